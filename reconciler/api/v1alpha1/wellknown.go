package v1alpha1

import corev1 "k8s.io/api/core/v1"

// Annotations and labels of the seed API. Their keys are part of the drop-in contract:
// objects written by the seed's controller carry the same keys.
const (
	// OwnershipAnnotation holds the cluster ID (kube-system namespace UID) of the cluster
	// an object was synced from. An object without it was created locally and is never
	// overwritten or deleted by the sync engine.
	OwnershipAnnotation = "cluster-registry.k8s.cisco.com/resource-owner-cluster-id"
	// OwnershipLabel carries the same cluster ID as OwnershipAnnotation, so copies can
	// be listed and watched by label selector.
	OwnershipLabel = OwnershipAnnotation
	// OriginalGVKAnnotation records the group/version/kind of the source object when a
	// rule rewrote the GVK of the copy.
	OriginalGVKAnnotation = "cluster-registry.k8s.cisco.com/original-group-version-kind"
	// ClusterDisabledAnnotation on a Cluster CR ("true") stops all work with that
	// cluster and sets its state to Disabled.
	ClusterDisabledAnnotation = "cluster-registry.k8s.cisco.com/cluster-disabled"
	// SyncDisabledAnnotation on an object ("true") stops the object itself from being
	// synced to other clusters; on a ResourceSyncRule it keeps the rule local, so a
	// member that deleted its copy does not get it back.
	SyncDisabledAnnotation = "cluster-registry.k8s.cisco.com/resource-sync-disabled"

	// MarkPrefix begins the key of every label and annotation of the registry's: marks
	// that are the registry's, never a rule's to keep or change.
	MarkPrefix = "cluster-registry.k8s.cisco.com/"
	// UninstallRetryAnnotation is set by "kubectl registry uninstall --wait" on a CRD
	// whose objects the API server failed to delete, to make it retry finalizing it.
	UninstallRetryAnnotation = "clusterregistry.k8s.cisco.com/uninstall-retry"

	// ReaderAggregatedLabel selects the ClusterRoles aggregated into the role that
	// peers' reader identity holds on this cluster.
	ReaderAggregatedLabel = "cluster-registry.k8s.cisco.com/reader-aggregated"
	// ControllerAggregatedLabel selects the ClusterRoles aggregated into the local
	// controller's role.
	ControllerAggregatedLabel = "cluster-registry.k8s.cisco.com/controller-aggregated"

	// OriginGenerationAnnotation, written by the origin's controller on its original
	// when status flows back, holds the generation of the original the copied status
	// corresponds to.
	OriginGenerationAnnotation = "cluster-registry.k8s.cisco.com/sync-origin-generation"
	// CopyGenerationAnnotation, written next to OriginGenerationAnnotation, holds the
	// generation of the copy whose status was pulled back.
	CopyGenerationAnnotation = "cluster-registry.k8s.cisco.com/sync-copy-generation"
	// SourceGenerationAnnotation, on a copy of a rule with syncStatusBack, holds the
	// generation of the source object the copy was made from.
	SourceGenerationAnnotation = "cluster-registry.k8s.cisco.com/source-generation"
	// CreatedByAnnotation marks a namespace created by the sync engine (value: the
	// name of the rule), so it is deleted only if we created it and it is empty.
	CreatedByAnnotation = "cluster-registry.k8s.cisco.com/created-by"

	// LeftClustersAnnotation, on a member's own Cluster CR, lists the departures in
	// force as that member's controller decided them: "<clusterID>@<RFC 3339 time>"
	// entries separated by commas. The controller keeps it (see planner/members
	// Decide): a departure is in force when the departing cluster recorded it on its
	// own Cluster, or when a strict majority of the members record it on theirs, each
	// read over this cluster's own connection to that member. Each entry also counts
	// as that member's record of the departure. Every controller deletes its copies of
	// the departed clusters' Cluster CRs and reader Secrets and does not learn them
	// again; a departed cluster forgets the group.
	LeftClustersAnnotation = "cluster-registry.k8s.cisco.com/left-clusters"
	// ConfirmedDeparturesAnnotation, on a member's own Cluster CR, lists the departures
	// that member's admin recorded ("kubectl registry leave", "leave --force", "leave
	// --confirm") and that are not in force yet: "<clusterID>@<RFC 3339 time>"
	// entries. Each is that member's record of the departure; the controller moves an
	// entry to LeftClustersAnnotation once the departure is in force, and drops it when
	// a later admission (AdmittedClustersAnnotation) cancels it.
	ConfirmedDeparturesAnnotation = "cluster-registry.k8s.cisco.com/confirmed-departures"
	// AdmittedClustersAnnotation, on a member's own Cluster CR, lists the clusters that
	// member's admin brought back into the group after they left ("kubectl registry
	// join" on that member): "<clusterID>@<RFC 3339 time>" entries. An admission
	// cancels every record of the cluster's departure dated at or before it. A
	// cluster's own Cluster never admits it: a removed cluster cannot bring itself back.
	AdmittedClustersAnnotation = "cluster-registry.k8s.cisco.com/admitted-clusters"
	// JoinedAtAnnotation, on a cluster's own Cluster CR, was the time of the join that
	// brought it back after it left. It is no longer read (a removed cluster could
	// write it to cancel its removal) and is removed by join; admissions are
	// AdmittedClustersAnnotation.
	JoinedAtAnnotation = "cluster-registry.k8s.cisco.com/joined-at"
	// PinnedServerAnnotation, on this cluster's Cluster CR of a peer, is the API server
	// address this cluster's admin chose for that peer ("kubectl registry join
	// --peer-server" or "--server", which set it on the side they write; a join without
	// it removes it). The membership sync keeps the peer's endpoint at that address when
	// it copies the peer's own Cluster (its reader Secret keeps the pinned server in any
	// case), so the choice lasts until the next join. A local decision: never copied
	// between clusters, never written from a peer.
	PinnedServerAnnotation = "cluster-registry.k8s.cisco.com/pinned-server"

	// EventReasonMembershipRefused is the reason of the Warning event a controller
	// records on its own Cluster CR when it refuses what a member offered about the
	// group: a reader Secret whose token does not authenticate against the pinned
	// server, a token claiming a far-future expiry, a departure or join dated ahead of
	// its clock.
	EventReasonMembershipRefused = "MembershipRefused"

	// RuleLabel names, on every copy, the rule that wrote it (an addition to the seed's
	// marks): deletionPolicy Delete and the status counts find a rule's copies by it.
	RuleLabel = "cluster-registry.k8s.cisco.com/synced-by-rule"
	// CoreRuleName is the name of the built-in rule that syncs ResourceSyncRules to every
	// member.
	CoreRuleName = "core-resourcesyncrules"
)

