package syncdiff

import (
	"context"
	"fmt"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner"
)

// requestTimeout bounds every request, so that a context whose API server does not
// answer is reported instead of hanging the diff.
const requestTimeout = 15 * time.Second

// reviewer creates a SubjectAccessReview and returns it with its status.
type reviewer func(ctx context.Context, sar *authorizationv1.SubjectAccessReview) (*authorizationv1.SubjectAccessReview, error)

// lister lists the objects of a kind in a namespace ("" for all namespaces, and for
// cluster-scoped kinds).
type lister func(ctx context.Context, gvk schema.GroupVersionKind, namespace string) ([]unstructured.Unstructured, error)

// view is what sync-diff read of one cluster through one kubeconfig context. Every list
// is made once and kept, so a diff of many rules and clusters reads each kind once.
type view struct {
	// Context is the kubeconfig context.
	Context string
	// ID is the cluster's kube-system namespace UID.
	ID types.UID
	// Err is why the cluster could not be read; nil when it could.
	Err error
	// Installed is false when the registry's CRDs are not served.
	Installed bool
	// Clusters, Rules and Features are the registry objects of the cluster.
	Clusters []v1alpha1.Cluster
	Rules    []v1alpha1.ResourceSyncRule
	Features []v1alpha1.ClusterFeature
	// Policies are the cluster's SyncPolicies (none on an installation without the kind).
	Policies []v1alpha1.SyncPolicy

	list lister
	// review asks the cluster's authorizer whether a user may make a request
	// (SubjectAccessReview); nil on views of tests that do not ask.
	review reviewer
	// mapper resolves kinds to resources in the cluster.
	mapper meta.RESTMapper

	mu    sync.Mutex
	lists map[listKey]*listResult
}

type listKey struct {
	gvk       schema.GroupVersionKind
	namespace string
}

type listResult struct {
	objs  []unstructured.Unstructured
	byKey map[types.NamespacedName]*unstructured.Unstructured
	err   error
}

// objects returns the cluster's objects of a kind in a namespace ("" for all), listing
// them on first use.
func (v *view) objects(ctx context.Context, gvk schema.GroupVersionKind, namespace string) *listResult {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.lists == nil {
		v.lists = map[listKey]*listResult{}
	}
	k := listKey{gvk, namespace}
	if r, ok := v.lists[k]; ok {
		return r
	}
	if namespace != "" {
		// A list of every namespace answers for each of them.
		if r, ok := v.lists[listKey{gvk, ""}]; ok && r.err == nil {
			return r
		}
	}
	r := &listResult{byKey: map[types.NamespacedName]*unstructured.Unstructured{}}
	if v.list == nil {
		r.err = fmt.Errorf("context %s cannot be read", v.Context)
	} else {
		r.objs, r.err = v.list(ctx, gvk, namespace)
	}
	for i := range r.objs {
		o := &r.objs[i]
		if o.GetAPIVersion() == "" {
			o.SetGroupVersionKind(gvk)
		}
		r.byKey[types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}] = o
	}
	v.lists[k] = r
	return r
}

// lookup returns the object of a kind at a key; ok is false when the kind could not be
// listed (then absence proves nothing, like an informer that has not synced).
func (v *view) lookup(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, bool) {
	r := v.objects(ctx, gvk, namespace)
	if r.err != nil {
		return nil, false
	}
	o := r.byKey[types.NamespacedName{Namespace: namespace, Name: name}]
	if o == nil && namespace != "" {
		// A cluster-scoped kind asked for with a namespace.
		o = r.byKey[types.NamespacedName{Name: name}]
	}
	return o, true
}

// at returns the view as the planner reads it (planner.View), its lists made under ctx.
func (v *view) at(ctx context.Context) planner.View { return boundView{ctx: ctx, v: v} }

// boundView is a view with the context its lists are made under.
type boundView struct {
	ctx context.Context
	v   *view
}

func (b boundView) List(gvk schema.GroupVersionKind, namespace string) ([]*unstructured.Unstructured, error) {
	r := b.v.objects(b.ctx, gvk, namespace)
	if r.err != nil {
		return nil, r.err
	}
	out := make([]*unstructured.Unstructured, 0, len(r.objs))
	for i := range r.objs {
		if namespace == "" || r.objs[i].GetNamespace() == namespace {
			out = append(out, &r.objs[i])
		}
	}
	return out, nil
}

