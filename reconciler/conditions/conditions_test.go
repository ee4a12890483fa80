package conditions

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

func TestSet(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(t0.Add(d)) }
	ready := func(status corev1.ConditionStatus, reason string, hb, tr time.Duration) v1alpha1.ClusterCondition {
		return v1alpha1.ClusterCondition{Type: v1alpha1.ClusterConditionReady, Status: status, Reason: reason, LastHeartbeatTime: at(hb), LastTransitionTime: at(tr)}
	}
	const period = time.Minute
	tests := []struct {
		name string
		old  []v1alpha1.ClusterCondition
		set  v1alpha1.ClusterCondition
		now  time.Duration
		want []v1alpha1.ClusterCondition
	}{
		{
			name: "new condition gets both times",
			set:  New(v1alpha1.ClusterConditionReady, true, "R", ""),
			now:  0,
			want: []v1alpha1.ClusterCondition{ready(corev1.ConditionTrue, "R", 0, 0)},
		},
		{
			name: "unchanged within the heartbeat period keeps the old condition",
			old:  []v1alpha1.ClusterCondition{ready(corev1.ConditionTrue, "R", 0, 0)},
			set:  New(v1alpha1.ClusterConditionReady, true, "R", ""),
			now:  30 * time.Second,
			want: []v1alpha1.ClusterCondition{ready(corev1.ConditionTrue, "R", 0, 0)},
		},
		{
			name: "unchanged after the period refreshes the heartbeat only",
			old:  []v1alpha1.ClusterCondition{ready(corev1.ConditionTrue, "R", 0, 0)},
			set:  New(v1alpha1.ClusterConditionReady, true, "R", ""),
			now:  2 * time.Minute,
			want: []v1alpha1.ClusterCondition{ready(corev1.ConditionTrue, "R", 2*time.Minute, 0)},
		},
		{
			name: "reason change refreshes the heartbeat, not the transition",
			old:  []v1alpha1.ClusterCondition{ready(corev1.ConditionTrue, "R", 0, 0)},
			set:  New(v1alpha1.ClusterConditionReady, true, "Other", ""),
			now:  10 * time.Second,
			want: []v1alpha1.ClusterCondition{ready(corev1.ConditionTrue, "Other", 10*time.Second, 0)},
		},
		{
			name: "status change moves both times",
			old:  []v1alpha1.ClusterCondition{ready(corev1.ConditionTrue, "R", 0, 0)},
			set:  New(v1alpha1.ClusterConditionReady, false, "Down", ""),
			now:  10 * time.Second,
			want: []v1alpha1.ClusterCondition{ready(corev1.ConditionFalse, "Down", 10*time.Second, 10*time.Second)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Set(tt.old, tt.set, t0.Add(tt.now), period)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestSetDoesNotAliasInput(t *testing.T) {
	old := []v1alpha1.ClusterCondition{New(v1alpha1.ClusterConditionReady, true, "R", "")}
	_ = Set(old, New(v1alpha1.ClusterConditionReady, false, "X", ""), time.Now(), time.Minute)
	if old[0].Reason != "R" {
		t.Fatalf("Set modified its input: %+v", old[0])
	}
}
