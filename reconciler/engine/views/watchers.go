package views

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/kubectl-registry/kubectl-registry/reconciler/peers"
)

// Scope names one watch: a cluster ("" for the local one), a kind and a namespace (""
// for all namespaces, or a cluster-scoped kind), and, for a watch of one object by name
// (a local object in the way of a copy, see KeyScope), its name.
type Scope struct {
	Cluster   string
	GVK       schema.GroupVersionKind
	Namespace string
	Name      string
}

// String names the scope in logs: its cluster ("local" for this one), kind, namespace
// ("*" for all) and, for a watch by name, the name.
func (s Scope) String() string {
	c := clusterName(s.Cluster)
	ns := s.Namespace
	if ns == "" {
		ns = "*"
	}
	if s.Name != "" {
		return fmt.Sprintf("%s %s %s/%s", c, s.GVK.Kind, ns, s.Name)
	}
	return fmt.Sprintf("%s %s %s", c, s.GVK.Kind, ns)
}

// KeyScope is the scope of the local watch of one object by name (a peer's objects are
// not watched by name: Ensure).
func KeyScope(gvk schema.GroupVersionKind, namespace, name string) Scope {
	return Scope{GVK: gvk, Namespace: namespace, Name: name}
}

// NewScope returns the scope of the objects of kind gvk in namespace ns of cluster,
// normalised: a cluster-scoped kind has no namespace. mapper resolves the kind in the
// cluster (the local manager's mapper, a peer connection's: both read the kind's group
// again when it is missing, so that a CRD installed since is found on a later try).
func NewScope(cluster string, gvk schema.GroupVersionKind, ns string, mapper meta.RESTMapper) (Scope, error) {
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return Scope{}, fmt.Errorf("kind %s is not served by cluster %s: %w", gvk, clusterName(cluster), err)
	}
	if m.Scope.Name() == meta.RESTScopeNameRoot {
		ns = ""
	}
	return Scope{Cluster: cluster, GVK: gvk, Namespace: ns}, nil
}

