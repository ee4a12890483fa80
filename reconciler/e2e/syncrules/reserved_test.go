package syncrules

import (
	"context"
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

const reservedNS = "reserved"

// TestHostileBuiltinRuleName: the built-in rule copies ResourceSyncRules to every member
// and writes as the controller itself. A member's admin makes a rule with the built-in
// rule's name, syncing ConfigMaps: were it taken for the built-in rule, first would run
// it in its place, write second's ConfigMaps as its own controller though first grants
// members nothing, and sync no other rule. It is ignored: nothing of it arrives, and a
// rule made after it still reaches first and runs there (its copies written as second,
// once first's admin grants second).
func TestHostileBuiltinRuleName(t *testing.T) {
	testbed.SkipIfNoAssets(t)
	names := []string{"first", "second", "third"} // the package's bed holds these three
	cl, _ := harness.FormGroupControllers(t, bed, nil, names...)
	first, second := cl["first"], cl["second"]
	ctx := context.Background()
	harness.Grant(t, cl, "", "configmaps")
	for _, n := range names {
		if err := cl[n].Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: reservedNS}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	// first grants members nothing.
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

	applyRule(t, second, `
apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata: {name: `+v1alpha1.CoreRuleName+`}
spec:
  groupVersionKind: {version: v1, kind: ConfigMap}
  rules:
  - match: [{namespaces: [`+reservedNS+`], labels: [{matchLabels: {test: impostor}}]}]
`)
	t.Cleanup(func() {
		for _, c := range cl {
			_ = c.Delete(context.Background(), &v1alpha1.ResourceSyncRule{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.CoreRuleName}})
		}
	})
	impostor := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: reservedNS, Name: "impostor", Labels: map[string]string{"test": "impostor"}}, Data: map[string]string{"k": "v"}}
	if err := second.Create(ctx, impostor); err != nil {
		t.Fatal(err)
	}

	// A rule made after it still travels by the built-in rule, and runs on first.
	applyRule(t, second, `
apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata: {name: reserved-control}
spec:
  groupVersionKind: {version: v1, kind: ConfigMap}
  rules:
  - match: [{namespaces: [`+reservedNS+`], labels: [{matchLabels: {test: control}}]}]
`)
	t.Cleanup(func() {
		_ = second.Delete(context.Background(), &v1alpha1.ResourceSyncRule{ObjectMeta: metav1.ObjectMeta{Name: "reserved-control"}})
	})
	harness.Eventually(t, 60*time.Second, "the rule made after the impostor reaches first", func() error {
		return first.Get(ctx, client.ObjectKey{Name: "reserved-control"}, &v1alpha1.ResourceSyncRule{})
	})
	// first's admin lets second write ConfigMaps in the namespace.
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "reserved-configmaps"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}},
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: reservedNS, Name: "member-second"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: v1alpha1.MemberIdentityPrefix + "second"}},
	}
	for _, o := range []client.Object{role, rb} {
		if err := first.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = first.Delete(context.Background(), o) })
	}
	control := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: reservedNS, Name: "control", Labels: map[string]string{"test": "control"}}, Data: map[string]string{"k": "v"}}
	if err := second.Create(ctx, control); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 90*time.Second, "second's ConfigMap of the control rule reaches first", func() error {
		return first.Get(ctx, client.ObjectKey{Namespace: reservedNS, Name: "control"}, &corev1.ConfigMap{})
	})
	// By now first has run a full pass of second's objects under the rules it holds.
	if err := first.Get(ctx, client.ObjectKey{Namespace: reservedNS, Name: "impostor"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the ConfigMap of the rule with the built-in rule's name reached first: %v", err)
	}
	if err := first.Get(ctx, client.ObjectKey{Name: v1alpha1.CoreRuleName}, &v1alpha1.ResourceSyncRule{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the rule with the built-in rule's name was copied to first: %v", err)
	}
}
