package clusters_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/sizing"
)

// TestWithinSizing: the local Cluster says whether the controller's limits are within the
// sizing for its number of peers (the disabled ones apart), and stays silent without
// limits to compare.
func TestWithinSizing(t *testing.T) {
	const mi = 1 << 20
	manyPeers := []client.Object{cluster("local", localID, "local")}
	for i := range 30 {
		name := "peer-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		manyPeers = append(manyPeers, cluster(name, types.UID("id-"+name), name))
	}
	disabled := cluster("off", "id-off", "off")
	disabled.Annotations = map[string]string{v1alpha1.ClusterDisabledAnnotation: "true"}
	tests := []struct {
		name   string
		objs   []client.Object
		limits *sizing.Limits
		want   *cond
	}{
		{"no sizing", manyPeers, nil, nil},
		{"30 peers under 200Mi", manyPeers, &sizing.Limits{MemoryLimit: 200 * mi}, &cond{isFalse, v1alpha1.ReasonMemoryBelowSizing}},
		{"30 peers under 1Gi", manyPeers, &sizing.Limits{MemoryLimit: 1024 * mi}, &cond{isTrue, v1alpha1.ReasonWithinSizing}},
		{"a disabled peer does not count", []client.Object{cluster("local", localID, "local"), cluster("peer", peerID, "peer"), disabled},
			&sizing.Limits{MaxMembershipObjects: 3}, &cond{isTrue, v1alpha1.ReasonWithinSizing}}, // 2 members of 2.4; 3 with the disabled one
		{"the membership cap", []client.Object{cluster("local", localID, "local"), cluster("peer", peerID, "peer"), disabled},
			&sizing.Limits{MaxMembershipObjects: 2}, &cond{isFalse, v1alpha1.ReasonMembershipNearCap}}, // 2 members of 1.6
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, interceptor.Funcs{}, tt.objs...)
			f.r.Sizing = tt.limits
			if _, err := f.reconcile(t, "local"); err != nil {
				t.Fatal(err)
			}
			var got *cond
			if c, ok := condsOf(f.get(t, "local").Status)[v1alpha1.ClusterConditionWithinSizing]; ok {
				got = &c
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("WithinSizing (-want +got):\n%s", diff)
			}
		})
	}
}