// watcher is one informer.
type watcher struct {
	informer toolscache.SharedIndexInformer
	cancel   context.CancelFunc
	// done is closed once the informer is stopped (nil for a watcher not started by
	// Ensure).
	done <-chan struct{}
	// selector is the label selector of its lists and watches ("" for none).
	selector string
	// err is the last list/watch error (forbidden, unknown kind...), for rule status.
	mu  sync.Mutex
	err error
	// version counts the informer's events; counts are the match counts at a version.
	version uint64
	counts  map[any]matchCount
	// limit is the cap on the objects the informer holds (0: none); held counts them,
	// from its lists and event streams.
	limit int
	held  streamCount
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

// Watchers is the set of informers the engine runs: one per scope, shared by every rule.
type Watchers struct {
	mu  sync.Mutex
	all map[Scope]*watcher
	// capped are the scopes whose informer stopped at the cap on objects (see
	// objectcap.go), until it is tried again and syncs under it.
	capped map[Scope]*overCap
	// retry is the first wait before a scope over the cap is tried again.
	retry time.Duration
	// onOver is called when a scope goes over the cap (first: it was not over it
	// before), onUnder when a scope that was over it syncs under it; either may be nil.
	onOver  func(s Scope, err *TooManyObjectsError, first bool)
	onUnder func(s Scope)
	// clock times the waits of the scopes over the cap (the engine's Options.Clock).
	clock clock.PassiveClock
}

// Options configure Watchers.
type Options struct {
	// Retry is the first wait before a scope over the cap is tried again (backing off
	// while it stays over); zero means DefaultOverCapRetry.
	Retry time.Duration
	// Clock times the waits of the scopes over the cap; nil means clock.RealClock{}.
	Clock clock.PassiveClock
	// OnOver is called when a scope goes over the cap (first: it was not over it before),
	// OnUnder when a scope that was over it syncs under it; either may be nil. Neither
	// is called with the Watchers' lock held.
	OnOver  func(s Scope, err *TooManyObjectsError, first bool)
	OnUnder func(s Scope)
}

// New returns Watchers that run no informer yet.
func New(opts Options) *Watchers {
	if opts.Retry <= 0 {
		opts.Retry = DefaultOverCapRetry
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Watchers{all: map[Scope]*watcher{}, capped: map[Scope]*overCap{}, retry: opts.Retry, clock: opts.Clock, onOver: opts.OnOver, onUnder: opts.OnUnder}
}

// Handler receives the objects of a scope that changed (old and new; either may be nil).
type Handler func(s Scope, oldObj, newObj *Cached)

// Ensure starts the informer of scope s with the label selector selector ("" for none)
// and the cap limit on the objects it holds (0: none) if it is not running, replacing one
// that runs with another selector or cap. mapper resolves the kind; client lists and
// watches (Client.source); h receives every change. The informer runs until ctx is done
// or the scope is stopped (Stop, Retain). A scope over the cap is not started again
// before its retry time, unless its selector or cap changed. Only the local cluster's
// scopes may name an object (KeyScope).
func (ws *Watchers) Ensure(ctx context.Context, s Scope, selector string, limit int, client Client, mapper meta.RESTMapper, h Handler) error {
	if s.Name != "" && s.Cluster != "" {
		// Lookup reads a peer's objects from its kind's scopes only: one per object of
		// every peer would cost every lookup a peer's.
		return fmt.Errorf("watching %s: only the local cluster's objects are watched by name", s)
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if w, ok := ws.all[s]; ok {
		if w.selector == selector && w.limit == limit {
			return nil
		}
		w.cancel()
		delete(ws.all, s)
	}
	if c, ok := ws.capped[s]; ok && c.selector == selector && c.limit == limit && ws.clock.Now().Before(c.retry) {
		return c.err(s)
	}
	mapping, err := mapper.RESTMapping(s.GVK.GroupKind(), s.GVK.Version)
	if err != nil {
		return fmt.Errorf("kind %s is not served by cluster %s: %w", s.GVK, clusterName(s.Cluster), err)
	}
	src, err := client.source(s.GVK, mapping, s.Namespace)
	if err != nil {
		return fmt.Errorf("watching %s: %w", s, err)
	}
	fieldSelector := ""
	if s.Name != "" {
		fieldSelector = fields.OneTermEqualSelector("metadata.name", s.Name).String()
	}
	w := &watcher{selector: selector, limit: limit}
	if err := ws.startInformer(s, w, ws.listWatch(s, w, selector, fieldSelector, limit, src), src, h); err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(ctx)
	w.cancel, w.done = cancel, wctx.Done()
	ws.all[s] = w
	go w.informer.RunWithContext(wctx)
	return nil
}

// listWatch returns the ListWatch of the informer w of scope s: src's lists and watches,
// under the label selector selector and the field selector fieldSelector, and the cap
// limit on the objects (0: none).
func (ws *Watchers) listWatch(s Scope, w *watcher, selector, fieldSelector string, limit int, src objectSource) *toolscache.ListWatch {
	// A peer's answers are read through byte limits (peers.LimitTransport): a response or
	// an object over them refuses the scope like the cap on objects (tooLarge).
	limited := func(ctx context.Context) context.Context {
		if s.Cluster == "" {
			return ctx
		}
		return peers.WithRefusalHook(ctx, func(err *peers.TooLargeError) { _ = ws.tooLarge(s, w, err) })
	}
	// Capped, the objects are counted as they arrive, before the informer queues them: the
	// initial ones (a watch-list stream, or the pages of a list when the API server does
	// not stream them) and those the watches add or delete afterwards. One past the cap,
	// the informer stops: it never holds more.
	return &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.LabelSelector, opts.FieldSelector = selector, fieldSelector
			l, n, err := listCapped(limited(ctx), opts, limit, src.List)
			if err != nil {
				return nil, err
			}
			if l == nil {
				return nil, ws.over(s, w, n)
			}
			w.held.set(n)
			ws.under(s, w)
			return l, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.LabelSelector, opts.FieldSelector = selector, fieldSelector
			wi, err := src.Watch(limited(ctx), opts)
			if err != nil || limit <= 0 {
				return wi, err
			}
			initial := opts.SendInitialEvents != nil && *opts.SendInitialEvents
			// over's error is the one the scope reports from now on (OverCapErr, Lookup)
			// and onOver logs: the watch itself just ends.
			return newCappedWatch(wi, &w.held, initial, limit, func(n int) { _ = ws.over(s, w, n) }, func() { ws.under(s, w) }), nil
		},
	}
}

// startInformer makes the informer of w, scope s, listing and watching with lw, that
// calls h on every change; Ensure runs it.
func (ws *Watchers) startInformer(s Scope, w *watcher, lw *toolscache.ListWatch, src objectSource, h Handler) error {
	// The source says whether it serves watch-lists (a fake dynamic client does not: then
	// the list). Its objects are Cached already.
	inf := toolscache.NewSharedIndexInformer(toolscache.ToListWatcherWithWatchListSemantics(lw, src), &Cached{}, 0, toolscache.Indexers{})
	w.informer = inf
	// These fail only on an informer that has started, which this one has not; an error
	// is returned all the same rather than running an informer without its handler.
	if err := inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *toolscache.Reflector, err error) {
		w.setErr(err)
	}); err != nil {
		return fmt.Errorf("watching %s: %w", s, err)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
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
	}); err != nil {
		return fmt.Errorf("watching %s: %w", s, err)
	}
	return nil
}

