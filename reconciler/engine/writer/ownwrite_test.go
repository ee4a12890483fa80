package writer

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestOwnWriteReconciled: the event of the engine's own write is looked at in full unless
// it alone queued the copy and no reconcile decided on the copy as it was before the
// write reached the local cache.
func TestOwnWriteReconciled(t *testing.T) {
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	written := OwnWrite{ResourceVersion: "5", At: at}
	marked := OwnWrite{ResourceVersion: "5", At: at, decidedBefore: true}
	type step struct {
		observedRV string // "" the local cache does not have the copy
		full       bool
	}
	type outcome struct {
		Skips  []bool
		Kept   bool
		Marked bool
	}
	tests := []struct {
		name  string
		w     OwnWrite
		steps []step
		want  outcome
	}{
		{
			name:  "the write's own event alone: nothing to do",
			w:     written,
			steps: []step{{observedRV: "5"}},
			want:  outcome{Skips: []bool{true}},
		},
		{
			name:  "the write's event with a change of its source queued at once: in full",
			w:     written,
			steps: []step{{observedRV: "5", full: true}},
			want:  outcome{Skips: []bool{false}},
		},
		{
			// The race TestChaos once caught: the origin deletes the object right after
			// the write; that reconcile finds no copy in the local cache and decides
			// nothing; the write's own event must then delete the copy.
			name:  "a delete at the origin seen before the local cache has the write",
			w:     written,
			steps: []step{{observedRV: "", full: true}, {observedRV: "5"}},
			want:  outcome{Skips: []bool{false, false}},
		},
		{
			name:  "a retry while the local cache lacks the write, then the write's event",
			w:     written,
			steps: []step{{observedRV: "", full: true}, {observedRV: "5", full: false}},
			want:  outcome{Skips: []bool{false, false}},
		},
		{
			name:  "the copy changed by someone else after the write: kept, marked, in full",
			w:     written,
			steps: []step{{observedRV: "7"}},
			want:  outcome{Skips: []bool{false}, Kept: true, Marked: true},
		},
		{
			name:  "already marked: the write's event is looked at in full",
			w:     marked,
			steps: []step{{observedRV: "5"}},
			want:  outcome{Skips: []bool{false}},
		},
		{
			// The admission webhook of TestAdmissionLoop: the copy as stored differs from
			// the one written; the next decision writes again and Settle holds the copy.
			name:  "a write the cluster changed on the way: its event is looked at in full",
			w:     OwnWrite{ResourceVersion: "5", At: at, Changed: true},
			steps: []step{{observedRV: "5"}},
			want:  outcome{Skips: []bool{false}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, pending := tt.w, true
			var got outcome
			for _, s := range tt.steps {
				if !pending {
					got.Skips = append(got.Skips, false) // no pending write: a reconcile in full
					continue
				}
				next, skip := w.Reconciled(s.observedRV, s.full)
				got.Skips = append(got.Skips, skip)
				if next == nil {
					pending = false
					continue
				}
				w = *next
			}
			got.Kept = pending
			got.Marked = pending && w.decidedBefore
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
