package membership

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// TestRelayConflictsCondition: the local Cluster's RelaysAgree condition follows the
// last plan's conflicts, and a change is signalled once.
func TestRelayConflictsCondition(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sets     [][]string // successive Set calls; nil means none
		want     *v1alpha1.ClusterCondition
		signals  int
		contains []string
	}{
		{name: "before the first plan: no condition"},
		{name: "no conflict", sets: [][]string{{}}, signals: 1,
			want: &v1alpha1.ClusterCondition{Type: v1alpha1.ClusterConditionRelaysAgree, Status: "True", Reason: v1alpha1.ReasonRelaysAgree}},
		{name: "a conflict, set twice: signalled once", sets: [][]string{{"Cluster y not learnt: ..."}, {"Cluster y not learnt: ..."}}, signals: 1,
			want:     &v1alpha1.ClusterCondition{Type: v1alpha1.ClusterConditionRelaysAgree, Status: "False", Reason: v1alpha1.ReasonConflictingRelays},
			contains: []string{"Cluster y not learnt"}},
		{name: "many conflicts: the first three named", sets: [][]string{{"d", "c", "b", "a", "e"}}, signals: 1,
			want:     &v1alpha1.ClusterCondition{Type: v1alpha1.ClusterConditionRelaysAgree, Status: "False", Reason: v1alpha1.ReasonConflictingRelays},
			contains: []string{"a; b; c; and 2 more"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRelayConflicts()
			signals := 0
			for _, s := range tc.sets {
				r.Set(s)
				select {
				case <-r.Changes():
					signals++
				default:
				}
			}
			if signals != tc.signals {
				t.Errorf("signalled %d times, want %d", signals, tc.signals)
			}
			got, ok := r.Condition()
			if (tc.want != nil) != ok {
				t.Fatalf("condition present %v, want %v", ok, tc.want != nil)
			}
			if !ok {
				return
			}
			if diff := cmp.Diff(*tc.want, got, cmpopts.IgnoreFields(v1alpha1.ClusterCondition{}, "Message", "LastHeartbeatTime", "LastTransitionTime")); diff != "" {
				t.Errorf("condition (-want +got):\n%s", diff)
			}
			for _, c := range tc.contains {
				if !strings.Contains(got.Message, c) {
					t.Errorf("message %q lacks %q", got.Message, c)
				}
			}
		})
	}
}
