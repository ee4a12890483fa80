// Package credentials gives each peer a reader identity of its own.
//
// Every member X issues one ServiceAccount per peer P in its readers namespace
// (v1alpha1.ReadersNamespace of the registry namespace), named after P's cluster ID, so
// that X's API server audit log names the peer that read. X keeps a token of it, from
// the TokenRequest API with a bounded lifetime, in the Secret
// v1alpha1.IssuedReaderSecretName(P) of its registry namespace; P pulls that Secret from
// X itself (never through another member), renders its token for the server and CA it
// pinned for X, and keeps it as v1alpha1.ReceivedReaderSecretName(X). P's connection to
// X then uses it instead of X's shared reader token (the seed's Secret, which stays as
// it is for members that do not issue credentials yet, and for the seed's hand-made
// swap). The names, labels and annotations are wire format: they live in the API
// package (reconciler/api/v1alpha1/credentials.go).
//
// When a departure is in force (kubectl registry leave) and the membership has deleted
// X's Cluster CR of the departed cluster, X deletes the departed cluster's
// ServiceAccount, which revokes every token of it at once, and recreates its shared
// reader ServiceAccount, which revokes the copies of the shared token the departed
// cluster held; the bootstrapper issues a new shared token and membership spreads it.
// Revoking only after the Cluster CR is gone makes a rejection meaningful: a member that
// rejects the credential it issued to a departed cluster has dropped that cluster, which
// is what "leave --wait" run by the departed cluster itself reads (it can read the
// members only with the credentials they revoke). A cluster that sees itself departed
// stops issuing and renewing credentials.
//
// This file holds the pure decisions (names, which ServiceAccounts should exist, when a
// token is due, which Secret a connection uses), table-tested without clusters; the
// Reconciler carries them out.
package credentials

