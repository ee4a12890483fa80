// Package credentials gives each peer a reader identity of its own.
//
// Every member X issues one ServiceAccount per peer P in its readers namespace
// (ReadersNamespace of the registry namespace), named after P's cluster ID, so that X's
// API server audit log names the peer that read. X keeps a token of it, from the
// TokenRequest API with a bounded lifetime, in the Secret IssuedSecretName(P) of its
// registry namespace; P pulls that Secret from X itself (never through another member),
// renders its token for the server and CA it pinned for X, and keeps it as
// ReceivedSecretName(X). P's connection to X then uses it instead of X's shared reader
// token (the seed's Secret, which stays as it is for members that do not issue
// credentials yet, and for the seed's hand-made swap).
//
// When a departure is in force (kubectl registry leave), X deletes the departed
// cluster's ServiceAccount, which revokes every token of it at once, and recreates its
// shared reader ServiceAccount, which revokes the copies of the shared token the departed
// cluster held; the bootstrapper issues a new shared token and membership spreads it. A
// cluster that sees itself departed stops issuing and renewing credentials.
//
// This file holds the pure decisions (names, which ServiceAccounts should exist, when a
// token is due, which Secret a connection uses), table-tested without clusters; the
// Reconciler carries them out.
package credentials

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/bootstrap"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
)

// Labels and annotations of the per-peer credentials.
const (
	// ReaderForLabel is on a per-peer reader ServiceAccount and on the Secret holding its
	// token: the Key of the peer the identity is for.
	ReaderForLabel = "cluster-registry.k8s.cisco.com/reader-for"
	// PeerClusterIDAnnotation holds the full cluster ID of that peer.
	PeerClusterIDAnnotation = "cluster-registry.k8s.cisco.com/peer-cluster-id"
	// PeerClusterNameAnnotation holds the name of that peer's Cluster, for humans
	// reading the audit log (the ServiceAccount is named by ID).
	PeerClusterNameAnnotation = "cluster-registry.k8s.cisco.com/peer-cluster-name"
	// ReaderFromLabel is on the Secret a peer keeps the credential it received in: the
	// Key of the cluster that issued it.
	ReaderFromLabel = "cluster-registry.k8s.cisco.com/reader-from"
)

// Reasons of the events the Reconciler records on the local Cluster.
const (
	// EventReasonReaderIssued: a peer was issued a reader of its own.
	EventReasonReaderIssued = "ReaderIssued"
	// EventReasonReaderRevoked: a departed peer's reader was deleted.
	EventReasonReaderRevoked = "ReaderRevoked"
	// EventReasonReaderRotated: the shared reader was recreated (a departed cluster held
	// copies of its token).
	EventReasonReaderRotated = "ReaderRotated"
)

// Name prefixes.
const (
	// ServiceAccountPrefix prefixes the per-peer reader ServiceAccounts.
	ServiceAccountPrefix = "cluster-registry-reader-"
	// IssuedSecretPrefix prefixes the Secrets a member keeps the per-peer tokens in.
	IssuedSecretPrefix = "cluster-registry-reader-for-"
	// ReceivedSecretPrefix prefixes the Secrets a peer keeps the credentials it
	// received in.
	ReceivedSecretPrefix = "cluster-registry-reader-from-"
	// ReadersNamespaceSuffix makes the readers namespace from the registry namespace.
	ReadersNamespaceSuffix = "-readers"
)

// ReadersNamespace is where the per-peer reader ServiceAccounts of the registry
// namespace ns live: a namespace of their own, so that the controller may mint tokens of
// any ServiceAccount there and of none of the registry namespace (its own included), and
// so that one ClusterRoleBinding to the group of its ServiceAccounts gives every peer
// the reader's rights.
func ReadersNamespace(ns string) string { return ns + ReadersNamespaceSuffix }

// Key is how a cluster ID appears in names and label values: the ID itself when it is a
// DNS label (a kube-system namespace UID is), else "h-" and a hash of it.
func Key(id types.UID) string {
	s := string(id)
	if len(validation.IsDNS1123Label(s)) == 0 && len(s)+len(IssuedSecretPrefix) <= validation.DNS1123SubdomainMaxLength {
		return s
	}
	h := sha256.Sum256([]byte(s))
	return "h-" + hex.EncodeToString(h[:12])
}

// ServiceAccountName is the reader ServiceAccount a member issues for peer id.
func ServiceAccountName(id types.UID) string { return ServiceAccountPrefix + Key(id) }

// IssuedSecretName is the Secret a member keeps the token for peer id in.
func IssuedSecretName(id types.UID) string { return IssuedSecretPrefix + Key(id) }

// ReceivedSecretName is the Secret a peer keeps the credential issued by cluster id in.
func ReceivedSecretName(id types.UID) string { return ReceivedSecretPrefix + Key(id) }

// Peer is a peer that should have a reader identity.
type Peer struct {
	ID   types.UID
	Name string
}

