package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// GroupVersionKind names a kind; group is empty for the core group.
type GroupVersionKind struct {
	// +optional
	Group string `json:"group,omitempty"`
	// +kubebuilder:validation:MinLength=1
	Version string `json:"version"`
	// +kubebuilder:validation:MinLength=1
	Kind string `json:"kind"`
}

// Schema returns the GVK as apimachinery's schema.GroupVersionKind.
func (g GroupVersionKind) Schema() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: g.Group, Version: g.Version, Kind: g.Kind}
}

// ObjectKey names one object; an empty field matches any value.
type ObjectKey struct {
	// +optional
	Name string `json:"name,omitempty"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// ClusterFeatureMatch selects ClusterFeatures by feature name and labels; a peer is a
// source of a rule only if, for every entry, it has a ClusterFeature that satisfies it.
type ClusterFeatureMatch struct {
	// +optional
	FeatureName string `json:"featureName,omitempty"`
	// +optional
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
	// +optional
	MatchExpressions []metav1.LabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

// AnnotationSelectorOperator is an operator of an AnnotationSelectorRequirement.
// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist
type AnnotationSelectorOperator string

// The annotation selector operators.
const (
	AnnotationSelectorOpIn           AnnotationSelectorOperator = "In"
	AnnotationSelectorOpNotIn        AnnotationSelectorOperator = "NotIn"
	AnnotationSelectorOpExists       AnnotationSelectorOperator = "Exists"
	AnnotationSelectorOpDoesNotExist AnnotationSelectorOperator = "DoesNotExist"
)

// AnnotationValue is a value an annotation selector compares with.
// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
type AnnotationValue string

// AnnotationSelectorRequirement relates an annotation key to a set of values.
type AnnotationSelectorRequirement struct {
	// Key is the annotation key the requirement applies to.
	Key string `json:"key"`
	// Operator is one of In, NotIn, Exists and DoesNotExist.
	Operator AnnotationSelectorOperator `json:"operator"`
	// Values must be non-empty for In and NotIn and empty for Exists and DoesNotExist.
	// +optional
	Values []AnnotationValue `json:"values,omitempty"`
}

// AnnotationSelector matches objects by annotations; its two parts are ANDed.
type AnnotationSelector struct {
	// +optional
	MatchAnnotations map[string]string `json:"matchAnnotations,omitempty"`
	// +optional
	MatchExpressions []AnnotationSelectorRequirement `json:"matchExpressions,omitempty"`
}

// ContentSelector matches objects whose value at a JSON path equals Value.
type ContentSelector struct {
	// Key is a JSON path into the object, e.g. "data.mode" or "{.spec.replicas}".
	// +kubebuilder:validation:MinLength=1
	Key string `json:"key"`
	// Value is compared with the value found at Key.
	Value intstr.IntOrString `json:"value"`
}

// SyncRuleMatch selects objects. Its non-empty parts are ANDed; within labels and
// annotations the entries are ORed. An empty SyncRuleMatch matches every object.
type SyncRuleMatch struct {
	// +optional
	Annotations []AnnotationSelector `json:"annotations,omitempty"`
	// +optional
	Content []ContentSelector `json:"content,omitempty"`
	// +optional
	Labels []metav1.LabelSelector `json:"labels,omitempty"`
	// +optional
	Namespaces []string `json:"namespaces,omitempty"`
	// +optional
	ObjectKey ObjectKey `json:"objectKey,omitempty"`
}

// AnnotationMutations adds and removes annotations on the copy.
type AnnotationMutations struct {
	// +optional
	Add map[string]string `json:"add,omitempty"`
	// +optional
	Remove []string `json:"remove,omitempty"`
}

// LabelMutations adds and removes labels on the copy.
type LabelMutations struct {
	// +optional
	Add map[string]string `json:"add,omitempty"`
	// +optional
	Remove []string `json:"remove,omitempty"`
}

// OverlayPatchType is the operation of an OverlayPatch.
// +kubebuilder:validation:Enum=replace;remove
type OverlayPatchType string

// The overlay patch operations.
const (
	OverlayPatchTypeReplace OverlayPatchType = "replace"
	OverlayPatchTypeRemove  OverlayPatchType = "remove"
)

// OverlayPatch replaces or removes the value at a path of the copy.
type OverlayPatch struct {
	// Type is replace (the default) or remove.
	// +optional
	Type OverlayPatchType `json:"type,omitempty"`
	// Path is the path of the value, e.g. "data.mode" or "metadata.labels.app".
	// +optional
	Path string `json:"path,omitempty"`
	// Value is a Go template rendered over .Object (the source object), .Cluster (the
	// source Cluster) and .LocalCluster (this cluster's Cluster).
	// +optional
	Value string `json:"value,omitempty"`
	// ParseValue parses the rendered value as YAML instead of using it as a string.
	// +optional
	ParseValue bool `json:"parseValue,omitempty"`
}

// NameMutations rewrite a name or a namespace of the copy, in this order: strip the
// prefix, strip the suffix, add the prefix, add the suffix. When StripPrefix or
// StripSuffix is set, a source object whose name (namespace) lacks it is not synced: the
// sharded layouts of sync-controller, where each shard's objects carry its suffix.
// (An addition to the seed API.)
type NameMutations struct {
	// +optional
	StripPrefix string `json:"stripPrefix,omitempty"`
	// +optional
	StripSuffix string `json:"stripSuffix,omitempty"`
	// +optional
	AddPrefix string `json:"addPrefix,omitempty"`
	// +optional
	AddSuffix string `json:"addSuffix,omitempty"`
}

// Mutations change the copy written locally.
type Mutations struct {
	// +optional
	Annotations *AnnotationMutations `json:"annotations,omitempty"`
	// GVK rewrites the group, version and kind of the copy.
	// +optional
	GVK *GroupVersionKind `json:"groupVersionKind,omitempty"`
	// +optional
	Labels *LabelMutations `json:"labels,omitempty"`
	// Overrides are applied in order; at most 64.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Overrides []OverlayPatch `json:"overrides,omitempty"`
	// SyncStatus copies the status of the source too.
	// +optional
	SyncStatus bool `json:"syncStatus,omitempty"`
	// Name rewrites the name of the copy (an addition to the seed API).
	// +optional
	Name *NameMutations `json:"name,omitempty"`
	// Namespace rewrites the namespace of the copy (an addition to the seed API).
	// +optional
	Namespace *NameMutations `json:"namespace,omitempty"`
}

// SyncRule is a set of matches (ORed; none matches everything) and the mutations
// applied to the objects they match.
type SyncRule struct {
	// +optional
	Matches []SyncRuleMatch `json:"match,omitempty"`
	// +optional
	Mutations Mutations `json:"mutations,omitempty"`
}

// ResourceSyncRuleSpec defines what a rule syncs and from where.
type ResourceSyncRuleSpec struct {
	// ClusterFeatureMatch selects the peers to sync from by their ClusterFeatures; all
	// entries must hold. Empty: every peer is a source.
	// +optional
	ClusterFeatureMatches []ClusterFeatureMatch `json:"clusterFeatureMatch,omitempty"`
	// GVK is the kind of the objects to sync.
	GVK GroupVersionKind `json:"groupVersionKind"`
	// Rules select objects of the kind (ORed) and mutate them.
	Rules []SyncRule `json:"rules"`
	// DeletionPolicy says what happens to the copies when the rule is deleted: Retain
	// (the default) keeps them, Delete deletes them (an addition to the seed API).
	// +optional
	// +kubebuilder:validation:Enum=Retain;Delete
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`
	// CreateNamespaces creates a copy's missing namespace instead of failing; such a
	// namespace is marked as created by the rule and deleted only when the rule created
	// it and it holds nothing else (an addition to the seed API).
	// +optional
	CreateNamespaces bool `json:"createNamespaces,omitempty"`
	// SyncStatusBack makes the status flow back from the copies to the original: the
	// origin's controller reads the status of its objects' copies from the peers (the
	// first peer by name that has a copy) and writes it on the original, with the
	// annotations sync-origin-generation (the original's generation the copy was made
	// from) and sync-copy-generation (the copy's generation) — still writing only its own
	// cluster. It cannot be combined with mutations.syncStatus (an addition to the seed
	// API, after sync-controller).
	// +optional
	SyncStatusBack bool `json:"syncStatusBack,omitempty"`
	// SyncMode says how strongly the rule holds its copies (an addition to the seed
	// API): Enforce (the default, the seed's behaviour) creates, restores and deletes
	// copies; CreateOnly creates missing copies and then leaves them to the cluster (never
	// updated or deleted by the rule, except by deletionPolicy Delete); ReportOnly writes
	// nothing and reports what Enforce would do (status.drift, the drift metric and
	// sync-diff).
	// +optional
	// +kubebuilder:validation:Enum=Enforce;CreateOnly;ReportOnly
	SyncMode SyncMode `json:"syncMode,omitempty"`
	// IgnoreFields are paths of the copies whose values the destination cluster keeps:
	// fields a local controller, an HPA (spec.replicas) or a mutating webhook (an
	// injected sidecar: spec.template.spec.containers[name=istio-proxy]) owns. A new
	// copy gets the source's value; afterwards the local value is kept and never counts
	// as drift. Paths use the override syntax, with [*] for every element of a list (an
	// addition to the seed API). Fields that clusters assign themselves (a Service's
	// clusterIP, a Job's selector, ...) are always kept and need not be listed.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=512
	IgnoreFields []string `json:"ignoreFields,omitempty"`
	// OnImmutableChange says what happens when the source changes a field the copy
	// cannot be updated in (a Job's template, a Service's clusterIP: None switch, a
	// StatefulSet's volumeClaimTemplates): Report (the default) reports the copy with
	// reason ImmutableField and leaves it until the source changes again; Recreate
	// deletes the copy and creates it anew, once per change of the source (an addition to
	// the seed API).
	// +optional
	// +kubebuilder:validation:Enum=Report;Recreate
	OnImmutableChange ImmutableChangePolicy `json:"onImmutableChange,omitempty"`
}