func (b boundView) Get(gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, bool) {
	return b.v.lookup(b.ctx, gvk, namespace, name)
}

// namespaceGVK is the kind whose Pod Security labels the policy reads.
var namespaceGVK = schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}

// policy returns the cluster's consent to what rules write, as its controller computes
// it (registry namespace ns), with its namespaces' Pod Security labels. When the
// namespaces cannot be listed, the policy without them is returned with the error.
func (v *view) policy(ctx context.Context, ns string, clusters []v1alpha1.Cluster) (planner.Policy, error) {
	p := planner.PolicyOf(v.Policies, clusters, ns, v.ID)
	r := v.objects(ctx, namespaceGVK, "")
	if r.err != nil {
		return p, r.err
	}
	levels := map[string]string{}
	for i := range r.objs {
		if l, ok := r.objs[i].GetLabels()[planner.EnforceLevelLabel]; ok {
			levels[r.objs[i].GetName()] = l
		}
	}
	return p.WithNamespaceLevels(levels), nil
}

// localCluster returns the cluster's own Cluster CR, the one whose clusterID is its ID.
func (v *view) localCluster() *v1alpha1.Cluster {
	for i := range v.Clusters {
		if v.Clusters[i].Spec.ClusterID == v.ID {
			return &v.Clusters[i]
		}
	}
	return nil
}

// Name is how the output names the cluster: its local Cluster CR, else the context.
func (v *view) Name() string {
	if c := v.localCluster(); c != nil {
		return c.Name
	}
	return v.Context
}

// connect reads, with api, the identity and the registry objects of the cluster of a
// context. Errors are kept in the view's Err.
func connect(ctx context.Context, contextName string, api *apiClients) *view {
	v := &view{Context: contextName}
	ns, err := api.typed.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		v.Err = fmt.Errorf("context %s: reading the cluster ID (kube-system namespace): %w", contextName, err)
		return v
	}
	v.ID = ns.UID
	v.Installed = true
	clusters, err := listAs[v1alpha1.Cluster](ctx, api, "clusters")
	switch {
	case notServed(err):
		v.Installed = false
	case err != nil:
		v.Err = fmt.Errorf("context %s: listing Clusters: %w", contextName, err)
		return v
	}
	if v.Installed {
		if v.Err = v.readRegistry(ctx, api); v.Err != nil {
			return v
		}
		v.Clusters = clusters
	}
	v.mapper = api.mapper
	v.review = func(ctx context.Context, sar *authorizationv1.SubjectAccessReview) (*authorizationv1.SubjectAccessReview, error) {
		return api.typed.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	}
	v.list = func(ctx context.Context, gvk schema.GroupVersionKind, namespace string) ([]unstructured.Unstructured, error) {
		items, err := api.list(ctx, gvk, namespace)
		if err != nil {
			return nil, fmt.Errorf("listing %s in context %s: %w", gvk.Kind, contextName, err)
		}
		return items, nil
	}
	return v
}

// readRegistry reads the cluster's ResourceSyncRules, ClusterFeatures and SyncPolicies
// (none on an installation without that kind).
func (v *view) readRegistry(ctx context.Context, api *apiClients) error {
	var err error
	if v.Rules, err = listAs[v1alpha1.ResourceSyncRule](ctx, api, "resourcesyncrules"); err != nil {
		return fmt.Errorf("context %s: listing ResourceSyncRules: %w", v.Context, err)
	}
	if v.Features, err = listAs[v1alpha1.ClusterFeature](ctx, api, "clusterfeatures"); err != nil {
		return fmt.Errorf("context %s: listing ClusterFeatures: %w", v.Context, err)
	}
	if v.Policies, err = listAs[v1alpha1.SyncPolicy](ctx, api, "syncpolicies"); err != nil && !notServed(err) {
		return fmt.Errorf("context %s: listing SyncPolicies: %w", v.Context, err)
	}
	return nil
}
