package views

import (
	"encoding/json"
	"fmt"
	"strings"

	jsoniter "github.com/json-iterator/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	toolscache "k8s.io/client-go/tools/cache"
)

// Cached is how the engine's informers keep an object: its namespace, name and
// resourceVersion, and the rest as the JSON the API server sent (without managedFields),
// all in one string. An unstructured object costs about four times its JSON in maps and
// boxed strings; the engine caches every synced object of every member, so the cache
// holds bytes and decodes an object when it is read (a lookup, an event), which costs
// microseconds against a reconcile's milliseconds.
type Cached struct {
	// data is namespace, name, resourceVersion and JSON, concatenated; the ends are the
	// offsets of the first three.
	data                  string
	nsEnd, nameEnd, rvEnd uint32
	// annotations are those of a watch's bookmark (an object without a name), which
	// the informer reads through GetObjectMeta; nil for every other object, whose
	// annotations are in its JSON.
	annotations map[string]string
}

// GetObjectKind makes a Cached a runtime.Object, as the informers' lists and watches
// return them (Client). A Cached is never changed once made.
func (c *Cached) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject returns a copy of c, which shares its data: a Cached is never changed.
func (c *Cached) DeepCopyObject() runtime.Object {
	out := *c
	return &out
}

// Namespace is the object's namespace. It shares the cached version's memory, as Name and
// ResourceVersion do: a caller that keeps one beyond the object (in a queue, a history)
// keeps a copy (strings.Clone), or the whole version stays in memory.
func (c *Cached) Namespace() string { return c.data[:c.nsEnd] }

// Name is the object's name; see Namespace.
func (c *Cached) Name() string { return c.data[c.nsEnd:c.nameEnd] }

// ResourceVersion is the object's resourceVersion; see Namespace.
func (c *Cached) ResourceVersion() string { return c.data[c.nameEnd:c.rvEnd] }

func (c *Cached) json() []byte { return []byte(c.data[c.rvEnd:]) }

// GetObjectMeta makes a Cached readable by meta.Accessor, which the informer's
// store uses for the key and the resourceVersion. The strings are copies: the store keeps
// a key (the name itself for a cluster-scoped object) for as long as the object exists,
// and a substring would keep the version it was made from.
func (c *Cached) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: strings.Clone(c.Namespace()), Name: strings.Clone(c.Name()), ResourceVersion: strings.Clone(c.ResourceVersion()), Annotations: c.annotations}
}

// compact returns the Cached of u, of kind gvk. What the Cached restores on
// decoding is left out of the JSON: apiVersion and kind (when they are gvk's, as the
// dynamic client returns them), and metadata's namespace, name and resourceVersion. u
// is changed.
func compact(u *unstructured.Unstructured, gvk schema.GroupVersionKind) (*Cached, error) {
	ns, name, rv := u.GetNamespace(), u.GetName(), u.GetResourceVersion()
	anns := u.GetAnnotations()
	u.SetManagedFields(nil)
	if u.GetAPIVersion() == gvk.GroupVersion().String() && u.GetKind() == gvk.Kind {
		delete(u.Object, "apiVersion")
		delete(u.Object, "kind")
	}
	if md, ok := u.Object["metadata"].(map[string]any); ok {
		delete(md, "namespace")
		delete(md, "name")
		delete(md, "resourceVersion")
	}
	raw, err := json.Marshal(u.Object)
	if err != nil {
		return nil, fmt.Errorf("caching %s %s/%s: %w", gvk.Kind, ns, name, err)
	}
	c := newCachedObject(ns, name, rv, raw)
	if name == "" {
		c.annotations = anns // a bookmark (decodeCachedItem)
	}
	return c, nil
}

// Object decodes the cached object of kind gvk: a new unstructured object each time,
// which the caller owns. It decodes as the dynamic client does (integers stay int64).
// A Cached is the writer's Answer (writer.Answer): the API server's answer to a write,
// decoded as the informers decode objects.
func (c *Cached) Object(gvk schema.GroupVersionKind) (*unstructured.Unstructured, error) {
	m := map[string]any{}
	if err := utiljson.Unmarshal(c.json(), &m); err != nil {
		return nil, fmt.Errorf("decoding the cached %s %s/%s: %w", gvk.Kind, c.Namespace(), c.Name(), err)
	}
	u := &unstructured.Unstructured{Object: m}
	c.restore(u, gvk)
	return u, nil
}

// restore puts back what compact left out of the JSON.
func (c *Cached) restore(u *unstructured.Unstructured, gvk schema.GroupVersionKind) {
	if _, ok := u.Object["apiVersion"]; !ok {
		u.SetAPIVersion(gvk.GroupVersion().String())
	}
	if _, ok := u.Object["kind"]; !ok {
		u.SetKind(gvk.Kind)
	}
	for _, f := range []struct {
		v   string
		set func(string)
	}{{c.Namespace(), u.SetNamespace}, {c.Name(), u.SetName}, {c.ResourceVersion(), u.SetResourceVersion}} {
		if f.v != "" {
			f.set(strings.Clone(f.v))
		}
	}
}

// cachedJSON decodes parts of cached objects into structs (MetadataOnly): faster than
// encoding/json, and case-sensitive, as the decoding of the whole object into a map is (a
// "Metadata" key is not metadata).
var cachedJSON = jsoniter.Config{CaseSensitive: true}.Froze()

// MetadataOnly decodes only what matching by name, namespace, labels and annotations reads
// (plus apiVersion and kind, and a top-level string type, which tells a membership Secret:
// planner.MembershipObject): far cheaper than Object for counting matches over a cache
// and for mapping a peer's event to local objects.
func (c *Cached) MetadataOnly(gvk schema.GroupVersionKind) (*unstructured.Unstructured, error) {
	var m struct {
		APIVersion *string `json:"apiVersion"`
		Kind       *string `json:"kind"`
		Metadata   struct {
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Type jsoniter.RawMessage `json:"type"`
	}
	if err := cachedJSON.Unmarshal(c.json(), &m); err != nil {
		return nil, fmt.Errorf("decoding the cached %s %s/%s: %w", gvk.Kind, c.Namespace(), c.Name(), err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{}}
	if m.APIVersion != nil {
		u.Object["apiVersion"] = *m.APIVersion
	}
	if m.Kind != nil {
		u.Object["kind"] = *m.Kind
	}
	var typ string
	if len(m.Type) > 0 && m.Type[0] == '"' && cachedJSON.Unmarshal(m.Type, &typ) == nil {
		u.Object["type"] = typ
	}
	if m.Metadata.Labels != nil {
		u.SetLabels(m.Metadata.Labels)
	}
	if m.Metadata.Annotations != nil {
		u.SetAnnotations(m.Metadata.Annotations)
	}
	c.restore(u, gvk)
	return u, nil
}

// asCached returns the Cached an informer passed to a handler or holds in its
// store, unwrapping a tombstone; nil for anything else.
func asCached(o any) *Cached {
	switch t := o.(type) {
	case *Cached:
		return t
	case toolscache.DeletedFinalStateUnknown:
		c, _ := t.Obj.(*Cached)
		return c
	}
	return nil
}
