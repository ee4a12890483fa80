package planner

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// The members of the tests below: this cluster, the object's origin, an honest member
// whose rule syncs the origin's objects, and a hostile member (lowest ID of all).
const (
	cLocal  types.UID = "uid-5-local"
	cOrigin types.UID = "uid-3-origin"
	cHonest types.UID = "uid-4-honest"
	cEvil   types.UID = "uid-1-evil"
)

var cmGVK = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}

func consentCM(annotations map[string]string, data string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"data": map[string]any{"k": data}}}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetNamespace("ns")
	u.SetName("cm")
	if annotations != nil {
		u.SetAnnotations(annotations)
	}
	return u
}

// consentRule is a rule for the ConfigMap ns/cm named name, copied here from the member
// made (empty: made here), whose copies get the label mark=name.
func consentRule(t *testing.T, name string, made types.UID) Rule {
	t.Helper()
	rsr := &v1alpha1.ResourceSyncRule{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.ResourceSyncRuleSpec{GVK: v1alpha1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
			Rules: []v1alpha1.SyncRule{{Mutations: v1alpha1.Mutations{Labels: &v1alpha1.LabelMutations{Add: map[string]string{"mark": name}}}}}},
	}
	if made != "" {
		rsr.Annotations = map[string]string{v1alpha1.OwnershipAnnotation: string(made)}
	}
	compiled, err := CompileRule(rsr)
	if err != nil {
		t.Fatal(err)
	}
	return Rule{Spec: rsr, Compiled: compiled}
}

// consentSources are the three peers; each serves the object objs holds for it (none
// when absent).
func consentSources(objs map[types.UID]*unstructured.Unstructured) []Source {
	var out []Source
	for _, p := range []struct {
		name string
		id   types.UID
	}{{"origin", cOrigin}, {"honest", cHonest}, {"evil", cEvil}} {
		obj := objs[p.id]
		out = append(out, Source{Name: p.name, ClusterID: p.id, Readable: true,
			Lookup: func(schema.GroupVersionKind, string, string) (*unstructured.Unstructured, bool) { return obj, true }})
	}
	return out
}

func consentPolicy(specs ...v1alpha1.SyncPolicySpec) Policy {
	var pols []v1alpha1.SyncPolicy
	for _, s := range specs {
		pols = append(pols, v1alpha1.SyncPolicy{Spec: s})
	}
	return PolicyOf(pols, []v1alpha1.Cluster{
		{ObjectMeta: metav1.ObjectMeta{Name: "local"}, Spec: v1alpha1.ClusterSpec{ClusterID: cLocal}},
		{ObjectMeta: metav1.ObjectMeta{Name: "origin"}, Spec: v1alpha1.ClusterSpec{ClusterID: cOrigin}},
		{ObjectMeta: metav1.ObjectMeta{Name: "honest"}, Spec: v1alpha1.ClusterSpec{ClusterID: cHonest}},
		{ObjectMeta: metav1.ObjectMeta{Name: "evil"}, Spec: v1alpha1.ClusterSpec{ClusterID: cEvil}},
	}, v1alpha1.DefaultNamespace, cLocal)
}

// TestOriginIsAMember: the origin of a copy is a member this cluster knows by ID, never
// the string an object carries. A member that writes the name (or any non-member ID) of
// a trusted cluster in the ownership annotation gets its object refused and reported,
// not admitted under fromClusters; one that claims the ID of a member read directly is
// not followed (that member is read itself).
func TestOriginIsAMember(t *testing.T) {
	trusted := v1alpha1.SyncPolicySpec{FromClusters: []string{"origin"}}
	target := types.NamespacedName{Namespace: "ns", Name: "cm"}
	rule := consentRule(t, "cms", cHonest)
	for _, tc := range []struct {
		name        string
		policy      Policy
		objs        map[types.UID]*unstructured.Unstructured
		wantOrigins []types.UID
		wantRefused []string
	}{{
		name:   "the name of a trusted origin, written by the evil member: refused, not admitted by fromClusters",
		policy: consentPolicy(trusted),
		objs: map[types.UID]*unstructured.Unstructured{
			cEvil: consentCM(map[string]string{v1alpha1.OwnershipAnnotation: "origin"}, "forged")},
		wantRefused: []string{v1alpha1.ReasonUnknownOrigin},
	}, {
		name:   "an ID no member has: refused",
		policy: consentPolicy(),
		objs: map[types.UID]*unstructured.Unstructured{
			cEvil: consentCM(map[string]string{v1alpha1.OwnershipAnnotation: "uid-0-nobody"}, "forged")},
		wantRefused: []string{v1alpha1.ReasonUnknownOrigin},
	}, {
		name:   "the ID of a member read directly: the evil member's relay is not followed",
		policy: consentPolicy(trusted),
		objs: map[types.UID]*unstructured.Unstructured{
			cEvil:   consentCM(map[string]string{v1alpha1.OwnershipAnnotation: string(cOrigin)}, "forged"),
			cOrigin: consentCM(nil, "real")},
		wantOrigins: []types.UID{cOrigin},
	}, {
		name:   "the evil member's own object: its origin is the evil member, outside fromClusters",
		policy: consentPolicy(trusted),
		objs: map[types.UID]*unstructured.Unstructured{
			cEvil: consentCM(nil, "own")},
		wantRefused: []string{v1alpha1.ReasonNotAllowed},
	}, {
		name:        "the trusted origin's own object passes fromClusters by its ID's name here",
		policy:      consentPolicy(trusted),
		objs:        map[types.UID]*unstructured.Unstructured{cOrigin: consentCM(nil, "real")},
		wantOrigins: []types.UID{cOrigin},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := Gather(cLocal, nil, tc.policy, []Rule{rule}, consentSources(tc.objs), cmGVK, target, nil)
			var origins []types.UID
			for _, c := range g.Candidates {
				origins = append(origins, c.Origin)
				if got := c.Object.Object["data"].(map[string]any)["k"]; got != "real" {
					t.Errorf("candidate from %s carries %v", c.Peer, got)
				}
			}
			if diff := cmp.Diff(tc.wantOrigins, origins); diff != "" {
				t.Errorf("candidates' origins (-want +got):\n%s", diff)
			}
			var refused []string
			for _, r := range g.Refusals["cms"] {
				refused = append(refused, r.Reason)
			}
			if diff := cmp.Diff(tc.wantRefused, refused); diff != "" {
				t.Errorf("refusals (-want +got):\n%s", diff)
			}
		})
	}
}

