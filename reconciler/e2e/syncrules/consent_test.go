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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/e2e/harness"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

const consentNS = "consent"

// TestHostileRuleOwnership: the admin of third is hostile and attacks other members'
// copies through the ownership annotation and through rules, on real API servers. first
// is the honest origin, second the victim. Each attack fails on second and is reported
// there:
//   - an object of third's whose ownership annotation names first (by name) is refused as
//     an unknown origin, and is not admitted by second's SyncPolicy fromClusters: [first];
//   - a rule of third's named to sort first, matching first's objects, takes none of
//     second's copies over from first's own rule (its Conflict condition says which rule
//     writes them), and deleting it with deletionPolicy Delete deletes none of them;
//   - a rule deleted with deletionPolicy Delete deletes no copy another rule still asks
//     for (here a ReportOnly rule, which never relabels the copy, so that the deletion
//     policy's own check is what keeps it);
//   - status flowing back (syncStatusBack) passes the policy a copy passes: a member
//     outside first's fromClusters, first among its peers by name, never writes the
//     original's status.
func TestHostileRuleOwnership(t *testing.T) {
	testbed.SkipIfNoAssets(t)
	names := []string{"first", "second", "third"}
	cl, _ := harness.FormGroupControllers(t, bed, nil, names...)
	first, second, third := cl["first"], cl["second"], cl["third"]
	ctx := context.Background()
	harness.Grant(t, cl, "", "configmaps")
	for _, n := range names {
		if err := cl[n].Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: consentNS}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	mkCM := func(c client.Client, name string, labels, annotations map[string]string) {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: consentNS, Name: name, Labels: labels, Annotations: annotations}, Data: map[string]string{"from": name}}
		if err := c.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	getCM := func(c client.Client, name string) (*corev1.ConfigMap, error) {
		var cm corev1.ConfigMap
		err := c.Get(ctx, client.ObjectKey{Namespace: consentNS, Name: name}, &cm)
		return &cm, err
	}
	deleteRule := func(c client.Client, name string) {
		t.Helper()
		if err := c.Delete(ctx, &v1alpha1.ResourceSyncRule{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}

	t.Run("a forged origin string is refused and reported, not admitted by fromClusters", func(t *testing.T) {
		policy := &v1alpha1.SyncPolicy{ObjectMeta: metav1.ObjectMeta{Name: "only-first"}, Spec: v1alpha1.SyncPolicySpec{FromClusters: []string{"first"}}}
		if err := second.Create(ctx, policy); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = second.Delete(ctx, policy) })
		applyRule(t, first, `
apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata: {name: consent-forged}
spec:
  groupVersionKind: {version: v1, kind: ConfigMap}
  rules:
  - match: [{namespaces: [`+consentNS+`], labels: [{matchLabels: {test: forged}}]}]
`)
		t.Cleanup(func() { deleteRule(first, "consent-forged") })
		// third writes first's name, and then an ID no member has, as the origin.
		mkCM(third, "forged-name", map[string]string{"test": "forged"}, map[string]string{v1alpha1.OwnershipAnnotation: "first"})
		mkCM(third, "forged-id", map[string]string{"test": "forged"}, map[string]string{v1alpha1.OwnershipAnnotation: "0-not-a-member"})
		mkCM(first, "real", map[string]string{"test": "forged"}, nil)
		harness.Eventually(t, 60*time.Second, "first's own ConfigMap reaches second", func() error {
			_, err := getCM(second, "real")
			return err
		})
		harness.Eventually(t, 30*time.Second, "the forged origins reported on second's rule", func() error {
			c, err := condition(second, "consent-forged", v1alpha1.RuleConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonUnknownOrigin)
			if err != nil {
				return err
			}
			for _, want := range []string{"forged-name", "forged-id", "not a member"} {
				if !strings.Contains(c.Message, want) {
					return fmt.Errorf("the condition does not name %q: %s", want, c.Message)
				}
			}
			return nil
		})
		for _, n := range []string{"forged-name", "forged-id"} {
			if _, err := getCM(second, n); !apierrors.IsNotFound(err) {
				t.Errorf("%s reached second: %v", n, err)
			}
		}
	})

	t.Run("a rule named to sort first takes over and deletes nothing of another member's copies", func(t *testing.T) {
		applyRule(t, first, `
apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata: {name: consent-origin}
spec:
  groupVersionKind: {version: v1, kind: ConfigMap}
  rules:
  - match: [{namespaces: [`+consentNS+`], labels: [{matchLabels: {test: takeover}}]}]
`)
		t.Cleanup(func() { deleteRule(first, "consent-origin") })
		mkCM(first, "owned", map[string]string{"test": "takeover"}, nil)
		var uid types.UID
		harness.Eventually(t, 60*time.Second, "first's ConfigMap copied to second by first's rule", func() error {
			cm, err := getCM(second, "owned")
			if err != nil {
				return err
			}
			if cm.Labels[v1alpha1.RuleLabel] != "consent-origin" {
				return fmt.Errorf("the copy is written by rule %q", cm.Labels[v1alpha1.RuleLabel])
			}
			uid = cm.UID
			return nil
		})
		applyRule(t, third, `
apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata: {name: 0-hijack}
spec:
  groupVersionKind: {version: v1, kind: ConfigMap}
  deletionPolicy: Delete
  rules:
  - match: [{namespaces: [`+consentNS+`], labels: [{matchLabels: {test: takeover}}]}]
    mutations:
      labels: {add: {hijacked: "true"}}
      overrides: [{path: data.from, value: third}]
`)
		t.Cleanup(func() { deleteRule(third, "0-hijack") })
		harness.Eventually(t, 60*time.Second, "second reports that first's rule writes the copy", func() error {
			c, err := condition(second, "0-hijack", v1alpha1.RuleConditionConflict, metav1.ConditionTrue, v1alpha1.ReasonRuleOverlap)
			if err != nil {
				return err
			}
			if !strings.Contains(c.Message, "consent-origin") {
				return fmt.Errorf("the condition does not name the rule that writes the copy: %s", c.Message)
			}
			return nil
		})
		untouched := func() error {
			cm, err := getCM(second, "owned")
			if err != nil {
				return err
			}
			if cm.UID != uid || cm.Labels["hijacked"] != "" || cm.Data["from"] != "owned" || cm.Labels[v1alpha1.RuleLabel] != "consent-origin" {
				return fmt.Errorf("second's copy changed: uid %s (was %s), labels %v, data %v", cm.UID, uid, cm.Labels, cm.Data)
			}
			return nil
		}
		harness.Stays(t, 10*time.Second, "second's copy stays first's rule's", untouched)
		deleteRule(third, "0-hijack")
		harness.Eventually(t, 60*time.Second, "the hijacking rule gone from second", func() error {
			if _, err := rule(second, "0-hijack"); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there: %v", err)
			}
			return nil
		})
		harness.Stays(t, 10*time.Second, "second's copy survives the hijacking rule's Delete", untouched)
	})

	t.Run("a rule deleted with deletionPolicy Delete deletes no copy another rule still asks for", func(t *testing.T) {
		// consent-b reports only: it never relabels the copy, so only the deletion policy's
		// own check (planner.KeepOnRuleDelete) keeps consent-a's copy when consent-a goes.
		for n, mode := range map[string]string{"consent-a": "Enforce", "consent-b": "ReportOnly"} {
			applyRule(t, first, `
apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata: {name: `+n+`}
spec:
  groupVersionKind: {version: v1, kind: ConfigMap}
  deletionPolicy: Delete
  syncMode: `+mode+`
  rules:
  - match: [{namespaces: [`+consentNS+`], labels: [{matchLabels: {test: handover}}]}]
`)
			n := n
			t.Cleanup(func() { deleteRule(first, n) })
		}
		mkCM(first, "handed", map[string]string{"test": "handover"}, nil)
		var uid types.UID
		harness.Eventually(t, 60*time.Second, "the copy on second written by consent-a, with its rule's finalizer in place", func() error {
			cm, err := getCM(second, "handed")
			if err != nil {
				return err
			}
			if cm.Labels[v1alpha1.RuleLabel] != "consent-a" {
				return fmt.Errorf("the copy is written by rule %q", cm.Labels[v1alpha1.RuleLabel])
			}
			r, err := rule(second, "consent-a")
			if err != nil {
				return err
			}
			if len(r.Finalizers) == 0 {
				return fmt.Errorf("consent-a on second has no finalizer yet")
			}
			uid = cm.UID
			return nil
		})
		deleteRule(first, "consent-a")
		harness.Eventually(t, 60*time.Second, "consent-a gone from second", func() error {
			if _, err := rule(second, "consent-a"); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there: %v", err)
			}
			return nil
		})
		harness.Stays(t, 10*time.Second, "the copy consent-b asks for survives consent-a's Delete", func() error {
			cm, err := getCM(second, "handed")
			if err != nil {
				return fmt.Errorf("the copy is gone: %w", err)
			}
			if cm.UID != uid {
				return fmt.Errorf("the copy was deleted and made again (uid %s, was %s)", cm.UID, uid)
			}
			return nil
		})
	})

	t.Run("a hostile member's status on its copy does not flow back past the policy", func(t *testing.T) {
		// second is the hostile member here: it sorts first by name among first's peers,
		// and first's SyncPolicy admits only third. The status first's original takes is
		// third's, never the one second writes on its copy.
		testCRDs(t, cl)
		policy := &v1alpha1.SyncPolicy{ObjectMeta: metav1.ObjectMeta{Name: "only-third"}, Spec: v1alpha1.SyncPolicySpec{FromClusters: []string{"third"}}}
		if err := first.Create(ctx, policy); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = first.Delete(ctx, policy) })
		applyRule(t, first, `
apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata: {name: consent-status}
spec:
  groupVersionKind: {group: example.com, version: v1, kind: Widget}
  createNamespaces: true
  syncStatusBack: true
  rules:
  - match: [{namespaces: [consent-status]}]
`)
		t.Cleanup(func() { deleteRule(first, "consent-status") })
		if err := first.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "consent-status"}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		gvk := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
		get := func(c client.Client) (*unstructured.Unstructured, error) {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(gvk)
			return u, c.Get(ctx, client.ObjectKey{Namespace: "consent-status", Name: "w"}, u)
		}
		w := &unstructured.Unstructured{}
		w.SetGroupVersionKind(gvk)
		w.SetNamespace("consent-status")
		w.SetName("w")
		w.Object["spec"] = map[string]any{"size": int64(1)}
		if err := first.Create(ctx, w); err != nil {
			t.Fatal(err)
		}
		for peer, phase := range map[string]string{"second": "Forged", "third": "Running"} {
			c := cl[peer]
			harness.Eventually(t, 60*time.Second, "the copy on "+peer, func() error { _, err := get(c); return err })
			// The registry's controller writes the copy too: a conflict is read again.
			if err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
				cur, err := get(c)
				if err != nil {
					return err
				}
				cur.Object["status"] = map[string]any{"phase": phase}
				return c.Status().Update(ctx, cur)
			}); err != nil {
				t.Fatal(err)
			}
		}
		phase := func() (string, error) {
			o, err := get(first)
			if err != nil {
				return "", err
			}
			st, _ := o.Object["status"].(map[string]any)
			p, _ := st["phase"].(string)
			return p, nil
		}
		harness.Eventually(t, 60*time.Second, "third's status reaches the original on first", func() error {
			p, err := phase()
			if err == nil && p != "Running" {
				err = fmt.Errorf("the original's status phase is %q", p)
			}
			return err
		})
		harness.Stays(t, 5*time.Second, "second's forged status never reaches the original", func() error {
			p, err := phase()
			if err == nil && p != "Running" {
				err = fmt.Errorf("the original's status phase is %q", p)
			}
			return err
		})
	})
}
