package rulestatus

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner"
	"github.com/kubectl-registry/kubectl-registry/reconciler/rules"
)

func testRule(mode v1alpha1.SyncMode) *v1alpha1.ResourceSyncRule {
	return &v1alpha1.ResourceSyncRule{
		ObjectMeta: metav1.ObjectMeta{Name: "cms", Generation: 3},
		Spec:       v1alpha1.ResourceSyncRuleSpec{SyncMode: mode},
	}
}

// cond is a condition as the tests compare it.
type cond struct{ Status, Reason, Message string }

// conditions returns the conditions of st by type; a message is kept only when it
// contains keep, else replaced by "…".
func conditions(st v1alpha1.ResourceSyncRuleStatus, keep map[string]string) map[string]cond {
	out := map[string]cond{}
	for _, c := range st.Conditions {
		msg := c.Message
		if k, ok := keep[c.Type]; ok && !strings.Contains(msg, k) {
			msg = "missing " + k + " in: " + msg
		} else if msg != "" {
			msg = "…"
		}
		out[c.Type] = cond{Status: string(c.Status), Reason: c.Reason, Message: msg}
	}
	return out
}

// TestCompute: a rule's conditions say why it does not run (capped, invalid, its kind
// unknown, refused by the policy), what is in the way (conflicts, overlaps), what fails
// (sources over the cap, copies failing, sources failing, copies held) in that order, how
// its watches are narrowed, and, for a ReportOnly rule, its drift.
func TestCompute(t *testing.T) {
	healthy := map[string]cond{
		v1alpha1.RuleConditionAllowed:  {"True", v1alpha1.ReasonAllowed, ""},
		v1alpha1.RuleConditionReady:    {"True", v1alpha1.ReasonSynced, "…"},
		v1alpha1.RuleConditionConflict: {"False", v1alpha1.ReasonNoConflicts, ""},
		v1alpha1.RuleConditionDegraded: {"False", v1alpha1.ReasonAllSourcesOK, ""},
	}
	with := func(changes map[string]cond) map[string]cond {
		out := map[string]cond{}
		for k, v := range healthy {
			out[k] = v
		}
		for k, v := range changes {
			out[k] = v
		}
		return out
	}
	refusal := &planner.Refusal{Reason: "KindNotAllowed", Message: "no Secrets"}
	for _, tc := range []struct {
		name string
		in   Input
		keep map[string]string
		want map[string]cond
	}{
		{name: "healthy", in: Input{}, want: healthy},
		{
			name: "capped", in: Input{Err: errors.New("past the cap"), Capped: true},
			want: with(map[string]cond{v1alpha1.RuleConditionReady: {"False", v1alpha1.ReasonTooManyRules, "…"}}),
		},
		{
			name: "invalid", in: Input{Err: &rules.InvalidRuleError{}},
			want: with(map[string]cond{v1alpha1.RuleConditionReady: {"False", v1alpha1.ReasonInvalidRule, "…"}}),
		},
		{
			name: "unknown kind", in: Input{Err: errors.New("no kind")},
			want: with(map[string]cond{v1alpha1.RuleConditionReady: {"False", v1alpha1.ReasonUnknownKind, "…"}}),
		},
		{
			name: "refused by the policy", in: Input{Refusal: refusal},
			keep: map[string]string{v1alpha1.RuleConditionReady: "does not run in this cluster"},
			want: with(map[string]cond{
				v1alpha1.RuleConditionAllowed: {"False", "KindNotAllowed", "…"},
				v1alpha1.RuleConditionReady:   {"False", "KindNotAllowed", "…"},
			}),
		},
		{
			name: "a conflict and an overlap", in: Input{Tally: Tally{Conflicts: 1, ConflictList: "a", NOverlaps: 1, Overlaps: "o (x)"}},
			keep: map[string]string{v1alpha1.RuleConditionConflict: "written by another rule"},
			want: with(map[string]cond{v1alpha1.RuleConditionConflict: {"True", v1alpha1.ReasonObjectConflict, "…"}}),
		},
		{
			name: "an overlap alone", in: Input{Tally: Tally{NOverlaps: 1, Overlaps: "o (x)"}},
			want: with(map[string]cond{v1alpha1.RuleConditionConflict: {"True", v1alpha1.ReasonRuleOverlap, "…"}}),
		},
		{
			name: "a source over the cap, failures and holds: the cap first, with the rest",
			in: Input{Sources: Sources{TooMany: []string{"too many"}, TooManyReason: v1alpha1.ReasonTooManyObjects, Failing: 1},
				Tally: Tally{NFailures: 1, Failures: "a (no)", FailureReasons: map[string]int{"WriteForbidden": 1}, NHeld: 1, Held: "h (r)"}, MaxHold: time.Hour},
			keep: map[string]string{v1alpha1.RuleConditionDegraded: "too many; 1 objects fail to sync: a (no); 1 copies are changed"},
			want: with(map[string]cond{v1alpha1.RuleConditionDegraded: {"True", v1alpha1.ReasonTooManyObjects, "…"}}),
		},
		{
			name: "failures of one reason: that reason",
			in:   Input{Tally: Tally{NFailures: 2, FailureReasons: map[string]int{"WriteForbidden": 2}}},
			want: with(map[string]cond{v1alpha1.RuleConditionDegraded: {"True", "WriteForbidden", "…"}}),
		},
		{
			name: "failures of several reasons",
			in:   Input{Tally: Tally{NFailures: 2, FailureReasons: map[string]int{"WriteForbidden": 1, "ImmutableField": 1}}},
			want: with(map[string]cond{v1alpha1.RuleConditionDegraded: {"True", v1alpha1.ReasonCopiesFailing, "…"}}),
		},
		{
			name: "a failing source", in: Input{Sources: Sources{Failing: 2}},
			keep: map[string]string{v1alpha1.RuleConditionDegraded: "2 sources fail"},
			want: with(map[string]cond{v1alpha1.RuleConditionDegraded: {"True", v1alpha1.ReasonSourceFailing, "…"}}),
		},
		{
			name: "held copies", in: Input{Tally: Tally{NHeld: 1, Held: "h (r)"}, MaxHold: time.Hour},
			keep: map[string]string{v1alpha1.RuleConditionDegraded: "backing off up to 1h0m0s"},
			want: with(map[string]cond{v1alpha1.RuleConditionDegraded: {"True", v1alpha1.ReasonChangedAfterWrite, "…"}}),
		},
		{
			name: "narrowed watches", in: Input{Watch: WatchNote{Narrowed: true, Reason: v1alpha1.ReasonWatchesNarrowed, Message: "labels"}},
			want: with(map[string]cond{v1alpha1.RuleConditionWatchesNarrowed: {"True", v1alpha1.ReasonWatchesNarrowed, "…"}}),
		},
		{
			name: "ReportOnly with drift", in: Input{Rule: testRule(v1alpha1.SyncModeReportOnly), Tally: Tally{Drift: 2, DriftList: "d (x)"}},
			keep: map[string]string{v1alpha1.RuleConditionDrifted: "2 copies differ from their sources; syncMode ReportOnly writes nothing: d (x)"},
			want: with(map[string]cond{v1alpha1.RuleConditionDrifted: {"True", v1alpha1.ReasonDrift, "…"}}),
		},
		{
			name: "ReportOnly without drift", in: Input{Rule: testRule(v1alpha1.SyncModeReportOnly)},
			want: with(map[string]cond{v1alpha1.RuleConditionDrifted: {"False", v1alpha1.ReasonNoDrift, ""}}),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.in.Rule == nil {
				tc.in.Rule = testRule("")
			}
			st := Compute(tc.in)
			if diff := cmp.Diff(tc.want, conditions(st, tc.keep)); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if st.ObservedGeneration != 3 {
				t.Errorf("observedGeneration = %d, want 3", st.ObservedGeneration)
			}
		})
	}
}

