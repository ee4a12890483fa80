package planner

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// The planner is pure: these tests build unstructured objects in code and need no cluster.

const (
	planLocal  types.UID = "uid-local"
	planOrigA  types.UID = "uid-a"
	planOrigB  types.UID = "uid-b"
	planOrigC  types.UID = "uid-c"
	planRuleID           = "cms"
)

// planOpt changes an object under construction.
type planOpt func(u *unstructured.Unstructured)

// planObj returns a ConfigMap team/cfg with data {a: "1"}, changed by opts.
func planObj(opts ...planOpt) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata":   map[string]any{"name": "cfg", "namespace": "team"},
		"data":       map[string]any{"a": "1"},
	}}
	for _, o := range opts {
		o(u)
	}
	return u
}

// planMarked sets the ownership marks (annotation and label) and the rule label the
// engine puts on every candidate.
func planMarked(origin types.UID) planOpt {
	return func(u *unstructured.Unstructured) {
		planAnnotation(v1alpha1.OwnershipAnnotation, string(origin))(u)
		planLabel(v1alpha1.OwnershipLabel, string(origin))(u)
		planLabel(v1alpha1.RuleLabel, planRuleID)(u)
	}
}

func planLabel(k, v string) planOpt {
	return func(u *unstructured.Unstructured) {
		l := u.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		l[k] = v
		u.SetLabels(l)
	}
}

func planAnnotation(k, v string) planOpt {
	return func(u *unstructured.Unstructured) {
		a := u.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a[k] = v
		u.SetAnnotations(a)
	}
}

func planData(k string, v any) planOpt {
	return func(u *unstructured.Unstructured) {
		if err := unstructured.SetNestedField(u.Object, v, "data", k); err != nil {
			panic(err)
		}
	}
}

func planSet(v any, path ...string) planOpt {
	return func(u *unstructured.Unstructured) {
		if err := unstructured.SetNestedField(u.Object, v, path...); err != nil {
			panic(err)
		}
	}
}

func planStatus(phase string) planOpt {
	return planSet(map[string]any{"phase": phase}, "status")
}

// planServerMeta adds what the local API server and controllers set on an object.
func planServerMeta(rv string) planOpt {
	return func(u *unstructured.Unstructured) {
		u.SetUID("local-object-uid")
		u.SetResourceVersion(rv)
		u.SetGeneration(3)
		planSet("2024-01-02T03:04:05Z", "metadata", "creationTimestamp")(u)
		planSet([]any{map[string]any{
			"manager": "kubectl-registry", "operation": "Update", "apiVersion": "v1",
			"time": "2024-01-02T03:04:05Z", "fieldsType": "FieldsV1",
			"fieldsV1": map[string]any{"f:data": map[string]any{}},
		}}, "metadata", "managedFields")(u)
	}
}

func planLocalOwnership() planOpt {
	return func(u *unstructured.Unstructured) {
		u.SetFinalizers([]string{"example.com/keep"})
		planSet([]any{map[string]any{
			"apiVersion": "v1", "kind": "Namespace", "name": "team", "uid": "ns-uid",
		}}, "metadata", "ownerReferences")(u)
	}
}

func planCand(rule, peer string, peerID, origin types.UID, obj *unstructured.Unstructured) Candidate {
	return Candidate{Rule: rule, Peer: peer, PeerID: peerID, Origin: origin, Object: obj}
}

// planDirect is a candidate read from its origin, peer "peer-a".
func planDirect(obj *unstructured.Unstructured) Candidate {
	return planCand(planRuleID, "peer-a", planOrigA, planOrigA, obj)
}

// planCheck compares an action with the expected one; Reason must be set for conflicts
// and deletes and is otherwise not compared.
func planCheck(t *testing.T, got, want Action) {
	t.Helper()
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(Action{}, "Reason")); diff != "" {
		t.Errorf("Decide() mismatch (-want +got):\n%s", diff)
	}
	if (got.Type == ActionConflict || got.Type == ActionDelete) && got.Reason == "" {
		t.Errorf("Decide() = %s without a reason", got.Type)
	}
}

func planSnapshot(in Input) Input {
	out := in
	if in.Observed != nil {
		out.Observed = in.Observed.DeepCopy()
	}
	if in.Candidates != nil {
		out.Candidates = make([]Candidate, 0, len(in.Candidates))
	}
	for _, c := range in.Candidates {
		c.Object = c.Object.DeepCopy()
		out.Candidates = append(out.Candidates, c)
	}
	return out
}

// planDecide runs Decide and checks that it did not modify its input.
func planDecide(t *testing.T, in Input) Action {
	t.Helper()
	before := planSnapshot(in)
	got := Decide(in)
	if diff := cmp.Diff(before, in); diff != "" {
		t.Errorf("Decide() modified its input (-before +after):\n%s", diff)
	}
	return got
}

