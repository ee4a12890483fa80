package engine

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/engine/writer"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner"
)

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
		want       *writer.OwnWrite
	}{
		{name: "stored as written", stored: copyOf("v"), want: &writer.OwnWrite{ResourceVersion: "5", At: fakeStart}},
		{name: "changed by the cluster on the way", stored: stamped(copyOf("v")), want: &writer.OwnWrite{ResourceVersion: "5", At: fakeStart, Changed: true}},
		{name: "its status synced by a write of its own", stored: copyOf("v"), syncStatus: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			te := newTestEngine(t)
			act := writeAction(planner.ActionCreate, copyOf("v"), tt.syncStatus)
			tt.stored.SetResourceVersion("5")
			te.e.written(cmItem, act.Source, tt.stored)
			var got *writer.OwnWrite
			if w, ok := te.e.ownWrites.Load(cmItem.target()); ok {
				got = &w
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(writer.OwnWrite{})); diff != "" {
				t.Errorf("the write kept (-want +got):\n%s", diff)
			}
		})
	}
}
