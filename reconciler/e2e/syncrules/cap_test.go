package syncrules

import (
	"context"
	"fmt"
	"sort"
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

const (
	capNS = "cap"
	// peerCap is the cap on the objects of one peer's watch the controllers run with.
	peerCap = 20
)

// capCopies returns the names of the ConfigMaps of namespace cap on cl that a rule
// copied (they carry the ownership mark).
func capCopies(cl client.Client) ([]string, error) {
	var l corev1.ConfigMapList
	if err := cl.List(context.Background(), &l, client.InNamespace(capNS)); err != nil {
		return nil, err
	}
	var out []string
	for _, c := range l.Items {
		if c.Annotations[v1alpha1.OwnershipAnnotation] != "" {
			out = append(out, c.Name)
		}
	}
	sort.Strings(out)
	return out, nil
}

func capNames(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("cm-%02d", i))
	}
	sort.Strings(out)
	return out
}

// TestTooManyObjects: the admin of first, a hostile member, offers a rule more objects
// than second allows one peer's watch to hold (--max-peer-objects 20). Second refuses to
// watch them and says so on the rule (TooManyObjects, naming first, the count and the
// cap, and an event), writes no copy beyond the cap, keeps the copies it made while
// first was under the cap (even of an object first deleted meanwhile: an unwatched peer
// is no proof), keeps running, and once first is back under the cap syncs again: the
// condition clears and the deletion made meanwhile reaches the copy.
func TestTooManyObjects(t *testing.T) {
	testbed.SkipIfNoAssets(t)
	// The whole bed's group: the package's other tests join third too, and a group of
	// first and second alone would never form after them (first knows third).
	names := []string{"first", "second", "third"}
	var metrics harness.Metrics // second's
	cl, controllers := harness.FormGroupControllers(t, bed, func(n string) []string {
		args := []string{fmt.Sprintf("--max-peer-objects=%d", peerCap), "--max-peer-objects-retry=2s"}
		if n == "second" {
			addr := harness.FreeAddr(t)
			metrics = harness.MetricsAt(t, bed.Cluster(n), addr)
			args = append(args, "--metrics-bind-address", addr)
		}
		return args
	}, names...)
	overCap := func() (float64, error) {
		return harness.MetricSum(metrics, "kubectl_registry_sync_watches_over_cap", `cluster="first"`, `kind="ConfigMap"`)
	}
	first, second := cl["first"], cl["second"]
	ctx := context.Background()
	harness.Grant(t, cl, "", "configmaps")
	for _, n := range names {
		if err := cl[n].Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: capNS}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	create := func(from, to int) {
		t.Helper()
		for _, n := range capNames(from, to) {
			if err := first.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: capNS, Name: n}, Data: map[string]string{"v": n}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	del := func(from, to int) {
		t.Helper()
		for _, n := range capNames(from, to) {
			if err := first.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: capNS, Name: n}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The bed is shared by the package's tests: leave nothing of this one behind.
	t.Cleanup(func() {
		for _, n := range names {
			_ = cl[n].Delete(ctx, &v1alpha1.ResourceSyncRule{ObjectMeta: metav1.ObjectMeta{Name: "cap"}})
			_ = cl[n].DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(capNS))
		}
	})
	create(0, 15)
	applyRule(t, first, `
apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata: {name: cap}
spec:
  groupVersionKind: {version: v1, kind: ConfigMap}
  rules:
  - match: [{namespaces: [`+capNS+`]}]
`)
	underCap := capNames(0, 15)
	harness.Eventually(t, 60*time.Second, "the 15 objects under the cap synced to second", func() error {
		got, err := capCopies(second)
		if err != nil {
			return err
		}
		if strings.Join(got, ",") != strings.Join(underCap, ",") {
			return fmt.Errorf("copies on second: %v", got)
		}
		_, err = condition(second, "cap", v1alpha1.RuleConditionDegraded, metav1.ConditionFalse, v1alpha1.ReasonAllSourcesOK)
		return err
	})

	// Over the cap: 25 objects, and one of the synced ones deleted at first meanwhile.
	create(15, 25)
	del(0, 1)
	t.Run("refused and reported", func(t *testing.T) {
		harness.Eventually(t, 60*time.Second, "TooManyObjects on second", func() error {
			c, err := condition(second, "cap", v1alpha1.RuleConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonTooManyObjects)
			if err != nil {
				return err
			}
			for _, want := range []string{"peer first", fmt.Sprintf("more than %d objects", peerCap), "namespace " + capNS, "are kept"} {
				if !strings.Contains(c.Message, want) {
					return fmt.Errorf("the condition does not say %q: %s", want, c.Message)
				}
			}
			r, err := ruleStatus(second, "cap")
			if err != nil {
				return err
			}
			for _, s := range r.Status.Sources {
				if s.Cluster == "first" && (s.State != v1alpha1.SourceFailing || !strings.Contains(s.Message, "more than")) {
					return fmt.Errorf("first as a source: %+v", s)
				}
			}
			if n, err := overCap(); err != nil || n != 1 {
				return fmt.Errorf("kubectl_registry_sync_watches_over_cap for first's ConfigMaps: %v (%v), want 1", n, err)
			}
			var evs corev1.EventList
			if err := second.List(ctx, &evs); err != nil {
				return err
			}
			for _, e := range evs.Items {
				if e.Reason == v1alpha1.ReasonTooManyObjects && e.InvolvedObject.Name == "cap" && strings.Contains(e.Message, "peer first") {
					return nil
				}
			}
			return fmt.Errorf("no TooManyObjects event on the rule")
		})
	})
	t.Run("no copy beyond the cap, the copies made are kept", func(t *testing.T) {
		harness.Stays(t, 8*time.Second, "second's copies while first is over the cap", func() error {
			got, err := capCopies(second)
			if err != nil {
				return err
			}
			if len(got) > peerCap {
				return fmt.Errorf("%d copies on second, more than the cap %d: %v", len(got), peerCap, got)
			}
			have := map[string]bool{}
			for _, n := range got {
				have[n] = true
			}
			for _, n := range underCap { // cm-00 among them: first deleted it while over the cap
				if !have[n] {
					return fmt.Errorf("the copy %s made under the cap was deleted: %v", n, got)
				}
			}
			return nil
		})
		if !controllers["second"].Running() {
			t.Fatal("second's controller exited")
		}
	})

	// Back under the cap: 25 - 1 - 12 = 12 objects at first.
	del(13, 25)
	t.Run("syncs again under the cap", func(t *testing.T) {
		want := capNames(1, 13)
		harness.Eventually(t, 60*time.Second, "second syncs first again", func() error {
			if _, err := condition(second, "cap", v1alpha1.RuleConditionDegraded, metav1.ConditionFalse, v1alpha1.ReasonAllSourcesOK); err != nil {
				return err
			}
			got, err := capCopies(second)
			if err != nil {
				return err
			}
			if strings.Join(got, ",") != strings.Join(want, ",") {
				return fmt.Errorf("copies on second: %v, want %v", got, want)
			}
			if n, err := overCap(); err != nil || n != 0 {
				return fmt.Errorf("kubectl_registry_sync_watches_over_cap for first's ConfigMaps: %v (%v), want 0", n, err)
			}
			return nil
		})
		if !controllers["second"].LogContains("back under the cap") {
			t.Error("second's log does not say the peer is back under the cap")
		}
	})
}