import (
	"bytes"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/conditions"
	"github.com/kubectl-registry/kubectl-registry/reconciler/credentials/seal"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
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

// Peer is a peer that should have a reader identity.
type Peer struct {
	ID   types.UID
	Name string
	// PublicKey is the key the peer advertises on its own Cluster
	// (v1alpha1.ReaderPublicKeyAnnotation, as read from the peer: see PeerKeys), which
	// its credential is sealed to; empty when it advertises none (it is issued an
	// unsealed one).
	PublicKey string
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
	// ServiceAccounts are the per-peer reader ServiceAccounts (labelled v1alpha1.ReaderForLabel).
	ServiceAccounts []corev1.ServiceAccount
}

// Result is what Plan decides.
type Result struct {
	// Create are the peers that get a reader ServiceAccount.
	Create []Peer
	// Keep are the peers whose ServiceAccount exists and stays.
	Keep []Peer
	// Revoke are the ServiceAccounts to delete: of clusters that left and that no local
	// Cluster CR describes any more (the membership deleted them).
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
// force. A peer whose Cluster was deleted by hand keeps it (it may be learnt again). A
// departed peer's ServiceAccount is deleted once no local Cluster CR describes the peer
// (or those left are being deleted): the membership deletes them as it carries the
// departure out, and a member that has revoked a departed cluster's credential has then
// dropped it. Until then it is neither revoked nor renewed.
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
	// described are the clusters a local Cluster CR still describes, not being deleted.
	described := map[types.UID]bool{}
	for _, c := range in.Clusters {
		if c.DeletionTimestamp == nil {
			described[c.Spec.ClusterID] = true
		}
	}
	byKey := map[string]corev1.ServiceAccount{}
	sas := append([]corev1.ServiceAccount(nil), in.ServiceAccounts...)
	sort.Slice(sas, func(i, j int) bool { return sas[i].Name < sas[j].Name })
	for _, sa := range sas {
		if id := types.UID(sa.Annotations[v1alpha1.PeerClusterIDAnnotation]); id != "" && in.Departed[id] {
			if !described[id] {
				res.Revoke = append(res.Revoke, sa)
			}
			continue
		}
		byKey[sa.Labels[v1alpha1.ReaderForLabel]] = sa
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
		if _, ok := byKey[v1alpha1.ReaderKey(id)]; ok {
			res.Keep = append(res.Keep, p)
		} else {
			res.Create = append(res.Create, p)
		}
	}
	return res
}

// Due reports whether the token in the issued Secret s (nil when missing) must be
// issued again: it is missing or not ours, it was issued for another ServiceAccount (the
// ServiceAccount was recreated), it is due for renewal, it is sealed to another key than
// publicKey (the peer's current one; empty: it is to be unsealed), or, unsealed, it
// names another server or CA than the ones advertised. (A sealed one is not checked
// for its server: the peer uses its token with the server and CA it pinned.)
func Due(s *corev1.Secret, saUID types.UID, server string, ca []byte, publicKey string, now time.Time) bool {
	if s == nil || s.Type != v1alpha1.SecretTypeClusterRegistry || s.Annotations[v1alpha1.OwnershipAnnotation] != "" ||
		s.Annotations[v1alpha1.TokenServiceAccountUIDAnnotation] != string(saUID) {
		return true
	}
	renewAt, err := time.Parse(time.RFC3339, s.Annotations[v1alpha1.TokenRenewAfterAnnotation])
	if err != nil || !now.Before(renewAt) {
		return true
	}
	if publicKey != "" {
		return s.Annotations[v1alpha1.SealedToAnnotation] != seal.Fingerprint(publicKey) ||
			len(s.Data[v1alpha1.SealedKubeconfigKey]) == 0 || len(s.Data[v1alpha1.KubeconfigKey]) != 0
	}
	if len(s.Data[v1alpha1.SealedKubeconfigKey]) != 0 {
		return true
	}
	r, ok := kubeconfig.Read(s.Data[v1alpha1.KubeconfigKey])
	return !ok || r.Server != server || !bytes.Equal(r.CAData, ca) || r.Token == ""
}

// Opener opens a credential that issuer sealed to this cluster (seal.Key.Open for the
// local cluster as recipient).
type Opener func(issuer types.UID, sealed []byte) ([]byte, error)

// Choose returns the Secret a connection to cluster x uses: the token of the credential
// x issued to this cluster (received, nil when there is none; opened with open when it
// is sealed), for the server and CA of x's shared reader Secret (the pinned ones:
// re-pinning x there moves the credential too), while it is a copy of x's with a usable
// kubeconfig whose token has not expired; else x's shared reader Secret itself. A
// sealed credential that does not open (open nil, or another key) is not used; the
// error says why.
func Choose(shared, received *corev1.Secret, x types.UID, now time.Time, open Opener) (*corev1.Secret, error) {
	if received == nil || received.Type != v1alpha1.SecretTypeClusterRegistry ||
		received.Annotations[v1alpha1.OwnershipAnnotation] != string(x) {
		return shared, nil
	}
	raw := received.Data[v1alpha1.KubeconfigKey]
	if sealed := received.Data[v1alpha1.SealedKubeconfigKey]; len(sealed) > 0 {
		if open == nil {
			return shared, fmt.Errorf("the credential cluster %s issued to this cluster is sealed, and this cluster's key is not loaded yet", x)
		}
		var err error
		if raw, err = open(x, sealed); err != nil {
			return shared, fmt.Errorf("the credential cluster %s issued to this cluster: %w", x, err)
		}
	}
	r, ok := kubeconfig.Read(raw)
	if !ok || r.Token == "" {
		return shared, nil
	}
	if exp, _, ok := kubeconfig.TokenTimes(r.Token); ok && !now.Before(exp) {
		return shared, nil
	}
	pin, ok := kubeconfig.Read(shared.Data[v1alpha1.KubeconfigKey])
	if !ok || pin.Server == "" {
		return shared, nil
	}
	data, err := kubeconfig.Render(kubeconfig.Reader{ClusterName: "peer", Server: pin.Server, CAData: pin.CAData, Token: r.Token})
	if err != nil {
		return shared, nil
	}
	out := received.DeepCopy()
	out.Data = map[string][]byte{v1alpha1.KubeconfigKey: data}
	return out, nil
}

// PeerKeyCondition returns the ReaderKeyReady condition of a peer's Cluster on this
// cluster, the issuer, from the public key the peer advertises on its own Cluster as its
// API server serves it (see PeerKeys; "" for none): True when the credential issued to
// the peer is sealed to it; False when it is malformed (the Reconciler issues the peer
// nothing, see ensureToken) or when there is none (the credential is unsealed).
func PeerKeyCondition(publicKey string) v1alpha1.ClusterCondition {
	if publicKey == "" {
		return conditions.New(v1alpha1.ClusterConditionReaderKeyReady, false, v1alpha1.ReasonNoReaderKey,
			fmt.Sprintf("the peer advertises no public key on its own Cluster (%s; an older version): the reader credential this cluster issues it is not sealed", v1alpha1.ReaderPublicKeyAnnotation))
	}
	if _, err := seal.ParsePublicKey(publicKey); err != nil {
		return conditions.New(v1alpha1.ClusterConditionReaderKeyReady, false, v1alpha1.ReasonReaderKeyInvalid,
			fmt.Sprintf("the public key the peer advertises on its own Cluster (%s) is malformed: %v. This cluster issues the peer no reader credential (it reads this cluster with the shared reader Secret) until the peer advertises a valid key: the peer's admin deletes the annotation on the peer's own Cluster, and the peer's controller advertises its key again", v1alpha1.ReaderPublicKeyAnnotation, err))
	}
	return conditions.New(v1alpha1.ClusterConditionReaderKeyReady, true, v1alpha1.ReasonReaderKeyAdvertised,
		fmt.Sprintf("the reader credential this cluster issues the peer is sealed to the public key it advertises (fingerprint %s)", seal.Fingerprint(publicKey)))
}
