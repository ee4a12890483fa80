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
	// Cluster returns the peer's Cluster (unstructured content) for templates, or is nil.
	// It is called only for the copies this source offers, when they are made (not once
	// per source and object): reading it may cost a conversion.
	Cluster func() map[string]any
	// Lookup returns the peer's object of a kind at a key; synced is false when the
	// peer's view of the kind is not complete (then absence proves nothing).
	Lookup func(gvk schema.GroupVersionKind, namespace, name string) (obj *unstructured.Unstructured, synced bool)
}

// Gathered is what the sources ask for one local object.
type Gathered struct {
	// Candidates are the copies the sources ask for (only from the object's origin,
	// unless the origin is not a member read directly).
	Candidates []Candidate
	// OriginGone holds the origin of observed (its ownership mark) when it is positively
	// seen to no longer have a matching object; filled only when observed is a copy one of
	// the rules wrote. Decide reads no other origin's entry, so no other is gathered.
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
	g := gatherer{localID: localID, localCluster: localCluster, policy: policy, gvk: gvk, target: target,
		out: Gathered{OriginGone: map[types.UID]bool{}, Failures: map[string][]string{}, Unsynced: map[types.UID]bool{}, Modes: map[string]v1alpha1.SyncMode{},
			Refusals: map[string][]Refusal{}},
		sources: sources}
	if observed != nil {
		g.mark = types.UID(observed.GetAnnotations()[v1alpha1.OwnershipAnnotation])
	}
	var covering []string
	for _, r := range ruleSet {
		if r.Compiled == nil || r.Spec.DeletionTimestamp != nil || !ContainsGVK(r.Compiled.TargetGVKs, gvk) {
			continue
		}
		if policy.RuleAllowed(r.Spec, r.Compiled) != nil {
			continue // inert here: its copies are neither written nor deleted
		}
		covering = append(covering, r.Spec.Name)
		if m := r.Spec.Spec.SyncMode; m != "" && m != v1alpha1.SyncModeEnforce {
			g.out.Modes[r.Spec.Name] = m
		}
		g.ruleOrigin, g.kept = RuleOrigin(r.Spec, localID), KeptFor(gvk.GroupKind(), r.Compiled.IgnoreFields)
		for _, srcKey := range r.Compiled.SourceKeys(target) {
			for _, p := range sources {
				g.offer(r, srcKey, p)
			}
		}
	}
	// A copy is written from its origin. A copy read from another peer (a hop) is used
	// only for an origin that is not a member this cluster reads directly.
	for _, c := range g.cands {
		if c.PeerID == c.Origin {
			g.out.Candidates = append(g.out.Candidates, c)
		} else if _, member := g.sourceName(c.Origin); !member {
			g.out.Candidates = append(g.out.Candidates, c)
		}
	}
	// Only a copy a rule of this kind wrote (labelled with its name) may be deleted: not
	// the membership sync's copies, not copies of a rule that is gone (deletionPolicy
	// Retain), not copies another tool marked.
	if g.markGone && !g.markPresent && !g.markUnknown && contains(covering, observed.GetLabels()[v1alpha1.RuleLabel]) {
		g.out.OriginGone[g.mark] = true
	}
	return g.out
}

// gatherer is Gather's state for one local object.
type gatherer struct {
	localID      types.UID
	localCluster map[string]any
	policy       Policy
	gvk          schema.GroupVersionKind
	target       types.NamespacedName
	out          Gathered
	// sources are the sources; names their names by cluster ID, made when an origin
	// other than the source offering it is first looked up (sourceName); cands the copies
	// offered, hops included.
	sources []Source
	names   map[types.UID]string
	cands   []Candidate
	// mark is observed's origin (its ownership mark, "" for none); markPresent,
	// markUnknown and markGone say whether it, read directly, has a matching object,
	// cannot tell, or has none: the deletion evidence. Only the mark's is gathered: the
	// evidence of every other origin would cost a record per source and object, and
	// decides nothing.
	mark                               types.UID
	markPresent, markUnknown, markGone bool
	// ruleOrigin and kept are the rule's being gathered (RuleOrigin, KeptFor).
	ruleOrigin types.UID
	kept       Kept
}

// offer looks at what the source p holds at srcKey for the rule r: a candidate copy, a
// refusal, a failure, or evidence that the origin has (or has not) the object.
func (g *gatherer) offer(r Rule, srcKey types.NamespacedName, p Source) {
	obj, origin, ok := g.read(r, srcKey, p)
	if !ok {
		return
	}
	direct := origin == p.ClusterID
	mut, ok := g.match(r, srcKey, p, obj, direct)
	if !ok {
		return
	}
	originName, ok := g.memberOrigin(r, srcKey, p, origin)
	if !ok {
		return
	}
	if origin == g.localID {
		return // a peer's copy of an object of ours
	}
	if direct {
		g.present(origin)
	}
	g.addCandidate(r, p, obj, mut, origin, originName, direct)
}

// read returns the object p holds at srcKey for the rule r and the cluster it
// originates from, or false, having recorded what the source says of the origin
// (unknown when p cannot be read or is not synced, gone when it has no object), when
// there is no object to offer: none, a membership object, or one of a quarantined
// origin.
func (g *gatherer) read(r Rule, srcKey types.NamespacedName, p Source) (*unstructured.Unstructured, types.UID, bool) {
	if !p.Readable || !r.Compiled.Sources(p.Features) {
		g.unknown(p.ClusterID)
		return nil, "", false
	}
	obj, synced := p.Lookup(r.Compiled.GVK, srcKey.Namespace, srcKey.Name)
	if !synced {
		g.unknown(p.ClusterID)
		g.out.Unsynced[p.ClusterID] = true
		return nil, "", false
	}
	if obj == nil {
		g.gone(p.ClusterID)
		return nil, "", false
	}
	if MembershipObject(obj) {
		return nil, "", false
	}
	origin := types.UID(obj.GetAnnotations()[v1alpha1.OwnershipAnnotation])
	if origin == "" {
		origin = p.ClusterID
	}
	if g.policy.Quarantined(origin) {
		// Disabled or departed here: its objects are neither copied, through any member,
		// nor taken for gone.
		g.unknown(origin)
		return nil, "", false
	}
	return obj, origin, true
}

