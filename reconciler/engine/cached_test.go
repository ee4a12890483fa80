package engine

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner"
)

var deploymentGVK = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}

func cachedTestObject() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1",
		"kind":       "Deployment",
		"metadata": map[string]any{
			"name": "web", "namespace": "shop", "resourceVersion": "42", "uid": "u-1", "generation": int64(3),
			"labels":        map[string]any{"app": "web"},
			"annotations":   map[string]any{"team": "a", v1alpha1.OwnershipAnnotation: "uid-origin"},
			"managedFields": []any{map[string]any{"manager": "kubectl", "operation": "Apply"}},
		},
		"spec": map[string]any{
			"replicas": int64(2),
			"ratio":    1.5,
			"paused":   false,
			"nothing":  nil,
			"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "ports": []any{int64(80), int64(443)}}}}},
		},
		"status": map[string]any{"readyReplicas": int64(2)},
	}}
}

// TestCompactRoundTrip: what the informers keep decodes to the object as received, less
// managedFields, with integers still int64 (the dynamic client's decoding), and the
// transform is idempotent.
func TestCompactRoundTrip(t *testing.T) {
	in := cachedTestObject()
	want := in.DeepCopy()
	want.SetManagedFields(nil)

	compact := compactFor(deploymentGVK)
	out, err := compact(in)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := out.(*cachedObject)
	if !ok {
		t.Fatalf("compact returned %T, want *cachedObject", out)
	}
	if diff := cmp.Diff([]string{"shop", "web", "42"}, []string{c.namespace(), c.name(), c.resourceVersion()}); diff != "" {
		t.Errorf("key and resourceVersion (-want +got):\n%s", diff)
	}
	got, err := c.object(deploymentGVK)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want.Object, got.Object); diff != "" {
		t.Errorf("decoded object (-want +got):\n%s", diff)
	}
	again, err := compact(c)
	if err != nil || again != any(c) {
		t.Errorf("compact of a cachedObject = %v, %v; want the same object", again, err)
	}
	// Each decode is the caller's own object.
	got.SetName("changed")
	if other, _ := c.object(deploymentGVK); other.GetName() != "web" {
		t.Errorf("a decoded object shares state with the cache")
	}
	// The informer's store reads the key and the resourceVersion through meta.Accessor.
	key, err := toolscache.MetaNamespaceKeyFunc(c)
	if err != nil || key != "shop/web" {
		t.Errorf("store key = %q, %v; want shop/web", key, err)
	}
	if diff := cmp.Diff(c, asCached(toolscache.DeletedFinalStateUnknown{Key: key, Obj: c}), cmp.AllowUnexported(cachedObject{})); diff != "" {
		t.Errorf("asCached of a tombstone (-want +got):\n%s", diff)
	}
	if asCached("something else") != nil {
		t.Errorf("asCached of a string is not nil")
	}
}