// over stops the informer w of scope s, which holds or offers seen objects, more than its
// cap, and records the scope as over the cap until it is tried again (backing off while
// it stays over). It returns the error that says so.
func (ws *Watchers) over(s Scope, w *watcher, seen int) error {
	return ws.refuse(s, w, seen, nil)
}

// tooLarge stops the informer w of scope s, whose peer answered over a byte limit, and
// records the scope as over the cap, as over does.
func (ws *Watchers) tooLarge(s Scope, w *watcher, tl *peers.TooLargeError) error {
	return ws.refuse(s, w, 0, tl)
}

// refuse is over (tl nil) and tooLarge.
func (ws *Watchers) refuse(s Scope, w *watcher, seen int, tl *peers.TooLargeError) error {
	ws.mu.Lock()
	if ws.all[s] != w {
		ws.mu.Unlock()
		return &TooManyObjectsError{Peer: s.Cluster, Kind: s.GVK.Kind, Namespace: s.Namespace, Seen: seen, Limit: w.limit, TooLarge: tl}
	}
	w.cancel()
	delete(ws.all, s)
	prev := ws.capped[s]
	var prevDelay time.Duration
	if prev != nil {
		prevDelay = prev.delay
	}
	c := &overCap{selector: w.selector, limit: w.limit, seen: seen, tooLarge: tl, delay: nextOverCapDelay(prevDelay, ws.retry)}
	c.retry = ws.clock.Now().Add(c.delay)
	ws.capped[s] = c
	onOver := ws.onOver
	err := c.err(s)
	ws.mu.Unlock()
	if onOver != nil {
		onOver(s, err, prev == nil)
	}
	return err
}

// under records that the informer w of scope s has its initial objects, no more than its
// cap: a scope that was over the cap is no longer.
func (ws *Watchers) under(s Scope, w *watcher) {
	ws.mu.Lock()
	_, was := ws.capped[s]
	if ws.all[s] != w || !was {
		ws.mu.Unlock()
		return
	}
	delete(ws.capped, s)
	onUnder := ws.onUnder
	ws.mu.Unlock()
	if onUnder != nil {
		onUnder(s)
	}
}

