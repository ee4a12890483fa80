package planner

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Settle, Written, Forgettable, Changes and Digest are pure: no cluster, no clock (time is
// passed in).

var settleT0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func settleAt(d time.Duration) time.Time { return settleT0.Add(d) }

func settlePolicy() SettlePolicy {
	return SettlePolicy{Window: time.Minute, MaxWrites: 3, Hold: 5 * time.Minute, MaxHold: 20 * time.Minute}
}

func TestSettle(t *testing.T) {
	p := settlePolicy()
	now := settleAt(time.Hour)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	tests := []struct {
		name        string
		in          SettleInput
		want        Verdict
		wantHistory WriteHistory
		// reason holds substrings of the reason; the reason is compared only through them.
		reason []string
	}{{
		name:        "never written: write",
		in:          SettleInput{Desired: "d1"},
		wantHistory: WriteHistory{},
	}, {
		name:        "new content is written, even under a hold",
		in:          SettleInput{History: WriteHistory{Desired: "d1", Holds: 1, HeldUntil: now.Add(time.Minute), Reason: "r"}, Desired: "d2"},
		wantHistory: WriteHistory{Desired: "d1", Holds: 1, HeldUntil: now.Add(time.Minute), Reason: "r"},
	}, {
		name:        "under a hold: held, not started again",
		in:          SettleInput{History: WriteHistory{Desired: "d1", Holds: 1, HeldUntil: now.Add(time.Minute), Reason: "r"}, Desired: "d1"},
		want:        Verdict{Hold: true, Until: now.Add(time.Minute), Reason: "r"},
		wantHistory: WriteHistory{Desired: "d1", Holds: 1, HeldUntil: now.Add(time.Minute), Reason: "r"},
	}, {
		name:        "a hold that ended: written once more",
		in:          SettleInput{History: WriteHistory{Desired: "d1", Holds: 1, HeldUntil: now, Reason: "r"}, Desired: "d1"},
		wantHistory: WriteHistory{Desired: "d1", Holds: 1, HeldUntil: now, Reason: "r"},
	}, {
		name: "the cluster changed the last write: held for Hold",
		in: SettleInput{History: WriteHistory{Desired: "d1", Writes: []time.Time{ago(time.Second)}, Changed: []string{"metadata.labels[stamp]"}},
			Desired: "d1", Drift: []string{"metadata.labels[stamp]"}},
		want:        Verdict{Hold: true, Until: now.Add(5 * time.Minute), Started: true},
		wantHistory: WriteHistory{Desired: "d1", Holds: 1, HeldUntil: now.Add(5 * time.Minute)},
		reason:      []string{"changed by the cluster on every write", "metadata.labels[stamp]", "admission webhook", "not rewritten for 5m0s"},
	}, {
		name: "the next hold in a row doubles",
		in: SettleInput{History: WriteHistory{Desired: "d1", Writes: []time.Time{ago(time.Second)}, Changed: []string{"data.x"}, Holds: 1, HeldUntil: ago(2 * time.Second)},
			Desired: "d1"},
		want:        Verdict{Hold: true, Until: now.Add(10 * time.Minute), Started: true},
		wantHistory: WriteHistory{Desired: "d1", Holds: 2, HeldUntil: now.Add(10 * time.Minute)},
		reason:      []string{"data.x", "not rewritten for 10m0s"},
	}, {
		name: "holds stop growing at MaxHold",
		in: SettleInput{History: WriteHistory{Desired: "d1", Writes: []time.Time{ago(time.Second)}, Changed: []string{"data.x"}, Holds: 7, HeldUntil: ago(2 * time.Second)},
			Desired: "d1"},
		want:        Verdict{Hold: true, Until: now.Add(20 * time.Minute), Started: true},
		wantHistory: WriteHistory{Desired: "d1", Holds: 8, HeldUntil: now.Add(20 * time.Minute)},
		reason:      []string{"not rewritten for 20m0s"},
	}, {
		name:        "fewer than MaxWrites rewrites in the window: write",
		in:          SettleInput{History: WriteHistory{Desired: "d1", Writes: []time.Time{ago(20 * time.Second), ago(10 * time.Second)}}, Desired: "d1", Drift: []string{"data.x"}},
		wantHistory: WriteHistory{Desired: "d1", Writes: []time.Time{ago(20 * time.Second), ago(10 * time.Second)}},
	}, {
		name: "MaxWrites writes of the same content in the window: held",
		in: SettleInput{History: WriteHistory{Desired: "d1", Writes: []time.Time{ago(30 * time.Second), ago(20 * time.Second), ago(10 * time.Second)}},
			Desired: "d1", Drift: []string{"data.fought", "metadata.labels[x]"}},
		want:        Verdict{Hold: true, Until: now.Add(5 * time.Minute), Started: true},
		wantHistory: WriteHistory{Desired: "d1", Holds: 1, HeldUntil: now.Add(5 * time.Minute)},
		reason:      []string{"written 3 times in 1m0s", "changed again after each write (data.fought, metadata.labels[x])", "another controller"},
	}, {
		name: "writes older than the window do not count",
		in: SettleInput{History: WriteHistory{Desired: "d1", Writes: []time.Time{ago(3 * time.Minute), ago(2 * time.Minute), ago(10 * time.Second)}},
			Desired: "d1", Drift: []string{"data.x"}},
		wantHistory: WriteHistory{Desired: "d1", Writes: []time.Time{ago(10 * time.Second)}},
	}, {
		name: "once held, two writes in the window are enough",
		in: SettleInput{History: WriteHistory{Desired: "d1", Writes: []time.Time{ago(20 * time.Second), ago(10 * time.Second)}, Holds: 1, HeldUntil: ago(30 * time.Second)},
			Desired: "d1", Drift: []string{"data.x"}},
		want:        Verdict{Hold: true, Until: now.Add(10 * time.Minute), Started: true},
		wantHistory: WriteHistory{Desired: "d1", Holds: 2, HeldUntil: now.Add(10 * time.Minute)},
		reason:      []string{"written 2 times"},
	}, {
		name: "recreated after each delete: held",
		in: SettleInput{History: WriteHistory{Desired: "d1", Writes: []time.Time{ago(30 * time.Second), ago(20 * time.Second), ago(10 * time.Second)}},
			Desired: "d1", Missing: true},
		want:        Verdict{Hold: true, Until: now.Add(5 * time.Minute), Started: true},
		wantHistory: WriteHistory{Desired: "d1", Holds: 1, HeldUntil: now.Add(5 * time.Minute)},
		reason:      []string{"gone again after each write", "deletes it"},
	}, {
		name: "changed, with nothing to name: still held",
		in: SettleInput{History: WriteHistory{Desired: "d1", Writes: []time.Time{ago(30 * time.Second), ago(20 * time.Second), ago(10 * time.Second)}},
			Desired: "d1"},
		want:        Verdict{Hold: true, Until: now.Add(5 * time.Minute), Started: true},
		wantHistory: WriteHistory{Desired: "d1", Holds: 1, HeldUntil: now.Add(5 * time.Minute)},
		reason:      []string{"changed again after each write: another controller"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			in.Now, in.Policy = now, p
			before := fmt.Sprint(in.History)
			h, v := Settle(in)
			if fmt.Sprint(in.History) != before {
				t.Errorf("Settle modified its input history: %s -> %v", before, in.History)
			}
			if v.Hold && v.Reason == "" {
				t.Errorf("held without a reason")
			}
			for _, s := range tt.reason {
				if !strings.Contains(v.Reason, s) {
					t.Errorf("reason %q lacks %q", v.Reason, s)
				}
			}
			if v.Started && h.Reason != v.Reason {
				t.Errorf("history reason %q, verdict reason %q", h.Reason, v.Reason)
			}
			opts := []cmp.Option{cmpopts.EquateEmpty()}
			if tt.reason != nil {
				opts = append(opts, cmpopts.IgnoreFields(Verdict{}, "Reason"), cmpopts.IgnoreFields(WriteHistory{}, "Reason"))
			}
			if diff := cmp.Diff(tt.want, v, opts...); diff != "" {
				t.Errorf("verdict (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantHistory, h, opts...); diff != "" {
				t.Errorf("history (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWritten(t *testing.T) {
	p := settlePolicy()
	now := settleAt(time.Hour)
	tests := []struct {
		name    string
		h       WriteHistory
		desired string
		changed []string
		want    WriteHistory
	}{{
		name: "first write", desired: "d1",
		want: WriteHistory{Desired: "d1", Writes: []time.Time{now}},
	}, {
		name: "same content: appended, old writes dropped", desired: "d1",
		h:    WriteHistory{Desired: "d1", Writes: []time.Time{now.Add(-2 * time.Minute), now.Add(-time.Second)}},
		want: WriteHistory{Desired: "d1", Writes: []time.Time{now.Add(-time.Second), now}},
	}, {
		name: "new content: the count starts over, holds are kept", desired: "d2", changed: []string{"data.x"},
		h:    WriteHistory{Desired: "d1", Writes: []time.Time{now.Add(-time.Second)}, Holds: 2, HeldUntil: now.Add(-time.Second), Reason: "r"},
		want: WriteHistory{Desired: "d2", Writes: []time.Time{now}, Changed: []string{"data.x"}, Holds: 2, HeldUntil: now.Add(-time.Second), Reason: "r"},
	}, {
		name: "a clean write clears Changed", desired: "d1",
		h:    WriteHistory{Desired: "d1", Changed: []string{"data.x"}},
		want: WriteHistory{Desired: "d1", Writes: []time.Time{now}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.h.Written(tt.desired, tt.changed, now, p)
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Written (-want +got):\n%s", diff)
			}
		})
	}
}

func TestForgettable(t *testing.T) {
	p := settlePolicy()
	now := settleAt(time.Hour)
	tests := []struct {
		name string
		h    WriteHistory
		want bool
	}{
		{name: "empty", want: true},
		{name: "a recent write", h: WriteHistory{Writes: []time.Time{now.Add(-30 * time.Second)}}},
		{name: "a write older than the window", h: WriteHistory{Writes: []time.Time{now.Add(-2 * time.Minute)}}, want: true},
		{name: "a changed write is kept until MaxHold", h: WriteHistory{Writes: []time.Time{now.Add(-2 * time.Minute)}, Changed: []string{"x"}}},
		{name: "a changed write older than MaxHold", h: WriteHistory{Writes: []time.Time{now.Add(-30 * time.Minute)}, Changed: []string{"x"}}, want: true},
		{name: "under a hold", h: WriteHistory{Holds: 1, HeldUntil: now.Add(time.Minute)}},
		{name: "a hold that ended recently keeps the backoff", h: WriteHistory{Holds: 3, HeldUntil: now.Add(-10 * time.Minute)}},
		{name: "a hold that ended more than MaxHold ago", h: WriteHistory{Holds: 3, HeldUntil: now.Add(-21 * time.Minute)}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.h.Forgettable(now, p); got != tt.want {
				t.Errorf("Forgettable() = %t, want %t", got, tt.want)
			}
		})
	}
}

func TestChanges(t *testing.T) {
	tests := []struct {
		name       string
		desired    *unstructured.Unstructured
		observed   *unstructured.Unstructured
		syncStatus bool
		want       []string
	}{{
		name:     "equal, server metadata aside",
		desired:  planObj(planMarked(planOrigA)),
		observed: planObj(planMarked(planOrigA), planServerMeta("7"), planLocalOwnership()),
	}, {
		name:     "a label added, an annotation changed, a data key added",
		desired:  planObj(planMarked(planOrigA), planAnnotation("note", "a")),
		observed: planObj(planMarked(planOrigA), planAnnotation("note", "b"), planLabel("stamp", "1"), planData("fought", "yes")),
		want:     []string{"data.fought", "metadata.annotations[note]", "metadata.labels[stamp]"},
	}, {
		name:     "a label removed, a data key changed",
		desired:  planObj(planMarked(planOrigA), planLabel("app", "x")),
		observed: planObj(planMarked(planOrigA), planData("a", "2")),
		want:     []string{"data.a", "metadata.labels[app]"},
	}, {
		name:     "nested paths; lists compared whole",
		desired:  planObj(planSet(map[string]any{"template": map[string]any{"image": "a"}, "ports": []any{int64(80)}}, "spec")),
		observed: planObj(planSet(map[string]any{"template": map[string]any{"image": "b"}, "ports": []any{int64(81)}}, "spec")),
		want:     []string{"spec.ports", "spec.template.image"},
	}, {
		name:     "missing, null and empty are the same",
		desired:  planObj(planSet(map[string]any{}, "spec"), planSet(nil, "extra"), planSet([]any{}, "list")),
		observed: planObj(),
	}, {
		name:     "status only counts with syncStatus",
		desired:  planObj(planStatus("Ready")),
		observed: planObj(planStatus("Pending")),
	}, {
		name:       "status counts with syncStatus",
		desired:    planObj(planStatus("Ready")),
		observed:   planObj(planStatus("Pending")),
		syncStatus: true,
		want:       []string{"status.phase"},
	}, {
		name:     "a whole map against a value",
		desired:  planObj(),
		observed: planObj(planSet("flat", "data")),
		want:     []string{"data"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, o := tt.desired.DeepCopy(), tt.observed.DeepCopy()
			got := Changes(tt.desired, tt.observed, tt.syncStatus)
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Changes (-want +got):\n%s", diff)
			}
			if !cmp.Equal(d, tt.desired) || !cmp.Equal(o, tt.observed) {
				t.Errorf("Changes modified its input")
			}
			// Changes agrees with Equal wherever neither side has an empty value.
			if len(got) == 0 && tt.name != "missing, null and empty are the same" && !Equal(tt.desired, tt.observed, tt.syncStatus) {
				t.Errorf("Changes found nothing but Equal is false")
			}
			if len(got) > 0 && Equal(tt.desired, tt.observed, tt.syncStatus) {
				t.Errorf("Changes found %v but Equal is true", got)
			}
		})
	}
}

func TestDigest(t *testing.T) {
	base := planObj(planMarked(planOrigA), planStatus("Ready"))
	tests := []struct {
		name       string
		other      *unstructured.Unstructured
		syncStatus bool
		same       bool
	}{
		{name: "server metadata does not count", other: planObj(planMarked(planOrigA), planStatus("Ready"), planServerMeta("9"), planLocalOwnership()), same: true},
		{name: "status does not count without syncStatus", other: planObj(planMarked(planOrigA), planStatus("Pending")), same: true},
		{name: "status counts with syncStatus", other: planObj(planMarked(planOrigA), planStatus("Pending")), syncStatus: true},
		{name: "a label counts", other: planObj(planMarked(planOrigA), planStatus("Ready"), planLabel("x", "y"))},
		{name: "an annotation counts", other: planObj(planMarked(planOrigA), planStatus("Ready"), planAnnotation("x", "y"))},
		{name: "the origin counts", other: planObj(planMarked(planOrigB), planStatus("Ready"))},
		{name: "content counts", other: planObj(planMarked(planOrigA), planStatus("Ready"), planData("a", "2"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := Digest(base, tt.syncStatus), Digest(tt.other, tt.syncStatus)
			if a != Digest(base.DeepCopy(), tt.syncStatus) {
				t.Fatalf("Digest is not deterministic")
			}
			if (a == b) != tt.same {
				t.Errorf("Digest equal = %t, want %t", a == b, tt.same)
			}
		})
	}
}

// TestSettleLoops plays the engine's loop (Decide, Settle, write, Written) against other
// writers in the local cluster, with a simulated clock, and counts the writes.
func TestSettleLoops(t *testing.T) {
	p := DefaultSettlePolicy()
	type world struct {
		// onWrite turns what we wrote into what the cluster stores.
		onWrite func(n int, written *unstructured.Unstructured) *unstructured.Unstructured
		// afterWrite is what another controller does to the stored copy right after.
		afterWrite func(stored *unstructured.Unstructured) *unstructured.Unstructured
		// source returns the desired copy at step i (the source may change).
		source func(i int) *unstructured.Unstructured
	}
	same := func(int) *unstructured.Unstructured { return planObj(planMarked(planOrigA)) }
	tests := []struct {
		name     string
		w        world
		steps    int
		every    time.Duration
		min, max int
		held     bool
	}{{
		name:  "nobody else writes: one write, then none",
		w:     world{source: same},
		steps: 1000, every: time.Second, min: 1, max: 1,
	}, {
		name: "the source changes every second: every change is written, nothing held",
		w: world{source: func(i int) *unstructured.Unstructured {
			return planObj(planMarked(planOrigA), planData("i", fmt.Sprint(i)))
		}},
		steps: 600, every: time.Second, min: 600, max: 600,
	}, {
		name: "an admission webhook stamps every write: held after the first, then a probe per backoff",
		w: world{source: same, onWrite: func(n int, u *unstructured.Unstructured) *unstructured.Unstructured {
			planLabel("stamp", fmt.Sprint(n))(u)
			return u
		}},
		// Two hours: a write, then one after each hold of 5, 10, 20 and 40 minutes (the
		// next, of 60, ends after the two hours).
		steps: 7200, every: time.Second, min: 5, max: 5, held: true,
	}, {
		name: "another controller changes a data key after every write",
		w: world{source: same, afterWrite: func(u *unstructured.Unstructured) *unstructured.Unstructured {
			planData("fought", "yes")(u)
			return u
		}},
		// MaxWrites writes, then two after each of the same four holds.
		steps: 7200, every: time.Second, min: 5 + 2*4, max: 5 + 2*4, held: true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				stored  *unstructured.Unstructured
				h       WriteHistory
				known   bool
				writes  int
				held    bool
				holding time.Time
			)
			for i := 0; i < tt.steps; i++ {
				now := settleAt(time.Duration(i) * tt.every)
				desired := tt.w.source(i)
				act := Decide(Input{LocalID: planLocal, Observed: stored, Candidates: []Candidate{planDirect(desired)}})
				if act.Type != ActionCreate && act.Type != ActionUpdate {
					continue
				}
				if known {
					in := SettleInput{History: h, Desired: Digest(desired, false), Missing: stored == nil, Now: now, Policy: p}
					if stored != nil {
						in.Drift = Changes(desired, stored, false)
					}
					var v Verdict
					h, v = Settle(in)
					if v.Hold {
						held = true
						if v.Started {
							holding = v.Until
						}
						if now.After(holding) {
							t.Fatalf("held past the hold's end")
						}
						continue
					}
				}
				writes++
				out := act.Object.DeepCopy()
				if tt.w.onWrite != nil {
					out = tt.w.onWrite(writes, out)
				}
				h, known = h.Written(Digest(desired, false), Changes(desired, out, false), now, p), true
				stored = out
				if tt.w.afterWrite != nil {
					stored = tt.w.afterWrite(stored.DeepCopy())
				}
			}
			if writes < tt.min || writes > tt.max {
				t.Errorf("%d writes, want %d to %d", writes, tt.min, tt.max)
			}
			if held != tt.held {
				t.Errorf("held = %t, want %t", held, tt.held)
			}
		})
	}
}

// TestSettleRefused: content the API server refused for good (an immutable field) is not
// written again until it changes or MaxHold has passed; then it is tried once more.
func TestSettleRefused(t *testing.T) {
	p := settlePolicy()
	h := WriteHistory{}.Refused("d1", "ImmutableField", "spec.template is immutable", settleAt(0), p)
	h2, v := Settle(SettleInput{History: h, Desired: "d1", Now: settleAt(time.Minute), Policy: p})
	if !v.Hold || !v.Rejected || v.RejectedReason != "ImmutableField" || v.Reason != "spec.template is immutable" {
		t.Fatalf("same content within MaxHold: %+v, want a rejected hold", v)
	}
	if _, v := Settle(SettleInput{History: h2, Desired: "d2", Now: settleAt(time.Minute), Policy: p}); v.Hold {
		t.Errorf("new content: %+v, want it written", v)
	}
	h3, v := Settle(SettleInput{History: h2, Desired: "d1", Now: settleAt(p.MaxHold + time.Second), Policy: p})
	if v.Hold || h3.Rejected != "" {
		t.Errorf("after MaxHold: %+v (rejected %q), want one more try", v, h3.Rejected)
	}
	if h.Forgettable(settleAt(time.Minute), p) {
		t.Error("a refusal must be remembered while it holds")
	}
	if !h.Forgettable(settleAt(p.MaxHold), p) {
		t.Error("a refusal past its hold must be forgettable")
	}
}
