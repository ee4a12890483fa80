package views

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	dynamicfake "k8s.io/client-go/dynamic/fake"
)

func TestOverLimit(t *testing.T) {
	for _, tc := range []struct {
		n, limit int
		want     bool
	}{
		{0, 0, false},
		{1_000_000, 0, false}, // no cap
		{20, 20, false},
		{21, 20, true},
		{1, 1, false},
		{2, 1, true},
	} {
		if got := overLimit(tc.n, tc.limit); got != tc.want {
			t.Errorf("overLimit(%d, %d) = %v, want %v", tc.n, tc.limit, got, tc.want)
		}
	}
}

func TestNextOverCapDelay(t *testing.T) {
	base := time.Minute
	var got []time.Duration
	d := time.Duration(0)
	for range 6 {
		d = nextOverCapDelay(d, base)
		got = append(got, d)
	}
	want := []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 8 * time.Minute, 8 * time.Minute}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("delays (-want +got):\n%s", diff)
	}
}

func TestTooManyObjectsMessage(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  TooManyObjectsError
		want string
	}{
		{
			name: "a namespace",
			err:  TooManyObjectsError{Peer: "first", Kind: "ConfigMap", Namespace: "cap", Seen: 21, Limit: 20, Retry: 2 * time.Second},
			want: "peer first offers more than 20 objects of kind ConfigMap in namespace cap (at least 21 seen; the cap is 20 per watch, --max-peer-objects on this cluster): " +
				"they are not watched and the copies already made from first are kept as they are; tried again every 2s",
		},
		{
			name: "all namespaces",
			err:  TooManyObjectsError{Peer: "east", Kind: "Secret", Seen: 20001, Limit: 20000, Retry: time.Minute},
			want: "peer east offers more than 20000 objects of kind Secret in all namespaces (at least 20001 seen; the cap is 20000 per watch, --max-peer-objects on this cluster): " +
				"they are not watched and the copies already made from east are kept as they are; tried again every 1m0s",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.err.Error()); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
		})
	}
}

// pagedLister serves n objects in pages, as an API server does with limit and continue.
type pagedLister struct {
	n     int
	calls []metav1.ListOptions
}

func (p *pagedLister) list(_ context.Context, opts metav1.ListOptions) (*cachedList, error) {
	p.calls = append(p.calls, opts)
	start := 0
	if opts.Continue != "" {
		fmt.Sscanf(opts.Continue, "%d", &start)
	}
	end := p.n
	if opts.Limit > 0 {
		end = min(p.n, start+int(opts.Limit))
	}
	l := &cachedList{ListMeta: metav1.ListMeta{ResourceVersion: "7"}}
	for i := start; i < end; i++ {
		c, err := compact(cmObj("ns", fmt.Sprintf("o-%d", i), nil), cmGVK)
		if err != nil {
			return nil, err
		}
		l.Items = append(l.Items, c)
	}
	if end < p.n {
		l.Continue = fmt.Sprint(end)
	}
	return l, nil
}

func TestListCapped(t *testing.T) {
	for _, tc := range []struct {
		name               string
		objects, limit     int
		wantList           bool
		wantSeen, wantCall int
	}{
		{name: "no cap: one list as asked", objects: 1200, limit: 0, wantList: true, wantSeen: 1200, wantCall: 1},
		{name: "under the cap", objects: 20, limit: 20, wantList: true, wantSeen: 20, wantCall: 1},
		{name: "over a small cap: one page of cap+1", objects: 25, limit: 20, wantSeen: 21, wantCall: 1},
		{name: "under a large cap: every page", objects: 1200, limit: 20000, wantList: true, wantSeen: 1200, wantCall: 3},
		{name: "over a large cap: stops past it", objects: 5000, limit: 1000, wantSeen: 1500, wantCall: 3},
		{name: "empty", objects: 0, limit: 10, wantList: true, wantSeen: 0, wantCall: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &pagedLister{n: tc.objects}
			l, seen, err := listCapped(context.Background(), metav1.ListOptions{ResourceVersion: "0", LabelSelector: "a=b"}, tc.limit, p.list)
			if err != nil {
				t.Fatal(err)
			}
			if (l != nil) != tc.wantList || seen != tc.wantSeen || len(p.calls) != tc.wantCall {
				t.Fatalf("list %v, seen %d after %d calls; want list %v, seen %d after %d calls", l != nil, seen, len(p.calls), tc.wantList, tc.wantSeen, tc.wantCall)
			}
			if l != nil && (len(l.Items) != tc.objects || l.Continue != "") {
				t.Errorf("the list has %d items, continue %q; want %d, none", len(l.Items), l.Continue, tc.objects)
			}
			for _, c := range p.calls {
				if c.LabelSelector != "a=b" {
					t.Errorf("the selector was lost: %+v", c)
				}
				if tc.limit > 0 && (c.ResourceVersion != "" || c.Limit < 1 || c.Limit > overCapPageSize) {
					t.Errorf("a capped list page asks %+v: want a consistent read in pages of at most %d", c, overCapPageSize)
				}
			}
		})
	}
}

