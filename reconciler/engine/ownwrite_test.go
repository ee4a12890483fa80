package engine

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner"
)

// TestOwnWriteReconciled: the event of the engine's own write is looked at in full unless
// it alone queued the copy and no reconcile decided on the copy as it was before the
// write reached the local cache.
func TestOwnWriteReconciled(t *testing.T) {
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	written := ownWrite{resourceVersion: "5", at: at}
	marked := ownWrite{resourceVersion: "5", at: at, decidedBefore: true}
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
		w     ownWrite
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
			w:     ownWrite{resourceVersion: "5", at: at, changed: true},
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
				next, skip := w.reconciled(s.observedRV, s.full)
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

// TestWrittenKeepsOwnWrite: every write of a copy whose status is not synced is kept
// until the local cache has it, also one the cluster changed on the way (TestAdmissionLoop
// once saw a second create of such a copy, refused as already there, when a rule changed
// before the local cache had the first); only a write stored as written skips its event.
func TestWrittenKeepsOwnWrite(t *testing.T) {
	stamped := func(u *unstructured.Unstructured) *unstructured.Unstructured {
		u.SetLabels(map[string]string{v1alpha1.OwnershipLabel: "uid-peer", "stamp": "1"})
		return u
	}
	tests := []struct {
		name       string
		stored     *unstructured.Unstructured
		syncStatus bool
		want       *ownWrite
	}{
		{name: "stored as written", stored: copyOf("v"), want: &ownWrite{resourceVersion: "5", at: fakeStart}},
		{name: "changed by the cluster on the way", stored: stamped(copyOf("v")), want: &ownWrite{resourceVersion: "5", at: fakeStart, changed: true}},
		{name: "its status synced by a write of its own", stored: copyOf("v"), syncStatus: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			te := newTestEngine(t)
			act := writeAction(planner.ActionCreate, copyOf("v"), tt.syncStatus)
			tt.stored.SetResourceVersion("5")
			te.e.written(cmItem, act.Source, tt.stored)
			var got *ownWrite
			if w, ok := te.e.ownWrites.Load(cmItem); ok {
				ow := w.(ownWrite)
				got = &ow
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(ownWrite{})); diff != "" {
				t.Errorf("the write kept (-want +got):\n%s", diff)
			}
		})
	}
}