// match returns the mutation of the rule r that copies obj (at srcKey on p) to the
// target being gathered, or false: for an object with sync disabled (present, when
// read directly from its origin), or one the rule does not select or copies elsewhere
// (gone, when read directly).
func (g *gatherer) match(r Rule, srcKey types.NamespacedName, p Source, obj *unstructured.Unstructured, direct bool) (rules.Mutation, bool) {
	if obj.GetAnnotations()[v1alpha1.SyncDisabledAnnotation] == "true" {
		if direct {
			g.present(p.ClusterID) // not synced, but not gone either
		}
		return rules.Mutation{}, false
	}
	mut, ok := r.Compiled.Match(obj)
	if !ok {
		if direct {
			g.gone(p.ClusterID)
		}
		return rules.Mutation{}, false
	}
	tk, ok := mut.TargetKey(srcKey)
	if !ok || tk != g.target || mut.TargetGVK(r.Compiled.GVK) != g.gvk {
		if direct {
			g.gone(p.ClusterID)
		}
		return rules.Mutation{}, false
	}
	return mut, true
}

// memberOrigin returns the name of origin, the cluster an object at srcKey offered by p
// originates from, or false, having recorded the refusal, when it is neither a member
// this cluster knows by ID nor this cluster.
func (g *gatherer) memberOrigin(r Rule, srcKey types.NamespacedName, p Source, origin types.UID) (string, bool) {
	originName, member := p.Name, origin == p.ClusterID
	if !member {
		originName, member = g.sourceName(origin)
	}
	if !member {
		originName, member = g.policy.MemberName(origin)
	}
	if !member && origin != g.localID {
		// The annotation is a string the peer writes: an origin is a member this cluster
		// knows by ID, or the object is refused.
		g.out.Refusals[r.Spec.Name] = append(g.out.Refusals[r.Spec.Name], Refusal{Reason: v1alpha1.ReasonUnknownOrigin, Message: fmt.Sprintf(
			"%s %s offered by %s: its ownership annotation names cluster %s, which is not a member of this cluster's group: refused",
			r.Compiled.GVK.Kind, joinKey(srcKey.Namespace, srcKey.Name), p.Name, quoteShort(string(origin)))})
		return "", false
	}
	return originName, true
}

// addCandidate adds the copy mut makes of obj, offered by p, as a candidate, or records
// why there is none: a failure of the mutation (the origin unknown, when read
// directly) or a refusal of the copy by the policy.
func (g *gatherer) addCandidate(r Rule, p Source, obj *unstructured.Unstructured, mut rules.Mutation, origin types.UID, originName string, direct bool) {
	var cluster map[string]any
	if p.Cluster != nil {
		cluster = p.Cluster()
	}
	desired, err := mut.Apply(obj, rules.TemplateContext{Object: obj.Object, Cluster: cluster, LocalCluster: g.localCluster})
	if err != nil {
		g.out.Failures[r.Spec.Name] = append(g.out.Failures[r.Spec.Name], fmt.Sprintf("mutating %s %s from %s: %v", g.gvk.Kind, g.target, p.Name, err))
		if direct {
			g.unknown(origin)
		}
		return
	}
	if ref := g.policy.CheckCopy(obj, desired, originName, len(mut.Overrides) > 0); ref != nil {
		g.out.Refusals[r.Spec.Name] = append(g.out.Refusals[r.Spec.Name], *ref)
		return
	}
	Mark(desired, origin, r.Spec.Name)
	if r.Spec.Spec.SyncStatusBack {
		a := desired.GetAnnotations()
		delete(a, v1alpha1.OriginGenerationAnnotation)
		delete(a, v1alpha1.CopyGenerationAnnotation)
		a[v1alpha1.SourceGenerationAnnotation] = strconv.FormatInt(obj.GetGeneration(), 10)
		desired.SetAnnotations(a)
	}
	g.cands = append(g.cands, Candidate{Rule: r.Spec.Name, RuleOrigin: g.ruleOrigin, RuleSince: r.Spec.CreationTimestamp.Time,
		Peer: p.Name, PeerID: p.ClusterID, Origin: origin, Object: desired, SyncStatus: mut.SyncStatus, Kept: g.kept})
}

// present, unknown and gone record the deletion evidence of a source read directly,
// the origin id: it has a matching object, cannot tell, or has none. Only observed's
// origin (mark) is recorded.
func (g *gatherer) present(id types.UID) { g.markPresent = g.markPresent || (id == g.mark && id != "") }
func (g *gatherer) unknown(id types.UID) { g.markUnknown = g.markUnknown || (id == g.mark && id != "") }
func (g *gatherer) gone(id types.UID)    { g.markGone = g.markGone || (id == g.mark && id != "") }

// sourceName returns the name of the source whose cluster ID is id, and whether there is
// one. The index is made on the first call: most objects are offered only by their
// origin, whose name the offer carries, and need none.
func (g *gatherer) sourceName(id types.UID) (string, bool) {
	if g.names == nil {
		g.names = make(map[types.UID]string, len(g.sources))
		for _, p := range g.sources {
			g.names[p.ClusterID] = p.Name
		}
	}
	name, ok := g.names[id]
	return name, ok
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