func initialEnd() *unstructured.Unstructured {
	u := cmObj("", "", nil)
	u.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
	return u
}

func TestCappedWatch(t *testing.T) {
	add := func(n int) []watch.Event {
		var out []watch.Event
		for i := range n {
			out = append(out, watch.Event{Type: watch.Added, Object: cmObj("ns", fmt.Sprintf("o-%d", i), nil)})
		}
		return out
	}
	del := watch.Event{Type: watch.Deleted, Object: cmObj("ns", "o-0", nil)}
	mod := watch.Event{Type: watch.Modified, Object: cmObj("ns", "o-1", nil)}
	end := watch.Event{Type: watch.Bookmark, Object: initialEnd()}
	cat := func(parts ...[]watch.Event) []watch.Event {
		var out []watch.Event
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	for _, tc := range []struct {
		name       string
		before     int // the count before the watch (a list, or the last watch)
		initial    bool
		limit      int
		events     []watch.Event
		wantOver   int
		wantSynced bool
		wantEvents int
		wantCount  int
	}{
		{name: "watch-list under the cap, then adds and deletes within it", before: 40, initial: true, limit: 5,
			events: cat(add(3), []watch.Event{end}, add(2), []watch.Event{del, mod}, add(1)), wantSynced: true, wantEvents: 9, wantCount: 5},
		{name: "over the cap in the initial events", initial: true, limit: 3, events: add(10), wantOver: 4, wantEvents: 3, wantCount: 3},
		{name: "grows past the cap while watching", initial: true, limit: 5, events: cat(add(3), []watch.Event{end}, add(3)),
			wantOver: 6, wantSynced: true, wantEvents: 6, wantCount: 5},
		{name: "a resumed watch goes on from the count", before: 4, limit: 5, events: add(2), wantOver: 6, wantEvents: 1, wantCount: 5},
		{name: "a resumed watch under the cap", before: 4, limit: 5, events: cat([]watch.Event{del}, add(2)), wantEvents: 3, wantCount: 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The events are sent before the watch is read: the fake's Stop closes its
			// channel, which a later send would panic on.
			fw := watch.NewFakeWithChanSize(100, false)
			for _, ev := range tc.events {
				fw.Action(ev.Type, ev.Object)
			}
			count := &streamCount{}
			count.set(tc.before)
			over, synced := 0, false
			cw := newCappedWatch(fw, count, tc.initial, tc.limit, func(n int) { over = n }, func() { synced = true })
			got := 0
			timeout := time.After(5 * time.Second)
		loop:
			for got < tc.wantEvents || tc.wantOver > 0 {
				select {
				case _, ok := <-cw.ResultChan():
					if !ok {
						break loop
					}
					got++
				case <-timeout:
					break loop
				}
			}
			cw.Stop()
			for range cw.ResultChan() { // closed once the watch has counted what it delivered
			}
			if n := count.add(0); got != tc.wantEvents || over != tc.wantOver || synced != tc.wantSynced || n != tc.wantCount {
				t.Errorf("%d events, over(%d), synced %v, count %d; want %d events, over(%d), synced %v, count %d",
					got, over, synced, n, tc.wantEvents, tc.wantOver, tc.wantSynced, tc.wantCount)
			}
			if tc.wantOver > 0 && !fw.IsStopped() {
				t.Error("the watch over the cap was not stopped")
			}
		})
	}
}