// OverCapErr returns the error of scope s (a *TooManyObjectsError) if it is over the
// cap, else nil.
func (ws *Watchers) OverCapErr(s Scope) error {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if c, ok := ws.capped[s]; ok {
		return c.err(s)
	}
	return nil
}

// OverCapScopes returns the scopes over the cap.
func (ws *Watchers) OverCapScopes() []Scope {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	out := make([]Scope, 0, len(ws.capped))
	for s := range ws.capped {
		out = append(out, s)
	}
	return out
}

// get returns the watcher of scope s, if running.
func (ws *Watchers) get(s Scope) (*watcher, bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w, ok := ws.all[s]
	return w, ok
}

// Lookup finds the object key in the informers of the scopes that cover it: the
// namespace's own scope, the all-namespaces scope and the watch of the key by name.
// Their selectors may differ (each is derived from the rules that use the scope), so the
// object is looked for in all of them, and its absence is proven only when every covering
// informer has synced and none holds it: then it matches no rule that reads these scopes.
// synced is false when no informer covers the key or one has not synced.
func (ws *Watchers) Lookup(cluster string, gvk schema.GroupVersionKind, namespace, name string) (obj *unstructured.Unstructured, synced bool, err error) {
	c, synced, err := ws.LookupCached(cluster, gvk, namespace, name)
	if c == nil || err != nil {
		return nil, synced, err
	}
	if obj, err = c.Object(gvk); err != nil {
		return nil, false, err
	}
	return obj, true, nil
}

// LookupCached is Lookup without decoding the object found: the informer's Cached, which
// its caller must not change.
func (ws *Watchers) LookupCached(cluster string, gvk schema.GroupVersionKind, namespace, name string) (obj *Cached, synced bool, err error) {
	key := name
	if namespace != "" {
		key = namespace + "/" + name
	}
	// The scopes that may hold the object: its namespace's, its own (only the local
	// cluster's objects are watched by name: Ensure), and all namespaces'.
	scopes := [3]Scope{{Cluster: cluster, GVK: gvk, Namespace: namespace}}
	n := 1
	if cluster == "" {
		scopes[n], n = Scope{GVK: gvk, Namespace: namespace, Name: name}, n+1
	}
	if namespace != "" {
		scopes[n], n = Scope{Cluster: cluster, GVK: gvk}, n+1
	}
	// One lock for every scope: the engine looks up every peer for every object.
	var found [3]*watcher
	var capErrs [3]error
	ws.mu.Lock()
	for i, s := range scopes[:n] {
		found[i] = ws.all[s]
		if c, ok := ws.capped[s]; ok {
			capErrs[i] = c.err(s)
		}
	}
	ws.mu.Unlock()
	covered, allSynced := false, true
	var lastErr error
	for i := range n {
		w, capErr := found[i], capErrs[i]
		if w == nil {
			if capErr != nil {
				// Over the cap: a view that failed, not one without the object.
				covered, allSynced, lastErr = true, false, capErr
			}
			continue
		}
		covered = true
		if !w.informer.HasSynced() {
			allSynced = false
			lastErr = w.lastErr()
			if lastErr == nil {
				lastErr = capErr
			}
			continue
		}
		item, exists, err := w.informer.GetStore().GetByKey(key)
		if err != nil {
			return nil, false, err
		}
		if !exists {
			continue
		}
		return asCached(item), true, nil
	}
	if !covered || !allSynced {
		return nil, false, lastErr
	}
	return nil, true, nil
}

// Covers reports whether an informer runs for the objects of the kind in the namespace
// (its own or the all-namespaces one), synced or not.
func (ws *Watchers) Covers(cluster string, gvk schema.GroupVersionKind, namespace string) bool {
	for _, ns := range []string{namespace, ""} {
		if _, ok := ws.get(Scope{Cluster: cluster, GVK: gvk, Namespace: ns}); ok {
			return true
		}
	}
	return false
}

