package syncdiff

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube/clientgo"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// apiClients are the client-go clients sync-diff reads a cluster with: only reads,
// SubjectAccessReviews and dry-run applies, so no controller runtime is linked.
type apiClients struct {
	dynamic dynamic.Interface
	typed   kubernetes.Interface
	// mapper resolves kinds to resources from the cluster's discovery, cached for the
	// run and refreshed when a kind is not found.
	mapper meta.RESTMapper
}

// newClients builds the clients of t through f with opts.
func newClients(f clientgo.Factory, t clientgo.Target, opts clientgo.ClientOptions) (*apiClients, error) {
	dyn, err := f.Dynamic(t, opts)
	if err != nil {
		return nil, err
	}
	typed, err := f.Kubernetes(t, opts)
	if err != nil {
		return nil, err
	}
	disc, err := f.Discovery(t, opts)
	if err != nil {
		return nil, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	return &apiClients{dynamic: dyn, typed: typed, mapper: mapper}, nil
}

// list lists the objects of a kind in a namespace ("" for all namespaces, and for
// cluster-scoped kinds), in one request as the controllers' informers do.
func (a *apiClients) list(ctx context.Context, gvk schema.GroupVersionKind, namespace string) ([]unstructured.Unstructured, error) {
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	var ri dynamic.ResourceInterface = a.dynamic.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace && namespace != "" {
		ri = a.dynamic.Resource(m.Resource).Namespace(namespace)
	}
	l, err := ri.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// listAs lists a resource of the registry's API (cluster-scoped) as typed objects.
func listAs[T any](ctx context.Context, a *apiClients, resource string) ([]T, error) {
	l, err := a.dynamic.Resource(v1alpha1.GroupVersion.WithResource(resource)).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]T, len(l.Items))
	for i := range l.Items {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(l.Items[i].Object, &out[i]); err != nil {
			return nil, fmt.Errorf("decoding %s %s: %w", resource, l.Items[i].GetName(), err)
		}
	}
	return out, nil
}

// notServed reports whether err says that a resource is not served: its CRD is not
// installed.
func notServed(err error) bool {
	return err != nil && (apierrors.IsNotFound(err) || meta.IsNoMatchError(err))
}

// dryRunApply submits u, a ResourceSyncRule, as a server-side dry-run apply with the
// controllers' field manager, so that what the API server would reject is reported.
func (a *apiClients) dryRunApply(ctx context.Context, u *unstructured.Unstructured) error {
	_, err := a.dynamic.Resource(v1alpha1.GroupVersion.WithResource("resourcesyncrules")).Apply(ctx, u.GetName(), u,
		metav1.ApplyOptions{FieldManager: v1alpha1.FieldManager, Force: true, DryRun: []string{metav1.DryRunAll}})
	return err
}
