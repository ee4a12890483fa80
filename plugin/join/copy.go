package join

import (
	"bytes"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	memberplan "github.com/kubectl-registry/kubectl-registry/reconciler/planner/members"
)

// Resource names as kubectl prints them ("<resource>.<group>/<name>").
const (
	clusterResource = "cluster.clusterregistry.k8s.cisco.com"
	secretResource  = "secret"
)

// copies are the two objects written on the other side: the reader Secret first, then
// the Cluster.
type copies struct {
	Secret  *corev1.Secret
	Cluster *v1alpha1.Cluster
}

// buildCopies returns what the user would copy of a cluster's local Cluster and reader
// Secret: the membership planner's HandCopy (the seed's swap by hand), the Secret in
// namespace (the Cluster's secretRef namespace, checked by the caller). With a non-empty
// server, the reader kubeconfig's server and the matching API endpoint of the Cluster
// are rewritten to it; everything else is kept byte for byte.
func buildCopies(cluster *v1alpha1.Cluster, secret *corev1.Secret, namespace, server string) (copies, error) {
	c, s := memberplan.HandCopy(cluster, secret, namespace)
	if server != "" {
		rewritten, old, err := rewriteServer(secret.Data[v1alpha1.KubeconfigKey], server)
		if err != nil {
			return copies{}, err
		}
		s.Data[v1alpha1.KubeconfigKey] = rewritten
		c.Spec.KubernetesAPIEndpoints = rewriteEndpoints(c.Spec.KubernetesAPIEndpoints, old, server)
		// Pinned: the membership sync of that side keeps the endpoint at server (the
		// reader Secret's server is pinned in any case) until a join without it.
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[v1alpha1.PinnedServerAnnotation] = server
	}
	return copies{Secret: s, Cluster: c}, nil
}

// rewriteServer sets the server of the cluster the current context of a reader
// kubeconfig uses (the one kubeconfig.Parse reads), and returns the new kubeconfig and
// the old server. When the server does not change, data is returned as it is.
func rewriteServer(data []byte, server string) ([]byte, string, error) {
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return nil, "", fmt.Errorf("reading the reader kubeconfig: %w", err)
	}
	ctxName := cfg.CurrentContext
	if ctxName == "" && len(cfg.Contexts) == 1 {
		for name := range cfg.Contexts {
			ctxName = name
		}
	}
	kctx := cfg.Contexts[ctxName]
	if kctx == nil {
		return nil, "", errors.New("the reader kubeconfig has no current context")
	}
	cluster := cfg.Clusters[kctx.Cluster]
	if cluster == nil {
		return nil, "", fmt.Errorf("the reader kubeconfig has no cluster %q", kctx.Cluster)
	}
	old := cluster.Server
	if old == server {
		return data, old, nil
	}
	cluster.Server = server
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, "", fmt.Errorf("writing the reader kubeconfig: %w", err)
	}
	return out, old, nil
}

// rewriteEndpoints is memberplan.RewriteEndpoints: the rewrite the membership sync keeps
// while the copy carries v1alpha1.PinnedServerAnnotation.
func rewriteEndpoints(eps []v1alpha1.KubernetesAPIEndpoint, old, server string) []v1alpha1.KubernetesAPIEndpoint {
	return memberplan.RewriteEndpoints(eps, old, server)
}

// subset reports whether every entry of want is in have with the same value.
func subset(want, have map[string]string) bool {
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			return false
		}
	}
	return true
}

// secretUpToDate reports whether applying desired would change nothing in existing.
func secretUpToDate(existing, desired *corev1.Secret) bool {
	if existing.Type != desired.Type || !subset(desired.Labels, existing.Labels) || !subset(desired.Annotations, existing.Annotations) {
		return false
	}
	for k, v := range desired.Data {
		if ev, ok := existing.Data[k]; !ok || !bytes.Equal(ev, v) {
			return false
		}
	}
	return true
}

// clusterUpToDate reports whether applying desired would change nothing in existing
// (an address pinned on existing that desired does not pin is a change: the apply
// removes it).
func clusterUpToDate(existing, desired *v1alpha1.Cluster) bool {
	return apiequality.Semantic.DeepEqual(existing.Spec, desired.Spec) &&
		subset(desired.Labels, existing.Labels) && subset(desired.Annotations, existing.Annotations) &&
		existing.Annotations[v1alpha1.PinnedServerAnnotation] == desired.Annotations[v1alpha1.PinnedServerAnnotation]
}

// toApply turns a copy into the unstructured body of a server-side apply: only the
// fields the copy sets (no creationTimestamp, no status).
func toApply(obj client.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("converting %s: %w", obj.GetName(), err)
	}
	u := &unstructured.Unstructured{Object: m}
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "status")
	if md, ok := u.Object["metadata"].(map[string]any); ok && len(md) == 0 {
		delete(u.Object, "metadata")
	}
	return u, nil
}

// resourceName is how kubectl names an object in its messages: secret/a,
// cluster.clusterregistry.k8s.cisco.com/a.
func resourceName(obj client.Object) string {
	switch obj.(type) {
	case *corev1.Secret:
		return secretResource + "/" + obj.GetName()
	case *v1alpha1.Cluster:
		return clusterResource + "/" + obj.GetName()
	}
	return fmt.Sprintf("%T/%s", obj, obj.GetName())
}
