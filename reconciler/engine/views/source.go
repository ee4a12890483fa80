package views

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"unicode/utf8"

	jsoniter "github.com/json-iterator/go"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	jsonserializer "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/watchlist"

	"github.com/kubectl-registry/kubectl-registry/reconciler/engine/writer"
)

// The informers' objects arrive as JSON and are kept as JSON (Cached). Decoded by
// the dynamic client, each one became an unstructured object (a map per JSON object, a
// boxed value per field) and was encoded again by compact, and its watch event's
// envelope was decoded by the standard serializer: together about 45 µs of CPU and 8 KB
// of garbage for a small ConfigMap (BenchmarkCacheIn), for every watch event of every
// member's controller. A Client's informers instead read the envelope with
// eventCodec and the object straight into a Cached (decodeCached), which copies
// the bytes it keeps and skips the rest: about 12 µs and 2 KB. The dynamic client remains
// for writes, and for lists and watches when there is no REST config (the fakes of unit
// tests).

// Client is how the engine reaches one cluster: its dynamic client, and the REST config
// and HTTP client the informers list and watch with (both nil for a fake cluster: then
// the dynamic client lists and watches, and its objects are compacted).
type Client struct {
	Dynamic dynamic.Interface
	Config  *rest.Config
	// HTTPClient is the one the REST clients send through: for a peer, the one that
	// dials only the addresses this cluster allows (peers.Peer.HTTPClient). One is
	// never made from Config.
	HTTPClient *http.Client
}

// objectSource lists and watches the objects of one resource, in one namespace or in
// all, as the engine caches them: *Cached items and events (and *metav1.Status
// for a watch's error events).
type objectSource interface {
	List(ctx context.Context, opts metav1.ListOptions) (*cachedList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// source returns the objectSource of the objects of kind gvk (resource mapping) in
// namespace ("" for all namespaces or a cluster-scoped kind).
func (c Client) source(gvk schema.GroupVersionKind, mapping *meta.RESTMapping, namespace string) (objectSource, error) {
	if c.Config == nil {
		if c.Dynamic == nil {
			return nil, errors.New("no client for the cluster")
		}
		var ri dynamic.ResourceInterface = c.Dynamic.Resource(mapping.Resource)
		if namespace != "" && mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			ri = c.Dynamic.Resource(mapping.Resource).Namespace(namespace)
		}
		return &dynamicSource{ri: ri, gvk: gvk, noWatchList: watchlist.DoesClientNotSupportWatchListSemantics(c.Dynamic)}, nil
	}
	rc, err := c.RESTClient(gvk)
	if err != nil {
		return nil, err
	}
	return &restSource{client: rc, path: writer.ResourcePath(mapping, namespace)}, nil
}

// RESTClient returns a REST client of the cluster, sending through HTTPClient, whose
// decoder is cachedCodec for kind gvk: it decodes an object into a *Cached (the zero kind
// keeps every object's apiVersion and kind in its JSON). Every request it makes must have
// an absolute path.
func (c Client) RESTClient(gvk schema.GroupVersionKind) (rest.Interface, error) {
	if c.Config == nil || c.HTTPClient == nil {
		// Never an HTTP client made from the config: a peer's is the one that dials only
		// the addresses this cluster allows and refuses redirects (peers.Peer.HTTPClient).
		return nil, errors.New("no REST config and HTTP client for the cluster")
	}
	cfg := rest.CopyConfig(c.Config)
	cfg.ContentType = runtime.ContentTypeJSON
	cfg.AcceptContentTypes = runtime.ContentTypeJSON
	cfg.NegotiatedSerializer = cachedSerializer{codec: cachedCodec{gvk: gvk}}
	cfg.GroupVersion = nil
	cfg.APIPath = "/if-you-see-this-search-for-the-break" // every request has an absolute path
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.UnversionedRESTClientForConfigAndClient(cfg, c.HTTPClient)
	if err != nil {
		return nil, fmt.Errorf("a REST client for %s: %w", cfg.Host, err)
	}
	return rc, nil
}

// restSource lists and watches with a REST client whose decoder is cachedCodec.
type restSource struct {
	client rest.Interface
	path   []string
}

func (s *restSource) List(ctx context.Context, opts metav1.ListOptions) (*cachedList, error) {
	var l cachedList
	err := s.client.Get().AbsPath(s.path...).SpecificallyVersionedParams(&opts, metav1.ParameterCodec, metav1.SchemeGroupVersion).Do(ctx).Into(&l)
	if err != nil {
		return nil, err
	}
	return &l, nil
}

func (s *restSource) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return s.client.Get().AbsPath(s.path...).SpecificallyVersionedParams(&opts, metav1.ParameterCodec, metav1.SchemeGroupVersion).Watch(ctx)
}