// arrived returns r as if its object reached this cluster at t.
func arrived(r Rule, t time.Time) Rule {
	rsr := r.Spec.DeepCopy()
	rsr.CreationTimestamp = metav1.NewTime(t)
	return Rule{Spec: rsr, Compiled: r.Compiled}
}

// TestOneRulePerCopy: when rules made on different members match the same object, one
// writes the copy, chosen by who made it (here, then the object's origin, then a third
// member), never by its name; among third members' rules the one that reached this
// cluster first, whatever the ID of the member it was made on; an existing copy keeps the
// rule that wrote it among rules of the same rank, so a member's rule named to sort
// first takes nothing over.
func TestOneRulePerCopy(t *testing.T) {
	target := types.NamespacedName{Namespace: "ns", Name: "cm"}
	t0 := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	honest := arrived(consentRule(t, "sync-cms", cHonest), t0)
	// The hostile member (the lowest ID of all) makes its rule after the honest one.
	hijack := arrived(consentRule(t, "0-hijack", cEvil), t0.Add(time.Minute))
	hijackAsOld := arrived(hijack, t0)
	originRule := consentRule(t, "z-origin", cOrigin)
	localRule := consentRule(t, "zz-local", "")
	objs := map[types.UID]*unstructured.Unstructured{cOrigin: consentCM(nil, "real")}
	// copyBy is the copy here as rule wrote it.
	copyBy := func(rule Rule) *unstructured.Unstructured {
		g := Gather(cLocal, nil, consentPolicy(), []Rule{rule}, consentSources(objs), cmGVK, target, nil)
		act := Decide(g.Input(cLocal, nil))
		if act.Type != ActionCreate {
			t.Fatalf("creating the copy by %s: %s", rule.Spec.Name, act.Type)
		}
		return act.Object
	}
	for _, tc := range []struct {
		name     string
		rules    []Rule
		observed *unstructured.Unstructured
		wantType ActionType
		wantRule string
	}{
		{name: "a new copy: the third member's rule that reached this cluster first, whatever the IDs", rules: []Rule{honest, hijack}, wantType: ActionCreate, wantRule: "sync-cms"},
		{name: "a new copy: third members' rules of the same time by the ID of the member each was made on", rules: []Rule{honest, hijackAsOld}, wantType: ActionCreate, wantRule: "0-hijack"},
		{name: "an existing copy keeps its rule when a third member's rule that sorts first appears", rules: []Rule{honest, hijackAsOld}, observed: copyBy(honest), wantType: ActionNone, wantRule: "sync-cms"},
		{name: "the origin's own rule before a third member's", rules: []Rule{honest, hijack, originRule}, wantType: ActionCreate, wantRule: "z-origin"},
		{name: "the origin's own rule takes a copy over from a third member's", rules: []Rule{honest, originRule}, observed: copyBy(honest), wantType: ActionUpdate, wantRule: "z-origin"},
		{name: "a rule made here before every member's", rules: []Rule{honest, hijack, originRule, localRule}, wantType: ActionCreate, wantRule: "zz-local"},
		{name: "a rule made here takes over from the origin's", rules: []Rule{originRule, localRule}, observed: copyBy(originRule), wantType: ActionUpdate, wantRule: "zz-local"},
		{name: "a third member's rule never takes over from the origin's", rules: []Rule{originRule, hijack}, observed: copyBy(originRule), wantType: ActionNone, wantRule: "z-origin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := Gather(cLocal, nil, consentPolicy(), tc.rules, consentSources(objs), cmGVK, target, tc.observed)
			act := Decide(g.Input(cLocal, tc.observed))
			if act.Type != tc.wantType || act.Rule() != tc.wantRule {
				t.Fatalf("Decide = %s by rule %q, want %s by %q (%s)", act.Type, act.Rule(), tc.wantType, tc.wantRule, act.Reason)
			}
			if act.Object != nil {
				if got := act.Object.GetLabels()["mark"]; got != tc.wantRule {
					t.Errorf("the copy carries the mutations of rule %q, want %q", got, tc.wantRule)
				}
				if got := act.Object.GetLabels()[v1alpha1.RuleLabel]; got != tc.wantRule {
					t.Errorf("the copy is labelled with rule %q, want %q", got, tc.wantRule)
				}
			}
			// Every other rule is told which rule writes the object, and why.
			_, passed := Explain(g.Input(cLocal, tc.observed), act)
			for _, p := range passed {
				if p.Rule == tc.wantRule || p.Origin != cOrigin {
					continue
				}
				if !strings.Contains(p.Why, "rule "+tc.wantRule) {
					t.Errorf("rule %s passed over for %q, which does not name rule %s", p.Rule, p.Why, tc.wantRule)
				}
			}
		})
	}
}

