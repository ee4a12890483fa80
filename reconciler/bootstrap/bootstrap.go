// Package bootstrap makes the local cluster a member the group can read: it finds the
// cluster's identity (the UID of its kube-system namespace), keeps the local Cluster CR,
// the reader ServiceAccount and the reader kubeconfig Secret in place, and renews the
// reader's token (from the TokenRequest API, with a bounded lifetime) at about half its
// lifetime, updating the Secret in place. Peers pull that Secret through membership sync,
// so a renewed token reaches the whole group. It also reads or makes the local key pair
// (key.go) and advertises its public key on the local Cluster. It owns those objects
// only: the token is minted, and the key pair held for the other reconcilers, by package
// issue (Identity, TokenMinter and Keys here are its types).
package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/credentials/issue"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
)

// DefaultTokenLifetime is the lifetime asked for reader tokens.
const DefaultTokenLifetime = 24 * time.Hour

// MinTokenLifetime is the shortest lifetime the TokenRequest API grants.
const MinTokenLifetime = 10 * time.Minute

// Identity is who the local cluster is (issue.Identity).
type Identity = issue.Identity

// TokenMinter mints reader tokens (issue.TokenMinter).
type TokenMinter = issue.TokenMinter

// LocalClusterID returns the UID of the kube-system namespace: the cluster's ID.
func LocalClusterID(ctx context.Context, r client.Reader) (types.UID, error) {
	var ns corev1.Namespace
	if err := r.Get(ctx, client.ObjectKey{Name: metav1.NamespaceSystem}, &ns); err != nil {
		return "", fmt.Errorf("reading the kube-system namespace to learn the cluster ID: %w", err)
	}
	if ns.UID == "" {
		return "", errors.New("the kube-system namespace has no UID")
	}
	return ns.UID, nil
}

// ErrNoLocalCluster is returned by Resolve when no name was given and no Cluster CR
// claims the local cluster ID.
var ErrNoLocalCluster = errors.New("no local Cluster")

// Resolve returns the local identity: the given name, or else the name of the Cluster
// CR whose clusterID is the local ID (the first by name when several claim it; the
// cluster status reports the conflict).
func Resolve(ctx context.Context, r client.Reader, name string) (Identity, error) {
	id, err := LocalClusterID(ctx, r)
	if err != nil {
		return Identity{}, err
	}
	if name != "" {
		return Identity{ID: id, Name: name}, nil
	}
	var list v1alpha1.ClusterList
	if err := r.List(ctx, &list); err != nil {
		return Identity{}, fmt.Errorf("listing Cluster CRs to find the local one: %w", err)
	}
	var names []string
	for _, c := range list.Items {
		if c.Spec.ClusterID == id {
			names = append(names, c.Name)
		}
	}
	if len(names) == 0 {
		return Identity{}, fmt.Errorf("%w: no Cluster CR has clusterID %s (the kube-system namespace UID); pass --cluster-name to create one", ErrNoLocalCluster, id)
	}
	sort.Strings(names)
	return Identity{ID: id, Name: names[0]}, nil
}

// Options configure the bootstrapper.
type Options struct {
	// Namespace is the registry namespace (Secret, ServiceAccount).
	Namespace string
	// Endpoint is the API server address peers reach this cluster at (normalised https
	// URL), from --api-server-endpoint; empty keeps the Cluster CR's endpoints.
	Endpoint string
	// EndpointCA is the CA bundle peers verify Endpoint with; nil means LocalCA.
	EndpointCA []byte
	// NetworkName is the client network of this cluster's controller; it selects which of
	// the Cluster CR's kubernetesApiEndpoints to advertise.
	NetworkName string
	// LocalServer is the server the controller itself talks to, advertised when the
	// Cluster CR has no endpoint; empty in a pod (the in-cluster service address is never
	// advertised).
	LocalServer string
	// LocalCA is the CA of LocalServer.
	LocalCA []byte
	// TokenLifetime is the lifetime asked for reader tokens.
	TokenLifetime time.Duration
}

// Validate checks the options without I/O.
func (o Options) Validate() error {
	if o.Namespace == "" {
		return errors.New("bootstrap: the registry namespace is empty")
	}
	if o.TokenLifetime < MinTokenLifetime {
		return fmt.Errorf("the reader token lifetime must be at least %s, got %s", MinTokenLifetime, o.TokenLifetime)
	}
	return nil
}

// desiredServer picks the server and CA advertised in the reader kubeconfig.
func (o Options) desiredServer(cluster *v1alpha1.Cluster) (string, []byte, error) {
	if server, ca, err := kubeconfig.ServerFor(cluster.Spec.KubernetesAPIEndpoints, o.NetworkName); err == nil {
		if len(ca) == 0 {
			ca = o.caFallback()
		}
		return server, ca, nil
	}
	if o.LocalServer != "" {
		return o.LocalServer, o.caFallback(), nil
	}
	return "", nil, fmt.Errorf("no API server endpoint that peers can reach is known for network %q: pass --api-server-endpoint or set spec.kubernetesApiEndpoints of Cluster %s (the in-cluster service address is never advertised)", o.NetworkName, cluster.Name)
}

func (o Options) caFallback() []byte {
	if len(o.EndpointCA) > 0 {
		return o.EndpointCA
	}
	return o.LocalCA
}

// endpointsWith returns the endpoints with the one of network set to server/ca.
func endpointsWith(eps []v1alpha1.KubernetesAPIEndpoint, network, server string, ca []byte) []v1alpha1.KubernetesAPIEndpoint {
	out := append([]v1alpha1.KubernetesAPIEndpoint(nil), eps...)
	for i := range out {
		if out[i].ClientNetwork == network {
			out[i].ServerAddress = server
			out[i].CABundle = ca
			return out
		}
	}
	return append(out, v1alpha1.KubernetesAPIEndpoint{ClientNetwork: network, ServerAddress: server, CABundle: ca})
}

// apiError keeps the Kubernetes API error in the chain and adds what was being done.
func apiError(what string, err error) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%s: %w (is the registry installed? run kubectl registry install)", what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