// dynamicSource lists and watches with a dynamic client (a fake one, in unit tests) and
// compacts what it returns.
type dynamicSource struct {
	ri          dynamic.ResourceInterface
	gvk         schema.GroupVersionKind
	noWatchList bool
}

// IsWatchListSemanticsUnSupported tells the informer whether the dynamic client streams
// the initial objects of a watch (watchlist.DoesClientNotSupportWatchListSemantics).
func (s *dynamicSource) IsWatchListSemanticsUnSupported() bool { return s.noWatchList }

func (s *dynamicSource) List(ctx context.Context, opts metav1.ListOptions) (*cachedList, error) {
	l, err := s.ri.List(ctx, opts)
	if err != nil {
		return nil, err
	}
	out := &cachedList{ListMeta: metav1.ListMeta{ResourceVersion: l.GetResourceVersion(), Continue: l.GetContinue(), RemainingItemCount: l.GetRemainingItemCount()}}
	out.Items = make([]*Cached, 0, len(l.Items))
	for i := range l.Items {
		c, err := compact(&l.Items[i], s.gvk)
		if err != nil {
			return nil, err
		}
		out.Items = append(out.Items, c)
	}
	return out, nil
}

func (s *dynamicSource) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := s.ri.Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	return watch.Filter(w, func(ev watch.Event) (watch.Event, bool) {
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok {
			return ev, true // a Status
		}
		if u.GetKind() == "Status" && u.GetAPIVersion() == "v1" && s.gvk.Kind != "Status" {
			st := &metav1.Status{}
			if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, st) == nil {
				return watch.Event{Type: ev.Type, Object: st}, true
			}
		}
		c, err := compact(u, s.gvk)
		if err != nil {
			return watch.Event{Type: watch.Error, Object: &metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}}, true
		}
		return watch.Event{Type: ev.Type, Object: c}, true
	}), nil
}

// cachedList is a list of cached objects, as an informer's list returns it.
type cachedList struct {
	metav1.ListMeta
	Items []*Cached
}

func (l *cachedList) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

func (l *cachedList) DeepCopyObject() runtime.Object {
	out := &cachedList{}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = append([]*Cached(nil), l.Items...) // the items are immutable
	return out
}

// cachedSerializer is the content negotiation of an informer's REST client: JSON only,
// each object decoded by codec, a watch's event envelopes by eventCodec.
type cachedSerializer struct {
	codec cachedCodec
}

// eventScheme knows the watch event envelope and Status, which the stream serializer
// decodes.
var eventScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, metav1.SchemeGroupVersion)
	return s
}()

var eventSerializer = jsonserializer.NewSerializerWithOptions(jsonserializer.DefaultMetaFactory, eventScheme, eventScheme, jsonserializer.SerializerOptions{})

// eventCodec decodes a watch's event envelopes ({"type": ..., "object": ...}), leaving the
// object as bytes for cachedCodec, about five times faster than eventSerializer, which
// it leaves everything else to.
type eventCodec struct{}

func (eventCodec) Identifier() runtime.Identifier { return "kubectl-registry-watch-event-json" }

func (eventCodec) Encode(obj runtime.Object, w io.Writer) error {
	return eventSerializer.Encode(obj, w)
}