// Count returns how many objects of the kind in the cluster's informers match, counted
// once per object key. match sees each object as decode returns it. The count is kept per
// informer and matcher (a comparable key: the same matcher, the same match) and
// recomputed only when the informer has had events since.
func (ws *Watchers) Count(cluster string, gvk schema.GroupVersionKind, matcher any, decode func(*Cached) (*unstructured.Unstructured, error), match func(*unstructured.Unstructured) bool) int {
	ws.mu.Lock()
	var ws2 []*watcher
	for s, w := range ws.all {
		if s.Cluster == cluster && s.GVK == gvk {
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
			k := c.Namespace() + "/" + c.Name()
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
func (w *watcher) count(matcher any, decode func(*Cached) (*unstructured.Unstructured, error), match func(*unstructured.Unstructured) bool) int {
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

// Retain stops every informer whose scope keep rejects, and forgets such scopes over the
// cap.
func (ws *Watchers) Retain(keep func(Scope) bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for s, w := range ws.all {
		if !keep(s) {
			w.cancel()
			delete(ws.all, s)
		}
	}
	for s := range ws.capped {
		if !keep(s) {
			delete(ws.capped, s)
		}
	}
}

// WaitSynced waits up to d for the scope's informer to sync, and no longer than it runs:
// an informer stopped meanwhile (its scope dropped, its peer's connection changed) never
// syncs, and a refresh that waited for it would poll it for all of d. It waits in real
// time, not on the engine's clock: it polls the informer's progress over the network,
// and decides nothing but how long a refresh waits before it queues what the scope
// holds.
func (ws *Watchers) WaitSynced(s Scope, d time.Duration) bool {
	w, ok := ws.get(s)
	if !ok {
		return false
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if w.done != nil {
		go func() {
			select {
			case <-w.done:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, d, true, func(context.Context) (bool, error) {
		return w.informer.HasSynced(), nil
	})
	return err == nil
}

// Stop stops the informer of scope s, if running.
func (ws *Watchers) Stop(s Scope) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if w, ok := ws.all[s]; ok {
		w.cancel()
		delete(ws.all, s)
	}
}

// Running reports whether the informer of scope s runs, synced or not.
func (ws *Watchers) Running(s Scope) bool {
	_, ok := ws.get(s)
	return ok
}

// WatchesKind reports whether an informer of the kind runs in the cluster, of any
// namespace or object.
func (ws *Watchers) WatchesKind(cluster string, gvk schema.GroupVersionKind) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for s := range ws.all {
		if s.Cluster == cluster && s.GVK == gvk {
			return true
		}
	}
	return false
}

// KeyWatches counts the local watches by name of objects of the kind (KeyScope).
func (ws *Watchers) KeyWatches(gvk schema.GroupVersionKind) int {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	n := 0
	for s := range ws.all {
		if s.Cluster == "" && s.Name != "" && s.GVK == gvk {
			n++
		}
	}
	return n
}

// Objects waits up to d for the informer of scope s to sync (WaitSynced) and returns
// the objects it holds, which the caller must not change; false when it does not run or
// has not synced.
func (ws *Watchers) Objects(s Scope, d time.Duration) ([]*Cached, bool) {
	if !ws.WaitSynced(s, d) {
		return nil, false
	}
	w, ok := ws.get(s)
	if !ok {
		return nil, false
	}
	items := w.informer.GetStore().List()
	out := make([]*Cached, 0, len(items))
	for _, o := range items {
		out = append(out, asCached(o))
	}
	return out, true
}

// SyncErr reports whether the informer of scope s runs and, if it has not synced, the
// last error of its lists and watches (nil once it has synced, or while it has met none).
func (ws *Watchers) SyncErr(s Scope) (running bool, err error) {
	w, ok := ws.get(s)
	if !ok {
		return false, nil
	}
	if err = w.lastErr(); err != nil && !w.informer.HasSynced() {
		return true, err
	}
	return true, nil
}

// clusterName names a cluster in messages: "local" for this one.
func clusterName(c string) string {
	if c == "" {
		return "local"
	}
	return c
}
