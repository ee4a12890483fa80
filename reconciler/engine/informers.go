package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// scope names one watch: a cluster ("" for the local one), a kind and a namespace (""
// for all namespaces, or a cluster-scoped kind).
type scope struct {
	cluster   string
	gvk       schema.GroupVersionKind
	namespace string
}

func (s scope) String() string {
	c := s.cluster
	if c == "" {
		c = "local"
	}
	ns := s.namespace
	if ns == "" {
		ns = "*"
	}
	return fmt.Sprintf("%s %s %s", c, s.gvk.Kind, ns)
}

// watcher is one informer.
type watcher struct {
	informer toolscache.SharedIndexInformer
	cancel   context.CancelFunc
	// selector is the label selector of its lists and watches ("" for none).
	selector string
	// err is the last list/watch error (forbidden, unknown kind...), for rule status.
	mu  sync.Mutex
	err error
	// version counts the informer's events; counts are the match counts at a version.
	version uint64
	counts  map[any]matchCount
}

type matchCount struct {
	version uint64
	n       int
}

// changed records an event of the informer.
func (w *watcher) changed() {
	w.mu.Lock()
	w.version++
	w.mu.Unlock()
}

func (w *watcher) setErr(err error) {
	w.mu.Lock()
	w.err = err
	w.mu.Unlock()
}

func (w *watcher) lastErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// watchers is the set of informers the engine runs: one per scope, shared by every rule.
type watchers struct {
	mu  sync.Mutex
	all map[scope]*watcher
}

func newWatchers() *watchers { return &watchers{all: map[scope]*watcher{}} }

// handler receives the objects of a scope that changed (old and new; either may be nil).
type handler func(s scope, oldObj, newObj *cachedObject)

// ensure starts the informer of scope s with the label selector selector ("" for none) if
// it is not running, replacing one that runs with another selector. mapper resolves the
// kind; client lists and watches.
func (ws *watchers) ensure(ctx context.Context, s scope, selector string, client dynamic.Interface, mapper meta.RESTMapper, h handler) error {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if w, ok := ws.all[s]; ok {
		if w.selector == selector {
			return nil
		}
		w.cancel()
		delete(ws.all, s)
	}
	mapping, err := mapper.RESTMapping(s.gvk.GroupKind(), s.gvk.Version)
	if err != nil {
		return fmt.Errorf("kind %s is not served by cluster %s: %w", s.gvk, clusterName(s.cluster), err)
	}
	var ri dynamic.ResourceInterface = client.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace && s.namespace != "" {
		ri = client.Resource(mapping.Resource).Namespace(s.namespace)
	}
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.LabelSelector = selector
			return ri.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.LabelSelector = selector
			return ri.Watch(ctx, opts)
		},
	}
	inf := toolscache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, 0, toolscache.Indexers{})
	w := &watcher{informer: inf, selector: selector}
	_ = inf.SetTransform(compactFor(s.gvk))
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *toolscache.Reflector, err error) {
		w.setErr(err)
	})
	_, _ = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) {
			w.changed()
			h(s, nil, asCached(o))
		},
		UpdateFunc: func(o, n any) {
			w.setErr(nil)
			w.changed()
			h(s, asCached(o), asCached(n))
		},
		DeleteFunc: func(o any) {
			w.changed()
			h(s, asCached(o), nil)
		},
	})
	wctx, cancel := context.WithCancel(ctx)
	w.cancel = cancel
	ws.all[s] = w
	go inf.RunWithContext(wctx)
	return nil
}

// get returns the watcher of scope s, if running.
func (ws *watchers) get(s scope) (*watcher, bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w, ok := ws.all[s]
	return w, ok
}

// lookup finds the object key in the informer of the scope that covers it: the
// namespace's own scope, else the all-namespaces scope. synced is false when no covering
// informer has synced (then absence proves nothing).
func (ws *watchers) lookup(cluster string, gvk schema.GroupVersionKind, namespace, name string) (obj *unstructured.Unstructured, synced bool, err error) {
	for _, ns := range []string{namespace, ""} {
		w, ok := ws.get(scope{cluster: cluster, gvk: gvk, namespace: ns})
		if !ok {
			continue
		}
		if !w.informer.HasSynced() {
			return nil, false, w.lastErr()
		}
		key := name
		if namespace != "" {
			key = namespace + "/" + name
		}
		item, exists, err := w.informer.GetStore().GetByKey(key)
		if err != nil {
			return nil, false, err
		}
		if !exists {
			return nil, true, nil
		}
		obj, err := asCached(item).object(gvk)
		if err != nil {
			return nil, false, err
		}
		return obj, true, nil
	}
	return nil, false, nil
}