func (eventCodec) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	ev, ok := into.(*metav1.WatchEvent)
	if !ok {
		return eventSerializer.Decode(data, defaults, into)
	}
	it := jsoniter.ConfigDefault.BorrowIterator(data)
	defer jsoniter.ConfigDefault.ReturnIterator(it)
	if it.WhatIsNext() != jsoniter.ObjectValue {
		return nil, nil, errors.New("a watch event is not a JSON object")
	}
	*ev = metav1.WatchEvent{}
	it.ReadObjectCB(func(it *jsoniter.Iterator, k string) bool {
		switch k {
		case "type":
			ev.Type = readStringOrSkip(it)
		case "object":
			ev.Object.Raw = it.SkipAndReturnBytes() // a copy: data is the decoder's buffer
		default:
			it.Skip()
		}
		return true
	})
	if it.Error != nil {
		return nil, nil, fmt.Errorf("decoding a watch event: %w", it.Error)
	}
	return ev, &schema.GroupVersionKind{Group: metav1.GroupName, Version: "v1", Kind: "WatchEvent"}, nil
}

func (s cachedSerializer) SupportedMediaTypes() []runtime.SerializerInfo {
	return []runtime.SerializerInfo{{
		MediaType:        runtime.ContentTypeJSON,
		MediaTypeType:    "application",
		MediaTypeSubType: "json",
		EncodesAsText:    true,
		Serializer:       s.codec,
		StreamSerializer: &runtime.StreamSerializerInfo{EncodesAsText: true, Serializer: eventCodec{}, Framer: jsonserializer.Framer},
	}}
}

func (s cachedSerializer) EncoderForVersion(e runtime.Encoder, _ runtime.GroupVersioner) runtime.Encoder {
	return e
}

func (s cachedSerializer) DecoderToVersion(d runtime.Decoder, _ runtime.GroupVersioner) runtime.Decoder {
	return d
}

// cachedCodec decodes the API server's JSON for the informers of kind gvk: an object
// into a *Cached, a list into a *cachedList, a Status into a *metav1.Status (the
// body of an error, a watch's error event). It encodes nothing: the informers only read.
type cachedCodec struct {
	gvk schema.GroupVersionKind
}

func (c cachedCodec) Identifier() runtime.Identifier { return "kubectl-registry-cached-json" }

func (c cachedCodec) Encode(runtime.Object, io.Writer) error {
	return errors.New("the informers' client sends no objects")
}

func (c cachedCodec) Decode(data []byte, _ *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	gvk := c.gvk
	if st, ok, err := decodeStatus(data, gvk); ok || err != nil {
		return st, &schema.GroupVersionKind{Version: "v1", Kind: "Status"}, err
	}
	switch into := into.(type) {
	case *cachedList:
		if err := decodeCachedList(data, gvk, into); err != nil {
			return nil, nil, err
		}
		return into, &gvk, nil
	case *Cached:
		o, err := decodeCached(data, gvk)
		if err != nil {
			return nil, nil, err
		}
		*into = *o
		return into, &gvk, nil
	case nil:
		o, err := decodeCached(data, gvk)
		if err != nil {
			return nil, nil, err
		}
		return o, &gvk, nil
	}
	return nil, nil, fmt.Errorf("the informers' client decodes no %T", into)
}

// decodeStatus decodes data as a metav1.Status if its kind says so (and the informer's
// kind is not Status). ok is false for anything else.
func decodeStatus(data []byte, gvk schema.GroupVersionKind) (runtime.Object, bool, error) {
	if gvk.Kind == "Status" {
		return nil, false, nil
	}
	var tm metav1.TypeMeta
	// The envelope is small: a Status is a handful of fields, an object's kind is read
	// again below. Both fields are usually first, so this stops early.
	it := jsoniter.ConfigDefault.BorrowIterator(data)
	defer jsoniter.ConfigDefault.ReturnIterator(it)
	it.ReadObjectCB(func(it *jsoniter.Iterator, k string) bool {
		switch k {
		case "kind":
			tm.Kind = readStringOrSkip(it)
		case "apiVersion":
			tm.APIVersion = readStringOrSkip(it)
		default:
			it.Skip()
		}
		return tm.Kind == "" || tm.APIVersion == ""
	})
	if tm.Kind != "Status" || tm.APIVersion != "v1" {
		return nil, false, nil
	}
	st := &metav1.Status{}
	if err := json.Unmarshal(data, st); err != nil {
		return nil, true, fmt.Errorf("decoding a Status: %w", err)
	}
	return st, true, nil
}