// SyncMode says how strongly a rule holds its copies.
type SyncMode string

// The sync modes.
const (
	SyncModeEnforce    SyncMode = "Enforce"
	SyncModeCreateOnly SyncMode = "CreateOnly"
	SyncModeReportOnly SyncMode = "ReportOnly"
)

// ImmutableChangePolicy says what happens to a copy whose source changed an immutable
// field.
type ImmutableChangePolicy string

// The immutable change policies.
const (
	ImmutableChangeReport   ImmutableChangePolicy = "Report"
	ImmutableChangeRecreate ImmutableChangePolicy = "Recreate"
)

// DeletionPolicy says what happens to a rule's copies when the rule is deleted.
type DeletionPolicy string

// The deletion policies.
const (
	DeletionPolicyRetain DeletionPolicy = "Retain"
	DeletionPolicyDelete DeletionPolicy = "Delete"
)

// RuleFinalizer is put on a ResourceSyncRule with deletionPolicy Delete, so that its
// copies are deleted before the rule goes away.
const RuleFinalizer = "cluster-registry.k8s.cisco.com/delete-copies"

// Types and reasons of ResourceSyncRule conditions.
const (
	// RuleConditionReady is True when the rule is valid and every source peer syncs.
	RuleConditionReady = "Ready"
	// RuleConditionConflict is True when locally created objects are in the way of
	// copies; its message names them.
	RuleConditionConflict = "Conflict"
	// RuleConditionDegraded is True when some sources or objects fail to sync.
	RuleConditionDegraded = "Degraded"

	ReasonSynced         = "Synced"
	ReasonInvalidRule    = "InvalidRule"
	ReasonUnknownKind    = "UnknownKind"
	ReasonForbidden      = "Forbidden"
	ReasonObjectConflict = "UnownedObjectsInTheWay"
	ReasonNoConflicts    = "NoConflicts"
	ReasonSourceFailing  = "SourceFailing"
	// ReasonChangedAfterWrite: copies that something in the cluster changes after each
	// write (a mutating admission webhook, defaulting, another writer) are held, not
	// rewritten on every change.
	ReasonChangedAfterWrite = "ChangedAfterWrite"
	ReasonAllSourcesOK      = "AllSourcesHealthy"
	// RuleConditionDrifted is True when a ReportOnly rule's copies differ from what
	// Enforce would write; its message names them.
	RuleConditionDrifted = "Drifted"
	ReasonDrift          = "CopiesDrifted"
	ReasonNoDrift        = "NoDrift"
	// RuleConditionWatchesNarrowed says whether the watches the rule needs on the peers
	// carry only what it may select (by namespace, or by a label every match entry
	// requires, sent to the API server as a selector), or every object of the kind.
	RuleConditionWatchesNarrowed = "WatchesNarrowed"
	ReasonWatchesNarrowed        = "NarrowedBySelectors"
	ReasonEveryObjectWatched     = "EveryObjectWatched"

	// Reasons of objects that cannot be written (on the Degraded condition and in the
	// rule's events), classified from the local API server's answer.
	// ReasonImmutableField: the source changed a field the copy cannot be updated in.
	ReasonImmutableField = "ImmutableField"
	// ReasonInvalidCopy: the API server rejected the copy as invalid.
	ReasonInvalidCopy = "InvalidCopy"
	// ReasonWriteForbidden: the controller may not write the copy (RBAC, quota, a
	// policy, an admission webhook that denied it).
	ReasonWriteForbidden = "WriteForbidden"
	// ReasonNotGranted: this cluster's RBAC does not let the identity of the member the
	// copy comes from (v1alpha1.MemberUser) write it: the admin has not granted it.
	ReasonNotGranted = "NotGranted"
	// ReasonCopyTooLarge: the copy is larger than the API server accepts.
	ReasonCopyTooLarge = "CopyTooLarge"
	// ReasonNamespaceMissing: the copy's namespace does not exist and the rule does not
	// create namespaces.
	ReasonNamespaceMissing = "NamespaceMissing"
	// ReasonWriteFailed: the write failed for another reason (timeouts, server errors).
	ReasonWriteFailed = "WriteFailed"
	// ReasonMutationFailed: the rule's mutations failed on the object (a template error
	// or limit).
	ReasonMutationFailed = "MutationFailed"
	// ReasonCopiesFailing: objects fail for several of the reasons above.
	ReasonCopiesFailing = "CopiesFailing"
	// ReasonTooManyObjects: a peer offers more objects to the rule than the cap on one
	// watch (serve's --max-peer-objects); they are not watched, and the copies already
	// made from that peer are kept as they are.
	ReasonTooManyObjects = "TooManyObjects"
	// ReasonUnknownOrigin: a peer offers an object whose ownership annotation names a
	// cluster that is not a member this cluster knows by ID; it is refused (an origin is
	// a member or nothing, never a string an object carries).
	ReasonUnknownOrigin = "UnknownOrigin"
	// ReasonRuleOverlap (Conflict condition): another rule that takes precedence writes
	// some objects this rule matches (a rule made here, or on the object's origin, before
	// a third member's; an existing copy keeps the rule that wrote it among equals).
	ReasonRuleOverlap = "OverlapsAnotherRule"
)

