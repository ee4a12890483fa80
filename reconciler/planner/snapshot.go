package planner

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// Snapshot is what one cluster's controller plans with: its identity and Cluster, its
// policy, the rules that run here (AssembleRules) and the peers it reads, each with a
// read-only view of its objects (Source.Lookup). The engine builds it from its watches,
// sync-diff from what it read; both then ask it the same questions (PlanKey,
// OnRuleDelete, PlanCluster), so a check is written once.
type Snapshot struct {
	// LocalID is this cluster's ID (its kube-system namespace UID).
	LocalID types.UID
	// LocalCluster is this cluster's own Cluster (unstructured content) for templates;
	// nil before the controller has bootstrapped it.
	LocalCluster map[string]any
	// Policy is this cluster's consent to what rules write.
	Policy Policy
	// Rules are the rules that run here, by name (the built-in rule included); a rule
	// being deleted has its DeletionTimestamp set and asks for nothing.
	Rules []Rule
	// Sources are the peers this cluster reads (IsSource), readable or not.
	Sources []Source
}

// KeyPlan is what the controller does to one local object, and what it reports.
type KeyPlan struct {
	// Gathered is what the sources ask for the object (its failures and refusals are
	// reported on the rules).
	Gathered
	// Action is what is written; none for a membership object.
	Action Action
	// Membership is true when the local object belongs to the membership sync (a
	// Cluster or a reader Secret): no rule writes it, whatever it asks.
	Membership bool
}

// RulesFor returns the rules that may write local objects of gvk: running, not being
// deleted, with gvk among their targets.
func (s Snapshot) RulesFor(gvk schema.GroupVersionKind) []Rule {
	var out []Rule
	for _, r := range s.Rules {
		if r.Compiled != nil && r.Spec.DeletionTimestamp == nil && ContainsGVK(r.Compiled.TargetGVKs, gvk) {
			out = append(out, r)
		}
	}
	return out
}

// Gather is Gather over the snapshot for the local object at t, observed (nil when
// absent).
func (s Snapshot) Gather(t Target, observed *unstructured.Unstructured) Gathered {
	return Gather(s.LocalID, s.LocalCluster, s.Policy, s.RulesFor(t.GVK), s.Sources, t.GVK, t.Key, observed)
}

// PlanKey says, for the local object at t (observed, nil when absent), what the
// controller does: the one decision of the engine's reconcile and of sync-diff.
func (s Snapshot) PlanKey(t Target, observed *unstructured.Unstructured) KeyPlan {
	g := s.Gather(t, observed)
	if observed != nil && MembershipObject(observed) {
		return KeyPlan{Gathered: g, Action: Action{Type: ActionNone}, Membership: true}
	}
	return KeyPlan{Gathered: g, Action: Decide(g.Input(s.LocalID, observed))}
}

// OnRuleDelete says what the deletion policy Delete of a rule does to a local copy it
// wrote (labelled with its name and marked with an origin): keep it when another rule
// still asks for it from its origin (that rule takes it over), wait when that cannot be
// told yet (the origin's view has not synced), else delete it. The rule must already be
// out of the snapshot's running rules (being deleted).
func (s Snapshot) OnRuleDelete(t Target, copy *unstructured.Unstructured) (keep, wait bool) {
	return KeepOnRuleDelete(copy, s.Gather(t, copy))
}

// IsSource reports whether the controller of the cluster localID reads the peer c: a
// Cluster of another cluster that is not disabled (cluster-disabled on this cluster's
// copy of it stops all work with that cluster).
func IsSource(localID types.UID, c *v1alpha1.Cluster) bool {
	return c.Spec.ClusterID != localID && !c.Disabled()
}