func readStringOrSkip(it *jsoniter.Iterator) string {
	if it.WhatIsNext() != jsoniter.StringValue {
		it.Skip()
		return ""
	}
	return it.ReadString()
}

// decodeCachedList decodes a list of objects of kind gvk into l.
func decodeCachedList(data []byte, gvk schema.GroupVersionKind, l *cachedList) error {
	if !json.Valid(data) {
		return fmt.Errorf("a list of %s is not valid JSON", gvk.Kind)
	}
	it := jsoniter.ConfigDefault.BorrowIterator(data)
	defer jsoniter.ConfigDefault.ReturnIterator(it)
	var err error
	it.ReadObjectCB(func(it *jsoniter.Iterator, k string) bool {
		switch k {
		case "metadata":
			err = json.Unmarshal(it.SkipAndReturnBytes(), &l.ListMeta)
		case "items":
			it.ReadArrayCB(func(it *jsoniter.Iterator) bool {
				var o *Cached
				o, err = decodeCachedItem(it, gvk)
				if err == nil {
					l.Items = append(l.Items, o)
				}
				return err == nil
			})
		default:
			it.Skip()
		}
		return err == nil
	})
	if err != nil {
		return fmt.Errorf("decoding a list of %s: %w", gvk.Kind, err)
	}
	if it.Error != nil {
		return fmt.Errorf("decoding a list of %s: %w", gvk.Kind, it.Error)
	}
	return nil
}

// decodeCached decodes one object of kind gvk, as compact would keep it.
func decodeCached(data []byte, gvk schema.GroupVersionKind) (*Cached, error) {
	// What the cache keeps must decode later (Cached.Object): the skipping below
	// does not check every byte of what it keeps, so the whole is checked first. A peer's
	// API server is a stranger's.
	if !json.Valid(data) {
		return nil, fmt.Errorf("a %s is not valid JSON", gvk.Kind)
	}
	it := jsoniter.ConfigDefault.BorrowIterator(data)
	defer jsoniter.ConfigDefault.ReturnIterator(it)
	o, err := decodeCachedItem(it, gvk)
	if err != nil {
		return nil, err
	}
	return o, nil
}

// bufPool holds the buffers objects are assembled in.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// decodeCachedItem reads the object at it (valid JSON) into a Cached: metadata's
// namespace, name and resourceVersion apart, and the rest of the JSON as it is, without
// managedFields, and without apiVersion and kind when they are gvk's.
func decodeCachedItem(it *jsoniter.Iterator, gvk schema.GroupVersionKind) (*Cached, error) {
	if it.WhatIsNext() != jsoniter.ObjectValue {
		it.Skip()
		return nil, fmt.Errorf("a %s is not a JSON object", gvk.Kind)
	}
	bp := bufPool.Get().(*[]byte)
	d := &cachedDecoder{gvk: gvk, apiVersion: gvk.GroupVersion().String(), buf: append((*bp)[:0], '{')}
	it.ReadObjectCB(d.field)
	err := d.err
	if err == nil && it.Error != nil {
		err = it.Error
	}
	var anns map[string]string
	if err == nil && d.name == "" && d.annotations != nil {
		// No name: a watch's bookmark, whose annotations say whether the initial
		// events of a watch-list end here (initialEventsEnd).
		if e := json.Unmarshal(d.annotations, &anns); e != nil {
			err = fmt.Errorf("the annotations of a %s: %w", gvk.Kind, e)
		}
	}
	buf := d.buf
	if err != nil {
		*bp = buf[:0]
		bufPool.Put(bp)
		return nil, fmt.Errorf("decoding a %s: %w", gvk.Kind, err)
	}
	buf = append(buf, '}')
	o := newCachedObject(d.ns, d.name, d.rv, buf)
	o.annotations = anns
	*bp = buf[:0]
	bufPool.Put(bp)
	return o, nil
}

