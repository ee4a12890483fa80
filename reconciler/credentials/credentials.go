// Package credentials gives each peer a reader identity of its own.
//
// Every member X issues one ServiceAccount per peer P in its readers namespace
// (v1alpha1.ReadersNamespace of the registry namespace), named after P's cluster ID, so
// that X's API server audit log names the peer that read. X keeps a token of it, from
// the TokenRequest API with a bounded lifetime, sealed to the public key P advertises on
// its own Cluster (package seal), in the Secret v1alpha1.IssuedReaderSecretName(P) of its
// registry namespace; P pulls that Secret from X itself (never through another member),
// keeps it sealed as v1alpha1.ReceivedReaderSecretName(X), and opens it only to connect,
// with the server and CA it pinned for X. A peer that advertises no valid key is issued
// nothing: a credential in clear would be readable by every reader of X's registry
// namespace. The names, labels and annotations are wire format: they live in the API
// package (reconciler/api/v1alpha1/credentials.go).
//
// X's shared reader token (the seed's Secret, which join and the manual swap copy and
// the members relay) is a bootstrap credential: X's RBAC lets it read the Cluster CRs,
// the kube-system namespace and, by name, the Secrets X issued (the Role
// v1alpha1.BootstrapRoleName, which the Reconciler keeps listing exactly their names:
// BootstrapRules), nothing else. A peer reads X's objects only once X has issued it a
// reader of its own; a leaked shared token reads sealed blobs and membership, never an
// object, a Secret in clear or its own successor.
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
// What the package owns: which peers have a reader identity here and their
// ServiceAccounts, the Secrets of the credentials issued to them, the bootstrap and
// notice Roles, the legacy binding and the departure notices. Its decisions are the
// membership planner's (package members, readers.go), table-tested without clusters:
// which peers have a reader ServiceAccount (members.PlanReaders), when a token is due
// (TokenDue, LegacyTokenDue), what the bootstrap Role grants (BootstrapRules) and whom
// the legacy binding names (LegacySubjects); which departure notices exist and which
// credential a connection uses are there too (members.PlanNotices, members.Choose, which
// "kubectl registry leave" shares). This file holds the events and the conditions of a
// peer's Cluster; the Reconciler (reconciler.go, noticerec.go) reads, decides with the
// planner and writes. Minting a token and holding the key pair are in package issue,
// sealing in package seal.
package credentials

import (
	"fmt"
	"time"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/conditions"
	"github.com/kubectl-registry/kubectl-registry/reconciler/credentials/seal"
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
	// EventReasonBootstrapRoleFailed (Warning): the Role v1alpha1.BootstrapRoleName could
	// not be written: new peers cannot get the credentials issued to them.
	EventReasonBootstrapRoleFailed = "BootstrapRoleFailed"
	// EventReasonLegacyBindingFailed (Warning): the ClusterRoleBinding
	// v1alpha1.LegacyReaderRoleName could not be written: the legacy peers' readers
	// cannot read what the seed's controller reads.
	EventReasonLegacyBindingFailed = "LegacyBindingFailed"
	// EventReasonLegacyRevoked: a peer is no longer named a legacy member: the credential
	// it was issued in the clear is revoked (its reader ServiceAccount is recreated).
	EventReasonLegacyRevoked = "LegacyReaderRevoked"
)

// PeerKeyCondition returns the ReaderKeyReady condition of a peer's Cluster on this
// cluster, the issuer, from the public key the peer advertises on its own Cluster as its
// API server serves it (see PeerKeys; "" for none): True when the credential issued to
// the peer is sealed to it; False when it is malformed or when there is none (the
// Reconciler issues the peer nothing, and it reads only this cluster's membership).
func PeerKeyCondition(publicKey string) v1alpha1.ClusterCondition {
	if publicKey == "" {
		return conditions.New(v1alpha1.ClusterConditionReaderKeyReady, false, v1alpha1.ReasonNoReaderKey,
			fmt.Sprintf("the peer advertises no public key on its own Cluster (%s): this cluster issues it no reader credential, so it reads only this cluster's membership (with the shared reader Secret, a bootstrap credential) and syncs nothing from it. Its controller advertises its key once it has loaded it (its own Cluster's ReaderKeyReady condition says why it has not). A peer running the seed's cluster-registry-controller never does: this cluster's admin may name it a legacy peer (annotation %s=true on this Cluster) to issue it a credential in the clear, and copy it that credential (kubectl registry join --legacy, docs/migrate.md)", v1alpha1.ReaderPublicKeyAnnotation, v1alpha1.LegacyPeerAnnotation))
	}
	if _, err := seal.ParsePublicKey(publicKey); err != nil {
		return conditions.New(v1alpha1.ClusterConditionReaderKeyReady, false, v1alpha1.ReasonReaderKeyInvalid,
			fmt.Sprintf("the public key the peer advertises on its own Cluster (%s) is malformed: %v. This cluster issues the peer no reader credential (it reads only this cluster's membership, with the shared reader Secret) until the peer advertises a valid key: the peer's admin deletes the annotation on the peer's own Cluster, and the peer's controller advertises its key again", v1alpha1.ReaderPublicKeyAnnotation, err))
	}
	return conditions.New(v1alpha1.ClusterConditionReaderKeyReady, true, v1alpha1.ReasonReaderKeyAdvertised,
		fmt.Sprintf("the reader credential this cluster issues the peer is sealed to the public key it advertises (fingerprint %s)", seal.Fingerprint(publicKey)))
}

