package views

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner"
)

var (
	deploymentGVK = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	cmGVK         = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
)

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

// cacheWays are the two ways an object comes into the cache: compacted from the
// unstructured object a dynamic client returns (compact), and read from the API server's
// JSON (decodeCached, as Client's informers do).
var cacheWays = map[string]func(*unstructured.Unstructured, schema.GroupVersionKind) (*Cached, error){
	"compact": compact,
	"decodeCached": func(u *unstructured.Unstructured, gvk schema.GroupVersionKind) (*Cached, error) {
		raw, err := u.MarshalJSON()
		if err != nil {
			return nil, err
		}
		return decodeCached(raw, gvk)
	},
}

// TestCompactRoundTrip: what the informers keep decodes to the object as received, less
// managedFields, with integers still int64 (the dynamic client's decoding), whichever
// way it came into the cache.
func TestCompactRoundTrip(t *testing.T) {
	for way, cache := range cacheWays {
		t.Run(way, func(t *testing.T) {
			in := cachedTestObject()
			want := in.DeepCopy()
			want.SetManagedFields(nil)

			c, err := cache(in, deploymentGVK)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"shop", "web", "42"}, []string{c.Namespace(), c.Name(), c.ResourceVersion()}); diff != "" {
				t.Errorf("key and resourceVersion (-want +got):\n%s", diff)
			}
			got, err := c.Object(deploymentGVK)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want.Object, got.Object); diff != "" {
				t.Errorf("decoded object (-want +got):\n%s", diff)
			}
			if strings.Contains(c.data, "managedFields") || strings.Contains(c.data, `"apiVersion"`) || strings.Contains(c.data, `"resourceVersion"`) {
				t.Errorf("the cache keeps what it restores or drops: %s", c.data)
			}
			// Each decode is the caller's own object.
			got.SetName("changed")
			if other, _ := c.Object(deploymentGVK); other.GetName() != "web" {
				t.Errorf("a decoded object shares state with the cache")
			}
			// The informer's store reads the key and the resourceVersion through meta.Accessor.
			key, err := toolscache.MetaNamespaceKeyFunc(c)
			if err != nil || key != "shop/web" {
				t.Errorf("store key = %q, %v; want shop/web", key, err)
			}
			if diff := cmp.Diff(c, asCached(toolscache.DeletedFinalStateUnknown{Key: key, Obj: c}), cmp.AllowUnexported(Cached{})); diff != "" {
				t.Errorf("asCached of a tombstone (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(c, c.DeepCopyObject(), cmp.AllowUnexported(Cached{})); diff != "" {
				t.Errorf("DeepCopyObject (-want +got):\n%s", diff)
			}
		})
	}
	if asCached("something else") != nil {
		t.Errorf("asCached of a string is not nil")
	}
}