// 1. No observed object: create the chosen candidate, as a deep copy.
func TestDecideCreate(t *testing.T) {
	direct := planDirect(planObj(planMarked(planOrigA), planStatus("Ready")))
	hop := planCand("aaa-first-rule", "peer-b", planOrigB, planOrigA, planObj(planMarked(planOrigA), planData("via", "b")))
	other := planCand(planRuleID, "peer-c", planOrigC, planOrigC, planObj(planMarked(planOrigC)))
	// A peer whose name sorts after peer-a but whose cluster ID sorts first.
	namedFirst := planCand(planRuleID, "zzz-peer", "uid-0", "uid-0", planObj(planMarked("uid-0")))
	tests := []struct {
		name  string
		cands []Candidate
		want  Candidate
	}{
		{name: "one candidate", cands: []Candidate{direct}, want: direct},
		{name: "direct wins over a hop with a smaller rule name", cands: []Candidate{hop, direct}, want: direct},
		{name: "only a hop", cands: []Candidate{hop}, want: hop},
		{name: "two origins: the lowest cluster ID", cands: []Candidate{other, direct}, want: direct},
		{name: "two origins: the lowest cluster ID, not the peer name", cands: []Candidate{direct, namedFirst}, want: namedFirst},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, og := range []map[types.UID]bool{nil, {planOrigA: true}} {
				got := planDecide(t, Input{LocalID: planLocal, Candidates: tt.cands, OriginGone: og})
				want := tt.want
				planCheck(t, got, Action{Type: ActionCreate, Object: want.Object, Source: &want})
				if got.Object == want.Object {
					t.Fatalf("the created object is the candidate's object, not a copy")
				}
				// Modifying the result must not change the candidate.
				snapshot := want.Object.DeepCopy()
				planLabel("changed", "yes")(got.Object)
				planData("a", "changed")(got.Object)
				planSet("changed", "status", "phase")(got.Object)
				if diff := cmp.Diff(snapshot, want.Object); diff != "" {
					t.Errorf("modifying the created object changed the candidate (-before +after):\n%s", diff)
				}
			}
		})
	}
	if got := Decide(Input{LocalID: planLocal}); got.Type != ActionNone || got.Object != nil || got.Source != nil {
		t.Errorf("Decide(no candidates, no object) = %+v, want none", got)
	}
}

// 2. Choose: the lowest origin cluster ID, whatever the peer and rule names and whether
// the copy is read from its origin; for one origin, read from the origin first, then by
// rule, then by the peer's cluster ID; deterministic whatever the input order.
func TestChoose(t *testing.T) {
	c := func(rule, peer string, peerID, origin types.UID) Candidate {
		return planCand(rule, peer, peerID, origin, planObj(planMarked(origin), planData("from", rule+"/"+peer)))
	}
	tests := []struct {
		name  string
		cands []Candidate
		want  string // rule/peer
	}{
		{name: "none", want: ""},
		{name: "one", cands: []Candidate{c("r", "p", planOrigA, planOrigA)}, want: "r/p"},
		{
			name: "the lowest origin ID, not the peer name",
			cands: []Candidate{
				c("r", "a-first-by-name", planOrigC, planOrigC),
				c("r", "z-last-by-name", planOrigA, planOrigA),
				c("r", "m", planOrigB, planOrigB),
			},
			want: "r/z-last-by-name",
		},
		{
			name: "the lowest origin ID, not the rule name",
			cands: []Candidate{
				c("r2", "a", planOrigA, planOrigA),
				c("r1", "z", planOrigC, planOrigC),
				c("r3", "b", planOrigB, planOrigB),
			},
			want: "r2/a",
		},
		{
			name: "the lowest origin ID, even read through a hop",
			cands: []Candidate{
				c("a", "b", planOrigB, planOrigB),
				c("z", "c", planOrigC, planOrigA),
			},
			want: "z/c",
		},
		{
			name: "IDs compare as strings, not by length",
			cands: []Candidate{
				c("r", "long", "uid-b-long", "uid-b-long"),
				c("r", "short", "uid-c", "uid-c"),
			},
			want: "r/long",
		},
		{
			name: "one origin: direct beats hops with smaller rule and peer names",
			cands: []Candidate{
				c("a", "a", planOrigB, planOrigC),
				c("z", "z", planOrigC, planOrigC),
				c("a", "b", planOrigA, planOrigC),
			},
			want: "z/z",
		},
		{
			name: "one origin, direct copies: by rule name",
			cands: []Candidate{
				c("r2", "peer-a", planOrigA, planOrigA),
				c("r1", "peer-a", planOrigA, planOrigA),
			},
			want: "r1/peer-a",
		},
		{
			name: "one origin, only hops: by rule, then the peer's cluster ID, not its name",
			cands: []Candidate{
				c("r2", "a", planOrigA, planOrigC),
				c("r1", "a-first-by-name", planOrigB, planOrigC),
				c("r1", "z-last-by-name", planOrigA, planOrigC),
			},
			want: "r1/z-last-by-name",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rand.New(rand.NewSource(1))
			for i := 0; i < 50; i++ {
				cands := append([]Candidate(nil), tt.cands...)
				r.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
				before := append([]Candidate(nil), cands...)
				got := Choose(cands)
				if diff := cmp.Diff(before, cands); diff != "" {
					t.Fatalf("Choose() reordered its input:\n%s", diff)
				}
				name := ""
				if got != nil {
					name = got.Rule + "/" + got.Peer
					if from, _, _ := unstructured.NestedString(got.Object.Object, "data", "from"); from != name {
						t.Fatalf("Choose() returned %s with the object of %s", name, from)
					}
				}
				if name != tt.want {
					t.Fatalf("Choose(%v) = %q, want %q", planNames(cands), name, tt.want)
				}
			}
		})
	}
}

func planNames(cands []Candidate) []string {
	var out []string
	for _, c := range cands {
		out = append(out, fmt.Sprintf("%s/%s(%s<-%s)", c.Rule, c.Peer, c.PeerID, c.Origin))
	}
	return out
}

func planJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// planGoneCases are the OriginGone maps that must never change a conflict.
func planGoneCases() map[string]map[types.UID]bool {
	return map[string]map[types.UID]bool{
		"no evidence":           nil,
		"empty":                 {},
		"candidate origin gone": {planOrigA: true},
		"local id gone":         {planLocal: true},
		"empty id gone":         {"": true},
		"every origin gone":     {planOrigA: true, planOrigB: true, planOrigC: true, planLocal: true, "": true},
		"explicitly not gone":   {planOrigA: false, planOrigB: false, planLocal: false},
	}
}

// 3 and 4. An object without the ownership mark, or marked as made here, is never
// written: a conflict whatever OriginGone says.
func TestDecideNeverTouchesLocalObjects(t *testing.T) {
	desired := planObj(planMarked(planOrigA))
	observed := map[string]*unstructured.Unstructured{
		"unmarked, different content": planObj(planData("a", "local"), planServerMeta("7")),
		"unmarked, same content":      planObj(planServerMeta("7")),
		"only the label, not the annotation": planObj(planLabel(v1alpha1.OwnershipLabel, string(planOrigA)),
			planServerMeta("7")),
		"empty annotation":               planObj(planAnnotation(v1alpha1.OwnershipAnnotation, ""), planServerMeta("7")),
		"marked with the local ID":       planObj(planMarked(planLocal), planData("a", "local"), planServerMeta("7")),
		"marked local ID, same content":  planObj(planMarked(planLocal), planServerMeta("7")),
		"marked local ID, label of peer": planObj(planMarked(planLocal), planLabel(v1alpha1.OwnershipLabel, string(planOrigA))),
	}
	for oname, obs := range observed {
		for gname, gone := range planGoneCases() {
			t.Run(oname+"/"+gname, func(t *testing.T) {
				cand := planDirect(desired)
				got := planDecide(t, Input{LocalID: planLocal, Observed: obs, Candidates: []Candidate{cand}, OriginGone: gone})
				planCheck(t, got, Action{Type: ActionConflict, Object: obs, Source: &cand})
				// Without any candidate it is left alone, never deleted.
				got = planDecide(t, Input{LocalID: planLocal, Observed: obs, OriginGone: gone})
				if got.Type != ActionNone {
					t.Errorf("Decide(no candidates) = %s (%s), want none", got.Type, got.Reason)
				}
			})
		}
	}
}

// 5. A copy of another origin is taken over only once that origin is seen to no longer
// have the object.
func TestDecideOtherOrigin(t *testing.T) {
	desired := planObj(planMarked(planOrigA), planData("a", "from-a"))
	observed := planObj(planMarked(planOrigB), planServerMeta("9"), planLocalOwnership(), planStatus("Old"))
	tests := []struct {
		name string
		gone map[types.UID]bool
		want ActionType
	}{
		{name: "no evidence", gone: nil, want: ActionConflict},
		{name: "empty evidence", gone: map[types.UID]bool{}, want: ActionConflict},
		{name: "other origin explicitly present", gone: map[types.UID]bool{planOrigB: false}, want: ActionConflict},
		{name: "only the candidate's origin gone", gone: map[types.UID]bool{planOrigA: true}, want: ActionConflict},
		{name: "an unrelated origin gone", gone: map[types.UID]bool{planOrigC: true, planLocal: true}, want: ActionConflict},
		{name: "other origin gone: take over", gone: map[types.UID]bool{planOrigB: true}, want: ActionUpdate},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cand := planDirect(desired)
			got := planDecide(t, Input{LocalID: planLocal, Observed: observed, Candidates: []Candidate{cand}, OriginGone: tt.gone})
			want := Action{Type: tt.want, Object: observed, Source: &cand}
			if tt.want == ActionUpdate {
				want.Object = Merge(desired, observed, false)
			}
			planCheck(t, got, want)
			if tt.want == ActionUpdate {
				if got := got.Object.GetAnnotations()[v1alpha1.OwnershipAnnotation]; got != string(planOrigA) {
					t.Errorf("the taken over copy is marked %q, want %q", got, planOrigA)
				}
				if got.Object.GetResourceVersion() != "9" {
					t.Errorf("the update carries resourceVersion %q, want the observed 9", got.Object.GetResourceVersion())
				}
			}
		})
	}
}

