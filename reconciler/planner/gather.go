package planner

import (
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/rules"
)

// Rule is a compiled rule as Gather sees it.
type Rule struct {
	// Spec is the ResourceSyncRule (name, spec).
	Spec *v1alpha1.ResourceSyncRule
	// Compiled is rules.Compile of Spec.
	Compiled *rules.Rule
}

// Source is one peer as Gather sees it.
type Source struct {
	Name      string
	ClusterID types.UID
	// Readable is true when the peer is Ready and its objects can be read.
	Readable bool
	// Features are the peer's ClusterFeatures.
	Features []v1alpha1.ClusterFeature
	// Cluster is the peer's Cluster (unstructured content) for templates.
	Cluster map[string]any
	// Lookup returns the peer's object of a kind at a key; synced is false when the
	// peer's view of the kind is not complete (then absence proves nothing).
	Lookup func(gvk schema.GroupVersionKind, namespace, name string) (obj *unstructured.Unstructured, synced bool)
}

// Gathered is what the sources ask for one local object.
type Gathered struct {
	// Candidates are the copies the sources ask for (only from the object's origin,
	// unless the origin is not a member read directly).
	Candidates []Candidate
	// OriginGone holds the origins positively seen to no longer have a matching object;
	// filled only when observed is a copy one of the rules wrote.
	OriginGone map[types.UID]bool
	// Failures are mutation errors, by rule name.
	Failures map[string][]string
	// Unsynced holds the sources that are readable but whose view of a source key has not
	// synced yet: what they hold is not known, so a decision that needs them (the delete
	// of a copy of theirs) must be made again once they have synced.
	Unsynced map[types.UID]bool
	// Modes are the sync modes of the rules covering the key that do not enforce, by rule
	// name: Input.Modes.
	Modes map[string]v1alpha1.SyncMode
	// Refusals are the copies the local policy refuses (CheckCopy), by rule name. A rule
	// the policy refuses as a whole (RuleAllowed) does not run here and has none.
	Refusals map[string][]Refusal
}

