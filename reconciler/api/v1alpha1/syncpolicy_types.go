package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GroupKind names a kind; group is empty for the core group.
type GroupKind struct {
	// +optional
	Group string `json:"group,omitempty"`
	// +kubebuilder:validation:MinLength=1
	Kind string `json:"kind"`
}

// PolicyAllow lets rules write copies that the default policy refuses: kinds that grant
// power (RBAC, admission webhooks and policies, APIServices, CRDs, certificate signing
// requests) and the system namespaces.
type PolicyAllow struct {
	// Kinds are the kinds this entry allows; empty: the kinds allowed by default.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Kinds []GroupKind `json:"kinds,omitempty"`
	// Namespaces are the namespaces this entry allows copies in; empty: every namespace
	// but kube-system, kube-public and kube-node-lease, which must be listed to be
	// allowed.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	Namespaces []string `json:"namespaces,omitempty"`
	// FromClusters are the names of the origin clusters this entry allows; empty: every
	// member.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	FromClusters []string `json:"fromClusters,omitempty"`
}

// SyncPolicySpec is one cluster's consent to what ResourceSyncRules, whichever member
// made them, may write into it. Every SyncPolicy of the cluster counts: the allow
// entries add up, the restrictions add up.
type SyncPolicySpec struct {
	// Allow lists what rules may write beyond the default.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Allow []PolicyAllow `json:"allow,omitempty"`
	// FromClusters, when set, are the only origin clusters whose objects may be copied
	// here at all.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	FromClusters []string `json:"fromClusters,omitempty"`
	// DenyOverrides refuses rules with overrides (templates over the source object).
	// +optional
	DenyOverrides bool `json:"denyOverrides,omitempty"`
	// DenyRewrites refuses rules that rewrite the name or namespace of copies.
	// +optional
	DenyRewrites bool `json:"denyRewrites,omitempty"`
	// PodSecurity is the Pod Security Standards level that the pod templates of copies
	// (Pods, PodTemplates, ReplicationControllers, ReplicaSets, Deployments,
	// StatefulSets, DaemonSets, Jobs, CronJobs) must meet here. The level a copy is held
	// to is the strictest of the namespace's own pod-security.kubernetes.io/enforce
	// label and the levels of this cluster's SyncPolicies; baseline when no SyncPolicy
	// sets one. privileged is the explicit local grant that lets privileged templates in
	// (a CNI DaemonSet, say), in every namespace whose label is not stricter.
	// +optional
	// +kubebuilder:validation:Enum=privileged;baseline;restricted
	PodSecurity string `json:"podSecurity,omitempty"`
}

// SyncPolicy is a cluster-local policy of what rules may write into this cluster (an
// addition to the seed API). It is never synced: each cluster's admins decide for their
// own cluster, and keep it in Git like any other manifest. Without any SyncPolicy a
// cluster accepts the default: every kind but those that grant power, in every namespace
// but the system ones, pod templates that meet the baseline Pod Security Standard, never
// token-bearing Secrets or the registry's own objects, and nothing in the registry's
// namespaces but Secrets in the registry namespace.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=syncpolicies,scope=Cluster,categories=clusterregistry
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type SyncPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec SyncPolicySpec `json:"spec"`
}

// SyncPolicyList is a list of SyncPolicies.
//
// +kubebuilder:object:root=true
type SyncPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SyncPolicy `json:"items"`
}

func init() {
	SchemeBuilder.Register(&SyncPolicy{}, &SyncPolicyList{})
}

// Reasons of copies and rules the local policy refuses.
const (
	// RuleConditionAllowed is False when this cluster's policy refuses what the rule
	// syncs; its message names the SyncPolicy entry it needs.
	RuleConditionAllowed = "Allowed"
	ReasonAllowed        = "AllowedByPolicy"
	ReasonNotAllowed     = "NotAllowedByPolicy"
	// ReasonCopyRefused: a copy that is never written, whatever the policy (a
	// token-bearing Secret, a type change, an object of the registry).
	ReasonCopyRefused = "CopyRefused"
	// ReasonPodSecurity: a copy whose pod template does not meet the Pod Security
	// Standards level that applies here (SyncPolicySpec.PodSecurity), or cannot be read
	// as a pod template; the message names each failed check.
	ReasonPodSecurity = "PodSecurity"
)
