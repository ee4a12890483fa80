package engine

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner"
)

// policy returns this cluster's consent to what rules write: its SyncPolicies and the
// registry's own objects (the reader Secrets of its Clusters). A cluster whose API has no
// SyncPolicy kind yet (an older installation) has the default policy; any other error
// fails the reconcile (it is retried), never loosening the policy.
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
	return planner.PolicyOf(pols.Items, clusters.Items, e.opts.Namespace, e.opts.LocalID), nil
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