// A copy keeps following its origin while that origin still has the object, even when
// another origin, which sorts first, has an object with the same name.
func TestDecideFollowsTheCopysOrigin(t *testing.T) {
	fromA := planDirect(planObj(planMarked(planOrigA), planData("a", "from-a")))
	fromB := planCand(planRuleID, "peer-b", planOrigB, planOrigB, planObj(planMarked(planOrigB), planData("a", "from-b")))
	hopB := planCand(planRuleID, "peer-a", planOrigA, planOrigB, planObj(planMarked(planOrigB), planData("a", "from-b-via-a")))
	tests := []struct {
		name     string
		cands    []Candidate
		observed *unstructured.Unstructured
		gone     map[types.UID]bool
		want     func(obs *unstructured.Unstructured) Action
	}{
		{
			name:     "copy of B is up to date",
			cands:    []Candidate{fromA, fromB},
			observed: planObj(planMarked(planOrigB), planData("a", "from-b"), planServerMeta("4")),
			want:     func(*unstructured.Unstructured) Action { return Action{Type: ActionNone, Source: &fromB} },
		},
		{
			name:     "copy of B follows B's change",
			cands:    []Candidate{fromB, fromA},
			observed: planObj(planMarked(planOrigB), planData("a", "old-b"), planServerMeta("4")),
			want: func(obs *unstructured.Unstructured) Action {
				return Action{Type: ActionUpdate, Object: Merge(fromB.Object, obs, false), Source: &fromB}
			},
		},
		{
			name:     "copy of B follows B through a hop, not A's direct copy",
			cands:    []Candidate{fromA, hopB},
			observed: planObj(planMarked(planOrigB), planData("a", "old-b"), planServerMeta("4")),
			want: func(obs *unstructured.Unstructured) Action {
				return Action{Type: ActionUpdate, Object: Merge(hopB.Object, obs, false), Source: &hopB}
			},
		},
		{
			name:     "copy of B, B's direct copy beats the hop",
			cands:    []Candidate{hopB, fromA, fromB},
			observed: planObj(planMarked(planOrigB), planData("a", "old-b"), planServerMeta("4")),
			want: func(obs *unstructured.Unstructured) Action {
				return Action{Type: ActionUpdate, Object: Merge(fromB.Object, obs, false), Source: &fromB}
			},
		},
		{
			name:     "copy of C, which is gone: the chosen candidate takes over",
			cands:    []Candidate{fromB, fromA},
			observed: planObj(planMarked(planOrigC), planServerMeta("4")),
			gone:     map[types.UID]bool{planOrigC: true},
			want: func(obs *unstructured.Unstructured) Action {
				return Action{Type: ActionUpdate, Object: Merge(fromA.Object, obs, false), Source: &fromA}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := planDecide(t, Input{LocalID: planLocal, Observed: tt.observed, Candidates: tt.cands, OriginGone: tt.gone})
			planCheck(t, got, tt.want(tt.observed))
		})
	}
}

// 6. Equal: labels, annotations and content; never server or local metadata; status
// only with syncStatus.
func TestEqual(t *testing.T) {
	desired := func(opts ...planOpt) *unstructured.Unstructured {
		return planObj(append([]planOpt{planMarked(planOrigA), planAnnotation("note", "x"), planData("b", "2"), planStatus("Ready")}, opts...)...)
	}
	tests := []struct {
		name       string
		observed   *unstructured.Unstructured
		syncStatus bool
		want       bool
	}{
		{name: "identical", observed: desired(), want: true},
		{name: "identical, syncStatus", observed: desired(), syncStatus: true, want: true},
		{name: "server metadata", observed: desired(planServerMeta("12")), want: true},
		{name: "finalizers and ownerReferences", observed: desired(planLocalOwnership()), want: true},
		{name: "deletion timestamp, generateName, self link", observed: desired(
			planSet("2024-01-02T03:04:05Z", "metadata", "deletionTimestamp"),
			planSet("cfg-", "metadata", "generateName"),
			planSet("/api/v1/namespaces/team/configmaps/cfg", "metadata", "selfLink"),
		), want: true},
		{name: "status differs", observed: desired(planStatus("Pending")), want: true},
		{name: "status missing", observed: desired(func(u *unstructured.Unstructured) { delete(u.Object, "status") }), want: true},
		{name: "status differs, syncStatus", observed: desired(planStatus("Pending")), syncStatus: true, want: false},
		{name: "status missing, syncStatus", observed: desired(func(u *unstructured.Unstructured) { delete(u.Object, "status") }), syncStatus: true, want: false},
		{name: "added label", observed: desired(planLabel("local", "yes")), want: false},
		{name: "changed label", observed: desired(planLabel(v1alpha1.RuleLabel, "other")), want: false},
		{name: "removed label", observed: desired(func(u *unstructured.Unstructured) {
			l := u.GetLabels()
			delete(l, v1alpha1.RuleLabel)
			u.SetLabels(l)
		}), want: false},
		{name: "added annotation", observed: desired(planAnnotation("kubectl.kubernetes.io/last-applied-configuration", "{}")), want: false},
		{name: "changed annotation", observed: desired(planAnnotation("note", "y")), want: false},
		{name: "added data key", observed: desired(planData("c", "3")), want: false},
		{name: "changed data value", observed: desired(planData("b", "two")), want: false},
		{name: "removed data", observed: desired(func(u *unstructured.Unstructured) { delete(u.Object, "data") }), want: false},
		{name: "new top-level field", observed: desired(planSet(true, "immutable")), want: false},
		{name: "other apiVersion", observed: desired(planSet("v2", "apiVersion")), want: false},
		{name: "other name is not content", observed: desired(planSet("other", "metadata", "name")), want: true},
	}
	// Current behaviour, documented: nil and empty maps are equal, but an absent field is
	// not equal to an empty one. A server that drops an empty field (omitempty in a
	// built-in type) from a desired copy that has it would see it rewritten on each pass.
	t.Run("nil and empty data maps", func(t *testing.T) {
		d, o := planObj(planSet(map[string]any{}, "data")), planObj(func(u *unstructured.Unstructured) { u.Object["data"] = map[string]any(nil) })
		if !Equal(d, o, false) {
			t.Errorf("Equal(data {}, data nil) = false, want true")
		}
		delete(o.Object, "data")
		if Equal(d, o, false) {
			t.Errorf("Equal(data {}, no data) = true; the documented behaviour changed, update this test")
		}
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := desired()
			dBefore, oBefore := d.DeepCopy(), tt.observed.DeepCopy()
			if got := Equal(d, tt.observed, tt.syncStatus); got != tt.want {
				t.Errorf("Equal() = %t, want %t", got, tt.want)
			}
			if got := Equal(tt.observed, d, tt.syncStatus); got != tt.want {
				t.Errorf("Equal() is not symmetric: reversed = %t, want %t", got, tt.want)
			}
			if diff := cmp.Diff(dBefore, d); diff != "" {
				t.Errorf("Equal() modified desired:\n%s", diff)
			}
			if diff := cmp.Diff(oBefore, tt.observed); diff != "" {
				t.Errorf("Equal() modified observed:\n%s", diff)
			}
		})
	}
}