// TestCompactRoundTripShapes: what the cache leaves out of the JSON comes back exactly:
// a cluster-scoped object has no namespace, an object of another apiVersion than the
// informer's keeps its own, a minimal object stays minimal, keys that JSON must escape
// stay what they were.
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
		{name: "keys to escape", obj: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata":  map[string]any{"name": "n", "quo\"te": "a", "new\nline": map[string]any{}, "ünï": []any{}},
			"tab\there": "x", "\\": "back", "<html>&": "esc"}},
		{name: "escaped values", obj: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "n\"\u00e9", "namespace": "ns\\", "resourceVersion": "1\n",
				"annotations": map[string]any{"a": "line\nbreak \"quoted\" \u2028"}}}},
	} {
		for way, cache := range cacheWays {
			t.Run(tc.name+"/"+way, func(t *testing.T) {
				in := &unstructured.Unstructured{Object: tc.obj}
				want := in.DeepCopy()
				c, err := cache(in.DeepCopy(), deploymentGVK)
				if err != nil {
					t.Fatal(err)
				}
				got, err := c.Object(deploymentGVK)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want.Object, got.Object); diff != "" {
					t.Errorf("decoded object (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// TestDecodeCachedRefuses: what is not an object of the kind is refused, not cached: a
// peer's API server is a stranger's, and what the cache keeps must decode later.
func TestDecodeCachedRefuses(t *testing.T) {
	for _, in := range []string{
		``,
		`[]`,
		`"a string"`,
		`{"metadata": "not an object"}`,
		`{"metadata": {"name": 7}}`,
		`{"metadata": {"name": "n", "resourceVersion": ["1"]}}`,
		`{"metadata": {"name": "n"}, "spec": {"a": tru}}`,
		`{"metadata": {"name": "n"}, "spec": {"a": 01}}`,
		`{"metadata": {"name": "n"}, "spec": {"a": "\x"}}`,
		`{"metadata": {"name": "n"}, "spec": {"a": 1}`,
		`{"metadata": {"name": "n"}} trailing`,
	} {
		if c, err := decodeCached([]byte(in), deploymentGVK); err == nil {
			t.Errorf("decodeCached(%s) = %+v, want an error", in, c)
		}
	}
}

// TestCachedCodec: the informers' client decodes objects, lists (with their list
// metadata), a watch's bookmarks (with the annotation that ends a watch-list's initial
// events) and Status bodies (errors), as the reflector and the REST client need them.
func TestCachedCodec(t *testing.T) {
	codec := cachedCodec{gvk: cmGVK}
	obj, _, err := codec.Decode([]byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"ns","resourceVersion":"5","labels":{"x":"y"}},"data":{"k":"v"}}`), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := obj.(*Cached)
	if !ok {
		t.Fatalf("an object decodes to %T", obj)
	}
	u, err := c.Object(cmGVK)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"kind": "ConfigMap", "apiVersion": "v1", "metadata": map[string]any{"name": "a", "namespace": "ns", "resourceVersion": "5", "labels": map[string]any{"x": "y"}}, "data": map[string]any{"k": "v"}}
	if diff := cmp.Diff(want, u.Object); diff != "" {
		t.Errorf("object (-want +got):\n%s", diff)
	}

	var l cachedList
	if _, _, err := codec.Decode([]byte(`{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"9","continue":"c1","remainingItemCount":3},"items":[{"metadata":{"name":"a","namespace":"ns"}},{"metadata":{"name":"b","namespace":"ns"}}]}`), nil, &l); err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, it := range l.Items {
		names = append(names, it.Namespace()+"/"+it.Name())
	}
	if diff := cmp.Diff([]any{"9", "c1", int64(3), []string{"ns/a", "ns/b"}}, []any{l.ResourceVersion, l.Continue, *l.RemainingItemCount, names}); diff != "" {
		t.Errorf("list (-want +got):\n%s", diff)
	}
	items, err := meta.ExtractListWithAlloc(&l)
	if err != nil || len(items) != 2 {
		t.Errorf("ExtractListWithAlloc = %d items, %v; want 2", len(items), err)
	}

	bm, _, err := codec.Decode([]byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"12","annotations":{"k8s.io/initial-events-end":"true"}}}`), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !initialEventsEnd(bm) {
		t.Error("a bookmark that ends the initial events does not say so")
	}
	if m, _ := meta.Accessor(bm); m.GetResourceVersion() != "12" {
		t.Errorf("the bookmark's resourceVersion = %q, want 12", m.GetResourceVersion())
	}
	if initialEventsEnd(c) {
		t.Error("an object says it ends the initial events")
	}

	st, _, err := codec.Decode([]byte(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old","reason":"Expired","code":410}`), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := apierrors.FromObject(st); !apierrors.IsResourceExpired(err) {
		t.Errorf("a Status decodes to %T, the error %v; want the Expired error", st, err)
	}
	// A Status body decodes as a Status whatever it was decoded into: the REST client
	// turns it into the API error.
	out, _, err := codec.Decode([]byte(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","code":403,"reason":"Forbidden"}`), nil, &l)
	if err != nil {
		t.Fatal(err)
	}
	if err := apierrors.FromObject(out); !apierrors.IsForbidden(err) {
		t.Errorf("a Status decoded into a list is %T, the error %v; want Forbidden", out, err)
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
			out, err := compact(o.DeepCopy(), deploymentGVK)
			if err != nil {
				t.Fatal(err)
			}
			meta, err := out.MetadataOnly(deploymentGVK)
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
		c, err := compact(u, deploymentGVK)
		if err != nil {
			t.Fatal(err)
		}
		if err := inf.GetStore().Add(c); err != nil {
			t.Fatal(err)
		}
	}
	decodes := 0
	decode := func(c *Cached) (*unstructured.Unstructured, error) {
		decodes++
		return c.MetadataOnly(deploymentGVK)
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

// FuzzDecodeCached: whatever decodeCached keeps decodes to what the API server's JSON
// decodes to (less managedFields), and what it refuses utiljson refuses or is not an
// object with a metadata object.
func FuzzDecodeCached(f *testing.F) {
	for _, s := range []string{
		`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"ns","resourceVersion":"3","managedFields":[{}],"labels":{"x":"y"}},"data":{"k":"v"}}`,
		`{"kind":"Other","apiVersion":"v2","metadata":{"name":"a\"b"},"x":[1,2.5,null]}`,
		`{"metadata":{"resourceVersion":"9","annotations":{"k8s.io/initial-events-end":"true"}}}`,
		`{"metadata":{}}`, `{}`, `{"metadata":null}`, "{\"metadata\":{\"name\":\"\xff\"}}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		want := map[string]any{}
		if err := utiljson.Unmarshal(data, &want); err != nil {
			if _, err := decodeCached(data, cmGVK); err == nil {
				t.Fatalf("decodeCached(%q) kept what utiljson refuses", data)
			}
			return
		}
		c, err := decodeCached(data, cmGVK)
		if err != nil {
			return // not an object of the shape (a metadata object, string keys)
		}
		got, err := c.Object(cmGVK)
		if err != nil {
			t.Fatalf("decodeCached(%q) kept what does not decode: %v", data, err)
		}
		if md, ok := want["metadata"].(map[string]any); ok {
			delete(md, "managedFields")
			for _, k := range []string{"name", "namespace", "resourceVersion"} {
				if md[k] == "" {
					delete(md, k) // restored only when set
				}
			}
		}
		for k, v := range map[string]string{"apiVersion": "v1", "kind": "ConfigMap"} {
			if _, ok := want[k]; !ok {
				want[k] = v // restored from the informer's kind
			}
		}
		if diff := cmp.Diff(want, got.Object); diff != "" {
			t.Fatalf("decodeCached(%q) (-utiljson +cached):\n%s", data, diff)
		}
	})
}

// BenchmarkCacheIn is what an object of the bench's shape costs coming into the cache
// (as the dynamic client did it: decoded into an unstructured object and compacted; as
// the informers do it: decodeCached), its watch event's envelope (the standard
// serializer, eventCodec), and reading it out of the cache (object).
func BenchmarkCacheIn(b *testing.B) {
	data := []byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"lat-000123","namespace":"bench","uid":"0f3c7a3e-5a8e-4c0a-9b0e-1b2c3d4e5f60","resourceVersion":"123456","creationTimestamp":"2026-11-26T09:00:00Z","labels":{"bench.kubectl-registry.io/sync":"true"},"managedFields":[{"manager":"registry-bench","operation":"Update","apiVersion":"v1","time":"2026-11-26T09:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:data":{".":{},"f:payload":{},"f:v":{}},"f:metadata":{"f:labels":{".":{},"f:bench.kubectl-registry.io/sync":{}}}}}]},"data":{"payload":"bench","v":"1764147600000000000"}}`)
	b.Run("unstructured+compact", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			o, _, err := unstructured.UnstructuredJSONScheme.Decode(data, nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := compact(o.(*unstructured.Unstructured), cmGVK); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decodeCached", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeCached(data, cmGVK); err != nil {
				b.Fatal(err)
			}
		}
	})
	event := []byte(`{"type":"ADDED","object":` + string(data) + `}`)
	for name, codec := range map[string]runtime.Decoder{"envelope/standard": eventSerializer, "envelope/eventCodec": eventCodec{}} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var ev metav1.WatchEvent
				if _, _, err := codec.Decode(event, nil, &ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	c, err := decodeCached(data, cmGVK)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("object", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Object(cmGVK); err != nil {
				b.Fatal(err)
			}
		}
	})

}

// TestEventCodec: a watch event's envelope decodes to its type and its object's bytes,
// as the standard serializer decodes it, and a broken one is an error.
func TestEventCodec(t *testing.T) {
	for _, in := range []string{
		`{"type":"ADDED","object":{"kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"v \"q\""}}}`,
		`{"object":{"metadata":{"resourceVersion":"3"}},"type":"BOOKMARK","extra":[1,2]}`,
		`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","code":410}}`,
	} {
		var want, got metav1.WatchEvent
		if _, _, err := eventSerializer.Decode([]byte(in), nil, &want); err != nil {
			t.Fatal(err)
		}
		if _, _, err := (eventCodec{}).Decode([]byte(in), nil, &got); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-standard +eventCodec):\n%s", in, diff)
		}
	}
	for _, in := range []string{``, `[]`, `{"type":"ADDED","object":{"a":`, `{"type":"ADDED" "object":{}}`} {
		var ev metav1.WatchEvent
		if _, _, err := (eventCodec{}).Decode([]byte(in), nil, &ev); err == nil {
			t.Errorf("%q decodes to %+v, want an error", in, ev)
		}
	}
}