// covers reports whether an informer runs for the objects of the kind in the namespace
// (its own or the all-namespaces one), synced or not.
func (ws *watchers) covers(cluster string, gvk schema.GroupVersionKind, namespace string) bool {
	for _, ns := range []string{namespace, ""} {
		if _, ok := ws.get(scope{cluster: cluster, gvk: gvk, namespace: ns}); ok {
			return true
		}
	}
	return false
}

// count returns how many objects of the kind in the cluster's informers match, counted
// once per object key. match sees each object as decode returns it. The count is kept per
// informer and matcher and recomputed only when the informer has had events since.
func (ws *watchers) count(cluster string, gvk schema.GroupVersionKind, matcher any, decode func(*cachedObject) (*unstructured.Unstructured, error), match func(*unstructured.Unstructured) bool) int {
	ws.mu.Lock()
	var ws2 []*watcher
	for s, w := range ws.all {
		if s.cluster == cluster && s.gvk == gvk {
			ws2 = append(ws2, w)
		}
	}
	ws.mu.Unlock()
	if len(ws2) == 1 {
		return ws2[0].count(matcher, decode, match)
	}
	// Overlapping scopes (a namespace and all namespaces): count each key once.
	seen := map[string]bool{}
	n := 0
	for _, w := range ws2 {
		for _, item := range w.informer.GetStore().List() {
			c := asCached(item)
			k := c.namespace() + "/" + c.name()
			if seen[k] {
				continue
			}
			seen[k] = true
			if u, err := decode(c); err == nil && match(u) {
				n++
			}
		}
	}
	return n
}

// count counts the informer's objects that match, reusing the last count for the same
// matcher while the informer has had no events.
func (w *watcher) count(matcher any, decode func(*cachedObject) (*unstructured.Unstructured, error), match func(*unstructured.Unstructured) bool) int {
	w.mu.Lock()
	if c, ok := w.counts[matcher]; ok && c.version == w.version {
		w.mu.Unlock()
		return c.n
	}
	version := w.version
	w.mu.Unlock()
	n := 0
	for _, item := range w.informer.GetStore().List() {
		if u, err := decode(asCached(item)); err == nil && match(u) {
			n++
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.counts == nil {
		w.counts = map[any]matchCount{}
	}
	// Counts at older versions are recomputed when asked for: drop them, so matchers of
	// rules changed or gone do not stay.
	for m, c := range w.counts {
		if c.version != version {
			delete(w.counts, m)
		}
	}
	w.counts[matcher] = matchCount{version: version, n: n}
	return n
}

// retain stops every informer whose scope keep rejects.
func (ws *watchers) retain(keep func(scope) bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for s, w := range ws.all {
		if !keep(s) {
			w.cancel()
			delete(ws.all, s)
		}
	}
}

// waitSynced waits up to d for the scope's informer to sync.
func (ws *watchers) waitSynced(s scope, d time.Duration) bool {
	w, ok := ws.get(s)
	if !ok {
		return false
	}
	deadline := time.Now().Add(d)
	for !w.informer.HasSynced() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

func clusterName(c string) string {
	if c == "" {
		return "local"
	}
	return c
}

// uselessCopies returns the label selector of a peer's informer that leaves out the
// copies on that peer which decide nothing here (see Gather): copies of the local
// cluster's objects (unless keepOwn: their status flows back), and copies of the objects
// of the other members, which this cluster reads from their origins directly. Values that
// are not valid label values are not left out.
func uselessCopies(local, peer types.UID, members []types.UID, keepOwn bool) string {
	var ids []string
	add := func(id types.UID) {
		if id != "" && len(validation.IsValidLabelValue(string(id))) == 0 {
			ids = append(ids, string(id))
		}
	}
	if !keepOwn {
		add(local)
	}
	for _, m := range members {
		if m != peer && m != local {
			add(m)
		}
	}
	if len(ids) == 0 {
		return ""
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	return v1alpha1.OwnershipLabel + " notin (" + strings.Join(ids, ",") + ")"
}

// offered reports whether a peer's object is one the peer offers as a source: its own or
// a copy of an object of a cluster that is not a member (not a copy uselessCopies would
// leave out, whatever the informer's selector).
func offered(u *unstructured.Unstructured, local, peer types.UID, members []types.UID) bool {
	origin := types.UID(u.GetAnnotations()[v1alpha1.OwnershipAnnotation])
	return origin == "" || origin == peer || (origin != local && !slices.Contains(members, origin))
}