// Input is what Plan decides from.
type Input struct {
	// LocalID is the local cluster's ID.
	LocalID types.UID
	// Clusters are the local Cluster CRs.
	Clusters []v1alpha1.Cluster
	// Departed are the clusters whose departure is in force (the local one included, if
	// it left).
	Departed map[types.UID]bool
	// ServiceAccounts are the per-peer reader ServiceAccounts (labelled ReaderForLabel).
	ServiceAccounts []corev1.ServiceAccount
}

// Result is what Plan decides.
type Result struct {
	// Create are the peers that get a reader ServiceAccount.
	Create []Peer
	// Keep are the peers whose ServiceAccount exists and stays.
	Keep []Peer
	// Revoke are the ServiceAccounts to delete: of clusters that left.
	Revoke []corev1.ServiceAccount
	// RotateShared says the shared reader ServiceAccount is to be recreated first: a
	// departed cluster held copies of its token.
	RotateShared bool
	// Left says the local cluster left the group: the Secrets holding the tokens it
	// issued are deleted (the members deleted their copies), its ServiceAccounts kept.
	Left bool
}

// Plan decides which per-peer reader ServiceAccounts exist. A ServiceAccount is deleted
// only on a positive observation: its peer's departure (or the local cluster's) is in
// force. A peer whose Cluster was deleted by hand keeps it (it may be learnt again).
func Plan(in Input) Result {
	var res Result
	if in.Departed[in.LocalID] {
		// The local cluster left: it issues and renews nothing, and revokes nothing
		// either, so that the members (and "leave --wait") still see it forget the
		// group; it deletes the Secrets of the tokens it issued, which expire with their
		// lifetime.
		res.Left = true
		return res
	}
	byKey := map[string]corev1.ServiceAccount{}
	sas := append([]corev1.ServiceAccount(nil), in.ServiceAccounts...)
	sort.Slice(sas, func(i, j int) bool { return sas[i].Name < sas[j].Name })
	for _, sa := range sas {
		if id := types.UID(sa.Annotations[PeerClusterIDAnnotation]); id != "" && in.Departed[id] {
			res.Revoke = append(res.Revoke, sa)
			continue
		}
		byKey[sa.Labels[ReaderForLabel]] = sa
	}
	res.RotateShared = len(res.Revoke) > 0
	clusters := append([]v1alpha1.Cluster(nil), in.Clusters...)
	sort.Slice(clusters, func(i, j int) bool { return clusters[i].Name < clusters[j].Name })
	seen := map[types.UID]bool{}
	for _, c := range clusters {
		id := c.Spec.ClusterID
		if id == "" || id == in.LocalID || in.Departed[id] || seen[id] {
			continue
		}
		seen[id] = true
		p := Peer{ID: id, Name: c.Name}
		if _, ok := byKey[Key(id)]; ok {
			res.Keep = append(res.Keep, p)
		} else {
			res.Create = append(res.Create, p)
		}
	}
	return res
}

// Due reports whether the token in the issued Secret s (nil when missing) must be
// issued again: it is missing or not ours, it was issued for another ServiceAccount (the
// ServiceAccount was recreated), it is due for renewal, or it names another server or CA
// than the ones advertised.
func Due(s *corev1.Secret, saUID types.UID, server string, ca []byte, now time.Time) bool {
	if s == nil || s.Type != v1alpha1.SecretTypeClusterRegistry || s.Annotations[v1alpha1.OwnershipAnnotation] != "" ||
		s.Annotations[bootstrap.ServiceAccountUIDAnnotation] != string(saUID) {
		return true
	}
	renewAt, err := time.Parse(time.RFC3339, s.Annotations[bootstrap.RenewAfterAnnotation])
	if err != nil || !now.Before(renewAt) {
		return true
	}
	r, ok := kubeconfig.Read(s.Data[v1alpha1.KubeconfigKey])
	return !ok || r.Server != server || !bytes.Equal(r.CAData, ca) || r.Token == ""
}

// Choose returns the Secret a connection to cluster x uses: the token of the credential
// x issued to this cluster (received, nil when there is none), for the server and CA of
// x's shared reader Secret (the pinned ones: re-pinning x there moves the credential
// too), while it is a copy of x's with a usable kubeconfig whose token has not expired;
// else x's shared reader Secret itself.
func Choose(shared, received *corev1.Secret, x types.UID, now time.Time) *corev1.Secret {
	if received == nil || received.Type != v1alpha1.SecretTypeClusterRegistry ||
		received.Annotations[v1alpha1.OwnershipAnnotation] != string(x) {
		return shared
	}
	r, ok := kubeconfig.Read(received.Data[v1alpha1.KubeconfigKey])
	if !ok || r.Token == "" {
		return shared
	}
	if exp, _, ok := kubeconfig.TokenTimes(r.Token); ok && !now.Before(exp) {
		return shared
	}
	pin, ok := kubeconfig.Read(shared.Data[v1alpha1.KubeconfigKey])
	if !ok || pin.Server == "" {
		return shared
	}
	data, err := kubeconfig.Render(kubeconfig.Reader{ClusterName: "peer", Server: pin.Server, CAData: pin.CAData, Token: r.Token})
	if err != nil {
		return shared
	}
	out := received.DeepCopy()
	out.Data = map[string][]byte{v1alpha1.KubeconfigKey: data}
	return out
}