// TestClusterClientSource: the informers of a real cluster list and watch at the
// resource's path with the cluster's own HTTP client (a peer's dials only what this
// cluster allows: one is never made from the config), those of a fake one through its
// dynamic client.
func TestClusterClientSource(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	hc := &http.Client{}
	deployments := &meta.RESTMapping{Resource: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, Scope: meta.RESTScopeNamespace}
	nodes := &meta.RESTMapping{Resource: schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, Scope: meta.RESTScopeRoot}
	for _, tc := range []struct {
		name      string
		client    Client
		mapping   *meta.RESTMapping
		namespace string
		wantPath  []string // a restSource's
		wantDyn   bool
		wantErr   bool
	}{
		{name: "namespaced", client: Client{Config: cfg, HTTPClient: hc}, mapping: deployments, namespace: "shop", wantPath: []string{"apis", "apps", "v1", "namespaces", "shop", "deployments"}},
		{name: "all namespaces", client: Client{Config: cfg, HTTPClient: hc}, mapping: deployments, wantPath: []string{"apis", "apps", "v1", "deployments"}},
		{name: "cluster-scoped ignores the namespace", client: Client{Config: cfg, HTTPClient: hc}, mapping: nodes, namespace: "shop", wantPath: []string{"api", "v1", "nodes"}},
		{name: "a config without its HTTP client", client: Client{Config: cfg}, mapping: nodes, wantErr: true},
		{name: "nothing", mapping: nodes, wantErr: true},
		{name: "a fake cluster", client: Client{Dynamic: dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())}, mapping: deployments, namespace: "shop", wantDyn: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, err := tc.client.source(deploymentGVK, tc.mapping, tc.namespace)
			if (err != nil) != tc.wantErr {
				t.Fatalf("source: %v, want an error %v", err, tc.wantErr)
			}
			switch s := src.(type) {
			case *restSource:
				if diff := cmp.Diff(tc.wantPath, s.path); diff != "" {
					t.Errorf("path (-want +got):\n%s", diff)
				}
			case *dynamicSource:
				if !tc.wantDyn {
					t.Errorf("a dynamic source for a real cluster")
				}
			case nil:
				if !tc.wantErr {
					t.Error("no source")
				}
			}
		})
	}
}

