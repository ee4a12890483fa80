// Package conditions sets the conditions of a Cluster's status the way the seed API
// defines them: a transition time that moves only when the status changes, and a
// heartbeat that is refreshed at most once per period so that status writes do not
// churn. It is pure: callers pass the clock.
package conditions

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// Set puts cond into conds (replacing the condition of the same type) and returns the
// result. LastTransitionTime is now when the status changes, else kept. LastHeartbeatTime
// is now when anything but the times changes or when the last heartbeat is older than
// heartbeat; otherwise the old condition is kept byte for byte.
func Set(conds []v1alpha1.ClusterCondition, cond v1alpha1.ClusterCondition, now time.Time, heartbeat time.Duration) []v1alpha1.ClusterCondition {
	t := metav1.NewTime(now.Truncate(time.Second))
	for i := range conds {
		old := conds[i]
		if old.Type != cond.Type {
			continue
		}
		cond.LastTransitionTime = old.LastTransitionTime
		if old.Status != cond.Status || old.LastTransitionTime.IsZero() {
			cond.LastTransitionTime = t
		}
		cond.LastHeartbeatTime = old.LastHeartbeatTime
		if old.Status != cond.Status || old.Reason != cond.Reason || old.Message != cond.Message ||
			old.LastHeartbeatTime.IsZero() || now.Sub(old.LastHeartbeatTime.Time) >= heartbeat {
			cond.LastHeartbeatTime = t
		}
		out := append([]v1alpha1.ClusterCondition(nil), conds...)
		out[i] = cond
		return out
	}
	cond.LastTransitionTime = t
	cond.LastHeartbeatTime = t
	return append(append([]v1alpha1.ClusterCondition(nil), conds...), cond)
}

// Get returns the condition of type t, if any.
func Get(conds []v1alpha1.ClusterCondition, t v1alpha1.ClusterConditionType) (v1alpha1.ClusterCondition, bool) {
	for _, c := range conds {
		if c.Type == t {
			return c, true
		}
	}
	return v1alpha1.ClusterCondition{}, false
}

// IsTrue reports whether the condition of type t is present and True.
func IsTrue(conds []v1alpha1.ClusterCondition, t v1alpha1.ClusterConditionType) bool {
	c, ok := Get(conds, t)
	return ok && c.Status == corev1.ConditionTrue
}

// Remove returns conds without the condition of type t.
func Remove(conds []v1alpha1.ClusterCondition, t v1alpha1.ClusterConditionType) []v1alpha1.ClusterCondition {
	var out []v1alpha1.ClusterCondition
	for _, c := range conds {
		if c.Type != t {
			out = append(out, c)
		}
	}
	return out
}

// New returns a condition with a status from a bool.
func New(t v1alpha1.ClusterConditionType, status bool, reason, message string) v1alpha1.ClusterCondition {
	s := corev1.ConditionFalse
	if status {
		s = corev1.ConditionTrue
	}
	return v1alpha1.ClusterCondition{Type: t, Status: s, Reason: reason, Message: message}
}
