package planner

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// TestGatherUnsynced: absence in a view that has not synced proves nothing. The origin is
// neither gone nor present but reported Unsynced, so that the engine looks at the copy
// again once the view has synced (a delete made while the origin's view was being rebuilt
// must still reach the copy).
func TestGatherUnsynced(t *testing.T) {
	const origin types.UID = "uid-origin"
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	rsr := &v1alpha1.ResourceSyncRule{
		ObjectMeta: metav1.ObjectMeta{Name: "cms"},
		Spec:       v1alpha1.ResourceSyncRuleSpec{GVK: v1alpha1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Rules: []v1alpha1.SyncRule{{}}},
	}
	compiled, err := CompileRule(rsr)
	if err != nil {
		t.Fatal(err)
	}
	target := types.NamespacedName{Namespace: "ns", Name: "cm"}
	copyOf := &unstructured.Unstructured{}
	copyOf.SetAPIVersion("v1")
	copyOf.SetKind("ConfigMap")
	copyOf.SetNamespace("ns")
	copyOf.SetName("cm")
	Mark(copyOf, origin, "cms")

	for _, tc := range []struct {
		name         string
		readable     bool
		synced       bool
		wantGone     map[types.UID]bool
		wantUnsynced map[types.UID]bool
	}{
		{name: "synced and absent: gone", readable: true, synced: true, wantGone: map[types.UID]bool{origin: true}, wantUnsynced: map[types.UID]bool{}},
		{name: "not synced: unknown, to look at again", readable: true, synced: false, wantGone: map[types.UID]bool{}, wantUnsynced: map[types.UID]bool{origin: true}},
		{name: "not readable: unknown, waits for the peer", readable: false, wantGone: map[types.UID]bool{}, wantUnsynced: map[types.UID]bool{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := Source{Name: "origin", ClusterID: origin, Readable: tc.readable,
				Lookup: func(schema.GroupVersionKind, string, string) (*unstructured.Unstructured, bool) {
					return nil, tc.synced
				}}
			g := Gather("uid-local", nil, Policy{}, []Rule{{Spec: rsr, Compiled: compiled}}, []Source{src}, gvk, target, copyOf)
			if diff := cmp.Diff(tc.wantGone, g.OriginGone); diff != "" {
				t.Errorf("OriginGone (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantUnsynced, g.Unsynced); diff != "" {
				t.Errorf("Unsynced (-want +got):\n%s", diff)
			}
			if act := Decide(Input{LocalID: "uid-local", Observed: copyOf, OriginGone: g.OriginGone}); (act.Type == ActionDelete) != tc.wantGone[origin] {
				t.Errorf("Decide = %s", act.Type)
			}
		})
	}
}