// 6, through Decide: an equal copy is not written; a different one is restored exactly.
func TestDecideUpdate(t *testing.T) {
	desired := planObj(planMarked(planOrigA), planAnnotation("note", "x"), planData("b", "2"), planStatus("Ready"))
	live := func(opts ...planOpt) *unstructured.Unstructured {
		u := desired.DeepCopy()
		planServerMeta("21")(u)
		for _, o := range opts {
			o(u)
		}
		return u
	}
	tests := []struct {
		name       string
		observed   *unstructured.Unstructured
		syncStatus bool
		want       ActionType
	}{
		{name: "identical", observed: desired.DeepCopy(), want: ActionNone},
		{name: "server metadata only", observed: live(), want: ActionNone},
		{name: "finalizers and ownerReferences only", observed: live(planLocalOwnership()), want: ActionNone},
		{name: "status differs", observed: live(planStatus("Pending")), want: ActionNone},
		{name: "status differs, syncStatus", observed: live(planStatus("Pending")), syncStatus: true, want: ActionUpdate},
		{name: "added label", observed: live(planLabel("local", "yes")), want: ActionUpdate},
		{name: "added annotation", observed: live(planAnnotation("local", "yes"), planLocalOwnership()), want: ActionUpdate},
		{name: "added data key", observed: live(planData("c", "3")), want: ActionUpdate},
		{name: "changed data", observed: live(planData("a", "local")), want: ActionUpdate},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cand := planDirect(desired)
			cand.SyncStatus = tt.syncStatus
			got := planDecide(t, Input{LocalID: planLocal, Observed: tt.observed, Candidates: []Candidate{cand}})
			if tt.want == ActionNone {
				// Nothing to write; the source names the rule the copy is synced by.
				planCheck(t, got, Action{Type: ActionNone, Source: &cand})
				return
			}
			planCheck(t, got, Action{Type: ActionUpdate, Object: Merge(desired, tt.observed, tt.syncStatus), Source: &cand})
			// The update restores exactly the desired labels, annotations and data.
			if diff := cmp.Diff(desired.GetLabels(), got.Object.GetLabels()); diff != "" {
				t.Errorf("labels (-desired +update):\n%s", diff)
			}
			if diff := cmp.Diff(desired.GetAnnotations(), got.Object.GetAnnotations()); diff != "" {
				t.Errorf("annotations (-desired +update):\n%s", diff)
			}
			if diff := cmp.Diff(desired.Object["data"], got.Object.Object["data"]); diff != "" {
				t.Errorf("data (-desired +update):\n%s", diff)
			}
			if !Equal(desired, got.Object, tt.syncStatus) {
				t.Errorf("the update is not Equal to the desired copy")
			}
			if got.Object.GetResourceVersion() != "21" || got.Object.GetUID() != "local-object-uid" {
				t.Errorf("the update carries uid %q resourceVersion %q, want the observed ones", got.Object.GetUID(), got.Object.GetResourceVersion())
			}
		})
	}
}