// The reader kubeconfig Secret a cluster publishes for its peers.
const (
	// SecretTypeClusterRegistry is the type of the Secret referenced by a Cluster's
	// spec.authInfo.secretRef.
	SecretTypeClusterRegistry corev1.SecretType = "k8s.cisco.com/cluster-registry-secret"
	// KubeconfigKey is the data key holding the reader kubeconfig in that Secret.
	KubeconfigKey = "kubeconfig"
)

// Defaults of an installation.
const (
	// DefaultNamespace is the namespace the controller, its Secrets and its Lease live in.
	DefaultNamespace = "cluster-registry"
	// ControllerName is the name of the controller's ServiceAccount, Deployment and
	// ClusterRoles, and the field manager of its writes.
	ControllerName = "cluster-registry-controller"
	// ReaderName is the name of the reader ServiceAccount whose tokens peers hold, and
	// of its base ClusterRole.
	ReaderName = "cluster-registry-reader"
	// ControllerAggregatedRoleName is the ClusterRole bound to the controller; it holds
	// every ClusterRole labelled ControllerAggregatedLabel.
	ControllerAggregatedRoleName = "cluster-registry-controller-aggregated"
	// ReaderAggregatedRoleName is the ClusterRole bound to the reader; it holds every
	// ClusterRole labelled ReaderAggregatedLabel.
	ReaderAggregatedRoleName = "cluster-registry-reader-aggregated"
	// MetricsReaderRoleName is the ClusterRole that lets its subjects scrape the
	// controller's /metrics (get on the non-resource URL /metrics): bind it to the
	// scraper's ServiceAccount.
	MetricsReaderRoleName = "cluster-registry-metrics-reader"
	// FieldManager is the field manager of every write the plugin and controller make.
	FieldManager = "kubectl-registry"

	// MemberIdentityPrefix begins the name of the ServiceAccount, in the registry
	// namespace, that the controller impersonates to write what comes from a member: the
	// copies of the member's objects, their status, the namespaces they need and the
	// status that flows back from the member's copies (MemberUser). No such
	// ServiceAccount object exists: the name is a subject for RBAC bindings, so what a
	// member may write here is the RoleBindings and ClusterRoleBindings of its identity
	// and of MembersGroup.
	MemberIdentityPrefix = "member-"
	// MembersGroup is the group every member's identity is impersonated with: the default
	// install binds it to what the controller may write (MembersGrantName), so that a
	// member may write what the controller may until the cluster's admin narrows it.
	MembersGroup = "cluster-registry:members"
	// MembersGrantName names the default ClusterRoleBinding and the Role and RoleBinding
	// in the registry namespace that grant MembersGroup (install --member-grants=all).
	MembersGrantName = "cluster-registry-members"
)

// MemberUser is the user name of the identity that writes, in a cluster whose registry
// namespace is namespace, what comes from the member it names member (the name of the
// member's Cluster there): the ServiceAccount MemberIdentityPrefix+member of namespace.
func MemberUser(namespace, member string) string {
	return "system:serviceaccount:" + namespace + ":" + MemberIdentityPrefix + member
}