// LegacyPeerCondition returns the ReaderKeyReady condition of the Cluster of a peer this
// cluster's admin named a legacy member: it is issued a credential in the clear, kept in
// secret (the readers namespace's v1alpha1.LegacyReaderSecretName), and is read with
// the reader Secret its Cluster names. held is what the peer holds of this cluster, as
// read from it (HeldByLegacyPeer), at now.
func LegacyPeerCondition(readers, secret string, held LegacyHeld, now time.Time) v1alpha1.ClusterCondition {
	return conditions.New(v1alpha1.ClusterConditionReaderKeyReady, false, v1alpha1.ReasonLegacyPeer,
		fmt.Sprintf("named a legacy peer by this cluster's admin (annotation %s): it is issued a reader credential in the clear, sealed to no key, in the Secret %s/%s, for the admin to copy to it (kubectl registry join --legacy, run again to renew the copy; docs/migrate.md); it is read with the reader Secret its Cluster names, and its membership is not taken. Remove the annotation once it runs kubectl-registry: the credential is then revoked. %s", v1alpha1.LegacyPeerAnnotation, readers, secret, held.sentence(now)))
}

// Why this cluster reads a peer with its bootstrap credential (ReaderCredentialCondition).
const (
	// NotIssued: the peer has issued this cluster no reader credential yet.
	NotIssued = "not issued"
	// Rejected: the peer rejected the credential it issued this cluster.
	Rejected = "rejected"
	// Expired: the credential the peer issued this cluster has expired, or holds no
	// usable token.
	Expired = "expired"
)

// ReaderCredentialCondition returns the ReaderCredentialReady condition of a peer's
// Cluster: which credential this cluster reads the peer with. own says the credential
// the peer issued this cluster is used; legacy that the peer is a legacy one, read with
// the reader Secret its Cluster names. Otherwise the peer is read with its bootstrap
// credential, because: why (NotIssued, Rejected, Expired) or, when the credential does
// not open, unusable (what Choose said).
func ReaderCredentialCondition(own, legacy bool, why, unusable string) v1alpha1.ClusterCondition {
	switch {
	case legacy:
		return conditions.New(v1alpha1.ClusterConditionReaderCredentialReady, true, v1alpha1.ReasonLegacyPeer,
			fmt.Sprintf("named a legacy peer by this cluster's admin (annotation %s): read with the reader Secret its Cluster names, as a reader credential", v1alpha1.LegacyPeerAnnotation))
	case own:
		return conditions.New(v1alpha1.ClusterConditionReaderCredentialReady, true, v1alpha1.ReasonIssuedCredential,
			"read with the reader credential the peer issued this cluster (sealed to this cluster's key; the peer's audit log names this cluster)")
	}
	const fallback = "read with the peer's shared reader token, a bootstrap credential: its Clusters and the credential it issues this cluster, no object (its rules' sources are Unreachable, its copies kept, no membership taken from it): "
	var because string
	switch {
	case unusable != "":
		because = "the credential the peer issued this cluster is not usable: " + unusable + ". This cluster's own ReaderKeyReady condition says whether its key is loaded; a credential sealed to an older key is replaced once the peer has read this cluster's current key"
	case why == Rejected:
		because = "the peer rejected the credential it issued this cluster (it revoked it: kubectl registry revoke, or a departure); it issues another, unless this cluster left the group"
	case why == Expired:
		because = "the credential the peer issued this cluster has expired; the peer renews it at half its lifetime, so its controller is not running or cannot issue tokens"
	default:
		because = "the peer has not issued this cluster a reader credential yet; it issues one once it has read this cluster's own Cluster and the public key it advertises (the peer's Cluster of this cluster there says why not, in its ReaderKeyReady condition)"
	}
	return conditions.New(v1alpha1.ClusterConditionReaderCredentialReady, false, v1alpha1.ReasonBootstrapCredential, fallback+because)
}
