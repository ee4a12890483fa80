package syncrules

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/e2e/harness"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

const badInputNS = "sync-bad-input"

// TestRulesThatFailAtRuntime syncs, with one rule, objects whose mutation fails when it
// runs: a template that fails on the object's data, a template that loops past the
// rendering limits, and overrides that make the copy larger than the API server accepts.
// Each is reported on the rule, nothing is written for it, it is not retried in a tight
// loop, and the object next to them syncs.
func TestRulesThatFailAtRuntime(t *testing.T) {
	testbed.SkipIfNoAssets(t)
	names := []string{"first", "second", "third"}
	cl, metricsURL := harness.FormGroupWithMetrics(t, bed, names...)
	first, second := cl["first"], cl["second"]
	harness.Grant(t, cl, "", "configmaps")
	ctx := context.Background()
	for _, n := range names {
		if err := cl[n].Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: badInputNS}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}

	loopBody := `{{range .Object.data}}{{range $.Object.data}}{{range $.Object.data}}{{range $.Object.data}}x{{end}}{{end}}{{end}}{{end}}`
	applyRule(t, second, `
apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata:
  name: bad-at-runtime
  annotations: {cluster-registry.k8s.cisco.com/resource-sync-disabled: "true"}
spec:
  groupVersionKind: {version: v1, kind: ConfigMap}
  rules:
  - match:
    - namespaces: [`+badInputNS+`]
      labels: [{matchLabels: {case: fine}}]
  - match:
    - namespaces: [`+badInputNS+`]
      labels: [{matchLabels: {case: fails}}]
    mutations:
      overrides:
      - {type: replace, path: data.out, value: "{{ .Object.data.k.foo }}"}
  - match:
    - namespaces: [`+badInputNS+`]
      labels: [{matchLabels: {case: loops}}]
    mutations:
      overrides:
      - {type: replace, path: data.out, value: '`+loopBody+`'}
  - match:
    - namespaces: [`+badInputNS+`]
      labels: [{matchLabels: {case: too-large}}]
    mutations:
      overrides:
      - {type: replace, path: data.a, value: '{{ printf "%0900000d" 0 }}'}
      - {type: replace, path: data.b, value: '{{ printf "%0900000d" 0 }}'}
`)

	many := map[string]string{}
	for i := range 40 {
		many[fmt.Sprintf("k%02d", i)] = "v"
	}
	for name, data := range map[string]map[string]string{
		"fine":      {"k": "v"},
		"fails":     {"k": "a string has no field foo"},
		"loops":     many,
		"too-large": {"k": "v"},
	} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: badInputNS, Name: name, Labels: map[string]string{"case": name}}, Data: data}
		if err := first.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}

	harness.Eventually(t, 60*time.Second, "the fine object is copied to second", func() error {
		var cm corev1.ConfigMap
		return second.Get(ctx, client.ObjectKey{Namespace: badInputNS, Name: "fine"}, &cm)
	})
	wants := map[string]string{
		"fails":     "can't evaluate field foo",
		"loops":     "",
		"too-large": "",
	}
	harness.Eventually(t, 60*time.Second, "every failing object is reported on the rule", func() error {
		r, err := rule(second, "bad-at-runtime")
		if err != nil {
			return err
		}
		var degraded *metav1.Condition
		for i := range r.Status.Conditions {
			if r.Status.Conditions[i].Type == v1alpha1.RuleConditionDegraded {
				degraded = &r.Status.Conditions[i]
			}
		}
		if degraded == nil || degraded.Status != metav1.ConditionTrue {
			return fmt.Errorf("Degraded is not True: %+v", r.Status.Conditions)
		}
		for name, part := range wants {
			if !strings.Contains(degraded.Message, badInputNS+"/"+name) || !strings.Contains(degraded.Message, part) {
				return fmt.Errorf("the Degraded message does not name %s (%q): %s", name, part, degraded.Message)
			}
		}
		t.Logf("Degraded %s: %s", degraded.Reason, degraded.Message)
		return nil
	})

	// Nothing was written for the failing objects, and the controller does not retry them
	// in a tight loop: with the queue's backoff (200 ms doubling) a few attempts in 20 s.
	before, err := harness.MetricSum(metricsURL["second"], "kubectl_registry_sync_errors_total", `kind="ConfigMap"`)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Second)
	after, err := harness.MetricSum(metricsURL["second"], "kubectl_registry_sync_errors_total", `kind="ConfigMap"`)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sync errors on second: %v before the 20 s window, %v after", before, after)
	if after-before > 10 {
		t.Errorf("%v failed syncs in 20 s: retried in a tight loop", after-before)
	}
	for name := range wants {
		var cm corev1.ConfigMap
		if err := second.Get(ctx, client.ObjectKey{Namespace: badInputNS, Name: name}, &cm); !apierrors.IsNotFound(err) {
			t.Errorf("%s on second: %v, want it not written", name, err)
		}
	}
	// The controllers are still up and syncing: a change to the fine object arrives.
	fine := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: badInputNS, Name: "fine"}}
	if err := harness.Update(ctx, first, fine, func() { fine.Data["k"] = "changed" }); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 30*time.Second, "the change reaches second", func() error {
		var cm corev1.ConfigMap
		if err := second.Get(ctx, client.ObjectKey{Namespace: badInputNS, Name: "fine"}, &cm); err != nil {
			return err
		}
		if cm.Data["k"] != "changed" {
			return fmt.Errorf("data %v", cm.Data)
		}
		return nil
	})
}
