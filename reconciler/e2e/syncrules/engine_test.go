package syncrules

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/e2e/harness"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

const testNS = "sync-test"

// testCRDs creates the test CRDs Widget and Gadget (testdata/crds) on every cluster and
// lets peers read, and the controllers write, them.
func testCRDs(t *testing.T, cls map[string]client.Client) {
	t.Helper()
	for _, c := range cls {
		for _, f := range []string{"widgets.example.com.yaml", "gadgets.example.com.yaml"} {
			data, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "crds", f))
			if err != nil {
				t.Fatal(err)
			}
			var crd apiextensionsv1.CustomResourceDefinition
			if err := yaml.Unmarshal(data, &crd); err != nil {
				t.Fatal(err)
			}
			if err := c.Create(context.Background(), &crd); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
		}
	}
	harness.Grant(t, cls, "example.com", "widgets", "gadgets")
}

func configMap(name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name}, Data: data}
}

func applyRule(t *testing.T, cl client.Client, y string) {
	t.Helper()
	var r v1alpha1.ResourceSyncRule
	if err := yaml.UnmarshalStrict([]byte(y), &r); err != nil {
		t.Fatal(err)
	}
	if err := cl.Create(context.Background(), &r); err != nil {
		t.Fatal(err)
	}
}

func listCM(t *testing.T, cl client.Client) map[string]corev1.ConfigMap {
	t.Helper()
	var l corev1.ConfigMapList
	if err := cl.List(context.Background(), &l, client.InNamespace(testNS)); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	out := map[string]corev1.ConfigMap{}
	for _, c := range l.Items {
		if c.Name != "kube-root-ca.crt" {
			out[c.Name] = c
		}
	}
	return out
}