// TestMetadataOnlyMapsEventsAsTheObject: a peer's event is mapped to local objects from
// the metadata-only decoding when no rule of its kind matches by content (onEvent): the
// targets (planner.TargetOf, with rewrites of name and namespace) and whether the object
// is a membership object (a Secret's type) are what the whole object gives. Raw JSON from
// a stranger's API server: a "type" that is not a string, and keys that differ from
// metadata only in case, do not change the answer.
func TestMetadataOnlyMapsEventsAsTheObject(t *testing.T) {
	secretGVK := schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	raws := map[string]string{
		"opaque Secret":              `{"apiVersion":"v1","kind":"Secret","metadata":{"namespace":"shop","name":"db","labels":{"app":"web"}},"type":"Opaque","data":{"k":"dg=="}}`,
		"membership Secret":          `{"apiVersion":"v1","kind":"Secret","metadata":{"namespace":"shop","name":"db","labels":{"app":"web"}},"type":"` + string(v1alpha1.SecretTypeClusterRegistry) + `"}`,
		"Secret without a type":      `{"apiVersion":"v1","kind":"Secret","metadata":{"namespace":"shop","name":"db","labels":{"app":"web"}}}`,
		"a type that is an object":   `{"apiVersion":"v1","kind":"Secret","metadata":{"namespace":"shop","name":"db","labels":{"app":"web"}},"type":{"x":1}}`,
		"a copy of this cluster":     `{"apiVersion":"v1","kind":"Secret","metadata":{"namespace":"shop","name":"db","labels":{"app":"web"},"annotations":{"` + v1alpha1.OwnershipAnnotation + `":"uid-local"}},"type":"Opaque"}`,
		"Metadata in another case":   `{"apiVersion":"v1","kind":"Secret","metadata":{"namespace":"shop","name":"db","labels":{"app":"web"}},"Metadata":{"labels":{"app":"db"}},"Type":"` + string(v1alpha1.SecretTypeClusterRegistry) + `"}`,
		"labels of another app":      `{"apiVersion":"v1","kind":"Secret","metadata":{"namespace":"shop","name":"db","labels":{"app":"db"}},"type":"Opaque"}`,
		"another namespace and name": `{"apiVersion":"v1","kind":"Secret","metadata":{"namespace":"other","name":"api","labels":{"app":"web"}},"type":"Opaque"}`,
	}
	specs := map[string]v1alpha1.SyncRule{
		"everything":        {},
		"by labels":         {Matches: []v1alpha1.SyncRuleMatch{{Labels: []metav1.LabelSelector{{MatchLabels: map[string]string{"app": "web"}}}}}},
		"renamed and moved": {Matches: []v1alpha1.SyncRuleMatch{{Namespaces: []string{"shop"}}}, Mutations: v1alpha1.Mutations{Name: &v1alpha1.NameMutations{AddSuffix: "-copy"}, Namespace: &v1alpha1.NameMutations{AddPrefix: "moved-"}}},
	}
	for name, sr := range specs {
		rsr := &v1alpha1.ResourceSyncRule{ObjectMeta: metav1.ObjectMeta{Name: "r"},
			Spec: v1alpha1.ResourceSyncRuleSpec{GVK: v1alpha1.GroupVersionKind{Version: "v1", Kind: "Secret"}, Rules: []v1alpha1.SyncRule{sr}}}
		r, err := planner.CompileRule(rsr)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if r.ReadsContent() {
			t.Fatalf("%s: ReadsContent is true for a rule without content selectors", name)
		}
		targets := 0
		for what, raw := range raws {
			c, err := decodeCached([]byte(raw), secretGVK)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			whole, err := c.Object(secretGVK)
			if err != nil {
				t.Fatal(err)
			}
			meta, err := c.MetadataOnly(secretGVK)
			if err != nil {
				t.Fatalf("%s: metadataOnly: %v", what, err)
			}
			if w, m := planner.MembershipObject(whole), planner.MembershipObject(meta); w != m {
				t.Errorf("%s: MembershipObject of the whole object %v, of its metadata %v", what, w, m)
			}
			wt, wok := planner.TargetOf(r, "uid-local", whole)
			mt, mok := planner.TargetOf(r, "uid-local", meta)
			if diff := cmp.Diff(fmt.Sprint(wt, wok), fmt.Sprint(mt, mok)); diff != "" {
				t.Errorf("%s, rule %s: the target (-whole +metadata only):\n%s", what, name, diff)
			}
			if wok {
				targets++
			}
		}
		if targets == 0 || targets == len(raws) {
			t.Errorf("rule %s: %d of %d objects have a target: the table does not tell them apart", name, targets, len(raws))
		}
	}
}
