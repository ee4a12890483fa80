package peers

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

func TestChanged(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(5 * time.Minute))
	base := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "a", ResourceVersion: "1"}}
	base.Spec.ClusterID = "id-a"
	base.Status.State = v1alpha1.ClusterStateReady
	base.Status.Conditions = []v1alpha1.ClusterCondition{{Type: v1alpha1.ClusterConditionReady, Status: corev1.ConditionTrue, Reason: "R", LastHeartbeatTime: t0, LastTransitionTime: t0}}
	edit := func(f func(c *v1alpha1.Cluster)) *v1alpha1.Cluster {
		c := base.DeepCopy()
		c.ResourceVersion = "2"
		f(c)
		return c
	}
	tests := []struct {
		name    string
		old, up any
		want    bool
	}{
		{"a heartbeat only", base, edit(func(c *v1alpha1.Cluster) { c.Status.Conditions[0].LastHeartbeatTime = t1 }), false},
		{"no change but the resourceVersion", base, edit(func(*v1alpha1.Cluster) {}), false},
		{"a condition's status", base, edit(func(c *v1alpha1.Cluster) { c.Status.Conditions[0].Status = corev1.ConditionFalse }), true},
		{"a transition time", base, edit(func(c *v1alpha1.Cluster) { c.Status.Conditions[0].LastTransitionTime = t1 }), true},
		{"the state", base, edit(func(c *v1alpha1.Cluster) { c.Status.State = v1alpha1.ClusterStateFailed }), true},
		{"the spec", base, edit(func(c *v1alpha1.Cluster) { c.Spec.ClusterID = "id-b" }), true},
		{"an annotation", base, edit(func(c *v1alpha1.Cluster) { c.Annotations = map[string]string{"k": "v"} }), true},
		{"a Secret", &corev1.Secret{}, &corev1.Secret{}, true},
		{"a tombstone", base, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Changed(tt.old, tt.up); got != tt.want {
				t.Errorf("Changed = %v, want %v", got, tt.want)
			}
		})
	}
}
