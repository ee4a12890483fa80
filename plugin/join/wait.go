package join

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/cmdutil"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/conditions"
)

// waitTarget is one Cluster whose status --wait watches: on side on, the Cluster named
// cluster, as the controller of that side reports it.
type waitTarget struct {
	on      *side
	cluster string
	// synced also requires the ClustersSynced condition (not with --one-way: the other
	// side does not know this one).
	synced bool
}

// wait polls the Cluster status on each side until every target is Ready (and synced),
// printing a progress line on stderr whenever what it waits for changes.
func (o *Options) wait(ctx context.Context, targets []waitTarget) error {
	interval := o.PollInterval
	if interval <= 0 {
		interval = pollInterval
	}
	ts := make([]cmdutil.WaitTarget, len(targets))
	for i := range targets {
		ts[i] = targets[i]
	}
	still, err := cmdutil.WaitAll(ctx, o.Timeout, interval, ts, o.ErrOut, func(i int) {
		t := targets[i]
		what := "Ready"
		if t.synced {
			what = "Ready and synced"
		}
		fmt.Fprintf(o.statusOut(), "%s/%s %s on %s\n", clusterResource, t.cluster, what, t.on.name)
	})
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("timed out after %s waiting for the controllers: %s. The objects are written; see \"kubectl get clusters -o wide\" on each side and the controllers' logs",
			o.Timeout, strings.Join(still, "; "))
	}
	return err
}

// Check reads the target Cluster and reports whether it is there yet, or how it is.
func (t waitTarget) Check(ctx context.Context) (bool, string) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	var c v1alpha1.Cluster
	if err := t.on.client.Get(ctx, client.ObjectKey{Name: t.cluster}, &c); err != nil {
		if apierrors.IsNotFound(err) {
			return false, fmt.Sprintf("on %s, cluster %s is missing", t.on.name, t.cluster)
		}
		return false, fmt.Sprintf("on %s, cluster %s cannot be read: %v", t.on.name, t.cluster, err)
	}
	return describe(t.on.name, &c, t.synced)
}

// describe reports whether Cluster c, as the controller of side `on` sees it, is Ready
// (and synced), and otherwise a line saying how it is:
//
//	on a, cluster b is "" (connecting)
//	on a, cluster b is "Failed" (<message>)
//	on a, cluster b is "Ready" (ClustersSynced: <message>)
func describe(on string, c *v1alpha1.Cluster, synced bool) (bool, string) {
	state := c.Status.State
	prefix := fmt.Sprintf("on %s, cluster %s is %q", on, c.Name, state)
	if state != v1alpha1.ClusterStateReady {
		detail := c.Status.Message
		if detail == "" {
			detail = "connecting"
		}
		return false, fmt.Sprintf("%s (%s)", prefix, detail)
	}
	if !synced {
		return true, ""
	}
	cond, found := conditions.Get(c.Status.Conditions, v1alpha1.ClusterConditionClustersSynced)
	if found && cond.Status == corev1.ConditionTrue {
		return true, ""
	}
	detail := "not reported yet"
	if found {
		detail = cond.Message
		if detail == "" {
			detail = cond.Reason
		}
	}
	return false, fmt.Sprintf("%s (ClustersSynced: %s)", prefix, detail)
}
