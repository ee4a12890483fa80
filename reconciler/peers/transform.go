package peers

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// The transforms of a peer's membership cache keep what a decision of this cluster reads
// and share what the peers hold alike. In a group of N, each of the N peers serves a
// Cluster and a reader Secret of every member and about 2N sealed credentials: held
// whole, a member's caches grow as N² (#33).

// peerSecrets is the transform of a peer's Secrets: besides managedFields, it keeps of
// every sealed credential but the one the peer issued this cluster (localID) only its
// name, without data, labels or annotations. A peer keeps one sealed credential for each
// member it issued one to and one for each it received one from, of 2–3 KB each, which
// only their recipients can open: no decision of this cluster reads them (the membership
// planner reads the reader Secrets the Clusters name, in the clear, and the credential
// issued to this cluster). None of them is read but the one issued to this cluster
// (newCache's selectors); a peer that ignores the selectors serves them all the same,
// and they are held as stubs. The others, the reader Secrets every peer relays alike of a
// member, share their maps (data, labels, annotations) and then the whole Secret through
// pool, as the stubs do (pools.shareSecret).
func peerSecrets(localID types.UID, pool *pools) toolscache.TransformFunc {
	mine := v1alpha1.IssuedReaderSecretName(localID)
	strip := cache.TransformStripManagedFields()
	return func(o any) (any, error) {
		o, err := strip(o)
		if err != nil {
			return o, err
		}
		s, ok := o.(*corev1.Secret)
		if !ok {
			return o, nil
		}
		if _, sealed := s.Data[v1alpha1.SealedKubeconfigKey]; sealed && s.Name != mine {
			// Kept as a stub that names it: a decision looks a peer's Secret up by name
			// only (the one a Cluster names, the one issued to this cluster).
			return pool.shareSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, UID: s.UID, ResourceVersion: s.ResourceVersion}}), nil
		}
		s.Data = pool.shareData(s.Data)
		pool.shareMeta(&s.ObjectMeta)
		if s.Name == mine {
			return s, nil
		}
		return pool.shareSecret(s), nil
	}
}

// peerClusters is the transform of a peer's Clusters: besides managedFields, it drops the
// status of every Cluster but the peer's own (status.type Local), shares the CA bundles,
// labels and annotations through pool, and then every Cluster but the peer's own whole
// (pools.shareCluster). The status a peer writes of the other
// members is its own view of them, which no decision here reads (the membership planner
// copies their spec, labels and annotations; this cluster's status reconciler reads the
// peer's report of itself from its own Cluster); its conditions are most of a Cluster's
// size, and their heartbeats change every period.
func peerClusters(pool *pools) toolscache.TransformFunc {
	strip := cache.TransformStripManagedFields()
	return func(o any) (any, error) {
		o, err := strip(o)
		if err != nil {
			return o, err
		}
		c, ok := o.(*v1alpha1.Cluster)
		if !ok {
			return o, nil
		}
		for i := range c.Spec.KubernetesAPIEndpoints {
			ep := &c.Spec.KubernetesAPIEndpoints[i]
			ep.CABundle = pool.shareBytes(ep.CABundle)
		}
		pool.shareMeta(&c.ObjectMeta)
		if c.Status.Type == v1alpha1.ClusterTypeLocal {
			return c, nil
		}
		c.Status = v1alpha1.ClusterStatus{}
		return pool.shareCluster(c), nil
	}
}
