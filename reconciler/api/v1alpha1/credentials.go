package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Annotations on a reader Secret (the shared one and the per-peer ones): when its token
// is renewed, expires and was issued, and for which ServiceAccount. Written by the
// issuing cluster; a peer reads the token's own claims, never trusts these alone.
const (
	// TokenRenewAfterAnnotation holds the time (RFC 3339) after which the reader token is
	// renewed: about half of its lifetime.
	TokenRenewAfterAnnotation = "cluster-registry.k8s.cisco.com/token-renew-after"
	// TokenExpiresAtAnnotation holds the expiry time (RFC 3339) of the reader token.
	TokenExpiresAtAnnotation = "cluster-registry.k8s.cisco.com/token-expires-at"
	// TokenIssuedAtAnnotation holds when the token was issued (RFC 3339 with
	// nanoseconds): of two copies of a reader Secret, the one issued later is the newer,
	// even when their expiry times (whole seconds) are equal.
	TokenIssuedAtAnnotation = "cluster-registry.k8s.cisco.com/token-issued-at"
	// TokenServiceAccountUIDAnnotation holds the UID of the reader ServiceAccount the
	// token was issued for: recreating the ServiceAccount revokes its tokens, and a new
	// one is issued.
	TokenServiceAccountUIDAnnotation = "cluster-registry.k8s.cisco.com/token-service-account-uid"
)

// Labels, annotations and names of the per-peer reader credentials: every member X
// issues each peer P a ServiceAccount of its own in the readers namespace, keeps its
// token in IssuedReaderSecretName(P), and P keeps what it received from X in
// ReceivedReaderSecretName(X).
const (
	// ReaderForLabel is on a per-peer reader ServiceAccount and on the Secret holding its
	// token: the ReaderKey of the peer the identity is for.
	ReaderForLabel = "cluster-registry.k8s.cisco.com/reader-for"
	// PeerClusterIDAnnotation holds the full cluster ID of that peer.
	PeerClusterIDAnnotation = "cluster-registry.k8s.cisco.com/peer-cluster-id"
	// PeerClusterNameAnnotation holds the name of that peer's Cluster, for humans
	// reading the audit log (the ServiceAccount is named by ID).
	PeerClusterNameAnnotation = "cluster-registry.k8s.cisco.com/peer-cluster-name"
	// ReaderFromLabel is on the Secret a peer keeps the credential it received in: the
	// ReaderKey of the cluster that issued it.
	ReaderFromLabel = "cluster-registry.k8s.cisco.com/reader-from"

	// ReaderServiceAccountPrefix prefixes the per-peer reader ServiceAccounts.
	ReaderServiceAccountPrefix = "cluster-registry-reader-"
	// IssuedReaderSecretPrefix prefixes the Secrets a member keeps the per-peer tokens in.
	IssuedReaderSecretPrefix = "cluster-registry-reader-for-"
	// ReceivedReaderSecretPrefix prefixes the Secrets a peer keeps the credentials it
	// received in.
	ReceivedReaderSecretPrefix = "cluster-registry-reader-from-"
	// ReadersNamespaceSuffix makes the readers namespace from the registry namespace.
	ReadersNamespaceSuffix = "-readers"
	// BootstrapRoleName is the Role of the registry namespace that lets the shared
	// reader (ReaderName, the bootstrap credential) get the Secrets holding the
	// credentials this cluster issued (IssuedReaderSecretName), by name: the controller
	// keeps its one rule listing them. The shared reader reads nothing else but the
	// Cluster CRs and the kube-system namespace (manifests/rbac-reader.yaml).
	BootstrapRoleName = "cluster-registry-bootstrap"
)

// ReadersNamespace is where the per-peer reader ServiceAccounts of the registry
// namespace ns live: a namespace of their own, so that the controller may mint tokens of
// any ServiceAccount there and of none of the registry namespace (its own included), and
// so that one ClusterRoleBinding to the group of its ServiceAccounts gives every peer
// the reader's rights.
func ReadersNamespace(ns string) string { return ns + ReadersNamespaceSuffix }

// ReaderKey is how a cluster ID appears in names and label values: the ID itself when it
// is a DNS label (a kube-system namespace UID is), else "h-" and a hash of it.
func ReaderKey(id types.UID) string {
	s := string(id)
	if len(validation.IsDNS1123Label(s)) == 0 && len(s)+len(IssuedReaderSecretPrefix) <= validation.DNS1123SubdomainMaxLength {
		return s
	}
	h := sha256.Sum256([]byte(s))
	return "h-" + hex.EncodeToString(h[:12])
}

// ReaderServiceAccountName is the reader ServiceAccount a member issues for peer id.
func ReaderServiceAccountName(id types.UID) string { return ReaderServiceAccountPrefix + ReaderKey(id) }

// IssuedReaderSecretName is the Secret a member keeps the token for peer id in.
func IssuedReaderSecretName(id types.UID) string { return IssuedReaderSecretPrefix + ReaderKey(id) }

// ReceivedReaderSecretName is the Secret a peer keeps the credential issued by cluster
// id in.
func ReceivedReaderSecretName(id types.UID) string { return ReceivedReaderSecretPrefix + ReaderKey(id) }

