package syncrules

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/e2e/harness"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

// TestDeleteRightAfterCreate: objects deleted on the origin a moment after they were
// created leave no copy behind, even when the delete reaches a peer's controller while
// its create of the copy is in flight, before the copy is in its local cache (the engine
// skips the echo of its own write only when no reconcile decided on the copy meanwhile).
// Every tenth object is kept, and must be copied.
func TestDeleteRightAfterCreate(t *testing.T) {
	testbed.SkipIfNoAssets(t)
	const n = 300
	// A namespace of its own per run: the bed is shared, and -count may run the test again
	// while the last run's namespace is still terminating.
	ns := fmt.Sprintf("churn-%d", time.Now().UnixMilli()%1000000)
	cl, metrics := harness.FormGroupWithMetrics(t, bed, "first", "second", "third")
	harness.Grant(t, cl, "", "configmaps")
	first := cl["first"]
	firstDirect, err := client.New(bed.Cluster("first").DirectConfig(), client.Options{Scheme: first.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := first.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	applyRule(t, first, `
apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata:
  name: `+ns+`
spec:
  groupVersionKind: {version: v1, kind: ConfigMap}
  createNamespaces: true
  rules:
  - match:
    - namespaces: [`+ns+`]
`)
	t.Cleanup(func() {
		_ = first.Delete(context.Background(), &v1alpha1.ResourceSyncRule{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		_ = first.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"}}
	if err := first.Create(ctx, probe); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 60*time.Second, "the rule copies the probe to both peers", func() error {
		for _, p := range []string{"second", "third"} {
			var cm corev1.ConfigMap
			if err := cl[p].Get(ctx, client.ObjectKeyFromObject(probe), &cm); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
		}
		return nil
	})

	// Each object is deleted after a pause of 0 to 6 ms (about one write's round trip on
	// a peer), so that on some of them the delete reaches a peer while its create of the
	// copy is in flight.
	rng := rand.New(rand.NewPCG(1, 2))
	want := map[string]bool{"probe": true}
	for i := range n {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("churn-%03d", i)}, Data: map[string]string{"i": fmt.Sprint(i)}}
		if err := firstDirect.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 {
			want[cm.Name] = true
			continue
		}
		time.Sleep(time.Duration(rng.IntN(6000)) * time.Microsecond)
		if err := firstDirect.Delete(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"second", "third"} {
		harness.Eventually(t, 60*time.Second, p+" holds the copies of exactly the objects kept", func() error {
			var list corev1.ConfigMapList
			if err := cl[p].List(ctx, &list, client.InNamespace(ns)); err != nil {
				return err
			}
			var extra, missing []string
			have := map[string]bool{}
			for _, cm := range list.Items {
				if cm.Name == "kube-root-ca.crt" {
					continue
				}
				have[cm.Name] = true
				if !want[cm.Name] {
					extra = append(extra, cm.Name)
				}
			}
			for name := range want {
				if !have[name] {
					missing = append(missing, name)
				}
			}
			sort.Strings(extra)
			sort.Strings(missing)
			if len(extra)+len(missing) > 0 {
				return fmt.Errorf("copies of deleted objects left: %v; copies missing: %v", extra, missing)
			}
			return nil
		})
		// The pauses must have let copies of deleted objects be written: else the test
		// proves nothing about a delete racing a write.
		creates, err := harness.MetricSum(metrics[p], "kubectl_registry_sync_writes_total", `rule="`+ns+`"`, `op="create"`)
		if err != nil {
			t.Fatal(err)
		}
		deletes, err := harness.MetricSum(metrics[p], "kubectl_registry_sync_writes_total", `rule="`+ns+`"`, `op="delete"`)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %v copies created, %v deleted (%d objects kept)", p, creates, deletes, len(want))
		if deletes == 0 || creates <= float64(len(want)) {
			t.Errorf("%s: no copy of a deleted object was written (%v creates, %v deletes): the test raced nothing", p, creates, deletes)
		}
	}
}