// TestWatchersOverCap: a scope over the cap is a view that failed, never one without
// the object: lookup says not synced, with the error; ensure does not start it again
// before its retry; the first refusal is reported as first, and syncing under the cap
// clears it.
func TestWatchersOverCap(t *testing.T) {
	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	s := Scope{Cluster: "first", GVK: cm, Namespace: "cap"}
	ws := New(Options{})
	ws.retry = time.Hour
	type report struct {
		first bool
		seen  int
		retry time.Duration
	}
	var reports []report
	unders := 0
	ws.onOver = func(got Scope, err *TooManyObjectsError, first bool) {
		if got != s {
			t.Errorf("over the cap: scope %s, want %s", got, s)
		}
		reports = append(reports, report{first, err.Seen, err.Retry})
	}
	ws.onUnder = func(Scope) { unders++ }
	cancelled := 0
	start := func() *watcher {
		w := &watcher{limit: 20, selector: "x", cancel: func() { cancelled++ }}
		ws.all[s] = w
		return w
	}

	w := start()
	err := ws.over(s, w, 21)
	var tm *TooManyObjectsError
	if !errors.As(err, &tm) || tm.Limit != 20 || tm.Seen != 21 {
		t.Fatalf("over = %v, want a TooManyObjectsError at 21 over 20", err)
	}
	if _, running := ws.get(s); running || cancelled != 1 {
		t.Fatalf("the informer over the cap runs (cancelled %d times)", cancelled)
	}
	obj, synced, err := ws.Lookup("first", cm, "cap", "o-1")
	if obj != nil || synced || !errors.As(err, &tm) {
		t.Errorf("lookup over the cap = %v, synced %v, %v; want not synced with the error", obj, synced, err)
	}
	if err := ws.Ensure(context.Background(), s, "x", 20, Client{}, nil, nil); !errors.As(err, &tm) {
		t.Errorf("ensure before the retry = %v, want the scope not started", err)
	}
	if got := ws.OverCapScopes(); len(got) != 1 || got[0] != s {
		t.Errorf("overCapScopes = %v", got)
	}

	// Tried again and still over: reported again, not as first, backing off.
	w = start()
	_ = ws.over(s, w, 21)
	// A stale informer (already replaced) going over changes nothing.
	_ = ws.over(s, w, 30)
	want := []report{{true, 21, time.Hour}, {false, 21, 2 * time.Hour}}
	if diff := cmp.Diff(want, reports, cmp.AllowUnexported(report{})); diff != "" {
		t.Errorf("reports (-want +got):\n%s", diff)
	}

	// Tried again and under the cap: cleared.
	w = start()
	ws.under(s, w)
	ws.under(s, w)
	if err := ws.OverCapErr(s); err != nil || unders != 1 {
		t.Errorf("after syncing under the cap: %v, %d reports; want none, 1", err, unders)
	}
	if !strings.Contains(fmt.Sprint(reports), "true") {
		t.Error("no first report")
	}

	// A scope no rule needs any more is forgotten.
	_ = ws.over(s, w, 25)
	ws.Retain(func(Scope) bool { return false })
	if err := ws.OverCapErr(s); err != nil {
		t.Errorf("a scope no longer needed stays over the cap: %v", err)
	}
}

