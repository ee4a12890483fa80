// Package issue issues and opens the group's reader credentials, and holds the local
// cluster's key pair; the reconcilers call it, and it decides nothing about who is
// issued what (package credentials and the planner reconciler/planner/members do).
//
// Issuing: IssueReader asks the TokenRequest API (a TokenMinter) for a token of a
// reader ServiceAccount with a bounded lifetime and renders the reader kubeconfig of it,
// with the annotations that say when it is renewed; the bootstrapper issues the shared
// reader token with it, and package credentials the per-peer ones, which it then seals
// to the peer's public key (package seal, the pure cryptography).
//
// Opening: Keys holds the key pair the bootstrapper reads or makes (package bootstrap,
// which advertises its public key on the local Cluster), what it reported of it
// (KeyCondition, the local Cluster's ReaderKeyReady condition), and opens the
// credentials peers sealed to this cluster (Keys.Opener, for members.Choose).
//
// Identity is who the local cluster is, which every membership reconciler is given.
package issue

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
)

// Identity is who the local cluster is.
type Identity struct {
	// ID is the UID of the kube-system namespace.
	ID types.UID
	// Name is the name of the local Cluster CR.
	Name string
}

// Own returns the local cluster's own Cluster among clusters (of its name and cluster
// ID), or nil.
func (id Identity) Own(clusters []v1alpha1.Cluster) *v1alpha1.Cluster {
	for i := range clusters {
		if clusters[i].Name == id.Name && clusters[i].Spec.ClusterID == id.ID {
			return &clusters[i]
		}
	}
	return nil
}

// TokenMinter mints reader tokens; *kubernetes.Clientset's CoreV1().ServiceAccounts(ns)
// satisfies it through CreateToken.
type TokenMinter interface {
	CreateToken(ctx context.Context, serviceAccountName string, tokenRequest *authenticationv1.TokenRequest, opts metav1.CreateOptions) (*authenticationv1.TokenRequest, error)
}

// Issued is a reader kubeconfig minted for a ServiceAccount: its token's renewal time and
// the annotations its Secret carries (renew-after, expires-at, issued-at, the
// ServiceAccount's UID).
type Issued struct {
	Kubeconfig  []byte
	RenewAt     time.Time
	Annotations map[string]string
}

// IssueReader requests a token of ServiceAccount sa (UID saUID) lasting lifetime from
// tokens, at now, and renders the reader kubeconfig of cluster clusterName at server and
// ca with it. The token is renewed halfway to its expiry (the lifetime, when the API
// server answers none).
func IssueReader(ctx context.Context, tokens TokenMinter, sa string, saUID types.UID, lifetime time.Duration, now time.Time,
	clusterName, server string, ca []byte) (Issued, error) {
	tr, err := tokens.CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(lifetime / time.Second))},
	}, metav1.CreateOptions{})
	if err != nil {
		return Issued{}, err
	}
	expires := tr.Status.ExpirationTimestamp.Time
	if expires.IsZero() || !expires.After(now) {
		expires = now.Add(lifetime)
	}
	renewAt := now.Add(expires.Sub(now) / 2)
	data, err := kubeconfig.Render(kubeconfig.Reader{ClusterName: clusterName, Server: server, CAData: ca, Token: tr.Status.Token})
	if err != nil {
		return Issued{}, fmt.Errorf("rendering the reader kubeconfig: %w", err)
	}
	return Issued{Kubeconfig: data, RenewAt: renewAt, Annotations: map[string]string{
		v1alpha1.TokenRenewAfterAnnotation:        renewAt.UTC().Format(time.RFC3339),
		v1alpha1.TokenExpiresAtAnnotation:         expires.UTC().Format(time.RFC3339),
		v1alpha1.TokenIssuedAtAnnotation:          now.UTC().Format(time.RFC3339Nano),
		v1alpha1.TokenServiceAccountUIDAnnotation: string(saUID),
	}}, nil
}
