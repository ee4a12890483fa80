package members

import (
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig/document"
)

type write struct {
	op   Op
	obj  Object
	base Object // for OpUpdate: the local object as read
}

// copyMeta returns the labels and annotations a copy of src describing x carries, keeping
// the local decisions of the existing object (nil when there is none).
func copyMeta(src Object, existing map[string]string, x types.UID) (map[string]string, map[string]string) {
	labels := maps.Clone(src.GetLabels())
	if labels == nil {
		labels = map[string]string{}
	}
	labels[v1alpha1.OwnershipLabel] = string(x)
	annotations := maps.Clone(src.GetAnnotations())
	if annotations == nil {
		annotations = map[string]string{}
	}
	for _, k := range notCopied {
		delete(annotations, k)
		if v, ok := existing[k]; ok {
			annotations[k] = v
		}
	}
	annotations[v1alpha1.OwnershipAnnotation] = string(x)
	return labels, annotations
}

func sameMap(a, b map[string]string) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return maps.Equal(a, b)
}

// planCluster plans the local copy of src, cluster x's Cluster; advertised is the server
// of the reader Secret src references in the view it came from (what x advertises).
func planCluster(existing, src *v1alpha1.Cluster, advertised string, x, localID types.UID, relayOnly bool) (*write, string) {
	if existing != nil {
		mark := existing.Annotations[v1alpha1.OwnershipAnnotation]
		switch {
		case existing.Spec.ClusterID == localID:
			return nil, fmt.Sprintf("Cluster %s is the local cluster's; not overwritten by cluster %s's", existing.Name, x)
		case mark == "" && existing.Spec.ClusterID != x:
			return nil, fmt.Sprintf("Cluster %s was created locally for cluster %s; a peer has it for cluster %s: not overwritten", existing.Name, existing.Spec.ClusterID, x)
		case mark != "" && mark != string(x):
			return nil, fmt.Sprintf("Cluster %s is a copy of cluster %s's; a peer has it for cluster %s: not overwritten", existing.Name, mark, x)
		}
	}
	if relayOnly {
		return nil, "" // X is not Ready: its Cluster is left as it is
	}
	var existingAnnotations map[string]string
	if existing != nil {
		existingAnnotations = existing.Annotations
	}
	labels, annotations := copyMeta(src, existingAnnotations, x)
	spec := *src.Spec.DeepCopy()
	if pin := annotations[v1alpha1.PinnedServerAnnotation]; pin != "" {
		// This cluster's admin chose where x is reached (join --peer-server): the
		// endpoint x advertises is moved there, as join moved it.
		spec.KubernetesAPIEndpoints = RewriteEndpoints(spec.KubernetesAPIEndpoints, advertised, pin)
	}
	if existing == nil {
		c := &v1alpha1.Cluster{}
		c.Name = src.Name
		c.Labels, c.Annotations = labels, annotations
		c.Spec = spec
		return &write{op: OpCreate, obj: c}, ""
	}
	if apiequality.Semantic.DeepEqual(existing.Spec, spec) && sameMap(existing.Labels, labels) && sameMap(existing.Annotations, annotations) {
		return nil, ""
	}
	c := existing.DeepCopy()
	c.Labels, c.Annotations = labels, annotations
	c.Spec = spec
	return &write{op: OpUpdate, obj: c, base: existing}, ""
}

// advertisedServer returns the server of the reader Secret c references in view (the
// address c's cluster advertises, as that view holds it), or "".
func (k kubeconfigs) advertisedServer(view View, c *v1alpha1.Cluster, ns string) string {
	s := refSecret(view, c, ns)
	if s == nil {
		return ""
	}
	r, ok := k.read(s.Data[v1alpha1.KubeconfigKey])
	if !ok {
		return ""
	}
	return r.Server
}

// RewriteEndpoints returns eps with every endpoint whose address is old (after
// normalisation) moved to server, keeping its client network and CA bundle. When none
// matches, the endpoint for any network (empty clientNetwork) is moved, or added. It is
// what join --peer-server writes, and what the membership sync keeps while the local
// Cluster of the peer carries v1alpha1.PinnedServerAnnotation.
func RewriteEndpoints(eps []v1alpha1.KubernetesAPIEndpoint, old, server string) []v1alpha1.KubernetesAPIEndpoint {
	out := make([]v1alpha1.KubernetesAPIEndpoint, len(eps))
	for i := range eps {
		eps[i].DeepCopyInto(&out[i])
	}
	matched := false
	if oldNorm, err := document.NormalizeServer(old); err == nil && old != "" {
		for i := range out {
			if addr, err := document.NormalizeServer(out[i].ServerAddress); err == nil && addr == oldNorm {
				out[i].ServerAddress = server
				matched = true
			}
		}
	}
	if matched {
		return out
	}
	for i := range out {
		if out[i].ClientNetwork == "" {
			out[i].ServerAddress = server
			return out
		}
	}
	return append(out, v1alpha1.KubernetesAPIEndpoint{ServerAddress: server})
}

// HandCopy returns the copies of a cluster's own Cluster CR and reader Secret that a swap
// made by an admin writes on another cluster (kubectl registry join, or the seed's swap
// by hand): name, labels and annotations, the Cluster's spec, the Secret's type and data;
// no status, UID, resourceVersion or managed fields. They carry no ownership mark (the
// membership sync adopts them, as it adopts the seed's swap) and none of the annotations
// that are each cluster's own decisions (the same as the membership's copies leave
// out). The Secret lands in namespace. The originals are not changed.
func HandCopy(cluster *v1alpha1.Cluster, secret *corev1.Secret, namespace string) (*v1alpha1.Cluster, *corev1.Secret) {
	meta := func(m map[string]string) map[string]string {
		out := maps.Clone(m)
		for _, k := range append([]string{v1alpha1.OwnershipAnnotation, v1alpha1.OwnershipLabel}, notCopied...) {
			delete(out, k)
		}
		if len(out) == 0 {
			return nil
		}
		return out
	}
	s := &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   namespace,
			Name:        secret.Name,
			Labels:      meta(secret.Labels),
			Annotations: meta(secret.Annotations),
		},
		Type: secret.Type,
		Data: maps.Clone(secret.Data),
	}
	c := &v1alpha1.Cluster{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Cluster"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        cluster.Name,
			Labels:      meta(cluster.Labels),
			Annotations: meta(cluster.Annotations),
		},
		Spec: *cluster.Spec.DeepCopy(),
	}
	return c, s
}