// TestEngine checks the engine's promises on three clusters: locally made objects are
// never touched, an unreachable origin never causes a delete, nothing ping-pongs, a
// delete at the origin propagates, and a custom resource syncs with a GVK rewrite and a
// template override.
func TestEngine(t *testing.T) {
	testbed.SkipIfNoAssets(t)
	cl := harness.FormGroup(t, bed, "first", "second", "third")
	first, second, third := cl["first"], cl["second"], cl["third"]
	harness.Grant(t, cl, "", "configmaps")

	// A ConfigMap made by hand on second, in the way of a copy.
	if err := second.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNS}}); err != nil {
		t.Fatal(err)
	}
	if err := second.Create(context.Background(), configMap("made-here", map[string]string{"owner": "second"})); err != nil {
		t.Fatal(err)
	}
	if err := first.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNS}}); err != nil {
		t.Fatal(err)
	}
	if err := first.Create(context.Background(), configMap("made-here", map[string]string{"owner": "first"})); err != nil {
		t.Fatal(err)
	}
	applyRule(t, first, `
apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata:
  name: configmaps
spec:
  groupVersionKind: {version: v1, kind: ConfigMap}
  createNamespaces: true
  rules:
  - match:
    - namespaces: [`+testNS+`]
      labels:
      - matchExpressions: [{key: skip, operator: DoesNotExist}]
`)

	t.Run("a locally made object is never touched; the rule reports the conflict", func(t *testing.T) {
		// first and second both have made-here: third's copy follows the one with the
		// lower cluster ID.
		lower := lowestID(t, "first", "second")
		harness.Eventually(t, 30*time.Second, "third gets the copy of "+lower+", in a namespace the rule created", func() error {
			got := listCM(t, third)
			if got["made-here"].Data["owner"] != lower {
				return fmt.Errorf("third has %v", got)
			}
			var ns corev1.Namespace
			if err := third.Get(context.Background(), client.ObjectKey{Name: testNS}, &ns); err != nil {
				return err
			}
			if ns.Annotations[v1alpha1.CreatedByAnnotation] != "configmaps" {
				return fmt.Errorf("namespace annotations %v", ns.Annotations)
			}
			return nil
		})
		harness.Eventually(t, 30*time.Second, "second reports the conflict", func() error {
			r, err := rule(second, "configmaps")
			if err != nil {
				return err
			}
			for _, c := range r.Status.Conditions {
				if c.Type == v1alpha1.RuleConditionConflict && c.Status == metav1.ConditionTrue && strings.Contains(c.Message, testNS+"/made-here") {
					return nil
				}
			}
			return fmt.Errorf("conditions %+v", r.Status.Conditions)
		})
		if got := listCM(t, second)["made-here"]; got.Data["owner"] != "second" || got.Annotations[v1alpha1.OwnershipAnnotation] != "" {
			t.Fatalf("the locally made ConfigMap on second was touched: %+v", got)
		}
	})

	t.Run("an unreachable origin never causes a delete", func(t *testing.T) {
		// The test writes to first directly: cutting it off only cuts the peers off.
		firstDirect, err := client.New(bed.Cluster("first").DirectConfig(), client.Options{Scheme: first.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = bed.Cluster("first").Heal() })
		for i := 0; i < 200; i++ {
			if err := firstDirect.Create(context.Background(), configMap(fmt.Sprintf("burst-%03d", i), map[string]string{"i": fmt.Sprint(i)})); err != nil {
				t.Fatal(err)
			}
			if i == 100 {
				if err := bed.Cluster("first").Cut(); err != nil {
					t.Fatal(err)
				}
			}
		}
		// While first is cut off, whatever reached second and third stays.
		before := map[string]map[string]corev1.ConfigMap{"second": listCM(t, second), "third": listCM(t, third)}
		harness.Stays(t, 5*time.Second, "copies stay while their origin is unreachable", func() error {
			for name, c := range map[string]client.Client{"second": second, "third": third} {
				now := listCM(t, c)
				for k, cm := range before[name] {
					if now[k].UID != cm.UID {
						return fmt.Errorf("%s lost or replaced %s", name, k)
					}
				}
			}
			return nil
		})
		if err := bed.Cluster("first").Heal(); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, 60*time.Second, "the burst converges on second and third", func() error {
			for name, c := range map[string]client.Client{"second": second, "third": third} {
				n := 0
				for k := range listCM(t, c) {
					if strings.HasPrefix(k, "burst-") {
						n++
					}
				}
				if n != 200 {
					return fmt.Errorf("%s has %d of 200", name, n)
				}
			}
			return nil
		})
		for name, c := range map[string]client.Client{"second": second, "third": third} {
			now := listCM(t, c)
			for k, cm := range before[name] {
				if now[k].UID != cm.UID {
					t.Errorf("%s replaced %s", name, k)
				}
			}
		}
	})

	t.Run("no ping-pong in steady state", func(t *testing.T) {
		snapshot := func() map[string]string {
			out := map[string]string{}
			for name, c := range cl {
				for k, cm := range listCM(t, c) {
					out[name+"/"+k] = cm.ResourceVersion
				}
			}
			return out
		}
		a := snapshot()
		time.Sleep(15 * time.Second)
		b := snapshot()
		for k, rv := range a {
			if b[k] != rv {
				t.Errorf("%s was written in steady state (%s -> %s)", k, rv, b[k])
			}
		}
	})

	t.Run("a source's object count is what it offers, not its copies of members' objects", func(t *testing.T) {
		// third's status of the rule: first and second each offer their own matching
		// ConfigMaps; second also holds copies of first's, which its informer on third
		// does not even receive (label selector) and which are not counted.
		offered := map[string]int32{}
		for _, name := range []string{"first", "second"} {
			for _, cm := range listCM(t, cl[name]) {
				if _, copied := cm.Annotations[v1alpha1.OwnershipAnnotation]; !copied && cm.Labels["skip"] == "" {
					offered[name]++
				}
			}
		}
		if offered["first"] == 0 || offered["second"] == 0 {
			t.Fatalf("offered %v: the test needs originals on both", offered)
		}
		harness.Eventually(t, 30*time.Second, "third's source counts", func() error {
			r, err := rule(third, "configmaps")
			if err != nil {
				return err
			}
			got := map[string]int32{}
			for _, src := range r.Status.Sources {
				got[src.Cluster] = src.Objects
			}
			if got["first"] != offered["first"] || got["second"] != offered["second"] {
				return fmt.Errorf("source objects %v, want %v", got, offered)
			}
			return nil
		})
	})

	t.Run("a delete at the origin propagates; a copy that stops matching is removed", func(t *testing.T) {
		if err := first.Delete(context.Background(), configMap("burst-000", nil)); err != nil {
			t.Fatal(err)
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "burst-001"}}
		if err := harness.Update(context.Background(), first, cm, func() { cm.Labels = map[string]string{"skip": "yes"} }); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, 30*time.Second, "copies of burst-000 and burst-001 are gone", func() error {
			for name, c := range map[string]client.Client{"second": second, "third": third} {
				got := listCM(t, c)
				for _, k := range []string{"burst-000", "burst-001"} {
					if _, ok := got[k]; ok {
						return fmt.Errorf("%s still has %s", name, k)
					}
				}
			}
			return nil
		})
	})

	t.Run("a custom resource syncs with a GVK rewrite and a template override", func(t *testing.T) {
		testCRDs(t, cl)
		applyRule(t, first, `
apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata:
  name: widgets-as-gadgets
spec:
  groupVersionKind: {group: example.com, version: v1, kind: Widget}
  createNamespaces: true
  rules:
  - match:
    - namespaces: [`+testNS+`]
    mutations:
      groupVersionKind: {group: example.com, version: v1, kind: Gadget}
      labels:
        add: {synced: "true"}
      overrides:
      - type: replace
        path: spec.origin
        value: '{{ .Cluster.metadata.name }}'
      - type: replace
        path: spec.size
        value: '{{ .Object.spec.size }}'
        parseValue: true
`)
		widget := &unstructured.Unstructured{}
		widget.SetGroupVersionKind(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"})
		widget.SetNamespace(testNS)
		widget.SetName("w1")
		widget.Object["spec"] = map[string]any{"size": int64(3), "color": "blue"}
		if err := third.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNS}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		if err := third.Create(context.Background(), widget); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"first", "second"} {
			c := cl[name]
			harness.Eventually(t, 60*time.Second, "a Gadget on "+name, func() error {
				g := &unstructured.Unstructured{}
				g.SetGroupVersionKind(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Gadget"})
				if err := c.Get(context.Background(), client.ObjectKey{Namespace: testNS, Name: "w1"}, g); err != nil {
					return err
				}
				spec, _ := g.Object["spec"].(map[string]any)
				if spec["origin"] != "third" || spec["size"] != int64(3) || spec["color"] != "blue" || g.GetLabels()["synced"] != "true" {
					return fmt.Errorf("gadget %v labels %v", spec, g.GetLabels())
				}
				if g.GetAnnotations()[v1alpha1.OriginalGVKAnnotation] == "" {
					return fmt.Errorf("no %s annotation: %v", v1alpha1.OriginalGVKAnnotation, g.GetAnnotations())
				}
				return nil
			})
		}
	})
	t.Run("status flows back from a copy to the original when opted in", func(t *testing.T) {
		applyRule(t, first, `
apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata:
  name: widgets-status
spec:
  groupVersionKind: {group: example.com, version: v1, kind: Widget}
  createNamespaces: true
  syncStatusBack: true
  rules:
  - match:
    - namespaces: [sync-status]
`)
		if err := first.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "sync-status"}}); err != nil {
			t.Fatal(err)
		}
		gvk := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
		w := &unstructured.Unstructured{}
		w.SetGroupVersionKind(gvk)
		w.SetNamespace("sync-status")
		w.SetName("w2")
		w.Object["spec"] = map[string]any{"size": int64(1)}
		if err := first.Create(context.Background(), w); err != nil {
			t.Fatal(err)
		}
		get := func(c client.Client) (*unstructured.Unstructured, error) {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(gvk)
			return u, c.Get(context.Background(), client.ObjectKey{Namespace: "sync-status", Name: "w2"}, u)
		}
		var onSecond *unstructured.Unstructured
		harness.Eventually(t, 30*time.Second, "the copy on second", func() error {
			var err error
			onSecond, err = get(second)
			return err
		})
		// A controller on second reports on its copy; the registry's controller on second
		// writes the copy too, so a conflict is read again and retried.
		if err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
			cur, err := get(second)
			if err != nil {
				return err
			}
			cur.Object["status"] = map[string]any{"phase": "Running", "observedGeneration": cur.GetGeneration()}
			if err := second.Status().Update(context.Background(), cur); err != nil {
				return err
			}
			onSecond = cur
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, 30*time.Second, "the status reaches the original on first", func() error {
			o, err := get(first)
			if err != nil {
				return err
			}
			st, _ := o.Object["status"].(map[string]any)
			a := o.GetAnnotations()
			if st["phase"] != "Running" || a[v1alpha1.OriginGenerationAnnotation] != fmt.Sprint(o.GetGeneration()) || a[v1alpha1.CopyGenerationAnnotation] != fmt.Sprint(onSecond.GetGeneration()) {
				return fmt.Errorf("status %v annotations %v", st, a)
			}
			return nil
		})
		// ... and not onward: the copies keep their own status.
		harness.Stays(t, 3*time.Second, "third's copy keeps its own (empty) status", func() error {
			o, err := get(third)
			if err != nil {
				return err
			}
			if _, ok := o.Object["status"]; ok {
				return fmt.Errorf("third's copy got a status: %v", o.Object["status"])
			}
			return nil
		})
	})

	t.Run("copies carry their origin's status with mutations.syncStatus", func(t *testing.T) {
		applyRule(t, first, `
apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata:
  name: widgets-status-forward
spec:
  groupVersionKind: {group: example.com, version: v1, kind: Widget}
  createNamespaces: true
  rules:
  - match:
    - namespaces: [status-forward]
    mutations:
      syncStatus: true
`)
		if err := third.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "status-forward"}}); err != nil {
			t.Fatal(err)
		}
		gvk := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
		get := func(c client.Client) (*unstructured.Unstructured, error) {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(gvk)
			return u, c.Get(context.Background(), client.ObjectKey{Namespace: "status-forward", Name: "w3"}, u)
		}
		w := &unstructured.Unstructured{}
		w.SetGroupVersionKind(gvk)
		w.SetNamespace("status-forward")
		w.SetName("w3")
		w.Object["spec"] = map[string]any{"size": int64(2)}
		if err := third.Create(context.Background(), w); err != nil {
			t.Fatal(err)
		}
		// The origin's controller on third reports; the status subresource is written
		// apart from the object, as a real controller does.
		setPhase := func(phase string) {
			t.Helper()
			harness.Eventually(t, 10*time.Second, "status "+phase+" on the original", func() error {
				o, err := get(third)
				if err != nil {
					return err
				}
				o.Object["status"] = map[string]any{"phase": phase}
				return third.Status().Update(context.Background(), o)
			})
		}
		copiesShow := func(phase string) {
			t.Helper()
			for _, name := range []string{"first", "second"} {
				c := cl[name]
				harness.Eventually(t, 30*time.Second, "status "+phase+" on the copy on "+name, func() error {
					o, err := get(c)
					if err != nil {
						return err
					}
					st, _ := o.Object["status"].(map[string]any)
					if st["phase"] != phase {
						return fmt.Errorf("status %v", o.Object["status"])
					}
					if o.GetAnnotations()[v1alpha1.OwnershipAnnotation] == "" {
						return fmt.Errorf("not a copy: annotations %v", o.GetAnnotations())
					}
					return nil
				})
			}
		}
		setPhase("Pending")
		copiesShow("Pending")
		setPhase("Running")
		copiesShow("Running")
		// ... and the original keeps its own: nothing flows back without syncStatusBack.
		harness.Stays(t, 3*time.Second, "the original keeps the status its controller wrote", func() error {
			o, err := get(third)
			if err != nil {
				return err
			}
			if st, _ := o.Object["status"].(map[string]any); st["phase"] != "Running" {
				return fmt.Errorf("the original's status is %v", o.Object["status"])
			}
			return nil
		})
	})

	t.Run("invalid rules say why and write nothing", func(t *testing.T) {
		applyRule(t, first, `
apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata:
  name: bad-selector-and-template
  annotations: {cluster-registry.k8s.cisco.com/resource-sync-disabled: "true"}
spec:
  groupVersionKind: {version: v1, kind: ConfigMap}
  rules:
  - match:
    - labels:
      - matchExpressions: [{key: app, operator: Maybe, values: [x]}]
    mutations:
      overrides:
      - {type: replace, path: data.x, value: "{{ .Object.metadata.name "}
`)
		applyRule(t, first, `
apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata:
  name: unknown-kind
  annotations: {cluster-registry.k8s.cisco.com/resource-sync-disabled: "true"}
spec:
  groupVersionKind: {group: example.com, version: v1, kind: NoSuchKind}
  rules: [{}]
`)
		for name, want := range map[string][]string{
			"bad-selector-and-template": {v1alpha1.ReasonInvalidRule, "spec.rules[0].match[0].labels[0]", "spec.rules[0].mutations.overrides[0]"},
			"unknown-kind":              {v1alpha1.ReasonUnknownKind, "NoSuchKind"},
		} {
			harness.Eventually(t, 30*time.Second, name+" reports Ready=False", func() error {
				r, err := rule(first, name)
				if err != nil {
					return err
				}
				for _, c := range r.Status.Conditions {
					if c.Type != v1alpha1.RuleConditionReady {
						continue
					}
					if c.Status != metav1.ConditionFalse || c.Reason != want[0] {
						return fmt.Errorf("Ready %s/%s: %s", c.Status, c.Reason, c.Message)
					}
					for _, w := range want[1:] {
						if !strings.Contains(c.Message, w) {
							return fmt.Errorf("message %q lacks %q", c.Message, w)
						}
					}
					return nil
				}
				return fmt.Errorf("no Ready condition: %+v", r.Status)
			})
		}
	})

	t.Run("a kind the peers may not read is reported per source", func(t *testing.T) {
		applyRule(t, first, `
apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata:
  name: services-not-granted
  annotations: {cluster-registry.k8s.cisco.com/resource-sync-disabled: "true"}
spec:
  groupVersionKind: {version: v1, kind: Service}
  rules:
  - match:
    - namespaces: [default]
`)
		harness.Eventually(t, 30*time.Second, "the sources are Failing with forbidden and the rule Degraded", func() error {
			r, err := rule(first, "services-not-granted")
			if err != nil {
				return err
			}
			if len(r.Status.Sources) != 2 {
				return fmt.Errorf("sources %+v", r.Status.Sources)
			}
			for _, src := range r.Status.Sources {
				if src.State != v1alpha1.SourceFailing || !strings.Contains(src.Message, "forbidden") {
					return fmt.Errorf("source %+v", src)
				}
			}
			if !metaTrue(r.Status.Conditions, v1alpha1.RuleConditionDegraded) {
				return fmt.Errorf("not Degraded: %+v", r.Status.Conditions)
			}
			return nil
		})
	})

	t.Run("deletionPolicy Delete removes the copies with the rule", func(t *testing.T) {
		applyRule(t, first, `
apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata:
  name: configmaps-delete
spec:
  groupVersionKind: {version: v1, kind: ConfigMap}
  deletionPolicy: Delete
  createNamespaces: true
  rules:
  - match:
    - namespaces: [sync-delete]
`)
		if err := first.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "sync-delete"}}); err != nil {
			t.Fatal(err)
		}
		orig := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "sync-delete", Name: "doomed"}, Data: map[string]string{"k": "v"}}
		if err := first.Create(context.Background(), orig); err != nil {
			t.Fatal(err)
		}
		get := func(c client.Client) error {
			return c.Get(context.Background(), client.ObjectKey{Namespace: "sync-delete", Name: "doomed"}, &corev1.ConfigMap{})
		}
		harness.Eventually(t, 30*time.Second, "copies on second and third", func() error {
			if err := get(second); err != nil {
				return err
			}
			return get(third)
		})
		r, err := rule(first, "configmaps-delete")
		if err != nil {
			t.Fatal(err)
		}
		if err := first.Delete(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		// A member whose view of a source is not synced yet waits up to handOverWait (a
		// minute) before it deletes a copy no other rule asks for: the bound plus margin.
		harness.Eventually(t, 90*time.Second, "the rule and its copies are gone everywhere but the original stays", func() error {
			for name, c := range map[string]client.Client{"second": second, "third": third} {
				if _, err := rule(c, "configmaps-delete"); !apierrors.IsNotFound(err) {
					return fmt.Errorf("rule on %s: %v", name, err)
				}
				if err := get(c); !apierrors.IsNotFound(err) {
					return fmt.Errorf("copy on %s: %v", name, err)
				}
			}
			if _, err := rule(first, "configmaps-delete"); !apierrors.IsNotFound(err) {
				return fmt.Errorf("rule on first: %v", err)
			}
			return get(first)
		})
	})
}
