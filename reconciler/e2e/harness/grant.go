package harness

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// Grant lets peers read the resources of group on every cluster of cls, and the members'
// identities write them, the seed's "RBAC considerations" way: ClusterRoles with the
// aggregation labels, as a platform team adds them. What the members write (the
// controller writes a copy as the member it comes from, so a test's writes are
// authorized by RBAC even though the test's controllers run as the bed's administrator)
// covers the copies, their status subresource (syncStatus, syncStatusBack) and the
// namespaces a rule with createNamespaces makes. It returns once both aggregated roles
// hold the first resource on every cluster.
func Grant(t *testing.T, cls map[string]client.Client, group string, resources ...string) {
	t.Helper()
	status := make([]string, len(resources))
	for i, r := range resources {
		status[i] = r + "/status"
	}
	write := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	roles := []*rbacv1.ClusterRole{
		{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + strings.Join(resources, "-") + "-reader-aggregated", Labels: map[string]string{v1alpha1.ReaderAggregatedLabel: "true"}},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{group}, Resources: resources, Verbs: []string{"get", "list", "watch"}}},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + strings.Join(resources, "-") + "-controller-aggregated", Labels: map[string]string{v1alpha1.ControllerAggregatedLabel: "true"}},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{group}, Resources: resources, Verbs: write},
				{APIGroups: []string{group}, Resources: status, Verbs: []string{"get", "update", "patch"}},
			},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e-namespaces-controller-aggregated", Labels: map[string]string{v1alpha1.ControllerAggregatedLabel: "true"}},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch", "create"}}},
		},
	}
	for name, cl := range cls {
		for _, role := range roles {
			if err := cl.Create(context.Background(), role.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("%s: creating ClusterRole %s: %v", name, role.Name, err)
			}
		}
		for _, agg := range []string{v1alpha1.ReaderAggregatedRoleName, v1alpha1.ControllerAggregatedRoleName} {
			Eventually(t, 30*time.Second, "aggregation into "+agg+" on "+name, func() error {
				return Aggregated(cl, agg, group, resources[0])
			})
		}
	}
}

// Aggregated returns nil once the ClusterRole role holds a rule for resource of group.
func Aggregated(cl client.Client, role, group, resource string) error {
	var agg rbacv1.ClusterRole
	if err := cl.Get(context.Background(), client.ObjectKey{Name: role}, &agg); err != nil {
		return err
	}
	for _, r := range agg.Rules {
		if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) {
			return nil
		}
	}
	return fmt.Errorf("ClusterRole %s has no rule for %s yet", role, resource)
}