// 7. Merge: observed identity and locally owned metadata, desired labels, annotations
// and content; status per syncStatus; inputs untouched and not aliased.
func TestMerge(t *testing.T) {
	desired := func() *unstructured.Unstructured {
		u := planObj(planMarked(planOrigA), planAnnotation("note", "x"), planData("b", "2"),
			planSet(map[string]any{"nested": map[string]any{"list": []any{"x", int64(1)}}}, "spec"),
			planStatus("Ready"))
		// What a peer's copy carries that must not reach the local object.
		u.SetUID("peer-uid")
		u.SetResourceVersion("999")
		u.SetFinalizers([]string{"peer.example.com/f"})
		return u
	}
	observed := func() *unstructured.Unstructured {
		u := planObj(planMarked(planOrigA), planLabel("local", "yes"), planAnnotation("local", "yes"),
			planData("a", "local"), planData("extra", "x"), planServerMeta("21"), planLocalOwnership(),
			planSet(map[string]any{"phase": "Pending", "local": true}, "status"))
		return u
	}
	wantMeta := func() map[string]any {
		m := observed().Object["metadata"].(map[string]any)
		m["labels"] = map[string]any{
			v1alpha1.OwnershipLabel: string(planOrigA),
			v1alpha1.RuleLabel:      planRuleID,
		}
		m["annotations"] = map[string]any{
			v1alpha1.OwnershipAnnotation: string(planOrigA),
			"note":                       "x",
		}
		return m
	}
	base := map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"data":       map[string]any{"a": "1", "b": "2"},
		"spec":       map[string]any{"nested": map[string]any{"list": []any{"x", int64(1)}}},
	}
	with := func(status any) map[string]any {
		out := runtimeDeepCopy(base).(map[string]any)
		out["metadata"] = wantMeta()
		if status != nil {
			out["status"] = status
		}
		return out
	}
	tests := []struct {
		name       string
		desired    *unstructured.Unstructured
		observed   *unstructured.Unstructured
		syncStatus bool
		want       map[string]any
	}{
		{name: "observed status kept", desired: desired(), observed: observed(),
			want: with(map[string]any{"phase": "Pending", "local": true})},
		{name: "desired status with syncStatus", desired: desired(), observed: observed(), syncStatus: true,
			want: with(map[string]any{"phase": "Ready"})},
		{name: "no observed status, not synced", desired: desired(),
			observed: func() *unstructured.Unstructured { u := observed(); delete(u.Object, "status"); return u }(),
			want:     with(nil)},
		{name: "no desired status, syncStatus", observed: observed(), syncStatus: true,
			desired: func() *unstructured.Unstructured { u := desired(); delete(u.Object, "status"); return u }(),
			want:    with(nil)},
		{name: "desired without labels and annotations",
			desired: func() *unstructured.Unstructured {
				u := desired()
				u.SetLabels(nil)
				u.SetAnnotations(nil)
				return u
			}(),
			observed: observed(),
			want: func() map[string]any {
				m := with(map[string]any{"phase": "Pending", "local": true})
				md := m["metadata"].(map[string]any)
				delete(md, "labels")
				delete(md, "annotations")
				return m
			}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dBefore, oBefore := tt.desired.DeepCopy(), tt.observed.DeepCopy()
			got := Merge(tt.desired, tt.observed, tt.syncStatus)
			if diff := cmp.Diff(tt.want, got.Object); diff != "" {
				t.Errorf("Merge() mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(dBefore, tt.desired); diff != "" {
				t.Errorf("Merge() modified desired:\n%s", diff)
			}
			if diff := cmp.Diff(oBefore, tt.observed); diff != "" {
				t.Errorf("Merge() modified observed:\n%s", diff)
			}
			if !Equal(tt.desired, got, tt.syncStatus) {
				t.Errorf("Merge() is not Equal to desired")
			}
			// The result shares no map or slice with the inputs.
			planScribble(got.Object)
			if diff := cmp.Diff(dBefore, tt.desired); diff != "" {
				t.Errorf("changing the merged object changed desired:\n%s", diff)
			}
			if diff := cmp.Diff(oBefore, tt.observed); diff != "" {
				t.Errorf("changing the merged object changed observed:\n%s", diff)
			}
		})
	}
}

// An observed object without metadata (never served, but possible in a preview) still
// gets desired's labels and annotations.
func TestMergeObservedWithoutMetadata(t *testing.T) {
	desired := planObj(planMarked(planOrigA))
	observed := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
	got := Merge(desired, observed, false)
	want := map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"a": "1"},
		"metadata": map[string]any{
			"labels":      map[string]any{v1alpha1.OwnershipLabel: string(planOrigA), v1alpha1.RuleLabel: planRuleID},
			"annotations": map[string]any{v1alpha1.OwnershipAnnotation: string(planOrigA)},
		},
	}
	if diff := cmp.Diff(want, got.Object); diff != "" {
		t.Errorf("Merge() mismatch (-want +got):\n%s", diff)
	}
}

// planScribble overwrites every leaf and adds a key to every map, in place.
func planScribble(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			switch e.(type) {
			case map[string]any, []any:
				planScribble(e)
			default:
				x[k] = "scribbled"
			}
		}
		x["scribbled"] = true
	case []any:
		for i, e := range x {
			switch e.(type) {
			case map[string]any, []any:
				planScribble(e)
			default:
				x[i] = "scribbled"
			}
		}
	}
}

// 8. No candidates: delete only with the positive observation that the copy's origin no
// longer has the object.
func TestDecideNoCandidates(t *testing.T) {
	copyOfA := planObj(planMarked(planOrigA), planServerMeta("5"))
	tests := []struct {
		name     string
		observed *unstructured.Unstructured
		gone     map[types.UID]bool
		want     ActionType
	}{
		{name: "nothing at all", want: ActionNone},
		{name: "nothing, origin gone", gone: map[types.UID]bool{planOrigA: true}, want: ActionNone},
		{name: "copy, origin gone", observed: copyOfA, gone: map[types.UID]bool{planOrigA: true}, want: ActionDelete},
		{name: "copy, every origin gone", observed: copyOfA, gone: map[types.UID]bool{planOrigA: true, planOrigB: true}, want: ActionDelete},
		{name: "copy, no evidence", observed: copyOfA, want: ActionNone},
		{name: "copy, empty evidence", observed: copyOfA, gone: map[types.UID]bool{}, want: ActionNone},
		{name: "copy, origin explicitly not gone", observed: copyOfA, gone: map[types.UID]bool{planOrigA: false}, want: ActionNone},
		{name: "copy, another origin gone", observed: copyOfA, gone: map[types.UID]bool{planOrigB: true, planLocal: true}, want: ActionNone},
		{name: "unmarked, everything gone", observed: planObj(), gone: map[types.UID]bool{planOrigA: true, planLocal: true, "": true}, want: ActionNone},
		{name: "label only, origin gone", observed: planObj(planLabel(v1alpha1.OwnershipLabel, string(planOrigA))),
			gone: map[types.UID]bool{planOrigA: true}, want: ActionNone},
		{name: "marked local ID, local ID gone", observed: planObj(planMarked(planLocal)), gone: map[types.UID]bool{planLocal: true}, want: ActionNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, cands := range [][]Candidate{nil, {}} {
				got := planDecide(t, Input{LocalID: planLocal, Observed: tt.observed, Candidates: cands, OriginGone: tt.gone})
				want := Action{Type: tt.want}
				if tt.want == ActionDelete {
					want.Object = tt.observed
				}
				planCheck(t, got, want)
			}
		})
	}
}