// ResourceSyncRuleStatus is the observed state of a ResourceSyncRule (an addition to
// the seed API, which has an empty status).
type ResourceSyncRuleStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions of the rule: Ready, Conflict and Degraded.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Sources is the state of each peer as a source of the rule.
	// +optional
	// +listType=map
	// +listMapKey=cluster
	Sources []RuleSource `json:"sources,omitempty"`
	// SyncedObjects is how many copies the rule keeps in this cluster.
	// +optional
	SyncedObjects int32 `json:"syncedObjects,omitempty"`
	// Conflicts is how many objects the rule cannot write because a local object
	// without the ownership mark is in the way.
	// +optional
	Conflicts int32 `json:"conflicts,omitempty"`
	// Drift is how many copies a ReportOnly rule would create, update or delete.
	// +optional
	Drift int32 `json:"drift,omitempty"`
	// LastSyncTime is when the rule last wrote a copy.
	// +optional
	LastSyncTime *metav1.Time `json:"lastSyncTime,omitempty"`
}

// RuleSourceState is the state of a peer as a source of a rule.
type RuleSourceState string

// The source states.
const (
	// SourceSyncing: the peer is a source and its objects are synced.
	SourceSyncing RuleSourceState = "Syncing"
	// SourceNotSelected: the peer's ClusterFeatures do not satisfy clusterFeatureMatch.
	SourceNotSelected RuleSourceState = "NotSelected"
	// SourceUnreachable: the peer is not Ready; its copies are kept as they are.
	SourceUnreachable RuleSourceState = "Unreachable"
	// SourceFailing: reading the kind from the peer fails (e.g. forbidden, unknown kind).
	SourceFailing RuleSourceState = "Failing"
)