// Sealed per-peer credentials: every member has a key pair of its own (package
// reconciler/credentials/seal) and advertises the public key on its own Cluster; an
// issuer seals the kubeconfig of the reader it issued to a peer that advertises a key,
// so that only that peer can use it.
const (
	// ReaderPublicKeyAnnotation is on a member's own Cluster: the public key the
	// credentials issued to it are sealed to ("x25519:" and the key in base64). Other
	// members take it only from the member's own Cluster as its API server serves it (or
	// from a join), never from a relay.
	ReaderPublicKeyAnnotation = "cluster-registry.k8s.cisco.com/reader-public-key"
	// SealedToAnnotation is on an issued (and received) reader credential Secret that is
	// sealed: the fingerprint of the public key it is sealed to.
	SealedToAnnotation = "cluster-registry.k8s.cisco.com/sealed-to"
	// SealedKubeconfigKey is the data key of a sealed reader credential: the sealed
	// kubeconfig, in place of KubeconfigKey.
	SealedKubeconfigKey = "sealed-kubeconfig"
	// ReaderKeySecretName is the Secret of the readers namespace holding the member's
	// private key (which no peer can read), under PrivateKeyKey.
	ReaderKeySecretName = "cluster-registry-key"
	// PrivateKeyKey is the data key of the private key in ReaderKeySecretName.
	PrivateKeyKey = "x25519-private-key"
)

// Legacy peers: a member whose controller cannot open a sealed credential (the seed's
// cluster-registry-controller, which reads a peer only with the kubeconfig of the
// Secret its Cluster names) can be issued a reader credential in the clear, but only
// when this cluster's admin names it so, on this cluster.
const (
	// LegacyPeerAnnotation ("true"), set by this cluster's admin on a peer's Cluster
	// here, names the peer a legacy member: this cluster reads it with the reader Secret
	// its Cluster names as a full reader credential (not a bootstrap one), and issues it
	// a reader credential in the clear, with the reader's rights and those the seed's
	// controller needs (LegacyReaderRoleName), in LegacyReaderSecretName of the readers
	// namespace, for the admin to copy to the peer. It is a local decision: the
	// membership never copies it from a peer or a relay, and never removes it.
	LegacyPeerAnnotation = "cluster-registry.k8s.cisco.com/legacy-peer"
	// LegacyReaderRoleName is the ClusterRole the seed's controller needs besides the
	// reader's rights (it lists namespaces and nodes), and the ClusterRoleBinding whose
	// subjects the controller keeps to the legacy peers' reader ServiceAccounts.
	LegacyReaderRoleName = "cluster-registry-legacy-reader"
	// ReasonLegacyPeer (ReaderKeyReady False, peer's Cluster): the peer is named a
	// legacy member here (LegacyPeerAnnotation): it is issued a reader credential in
	// the clear, sealed to nothing.
	ReasonLegacyPeer = "LegacyPeer"
	// SeedCoreSyncLabel ("true") marks the objects the seed's controller makes for its
	// own membership on its cluster: the ClusterFeature cluster-registry-core-resources
	// (whose cluster the seed's members copy Clusters and reader Secrets from) and the
	// ResourceSyncRules cluster-registry-core-resource-*. This controller keeps the
	// membership itself: it never runs such a rule, wherever it was made.
	SeedCoreSyncLabel = "cluster-registry-controller.k8s.cisco.com/core-sync-resource"
)

// IsLegacyPeer reports whether this cluster's admin named the peer c describes a legacy
// member (LegacyPeerAnnotation "true" on c, the local Cluster of that peer).
func IsLegacyPeer(c *Cluster) bool {
	return c != nil && c.Annotations[LegacyPeerAnnotation] == "true"
}

// LegacyReaderSecretName is the Secret of the readers namespace holding, in the clear
// (KubeconfigKey), the reader kubeconfig issued to legacy peer id: the readers namespace,
// which no peer reads, so that only this cluster's admins can read it and copy it to the
// peer. It is named as IssuedReaderSecretName, the name the copy keeps on the peer.
func LegacyReaderSecretName(id types.UID) string { return IssuedReaderSecretName(id) }

// Departure notices: how a cluster that was down, stopped or cut off while the members
// removed it learns its departure once it is back, although the members revoked every
// reader credential it held. Each member X keeps, for every peer P whose departure X
// records on its own Cluster, a ConfigMap of its readers namespace (the notice) holding
// that record; P reads it with a token of the ServiceAccount NoticeName, which the
// departure does not revoke, issued with P's reader credential and sealed to P's key
// together with the notice's name. The name is random, chosen by X for P alone: the
// notice token gets, by name, nothing but the notices (the Role NoticeName of the readers
// namespace lists them), and a holder knows only its own notice's name. A notice goes
// once X no longer records the departure, or once the last notice token X issued P has
// expired (NoticeUntilAnnotation). Nothing a member's rule writes reaches the readers
// namespace, so no member writes a notice on another.
const (
	// NoticeName is the ServiceAccount of the registry namespace whose tokens peers hold
	// to read their departure notice, and the Role and RoleBinding of the readers
	// namespace that let it get the notices by name (the controller keeps the Role's one
	// rule listing them).
	NoticeName = "cluster-registry-notice"
	// DepartureNoticeAnnotation is on a per-peer reader ServiceAccount: the name of that
	// peer's departure notice (DepartureNoticePrefix and random hex), chosen when the
	// ServiceAccount is made. No reader can read it.
	DepartureNoticeAnnotation = "cluster-registry.k8s.cisco.com/departure-notice"
	// DepartureNoticePrefix prefixes the names of the departure notices.
	DepartureNoticePrefix = "cluster-registry-departure-"
	// DepartureKey is the data key of a departure notice: the member's record of the
	// peer's departure, "<peer cluster ID>@<RFC 3339 time>".
	DepartureKey = "departure"
	// NoticeUntilAnnotation is on a departure notice: when the last notice token issued to
	// the peer expires (RFC 3339); the notice is deleted after.
	NoticeUntilAnnotation = "cluster-registry.k8s.cisco.com/notice-until"
	// SealedNoticeKey is the data key, in an issued (and received) reader credential, of
	// the notice token and the notice's name (JSON, see members.Notice), sealed like the
	// reader kubeconfig.
	SealedNoticeKey = "sealed-notice"
)