// 9. Numbers. Content from an API server is decoded by unstructured's JSON decoder,
// which makes every integer an int64 and every other number a float64; and since the
// server writes what it returns with Go's encoder, a whole float64 (3.0, 1e3) comes back
// as an integer, an int64. Both sides of Equal therefore use the same representation,
// and identical objects are never rewritten.
//
// Equal itself does not equate an int64 with a float64 of the same value (it compares
// with apiequality.Semantic, which is type-strict for interface values): a desired copy
// holding whole float64 numbers would be rewritten on every pass. That is why the rules
// package normalises parsed override values the same way, and why desired content must
// come from the decoder, never from encoding/json into a plain map.
func TestEqualNumbers(t *testing.T) {
	const doc = `{"apiVersion":"example.com/v1","kind":"Thing",
		"metadata":{"name":"t","namespace":"team","resourceVersion":"3",
			"annotations":{"` + v1alpha1.OwnershipAnnotation + `":"` + string(planOrigA) + `"}},
		"spec":{"replicas":3,"zero":0,"negative":-7,"ratio":0.5,"whole":3.0,"exp":1e3,
			"big":9007199254740993,"max":9223372036854775807,"huge":18446744073709551616,
			"list":[1,2.5,{"n":42}]},
		"status":{"observed":2}}`
	decode := func(raw []byte) *unstructured.Unstructured {
		t.Helper()
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			t.Fatal(err)
		}
		return u
	}
	// serve is what an API server returns for an object: encoded, then decoded.
	serve := func(u *unstructured.Unstructured) *unstructured.Unstructured {
		t.Helper()
		raw, err := u.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		return decode(raw)
	}
	numTypes := func(u *unstructured.Unstructured) map[string]string {
		out := map[string]string{}
		for k, v := range u.Object["spec"].(map[string]any) {
			out[k] = fmt.Sprintf("%T", v)
		}
		return out
	}
	asWritten := decode([]byte(doc))
	want := map[string]string{
		"replicas": "int64", "zero": "int64", "negative": "int64", "big": "int64", "max": "int64",
		"ratio": "float64", "whole": "float64", "exp": "float64", "huge": "float64", "list": "[]interface {}",
	}
	if diff := cmp.Diff(want, numTypes(asWritten)); diff != "" {
		t.Errorf("number types decoded from the JSON as written (-want +got):\n%s", diff)
	}
	if got := asWritten.Object["spec"].(map[string]any)["big"]; got != int64(9007199254740993) {
		t.Errorf("big = %v, want the exact int64 9007199254740993", got)
	}
	served := serve(asWritten)
	want["whole"], want["exp"] = "int64", "int64"
	if diff := cmp.Diff(want, numTypes(served)); diff != "" {
		t.Errorf("number types as a server returns them (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(served.Object, serve(served).Object); diff != "" {
		t.Errorf("served content is not stable through another round trip:\n%s", diff)
	}

	// Identical objects decoded from JSON: no write, with or without status.
	for _, syncStatus := range []bool{false, true} {
		for name, pair := range map[string][2]*unstructured.Unstructured{
			"decoded twice as written": {decode([]byte(doc)), decode([]byte(doc))},
			"decoded twice as served":  {serve(asWritten), serve(asWritten)},
		} {
			desired, observed := pair[0], pair[1]
			if !Equal(desired, observed, syncStatus) {
				t.Errorf("%s: Equal(syncStatus %t) = false", name, syncStatus)
			}
			cand := Candidate{Rule: planRuleID, Peer: "peer-a", PeerID: planOrigA, Origin: planOrigA, Object: desired, SyncStatus: syncStatus}
			if got := planDecide(t, Input{LocalID: planLocal, Observed: observed, Candidates: []Candidate{cand}}); got.Type != ActionNone {
				t.Errorf("%s: Decide(syncStatus %t) = %s, want none", name, syncStatus, got.Type)
			}
		}
		// A served desired copy: the update we would write comes back Equal.
		desired := serve(asWritten)
		observed := serve(asWritten)
		planSet(int64(5), "spec", "replicas")(observed)
		back := serve(Merge(desired, observed, syncStatus))
		if !Equal(desired, back, syncStatus) {
			t.Errorf("Merge() as served is not Equal to desired (syncStatus %t)", syncStatus)
		}
	}

	// Documented: content not normalised by a server (a whole float64) is not Equal to
	// what the server returns for it.
	if Equal(asWritten, served, false) {
		t.Errorf("Equal(3.0 as float64, 3 as int64) = true; the documented behaviour changed, update this test and the comment above")
	}
	tests := []struct {
		name    string
		desired any
		obs     any
		want    bool
	}{
		{name: "int64 vs int64", desired: int64(3), obs: int64(3), want: true},
		{name: "float64 vs float64", desired: 0.5, obs: 0.5, want: true},
		{name: "int64 vs float64 of the same value", desired: int64(3), obs: float64(3), want: false},
		{name: "float64 vs int64 of the same value", desired: float64(3), obs: int64(3), want: false},
		{name: "number vs string", desired: int64(3), obs: "3", want: false},
		{name: "different int64", desired: int64(3), obs: int64(4), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := planObj(planData("n", tt.desired))
			o := planObj(planData("n", tt.obs))
			if got := Equal(d, o, false); got != tt.want {
				t.Errorf("Equal(%T %v, %T %v) = %t, want %t", tt.desired, tt.desired, tt.obs, tt.obs, got, tt.want)
			}
		})
	}

	// encoding/json into a plain map makes every number a float64: not what a server
	// returns, and not Equal to it.
	var plain map[string]any
	if err := json.Unmarshal([]byte(doc), &plain); err != nil {
		t.Fatal(err)
	}
	if Equal(served, &unstructured.Unstructured{Object: plain}, false) {
		t.Errorf("Equal(served, encoding/json decoding) = true; the documented behaviour changed, update this test and the comment above")
	}
}