// RuleSource is the state of one peer as a source of a rule.
type RuleSource struct {
	// Cluster is the name of the peer's Cluster.
	Cluster string `json:"cluster"`
	// State of the peer as a source.
	State RuleSourceState `json:"state"`
	// Objects is how many of the objects the peer offers match the rule: its own, and its
	// copies of objects of clusters that are not members (not its copies of members' objects).
	// +optional
	Objects int32 `json:"objects,omitempty"`
	// Message explains State.
	// +optional
	Message string `json:"message,omitempty"`
}

// ResourceSyncRule syncs objects of one kind from the group's peers to this cluster.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=resourcesyncrules,scope=Cluster,shortName=rsr,categories=clusterregistry
// +kubebuilder:printcolumn:name="Kind",type="string",JSONPath=".spec.groupVersionKind.kind"
// +kubebuilder:printcolumn:name="Group",type="string",JSONPath=".spec.groupVersionKind.group",priority=1
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Synced",type="integer",JSONPath=".status.syncedObjects"
// +kubebuilder:printcolumn:name="Conflicts",type="integer",JSONPath=".status.conflicts",priority=1
// +kubebuilder:printcolumn:name="Mode",type="string",JSONPath=".spec.syncMode",priority=1
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type ResourceSyncRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   ResourceSyncRuleSpec   `json:"spec"`
	Status ResourceSyncRuleStatus `json:"status,omitempty"`
}

// ResourceSyncRuleList is a list of ResourceSyncRules.
//
// +kubebuilder:object:root=true
type ResourceSyncRuleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ResourceSyncRule `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ResourceSyncRule{}, &ResourceSyncRuleList{})
}