// TestEnsureCapped runs real informers on a fake API: a scope whose peer offers more
// than the cap when its watch starts caches nothing and is over the cap; one that grows
// past the cap while watched stops and drops its cache; both are views that failed, not
// views without objects; tried again under the cap, the scope syncs and is no longer over.
func TestEnsureCapped(t *testing.T) {
	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(cm, meta.RESTScopeNamespace)
	var objs []runtime.Object
	for i := range 25 {
		objs = append(objs, cmObj("many", fmt.Sprintf("o-%02d", i), nil))
	}
	for i := range 15 {
		objs = append(objs, cmObj("grow", fmt.Sprintf("o-%02d", i), nil))
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "ConfigMapList"}, objs...)
	ws := New(Options{})
	ws.retry = time.Hour
	var mu sync.Mutex
	overs, unders := map[Scope]int{}, map[Scope]int{}
	ws.onOver = func(s Scope, _ *TooManyObjectsError, _ bool) { mu.Lock(); overs[s]++; mu.Unlock() }
	ws.onUnder = func(s Scope) { mu.Lock(); unders[s]++; mu.Unlock() }
	events := map[Scope]int{}
	h := func(s Scope, _, _ *Cached) { mu.Lock(); events[s]++; mu.Unlock() }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer ws.Retain(func(Scope) bool { return false })
	waitFor := func(what string, f func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !f() {
			if time.Now().After(deadline) {
				t.Fatalf("not within 10s: %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	count := func(m map[Scope]int, s Scope) int { mu.Lock(); defer mu.Unlock(); return m[s] }

	many := Scope{Cluster: "first", GVK: cm, Namespace: "many"}
	if err := ws.Ensure(ctx, many, "", 20, Client{Dynamic: dyn}, mapper, h); err != nil {
		t.Fatal(err)
	}
	waitFor("the scope of 25 objects is over the cap", func() bool { return ws.OverCapErr(many) != nil })
	if _, running := ws.get(many); running || count(events, many) != 0 {
		t.Errorf("over the cap when it starts: running %v, %d objects passed on; want stopped, none", running, count(events, many))
	}
	if _, synced, err := ws.Lookup("first", cm, "many", "o-01"); synced || err == nil {
		t.Errorf("lookup over the cap: synced %v, %v; want not synced, with the error", synced, err)
	}

	grow := Scope{Cluster: "first", GVK: cm, Namespace: "grow"}
	if err := ws.Ensure(ctx, grow, "", 20, Client{Dynamic: dyn}, mapper, h); err != nil {
		t.Fatal(err)
	}
	if !ws.WaitSynced(grow, 10*time.Second) {
		t.Fatal("the scope of 15 objects did not sync")
	}
	ri := dyn.Resource(gvr).Namespace("grow")
	for i := 15; i < 25; i++ {
		if _, err := ri.Create(ctx, cmObj("grow", fmt.Sprintf("o-%02d", i), nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor("the scope grown to 25 objects is over the cap", func() bool { return ws.OverCapErr(grow) != nil })
	if _, running := ws.get(grow); running {
		t.Error("the scope grown past the cap is still watched")
	}
	if n := count(events, grow); n > 20 {
		t.Errorf("%d objects passed on, more than the cap", n)
	}

	// Back under the cap, and its wait over: tried again, it syncs.
	for i := 10; i < 25; i++ {
		if err := ri.Delete(ctx, fmt.Sprintf("o-%02d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := ws.Ensure(ctx, grow, "", 20, Client{Dynamic: dyn}, mapper, h); err == nil {
		t.Fatal("ensure before the wait is over started the scope")
	}
	ws.mu.Lock()
	ws.capped[grow].retry = time.Now()
	ws.mu.Unlock()
	if err := ws.Ensure(ctx, grow, "", 20, Client{Dynamic: dyn}, mapper, h); err != nil {
		t.Fatal(err)
	}
	if !ws.WaitSynced(grow, 10*time.Second) {
		t.Fatal("the scope back under the cap did not sync")
	}
	if err := ws.OverCapErr(grow); err != nil || count(unders, grow) != 1 {
		t.Errorf("back under the cap: %v, %d reports; want none, 1", err, count(unders, grow))
	}
	if obj, synced, err := ws.Lookup("first", cm, "grow", "o-01"); obj == nil || !synced || err != nil {
		t.Errorf("lookup under the cap: %v, synced %v, %v", obj, synced, err)
	}
	if count(overs, many) != 1 || count(overs, grow) != 1 {
		t.Errorf("over-cap reports: %v", overs)
	}
}