// TestCompactRoundTripShapes: what compactFor leaves out of the JSON comes back exactly:
// a cluster-scoped object has no namespace, an object of another apiVersion than the
// informer's keeps its own, a minimal object stays minimal.
func TestCompactRoundTripShapes(t *testing.T) {
	for _, tc := range []struct {
		name string
		obj  map[string]any
	}{
		{name: "cluster-scoped", obj: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "n", "resourceVersion": "7", "uid": "u"}}},
		{name: "another apiVersion", obj: map[string]any{"apiVersion": "apps/v1beta1", "kind": "Deployment",
			"metadata": map[string]any{"name": "n", "namespace": "ns"}}},
		{name: "another kind", obj: map[string]any{"apiVersion": "apps/v1", "kind": "StatefulSet",
			"metadata": map[string]any{"name": "n", "namespace": "ns"}}},
		{name: "name only", obj: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "n"}}},
		{name: "numbers", obj: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "n", "generation": int64(9)},
			"spec":     map[string]any{"big": int64(1) << 53, "neg": int64(-3), "f": 0.25, "list": []any{int64(1), "x", nil, true}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := &unstructured.Unstructured{Object: tc.obj}
			want := in.DeepCopy()
			out, err := compactFor(deploymentGVK)(in)
			if err != nil {
				t.Fatal(err)
			}
			got, err := out.(*cachedObject).object(deploymentGVK)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want.Object, got.Object); diff != "" {
				t.Errorf("decoded object (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMetadataOnlyMatchesAsTheObject: for rules that do not select by content, matching
// the metadata-only decoding gives what matching the whole object gives.
func TestMetadataOnlyMatchesAsTheObject(t *testing.T) {
	objs := []*unstructured.Unstructured{cachedTestObject()}
	for _, mod := range []func(u *unstructured.Unstructured){
		func(u *unstructured.Unstructured) { u.SetLabels(nil) },
		func(u *unstructured.Unstructured) { u.SetAnnotations(nil) },
		func(u *unstructured.Unstructured) { u.SetNamespace("other") },
		func(u *unstructured.Unstructured) { u.SetName("api") },
		func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"app": "api", "tier": "db"}) },
		func(u *unstructured.Unstructured) { u.SetKind("StatefulSet") },
	} {
		u := cachedTestObject()
		mod(u)
		objs = append(objs, u)
	}
	specs := map[string][]v1alpha1.SyncRuleMatch{
		"everything":       nil,
		"by name":          {{ObjectKey: v1alpha1.ObjectKey{Name: "web"}}},
		"by namespace":     {{Namespaces: []string{"shop"}}},
		"by labels":        {{Labels: []metav1.LabelSelector{{MatchLabels: map[string]string{"app": "web"}}}}},
		"by annotations":   {{Annotations: []v1alpha1.AnnotationSelector{{MatchAnnotations: map[string]string{"team": "a"}}}}},
		"label expression": {{Labels: []metav1.LabelSelector{{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpDoesNotExist}}}}}},
	}
	for name, matches := range specs {
		rsr := &v1alpha1.ResourceSyncRule{
			ObjectMeta: metav1.ObjectMeta{Name: "r"},
			Spec: v1alpha1.ResourceSyncRuleSpec{GVK: v1alpha1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
				Rules: []v1alpha1.SyncRule{{Matches: matches}}},
		}
		r, err := planner.CompileRule(rsr)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if r.ReadsContent() {
			t.Fatalf("%s: ReadsContent is true for a rule without content selectors", name)
		}
		hits := 0
		for _, o := range objs {
			out, err := compactFor(deploymentGVK)(o.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			meta, err := out.(*cachedObject).metadataOnly(deploymentGVK)
			if err != nil {
				t.Fatal(err)
			}
			_, whole := r.Match(o)
			_, partial := r.Match(meta)
			if whole != partial {
				t.Errorf("%s: %s/%s %s: whole object matches %v, metadata only %v", name, o.GetNamespace(), o.GetName(), o.GetKind(), whole, partial)
			}
			if whole {
				hits++
			}
		}
		if hits == 0 || (name != "everything" && hits == len(objs)) {
			t.Errorf("%s: %d of %d objects match: the table does not tell matching apart", name, hits, len(objs))
		}
	}
	withContent := &v1alpha1.ResourceSyncRule{
		ObjectMeta: metav1.ObjectMeta{Name: "r"},
		Spec: v1alpha1.ResourceSyncRuleSpec{GVK: v1alpha1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
			Rules: []v1alpha1.SyncRule{{}, {Matches: []v1alpha1.SyncRuleMatch{{Content: []v1alpha1.ContentSelector{{Key: "spec.replicas", Value: intstr.FromInt32(2)}}}}}}},
	}
	r, err := planner.CompileRule(withContent)
	if err != nil {
		t.Fatal(err)
	}
	if !r.ReadsContent() {
		t.Errorf("ReadsContent is false for a rule with a content selector")
	}
}

// TestWatcherCountIsKeptUntilAnEvent: a watcher's match count is reused while the
// informer has had no events, and recomputed after one.
func TestWatcherCountIsKeptUntilAnEvent(t *testing.T) {
	inf := toolscache.NewSharedIndexInformer(&toolscache.ListWatch{}, &unstructured.Unstructured{}, 0, toolscache.Indexers{})
	w := &watcher{informer: inf}
	add := func(name string) {
		u := cachedTestObject()
		u.SetName(name)
		c, err := compactFor(deploymentGVK)(u)
		if err != nil {
			t.Fatal(err)
		}
		if err := inf.GetStore().Add(c); err != nil {
			t.Fatal(err)
		}
	}
	decodes := 0
	decode := func(c *cachedObject) (*unstructured.Unstructured, error) {
		decodes++
		return c.metadataOnly(deploymentGVK)
	}
	all := func(*unstructured.Unstructured) bool { return true }
	matcherA, matcherB := new(int), new(int)

	add("a")
	add("b")
	if n := w.count(matcherA, decode, all); n != 2 || decodes != 2 {
		t.Fatalf("first count = %d after %d decodes, want 2 after 2", n, decodes)
	}
	add("c") // without an event: the count is reused
	if n := w.count(matcherA, decode, all); n != 2 || decodes != 2 {
		t.Errorf("count without an event = %d after %d decodes, want the kept 2 after 2", n, decodes)
	}
	if n := w.count(matcherB, decode, all); n != 3 || decodes != 5 {
		t.Errorf("count for another matcher = %d after %d decodes, want 3 after 5", n, decodes)
	}
	w.changed()
	if n := w.count(matcherA, decode, all); n != 3 || decodes != 8 {
		t.Errorf("count after an event = %d after %d decodes, want 3 after 8", n, decodes)
	}
	if _, kept := w.counts[matcherB]; kept {
		t.Errorf("the stale count of another matcher is kept")
	}
}