// cachedDecoder assembles the JSON of one object as decodeCachedItem keeps it (buf), and
// what it keeps apart.
type cachedDecoder struct {
	gvk        schema.GroupVersionKind
	apiVersion string
	buf        []byte
	// ns, name and rv are metadata's namespace, name and resourceVersion; annotations
	// the JSON of metadata's annotations.
	ns, name, rv string
	annotations  []byte
	err          error
}

// key appends the key k of a field to buf, after a comma unless it is the first of its
// object.
func (d *cachedDecoder) key(k string) {
	if d.buf[len(d.buf)-1] != '{' {
		d.buf = append(d.buf, ',')
	}
	d.buf = appendJSONString(d.buf, k)
	d.buf = append(d.buf, ':')
}

// field reads the object's field k at it; false stops the read (d.err says why).
func (d *cachedDecoder) field(it *jsoniter.Iterator, k string) bool {
	switch k {
	case "apiVersion", "kind":
		want := d.apiVersion
		if k == "kind" {
			want = d.gvk.Kind
		}
		if it.WhatIsNext() == jsoniter.StringValue {
			// Written back with appendJSONString, which mends invalid UTF-8 as
			// decoding would.
			if v := it.ReadString(); v != want {
				d.key(k)
				d.buf = appendJSONString(d.buf, v)
			}
			return true
		}
		d.key(k)
		d.buf = it.SkipAndAppendBytes(d.buf)
	case "metadata":
		if it.WhatIsNext() != jsoniter.ObjectValue {
			d.err = fmt.Errorf("the metadata of a %s is not a JSON object", d.gvk.Kind)
			return false
		}
		d.key(k)
		d.buf = append(d.buf, '{')
		it.ReadObjectCB(d.metadataField)
		d.buf = append(d.buf, '}')
	default:
		d.key(k)
		d.buf = it.SkipAndAppendBytes(d.buf)
	}
	return d.err == nil
}

// metadataField reads the field k of the object's metadata at it; false stops the read
// (d.err says why).
func (d *cachedDecoder) metadataField(it *jsoniter.Iterator, k string) bool {
	switch k {
	case "namespace", "name", "resourceVersion":
		if it.WhatIsNext() != jsoniter.StringValue {
			d.err = fmt.Errorf("metadata.%s of a %s is not a string", k, d.gvk.Kind)
			return false
		}
		v := it.ReadString()
		if !utf8.ValidString(v) {
			d.err = fmt.Errorf("metadata.%s of a %s is not valid UTF-8", k, d.gvk.Kind)
			return false
		}
		switch k {
		case "namespace":
			d.ns = v
		case "name":
			d.name = v
		default:
			d.rv = v
		}
	case "managedFields":
		it.Skip()
	default:
		d.key(k)
		start := len(d.buf)
		d.buf = it.SkipAndAppendBytes(d.buf)
		if k == "annotations" {
			d.annotations = d.buf[start:]
		}
	}
	return true
}

// appendJSONString appends s as a JSON string.
func appendJSONString(buf []byte, s string) []byte {
	plain := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f {
			plain = false
			break
		}
	}
	if plain {
		buf = append(buf, '"')
		buf = append(buf, s...)
		return append(buf, '"')
	}
	q, _ := json.Marshal(s) // a string always encodes
	return append(buf, q...)
}

// newCachedObject returns the Cached of an object whose JSON, less namespace, name
// and resourceVersion, is raw.
func newCachedObject(ns, name, rv string, raw []byte) *Cached {
	var b strings.Builder
	b.Grow(len(ns) + len(name) + len(rv) + len(raw))
	b.WriteString(ns)
	b.WriteString(name)
	b.WriteString(rv)
	b.Write(raw)
	nsEnd := len(ns)
	return &Cached{data: b.String(), nsEnd: uint32(nsEnd), nameEnd: uint32(nsEnd + len(name)), rvEnd: uint32(nsEnd + len(name) + len(rv))}
}
