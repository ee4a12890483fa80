package engine

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner"
)

// policy returns this cluster's consent to what rules write: its SyncPolicies, the
// registry's own objects (the reader Secrets of its Clusters) and its namespaces' Pod
// Security labels. A cluster whose API has no SyncPolicy kind yet (an older
// installation) has the default policy; any other error fails the reconcile (it is
// retried), never loosening the policy.
func (e *Engine) policy(ctx context.Context) (planner.Policy, error) {
	e.policyMu.Lock()
	defer e.policyMu.Unlock()
	if e.policyValid {
		return e.policyVal, nil
	}
	p, err := e.computePolicy(ctx)
	if err != nil {
		return planner.Policy{}, err
	}
	e.policyVal, e.policyValid = p, true
	return p, nil
}

// computePolicy reads the policy from the cache.
func (e *Engine) computePolicy(ctx context.Context) (planner.Policy, error) {
	var pols v1alpha1.SyncPolicyList
	if e.noPolicyKind {
		// none
	} else if err := e.opts.Client.List(ctx, &pols); err != nil && !meta.IsNoMatchError(err) {
		return planner.Policy{}, fmt.Errorf("reading this cluster's SyncPolicies: %w", err)
	}
	var clusters v1alpha1.ClusterList
	if err := e.opts.Client.List(ctx, &clusters); err != nil {
		return planner.Policy{}, fmt.Errorf("listing Clusters: %w", err)
	}
	var namespaces corev1.NamespaceList
	if err := e.opts.Client.List(ctx, &namespaces); err != nil {
		return planner.Policy{}, fmt.Errorf("listing Namespaces (their Pod Security labels): %w", err)
	}
	levels := map[string]string{}
	for i := range namespaces.Items {
		if l, ok := namespaces.Items[i].Labels[planner.EnforceLevelLabel]; ok {
			levels[namespaces.Items[i].Name] = l
		}
	}
	return planner.PolicyOf(pols.Items, clusters.Items, e.opts.Namespace, e.opts.LocalID).WithNamespaceLevels(levels), nil
}

// watchNamespaceLevels computes the policy again, and looks at every object again, when
// a namespace's pod-security.kubernetes.io/enforce label changes, or a namespace with
// that label is added or deleted: the label is the level the pod templates of copies
// into the namespace must meet when it is stricter than the SyncPolicies'. Namespaces
// without the label change nothing.
func (e *Engine) watchNamespaceLevels(ctx context.Context) error {
	inf, err := e.opts.Cache.GetInformer(ctx, &corev1.Namespace{})
	if err != nil {
		return fmt.Errorf("watching Namespaces: %w", err)
	}
	level := func(o any) (string, bool) {
		if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
			o = d.Obj
		}
		if ns, ok := o.(client.Object); ok {
			v, has := ns.GetLabels()[planner.EnforceLevelLabel]
			return v, has
		}
		return "", false
	}
	changed := func() {
		e.policyMu.Lock()
		e.policyValid = false
		e.policyMu.Unlock()
		e.triggerRefresh()
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) {
			if _, has := level(o); has {
				changed()
			}
		},
		UpdateFunc: func(o, n any) {
			ov, oh := level(o)
			nv, nh := level(n)
			if ov != nv || oh != nh {
				changed()
			}
		},
		DeleteFunc: func(o any) {
			if _, has := level(o); has {
				changed()
			}
		},
	}); err != nil {
		return fmt.Errorf("watching Namespaces: %w", err)
	}
	return nil
}

// sameQuarantine reports whether two versions of a Cluster quarantine the same clusters
// (annotations do not change a Cluster's generation).
func sameQuarantine(a, b map[string]string) bool {
	for _, k := range []string{v1alpha1.ClusterDisabledAnnotation, v1alpha1.LeftClustersAnnotation} {
		if a[k] != b[k] {
			return false
		}
	}
	return true
}
