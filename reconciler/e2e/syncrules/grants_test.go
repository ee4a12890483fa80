package syncrules

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/e2e/harness"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

const grantsNS = "grants"

// TestMemberGrants: what a member may write here is this cluster's RBAC. first's admin
// replaces the members' default grant (install --member-grants=none) with one
// RoleBinding: second's identity may write ConfigMaps in one namespace. A rule third's
// admin made copies third's and second's ConfigMaps everywhere:
//   - on first, second's copy is written and third's is refused by the API server,
//     reported as NotGranted naming third's identity, while on second (the default grant)
//     third's arrives;
//   - once first's admin binds third's identity, third's copy arrives;
//   - second's delete of its original deletes first's copy, as second.
func TestMemberGrants(t *testing.T) {
	testbed.SkipIfNoAssets(t)
	names := []string{"first", "second", "third"}
	cl, _ := harness.FormGroupControllers(t, bed, nil, names...)
	first, second, third := cl["first"], cl["second"], cl["third"]
	ctx := context.Background()
	grantRead(t, cl, "", "configmaps")
	for _, n := range names {
		if err := cl[n].Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: grantsNS}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}

	// first: no default grant, and second's identity may write ConfigMaps in grantsNS.
	var def rbacv1.ClusterRoleBinding
	if err := first.Get(ctx, client.ObjectKey{Name: v1alpha1.MembersGrantName}, &def); err != nil {
		t.Fatalf("the default members' grant is not installed: %v", err)
	}
	if err := first.Delete(ctx, &def); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		restored := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: def.Name, Labels: def.Labels}, RoleRef: def.RoleRef, Subjects: def.Subjects}
		if err := first.Create(context.Background(), restored); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Errorf("restoring the default members' grant on first: %v", err)
		}
	})
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "grants-configmaps"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}},
	}
	if err := first.Create(ctx, role); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = first.Delete(context.Background(), role) })
	bind := func(member string) {
		t.Helper()
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: grantsNS, Name: "member-" + member},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: v1alpha1.MemberIdentityPrefix + member}},
		}
		if err := first.Create(ctx, rb); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = first.Delete(context.Background(), rb) })
	}
	bind("second")

	applyRule(t, third, `
apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata: {name: grants}
spec:
  groupVersionKind: {version: v1, kind: ConfigMap}
  rules:
  - match: [{namespaces: [`+grantsNS+`], labels: [{matchLabels: {test: grants}}]}]
`)
	t.Cleanup(func() {
		_ = third.Delete(context.Background(), &v1alpha1.ResourceSyncRule{ObjectMeta: metav1.ObjectMeta{Name: "grants"}})
	})
	mk := func(c client.Client, name string) {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: grantsNS, Name: name, Labels: map[string]string{"test": "grants"}}, Data: map[string]string{"from": name}}
		if err := c.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	get := func(c client.Client, name string) error {
		return c.Get(ctx, client.ObjectKey{Namespace: grantsNS, Name: name}, &corev1.ConfigMap{})
	}
	mk(second, "of-second")
	mk(third, "of-third")

	harness.Eventually(t, 60*time.Second, "second's ConfigMap reaches first, written as second", func() error {
		return get(first, "of-second")
	})
	harness.Eventually(t, 60*time.Second, "third's ConfigMap reaches second, whose default grant lets third write it", func() error {
		return get(second, "of-third")
	})
	harness.Eventually(t, 30*time.Second, "first reports third's copy as not granted", func() error {
		c, err := condition(first, "grants", v1alpha1.RuleConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonNotGranted)
		if err != nil {
			return err
		}
		for _, want := range []string{"of-third", v1alpha1.MemberUser(ns, "third")} {
			if !strings.Contains(c.Message, want) {
				return fmt.Errorf("the condition does not name %q: %s", want, c.Message)
			}
		}
		return nil
	})
	if err := get(first, "of-third"); !apierrors.IsNotFound(err) {
		t.Fatalf("third's ConfigMap reached first without a grant: %v", err)
	}

	bind("third")
	harness.Eventually(t, 90*time.Second, "third's ConfigMap reaches first once its identity is granted", func() error {
		return get(first, "of-third")
	})

	if err := second.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: grantsNS, Name: "of-second"}}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 60*time.Second, "first's copy of second's ConfigMap is deleted with it", func() error {
		if err := get(first, "of-second"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	})
}