// TestComputeKeepsCounts: the counts and the last sync time (to the second) are the
// tally's; a Drifted condition of a rule no longer ReportOnly goes away.
func TestComputeKeepsCounts(t *testing.T) {
	at := time.Date(2026, 11, 28, 12, 0, 0, 500, time.UTC)
	r := testRule("")
	r.Status.Conditions = []metav1.Condition{{Type: v1alpha1.RuleConditionDrifted, Status: "True", Reason: v1alpha1.ReasonDrift}}
	st := Compute(Input{Rule: r, Tally: Tally{Synced: 4, Conflicts: 1, Drift: 2, LastSync: at},
		Sources: Sources{States: []v1alpha1.RuleSource{{Cluster: "peer", State: v1alpha1.SourceSyncing}}}})
	type counts struct {
		Synced, Conflicts, Drift int32
		LastSync                 time.Time
		Sources                  int
		Drifted                  bool
	}
	got := counts{st.SyncedObjects, st.Conflicts, st.Drift, st.LastSyncTime.Time.UTC(), len(st.Sources), false}
	for _, c := range st.Conditions {
		got.Drifted = got.Drifted || c.Type == v1alpha1.RuleConditionDrifted
	}
	want := counts{4, 1, 2, at.Truncate(time.Second), 1, false}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestOverlaps: every rule whose candidate for the object has the chosen candidate's
// origin but is not the chosen one is told which rule writes it; a candidate of another
// origin, or no write at all, overlaps nothing.
func TestOverlaps(t *testing.T) {
	chosen := planner.Candidate{Rule: "a", Origin: "uid-1"}
	act := planner.Action{Type: planner.ActionUpdate, Source: &chosen}
	cands := []planner.Candidate{chosen, {Rule: "b", Origin: "uid-1"}, {Rule: "c", Origin: "uid-2"}}
	got := Overlaps(act, cands)
	if _, ok := got["b"]; !ok || len(got) != 1 {
		t.Errorf("Overlaps = %v, want rule b only", got)
	}
	if got := Overlaps(planner.Action{Type: planner.ActionNone}, cands); len(got) != 0 {
		t.Errorf("Overlaps without a write = %v, want none", got)
	}
}

// TestWriterPatchesChanges: the status is patched when it changed, and not when it is
// the same; compute is given the rule as read.
func TestWriterPatchesChanges(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	r := testRule("")
	c := crfake.NewClientBuilder().WithScheme(scheme).WithObjects(r).WithStatusSubresource(r).Build()
	w := Writer{Client: c}
	ctx := context.Background()
	var seen []int64
	compute := func(n int32) func(*v1alpha1.ResourceSyncRule) v1alpha1.ResourceSyncRuleStatus {
		return func(cur *v1alpha1.ResourceSyncRule) v1alpha1.ResourceSyncRuleStatus {
			seen = append(seen, cur.Generation)
			st := *cur.Status.DeepCopy()
			st.SyncedObjects = n
			return st
		}
	}
	rvs := []string{}
	for _, n := range []int32{1, 1, 2} {
		if err := w.Write(ctx, "cms", compute(n)); err != nil {
			t.Fatal(err)
		}
		var cur v1alpha1.ResourceSyncRule
		if err := c.Get(ctx, client.ObjectKey{Name: "cms"}, &cur); err != nil {
			t.Fatal(err)
		}
		if cur.Status.SyncedObjects != n {
			t.Errorf("syncedObjects = %d, want %d", cur.Status.SyncedObjects, n)
		}
		rvs = append(rvs, cur.ResourceVersion)
	}
	if rvs[0] != rvs[1] || rvs[1] == rvs[2] {
		t.Errorf("resourceVersions %v: want a patch for each change and none for the same status", rvs)
	}
	if diff := cmp.Diff([]int64{3, 3, 3}, seen); diff != "" {
		t.Errorf("the generations compute saw (-want +got):\n%s", diff)
	}
	if err := w.Write(ctx, "gone", compute(1)); err == nil {
		t.Error("the status of a rule that is gone was written")
	}
}