// planRandValue returns a random JSON-compatible value of at most the given depth.
func planRandValue(r *rand.Rand, depth int) any {
	n := 7
	if depth <= 0 {
		n = 5
	}
	switch r.Intn(n) {
	case 0:
		return fmt.Sprintf("s%d", r.Intn(4))
	case 1:
		return int64(r.Intn(5) - 2)
	case 2:
		return float64(r.Intn(5)) / 2
	case 3:
		return r.Intn(2) == 0
	case 4:
		return nil
	case 5:
		return planRandMap(r, depth-1)
	default:
		l := make([]any, r.Intn(3))
		for i := range l {
			l[i] = planRandValue(r, depth-1)
		}
		return l
	}
}

func planRandMap(r *rand.Rand, depth int) map[string]any {
	m := map[string]any{}
	for i, n := 0, r.Intn(4); i < n; i++ {
		m[fmt.Sprintf("k%d", r.Intn(5))] = planRandValue(r, depth)
	}
	return m
}

func planRandStrings(r *rand.Rand) map[string]string {
	if r.Intn(4) == 0 {
		return nil
	}
	m := map[string]string{}
	for i, n := 0, r.Intn(4); i < n; i++ {
		m[fmt.Sprintf("l%d", r.Intn(4))] = fmt.Sprintf("v%d", r.Intn(3))
	}
	return m
}

// planRandObject returns a random object; top-level fields and status are random.
func planRandObject(r *rand.Rand) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: planRandMap(r, 2)}
	delete(u.Object, "metadata")
	if r.Intn(2) == 0 {
		u.Object["status"] = planRandValue(r, 2)
	}
	if r.Intn(3) > 0 {
		u.Object["spec"] = planRandMap(r, 2)
	}
	u.SetAPIVersion("example.com/v1")
	u.SetKind("Thing")
	u.SetName("t")
	u.SetNamespace("team")
	u.SetLabels(planRandStrings(r))
	u.SetAnnotations(planRandStrings(r))
	return u
}

// A written update is a fixed point: deciding again on what it wrote asks for nothing,
// so two controllers never ping-pong.
func TestPlanUpdateIsAFixedPoint(t *testing.T) {
	r := rand.New(rand.NewSource(20240601))
	for i := 0; i < 2000; i++ {
		desired := planRandObject(r)
		planMarked(planOrigA)(desired)
		var observed *unstructured.Unstructured
		switch r.Intn(3) {
		case 0: // an unrelated copy of the same origin
			observed = planRandObject(r)
			planMarked(planOrigA)(observed)
		case 1: // a copy of an origin that is gone
			observed = planRandObject(r)
			planMarked(planOrigB)(observed)
		default: // the desired copy as the server returns it, then changed locally
			observed = desired.DeepCopy()
			observed.Object["spec"] = planRandMap(r, 1)
		}
		planServerMeta(fmt.Sprint(i))(observed)
		if r.Intn(2) == 0 {
			planLocalOwnership()(observed)
		}
		cand := Candidate{Rule: planRuleID, Peer: "peer-a", PeerID: planOrigA, Origin: planOrigA, Object: desired, SyncStatus: r.Intn(2) == 0}
		gone := map[types.UID]bool{planOrigB: true}

		merged := Merge(desired, observed, cand.SyncStatus)
		if got := Decide(Input{LocalID: planLocal, Observed: merged, Candidates: []Candidate{cand}, OriginGone: gone}); got.Type != ActionNone {
			t.Fatalf("case %d: Decide(Merge(desired, observed)) = %s, want none\ndesired:  %s\nobserved: %s\nmerged:   %s",
				i, got.Type, planJSON(t, desired.Object), planJSON(t, observed.Object), planJSON(t, merged.Object))
		}
		// The same through Decide: whatever update it asks for is final.
		act := Decide(Input{LocalID: planLocal, Observed: observed, Candidates: []Candidate{cand}, OriginGone: gone})
		switch act.Type {
		case ActionNone:
			if !Equal(desired, observed, cand.SyncStatus) {
				t.Fatalf("case %d: Decide() = none for an object that is not Equal", i)
			}
		case ActionUpdate:
			if got := Decide(Input{LocalID: planLocal, Observed: act.Object, Candidates: []Candidate{cand}, OriginGone: gone}); got.Type != ActionNone {
				t.Fatalf("case %d: deciding on the update again = %s, want none", i, got.Type)
			}
		default:
			t.Fatalf("case %d: Decide() = %s (%s), want none or update", i, act.Type, act.Reason)
		}
	}
}