// Gather computes, purely, the candidates and the deletion evidence for the local object
// of kind gvk at target: the controller calls it with its informers, the CLI's sync-diff
// with what it listed. observed is the local object (nil when absent); localCluster is
// the local Cluster (unstructured content) for templates; policy is this cluster's
// consent: a rule it refuses does not run, a copy it refuses is no candidate.
func Gather(localID types.UID, localCluster map[string]any, policy Policy, ruleSet []Rule, sources []Source,
	gvk schema.GroupVersionKind, target types.NamespacedName, observed *unstructured.Unstructured) Gathered {
	out := Gathered{OriginGone: map[types.UID]bool{}, Failures: map[string][]string{}, Unsynced: map[types.UID]bool{}, Modes: map[string]v1alpha1.SyncMode{},
		Refusals: map[string][]Refusal{}}
	names := make(map[types.UID]string, len(sources))
	for _, p := range sources {
		names[p.ClusterID] = p.Name
	}
	var cands []Candidate
	present, unknown, gone := map[types.UID]bool{}, map[types.UID]bool{}, map[types.UID]bool{}
	var covering []string
	for _, r := range ruleSet {
		if r.Compiled == nil || r.Spec.DeletionTimestamp != nil || !ContainsGVK(r.Compiled.TargetGVKs, gvk) {
			continue
		}
		if policy.RuleAllowed(r.Spec, r.Compiled) != nil {
			continue // inert here: its copies are neither written nor deleted
		}
		covering = append(covering, r.Spec.Name)
		ruleOrigin, ruleSince := RuleOrigin(r.Spec, localID), r.Spec.CreationTimestamp.Time
		if m := r.Spec.Spec.SyncMode; m != "" && m != v1alpha1.SyncModeEnforce {
			out.Modes[r.Spec.Name] = m
		}
		kept := KeptFor(gvk.GroupKind(), r.Compiled.IgnoreFields)
		for _, srcKey := range r.Compiled.SourceKeys(target) {
			for _, p := range sources {
				if !p.Readable || !r.Compiled.Sources(p.Features) {
					unknown[p.ClusterID] = true
					continue
				}
				obj, synced := p.Lookup(r.Compiled.GVK, srcKey.Namespace, srcKey.Name)
				if !synced {
					unknown[p.ClusterID] = true
					out.Unsynced[p.ClusterID] = true
					continue
				}
				if obj == nil {
					gone[p.ClusterID] = true
					continue
				}
				if MembershipObject(obj) {
					continue
				}
				origin := types.UID(obj.GetAnnotations()[v1alpha1.OwnershipAnnotation])
				if origin == "" {
					origin = p.ClusterID
				}
				if policy.Quarantined(origin) {
					// Disabled or departed here: its objects are neither copied, through
					// any member, nor taken for gone.
					unknown[origin] = true
					continue
				}
				direct := origin == p.ClusterID
				if obj.GetAnnotations()[v1alpha1.SyncDisabledAnnotation] == "true" {
					if direct {
						present[origin] = true // not synced, but not gone either
					}
					continue
				}
				mut, ok := r.Compiled.Match(obj)
				if !ok {
					if direct {
						gone[p.ClusterID] = true
					}
					continue
				}
				tk, ok := mut.TargetKey(srcKey)
				if !ok || tk != target || mut.TargetGVK(r.Compiled.GVK) != gvk {
					if direct {
						gone[p.ClusterID] = true
					}
					continue
				}
				originName, member := names[origin]
				if !member {
					originName, member = policy.MemberName(origin)
				}
				if !member && origin != localID {
					// The annotation is a string the peer writes: an origin is a member this
					// cluster knows by ID, or the object is refused.
					out.Refusals[r.Spec.Name] = append(out.Refusals[r.Spec.Name], Refusal{Reason: v1alpha1.ReasonUnknownOrigin, Message: fmt.Sprintf(
						"%s %s offered by %s: its ownership annotation names cluster %s, which is not a member of this cluster's group: refused",
						r.Compiled.GVK.Kind, joinKey(srcKey.Namespace, srcKey.Name), p.Name, quoteShort(string(origin)))})
					continue
				}
				if origin == localID {
					continue // a peer's copy of an object of ours
				}
				if direct {
					present[origin] = true
				}
				desired, err := mut.Apply(obj, rules.TemplateContext{Object: obj.Object, Cluster: p.Cluster, LocalCluster: localCluster})
				if err != nil {
					out.Failures[r.Spec.Name] = append(out.Failures[r.Spec.Name], fmt.Sprintf("mutating %s %s from %s: %v", gvk.Kind, target, p.Name, err))
					if direct {
						unknown[origin] = true
					}
					continue
				}
				if ref := policy.CheckCopy(obj, desired, originName, len(mut.Overrides) > 0); ref != nil {
					out.Refusals[r.Spec.Name] = append(out.Refusals[r.Spec.Name], *ref)
					continue
				}
				Mark(desired, origin, r.Spec.Name)
				if r.Spec.Spec.SyncStatusBack {
					a := desired.GetAnnotations()
					delete(a, v1alpha1.OriginGenerationAnnotation)
					delete(a, v1alpha1.CopyGenerationAnnotation)
					a[v1alpha1.SourceGenerationAnnotation] = strconv.FormatInt(obj.GetGeneration(), 10)
					desired.SetAnnotations(a)
				}
				cands = append(cands, Candidate{Rule: r.Spec.Name, RuleOrigin: ruleOrigin, RuleSince: ruleSince, Peer: p.Name, PeerID: p.ClusterID, Origin: origin, Object: desired, SyncStatus: mut.SyncStatus, Kept: kept})
			}
		}
	}
	// A copy is written from its origin. A copy read from another peer (a hop) is used
	// only for an origin that is not a member this cluster reads directly.
	members := map[types.UID]bool{}
	for _, p := range sources {
		members[p.ClusterID] = true
	}
	for _, c := range cands {
		if c.PeerID == c.Origin || !members[c.Origin] {
			out.Candidates = append(out.Candidates, c)
		}
	}
	// Only a copy a rule of this kind wrote (labelled with its name) may be deleted: not
	// the membership sync's copies, not copies of a rule that is gone (deletionPolicy
	// Retain), not copies another tool marked.
	if observed != nil && contains(covering, observed.GetLabels()[v1alpha1.RuleLabel]) {
		for id := range gone {
			if !present[id] && !unknown[id] {
				out.OriginGone[id] = true
			}
		}
	}
	return out
}

// RuleOrigin returns the cluster a rule was made on, as this cluster (localID) knows it:
// the ownership mark of its copy here, empty for a rule made here. The mark of a copy is
// written by this cluster's controller from the member the rule was read from, never by
// a peer.
func RuleOrigin(rsr *v1alpha1.ResourceSyncRule, localID types.UID) types.UID {
	o := types.UID(rsr.Annotations[v1alpha1.OwnershipAnnotation])
	if o == localID {
		return ""
	}
	return o
}

// quoteShort quotes a string a peer wrote, cut to a length a message can hold.
func quoteShort(s string) string {
	const max = 64
	if len(s) > max {
		return strconv.Quote(s[:max]) + "..."
	}
	return strconv.Quote(s)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if s != "" && x == s {
			return true
		}
	}
	return false
}

// Input returns the planner's input for the local object observed (nil when absent) at
// the key g was gathered for: what Decide decides from.
func (g Gathered) Input(localID types.UID, observed *unstructured.Unstructured) Input {
	return Input{LocalID: localID, Observed: observed, Candidates: g.Candidates, OriginGone: g.OriginGone, Modes: g.Modes}
}

// KeepOnRuleDelete says what the deletion policy (Delete) of a rule being deleted does
// with a copy it wrote, observed, given what the other rules ask for it (g, gathered
// without the deleted rule): keep is true when another rule still asks for the copy from
// its own origin (that rule takes it over: it is updated, never deleted and made again);
// wait is true when that cannot be told yet, because the view of the copy's origin has
// not synced. A rule deletes only the copies no other rule asks for.
func KeepOnRuleDelete(observed *unstructured.Unstructured, g Gathered) (keep, wait bool) {
	mark := types.UID(observed.GetAnnotations()[v1alpha1.OwnershipAnnotation])
	for _, c := range g.Candidates {
		if c.Origin == mark {
			return true, false
		}
	}
	return false, g.Unsynced[mark]
}
