package writer

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/kubectl-registry/kubectl-registry/reconciler/planner"
)

// TestRecordKeepsTheHistory: Records' compact record of a planner.WriteHistory gives it
// back as it was, whichever form it takes.
func TestRecordKeepsTheHistory(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		h       planner.WriteHistory
		compact bool
	}{
		{name: "none", h: planner.WriteHistory{}},
		{name: "one write", h: planner.WriteHistory{Desired: "d1", Writes: []time.Time{t0}}, compact: true},
		{name: "two writes", h: planner.WriteHistory{Desired: "d1", Writes: []time.Time{t0, t0.Add(time.Second)}}},
		{name: "changed on write", h: planner.WriteHistory{Desired: "d1", Writes: []time.Time{t0}, Changed: []string{"data.x"}}},
		{name: "held", h: planner.WriteHistory{Desired: "d1", Holds: 2, HeldUntil: t0.Add(time.Hour), Reason: "r"}},
		{name: "held before, written since", h: planner.WriteHistory{Desired: "d1", Writes: []time.Time{t0}, Holds: 1}},
		{name: "no writes in the window", h: planner.WriteHistory{Desired: "d1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRecord(tc.h)
			if got := r.full == nil; got != tc.compact {
				t.Errorf("compact form = %v, want %v", got, tc.compact)
			}
			if diff := cmp.Diff(tc.h, r.history(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("history (-want +got):\n%s", diff)
			}
		})
	}
}
