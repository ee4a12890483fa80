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
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/engine/rulestatus"
	"github.com/kubectl-registry/kubectl-registry/reconciler/peers"
	"github.com/kubectl-registry/kubectl-registry/reconciler/rules"
)

// scope names one watch: a cluster ("" for the local one), a kind and a namespace (""
// for all namespaces, or a cluster-scoped kind), and, for a watch of one object by name
// (a local object in the way of a copy, see watchKey), its name.
type scope struct {
	cluster   string
	gvk       schema.GroupVersionKind
	namespace string
	name      string
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
	if s.name != "" {
		return fmt.Sprintf("%s %s %s/%s", c, s.gvk.Kind, ns, s.name)
	}
	return fmt.Sprintf("%s %s %s", c, s.gvk.Kind, ns)
}

// keyScope is the scope of the watch of one object by name.
func keyScope(gvk schema.GroupVersionKind, namespace, name string) scope {
	return scope{gvk: gvk, namespace: namespace, name: name}
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

// watchers is the set of informers the engine runs: one per scope, shared by every rule.
type watchers struct {
	mu  sync.Mutex
	all map[scope]*watcher
	// capped are the scopes whose informer stopped at the cap on objects (see
	// objectcap.go), until it is tried again and syncs under it.
	capped map[scope]*overCap
	// retry is the first wait before a scope over the cap is tried again.
	retry time.Duration
	// onOver is called when a scope goes over the cap (first: it was not over it
	// before), onUnder when a scope that was over it syncs under it; either may be nil.
	onOver  func(s scope, err *TooManyObjectsError, first bool)
	onUnder func(s scope)
	// clock times the waits of the scopes over the cap (the engine's Options.Clock).
	clock clock.PassiveClock
}

func newWatchers() *watchers {
	return &watchers{all: map[scope]*watcher{}, capped: map[scope]*overCap{}, retry: DefaultOverCapRetry, clock: clock.RealClock{}}
}

// handler receives the objects of a scope that changed (old and new; either may be nil).
type handler func(s scope, oldObj, newObj *cachedObject)

// ensure starts the informer of scope s with the label selector selector ("" for none)
// and the cap limit on the objects it holds (0: none) if it is not running, replacing one
// that runs with another selector or cap. mapper resolves the kind; client lists and
// watches (clusterClient.source). A scope over the cap is not started again before its
// retry time, unless its selector or cap changed.
func (ws *watchers) ensure(ctx context.Context, s scope, selector string, limit int, client clusterClient, mapper meta.RESTMapper, h handler) error {
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
	mapping, err := mapper.RESTMapping(s.gvk.GroupKind(), s.gvk.Version)
	if err != nil {
		return fmt.Errorf("kind %s is not served by cluster %s: %w", s.gvk, clusterName(s.cluster), err)
	}
	src, err := client.source(s.gvk, mapping, s.namespace)
	if err != nil {
		return fmt.Errorf("watching %s: %w", s, err)
	}
	fieldSelector := ""
	if s.name != "" {
		fieldSelector = fields.OneTermEqualSelector("metadata.name", s.name).String()
	}
	w := &watcher{selector: selector, limit: limit}
	if err := ws.startInformer(s, w, ws.listWatch(s, w, selector, fieldSelector, limit, src), src, h); err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(ctx)
	w.cancel = cancel
	ws.all[s] = w
	go w.informer.RunWithContext(wctx)
	return nil
}

// listWatch returns the ListWatch of the informer w of scope s: src's lists and watches,
// under the label selector selector and the field selector fieldSelector, and the cap
// limit on the objects (0: none).
func (ws *watchers) listWatch(s scope, w *watcher, selector, fieldSelector string, limit int, src objectSource) *toolscache.ListWatch {
	// A peer's answers are read through byte limits (peers.LimitTransport): a response or
	// an object over them refuses the scope like the cap on objects (tooLarge).
	limited := func(ctx context.Context) context.Context {
		if s.cluster == "" {
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
			// over's error is the one the scope reports from now on (overCapErr, lookup)
			// and onOver logs: the watch itself just ends.
			return newCappedWatch(wi, &w.held, initial, limit, func(n int) { _ = ws.over(s, w, n) }, func() { ws.under(s, w) }), nil
		},
	}
}

// startInformer makes the informer of w, scope s, listing and watching with lw, that
// calls h on every change; ensure runs it.
func (ws *watchers) startInformer(s scope, w *watcher, lw *toolscache.ListWatch, src objectSource, h handler) error {
	// The source says whether it serves watch-lists (a fake dynamic client does not: then
	// the list). Its objects are cachedObjects already.
	inf := toolscache.NewSharedIndexInformer(toolscache.ToListWatcherWithWatchListSemantics(lw, src), &cachedObject{}, 0, toolscache.Indexers{})
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
func (ws *watchers) over(s scope, w *watcher, seen int) error {
	return ws.refuse(s, w, seen, nil)
}

// tooLarge stops the informer w of scope s, whose peer answered over a byte limit, and
// records the scope as over the cap, as over does.
func (ws *watchers) tooLarge(s scope, w *watcher, tl *peers.TooLargeError) error {
	return ws.refuse(s, w, 0, tl)
}

// refuse is over (tl nil) and tooLarge.
func (ws *watchers) refuse(s scope, w *watcher, seen int, tl *peers.TooLargeError) error {
	ws.mu.Lock()
	if ws.all[s] != w {
		ws.mu.Unlock()
		return &TooManyObjectsError{Peer: s.cluster, Kind: s.gvk.Kind, Namespace: s.namespace, Seen: seen, Limit: w.limit, TooLarge: tl}
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
func (ws *watchers) under(s scope, w *watcher) {
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

// overCapErr returns the error of scope s if it is over the cap, else nil.
func (ws *watchers) overCapErr(s scope) error {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if c, ok := ws.capped[s]; ok {
		return c.err(s)
	}
	return nil
}

// overCapScopes returns the scopes over the cap.
func (ws *watchers) overCapScopes() []scope {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	out := make([]scope, 0, len(ws.capped))
	for s := range ws.capped {
		out = append(out, s)
	}
	return out
}

// get returns the watcher of scope s, if running.
func (ws *watchers) get(s scope) (*watcher, bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w, ok := ws.all[s]
	return w, ok
}

// lookup finds the object key in the informers of the scopes that cover it: the
// namespace's own scope, the all-namespaces scope and the watch of the key by name.
// Their selectors may differ (each is derived from the rules that use the scope), so the
// object is looked for in all of them, and its absence is proven only when every covering
// informer has synced and none holds it: then it matches no rule that reads these scopes.
// synced is false when no informer covers the key or one has not synced.
func (ws *watchers) lookup(cluster string, gvk schema.GroupVersionKind, namespace, name string) (obj *unstructured.Unstructured, synced bool, err error) {
	c, synced, err := ws.lookupCached(cluster, gvk, namespace, name)
	if c == nil || err != nil {
		return nil, synced, err
	}
	if obj, err = c.object(gvk); err != nil {
		return nil, false, err
	}
	return obj, true, nil
}

// lookupCached is lookup without decoding the object found: the informer's cachedObject,
// which its caller must not change.
func (ws *watchers) lookupCached(cluster string, gvk schema.GroupVersionKind, namespace, name string) (obj *cachedObject, synced bool, err error) {
	key := name
	if namespace != "" {
		key = namespace + "/" + name
	}
	scopes := []scope{{cluster: cluster, gvk: gvk, namespace: namespace}, {cluster: cluster, gvk: gvk, namespace: namespace, name: name}}
	if namespace != "" {
		scopes = append(scopes, scope{cluster: cluster, gvk: gvk})
	}
	covered, allSynced := false, true
	var lastErr error
	for _, s := range scopes {
		w, ok := ws.get(s)
		capErr := ws.overCapErr(s)
		if !ok {
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

// retain stops every informer whose scope keep rejects, and forgets such scopes over the
// cap.
func (ws *watchers) retain(keep func(scope) bool) {
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

// waitSynced waits up to d for the scope's informer to sync. It waits in real time, not
// on the engine's clock: it polls the informer's progress over the network, and decides
// nothing but how long a refresh waits before it queues what the scope holds.
func (ws *watchers) waitSynced(s scope, d time.Duration) bool {
	w, ok := ws.get(s)
	if !ok {
		return false
	}
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, d, true, func(context.Context) (bool, error) {
		return w.informer.HasSynced(), nil
	})
	return err == nil
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

// stop stops the informer of scope s, if running.
func (ws *watchers) stop(s scope) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if w, ok := ws.all[s]; ok {
		w.cancel()
		delete(ws.all, s)
	}
}

// copiesSelector is the label selector of the local informers: the copies, which all
// carry the ownership label (planner.Mark). Objects made in this cluster, which rules
// never write, are not watched: one matters only when it is in the way of a copy, and
// the create of that copy finds it (inTheWay).
var copiesSelector = v1alpha1.OwnershipLabel

// joinSelectors ANDs label selectors given as strings ("" selects everything).
func joinSelectors(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, ",")
}

// sourceSelector is the label selector of a peer's informer read by rules whose label
// alternatives are alts: what every one of them may match (rules.CommonSelector), or ""
// when they share no label requirement.
func sourceSelector(alts []labels.Selector) string {
	return rules.CommonSelector(alts).String()
}

// hasCopyLabel reports whether the local informers (copiesSelector) see u.
func hasCopyLabel(u *unstructured.Unstructured) bool {
	_, ok := u.GetLabels()[copiesSelector]
	return ok
}

// inTheWay is called when the create of a copy found an object at its key that the local
// informers do not hold: one made in this cluster (no ownership label). The object is
// then watched by name, so that the copy's reconcile sees it (a conflict: it is never
// touched) and is queued again when it changes or goes away; a copy the cache has not
// seen yet is left to its own event.
//
// Each such object costs a watch; beyond maxKeyWatches of a kind, the local informers of
// the kind go back to carrying every object (localSelector), which then shows the objects
// in the way to every reconcile, and the rules say so.
//
// The watch runs until ctx is done (or the scope is retained no more): ctx is the
// engine's run context, which the workers pass down to every reconcile.
func (e *Engine) inTheWay(ctx context.Context, it item, ri dynamic.ResourceInterface) {
	obj, err := ri.Get(ctx, it.name, metav1.GetOptions{})
	if err != nil || hasCopyLabel(obj) {
		return
	}
	if e.watchers.keyWatches(it.gvk) >= maxKeyWatches {
		e.local.mu.Lock()
		if e.local.every == nil {
			e.local.every = map[schema.GroupVersionKind]bool{}
		}
		first := !e.local.every[it.gvk]
		e.local.every[it.gvk] = true
		e.local.mu.Unlock()
		if first {
			e.log.Info("many objects made here are in the way of copies: watching every local object of the kind", "kind", it.gvk.String(), "watchedByName", maxKeyWatches)
			e.triggerRefresh()
		}
		return
	}
	s := keyScope(it.gvk, it.namespace, it.name)
	if err := e.watchers.ensure(ctx, s, "", 0, e.localClient(), e.opts.Mapper, e.onEvent); err != nil {
		e.log.Error(err, "watching an object in the way of a copy", "object", it.String())
		return
	}
	e.log.V(1).Info("an object without the ownership mark is in the way of a copy; watching it", "object", it.String())
}

// maxKeyWatches bounds the objects of one kind watched by name (inTheWay).
const maxKeyWatches = 100

// keyWatches counts the local watches by name of objects of the kind.
func (ws *watchers) keyWatches(gvk schema.GroupVersionKind) int {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	n := 0
	for s := range ws.all {
		if s.cluster == "" && s.name != "" && s.gvk == gvk {
			n++
		}
	}
	return n
}

// localSelector is the label selector of the local informers of the kind: the copies,
// unless too many objects made here are in the way of copies (inTheWay).
func (e *Engine) localSelector(gvk schema.GroupVersionKind) string {
	e.local.mu.Lock()
	defer e.local.mu.Unlock()
	if e.local.every[gvk] {
		return ""
	}
	return copiesSelector
}

// everyLocal reports whether the local informers of one of the kinds carry every object.
func (e *Engine) everyLocal(gvks []schema.GroupVersionKind) bool {
	e.local.mu.Lock()
	defer e.local.mu.Unlock()
	for _, g := range gvks {
		if e.local.every[g] {
			return true
		}
	}
	return false
}

// settledKey stops the watch of the object at it's key once it is no longer in the way:
// gone (observed nil, with every covering informer synced) or a copy the local informers
// hold again.
func (e *Engine) settledKey(it item, observed *unstructured.Unstructured) {
	if observed != nil && !hasCopyLabel(observed) {
		return
	}
	if e.keyWatched(it) {
		e.watchers.stop(keyScope(it.gvk, it.namespace, it.name))
	}
}

// keyWatched reports whether the key of it is watched by name (inTheWay).
func (e *Engine) keyWatched(it item) bool {
	_, ok := e.watchers.get(keyScope(it.gvk, it.namespace, it.name))
	return ok
}

// noteWatches describes the watches of rule r: the namespaces it reads and the label
// selector of its peers' informers (shared, the selector of the scopes it uses: the
// common requirements of every rule reading them).
func noteWatches(r *ruleEntry, scopeSelectors []string, everyLocal bool) rulestatus.WatchNote {
	kind := r.compiled.GVK.Kind
	local := "; this cluster watches only its copies"
	if everyLocal {
		local = fmt.Sprintf("; this cluster watches every object of the kind, since more than %d objects made here are in the way of copies", maxKeyWatches)
	}
	var by []string
	if r.namespaces != nil {
		by = append(by, "namespaces "+strings.Join(r.namespaces, ", "))
	}
	own := rules.CommonSelector(r.compiled.LabelAlternatives()).String()
	shared := own != ""
	for _, s := range scopeSelectors {
		shared = shared && s != ""
	}
	if shared {
		sel := own
		if len(scopeSelectors) > 0 {
			sel = scopeSelectors[0]
		}
		by = append(by, "labels "+sel)
	}
	if len(by) == 0 {
		msg := fmt.Sprintf("the peers' watches of %s carry every object of the kind: the rule selects by neither namespaces nor a label that every match entry requires", kind)
		if own != "" {
			msg = fmt.Sprintf("the peers' watches of %s carry every object of the kind: the rule shares them with rules that select every label", kind)
		}
		return rulestatus.WatchNote{Reason: v1alpha1.ReasonEveryObjectWatched, Message: msg + local}
	}
	return rulestatus.WatchNote{Narrowed: true, Reason: v1alpha1.ReasonWatchesNarrowed,
		Message: fmt.Sprintf("the peers' watches of %s carry only %s", kind, strings.Join(by, " and ")) + local}
}
