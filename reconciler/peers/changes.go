package peers

import (
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// Changed reports whether an update of a membership object (a Cluster, a Secret, a
// ClusterFeature) changes anything a reader of the membership decides on: every update
// does but that of a Cluster whose only change is its conditions' heartbeats
// (lastHeartbeatTime) and the bookkeeping of metadata (resourceVersion, managedFields).
// Every controller refreshes the heartbeats of every Cluster it holds every
// --heartbeat-period, so each of N peers' N+1 Clusters changes that way every period:
// N(N+1) events for nothing, each of which re-planned the whole membership (#33). No
// decision reads a heartbeat.
func Changed(old, updated any) bool {
	o, ok1 := old.(*v1alpha1.Cluster)
	n, ok2 := updated.(*v1alpha1.Cluster)
	if !ok1 || !ok2 || o == nil || n == nil {
		return true
	}
	if o == n {
		return false // the one copy the peers' caches share (objectPool)
	}
	return !equality.Semantic.DeepEqual(withoutHeartbeats(o), withoutHeartbeats(n))
}

// withoutHeartbeats returns a copy of c without its heartbeats and metadata bookkeeping.
func withoutHeartbeats(c *v1alpha1.Cluster) *v1alpha1.Cluster {
	c = c.DeepCopy()
	c.ResourceVersion, c.ManagedFields = "", nil
	for i := range c.Status.Conditions {
		c.Status.Conditions[i].LastHeartbeatTime = metav1.Time{}
	}
	return c
}