// TestKeepOnRuleDelete: the deletion policy Delete of a rule deletes only the copies no
// other rule asks for; a copy another rule asks for from its own origin is handed over,
// and one whose origin's view has not synced waits.
func TestKeepOnRuleDelete(t *testing.T) {
	target := types.NamespacedName{Namespace: "ns", Name: "cm"}
	hijack := consentRule(t, "0-hijack", cEvil)
	honest := consentRule(t, "sync-cms", cHonest)
	objs := map[types.UID]*unstructured.Unstructured{cOrigin: consentCM(nil, "real")}
	g := Gather(cLocal, nil, consentPolicy(), []Rule{hijack}, consentSources(objs), cmGVK, target, nil)
	written := Decide(g.Input(cLocal, nil)).Object // the hijacking rule's copy
	if written == nil || written.GetLabels()[v1alpha1.RuleLabel] != "0-hijack" {
		t.Fatalf("the hijacking rule wrote no copy: %v", written)
	}
	unsynced := consentSources(objs)
	unsynced[0].Lookup = func(schema.GroupVersionKind, string, string) (*unstructured.Unstructured, bool) { return nil, false }
	for _, tc := range []struct {
		name           string
		rules          []Rule
		sources        []Source
		keep, wantWait bool
	}{
		{name: "another rule asks for it: handed over", rules: []Rule{honest}, sources: consentSources(objs), keep: true},
		{name: "no other rule: deleted", rules: nil, sources: consentSources(objs)},
		{name: "another rule, the origin's view not synced: wait", rules: []Rule{honest}, sources: unsynced, wantWait: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := Gather(cLocal, nil, consentPolicy(), tc.rules, tc.sources, cmGVK, target, written)
			keep, wait := KeepOnRuleDelete(written, g)
			if keep != tc.keep || wait != tc.wantWait {
				t.Errorf("KeepOnRuleDelete = keep %t, wait %t; want %t, %t", keep, wait, tc.keep, tc.wantWait)
			}
		})
	}
}

// TestOnlyTheBuiltInRuleCopiesRules: a member's rule of kind ResourceSyncRule (which
// could copy the origin's rule renamed, with overrides, and so rank as a rule made on the
// origin) does not run; the built-in rule does.
func TestOnlyTheBuiltInRuleCopiesRules(t *testing.T) {
	rsr := &v1alpha1.ResourceSyncRule{
		ObjectMeta: metav1.ObjectMeta{Name: "copy-rules"},
		Spec: v1alpha1.ResourceSyncRuleSpec{GVK: v1alpha1.GroupVersionKind{Group: v1alpha1.GroupVersion.Group, Version: v1alpha1.GroupVersion.Version, Kind: "ResourceSyncRule"},
			Rules: []v1alpha1.SyncRule{{}}},
	}
	compiled, err := CompileRule(rsr)
	if err != nil {
		t.Fatal(err)
	}
	if ref := (Policy{}).RuleAllowed(rsr, compiled); ref == nil || ref.Reason != v1alpha1.ReasonCopyRefused {
		t.Errorf("RuleAllowed = %v, want a CopyRefused refusal", ref)
	}
	core, err := CompileRule(CoreRule())
	if err != nil {
		t.Fatal(err)
	}
	if ref := (Policy{}).RuleAllowed(CoreRule(), core); ref != nil {
		t.Errorf("the built-in rule is refused: %v", ref)
	}
}
