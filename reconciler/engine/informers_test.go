package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	toolscache "k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/rules"
)

func TestUselessCopies(t *testing.T) {
	const local, a, b, c types.UID = "uid-local", "uid-a", "uid-b", "uid-c"
	for _, tc := range []struct {
		name    string
		peer    types.UID
		members []types.UID
		keepOwn bool
		want    string
		// seen: the ownership label values (or "" for none) the peer's informer still sees.
		seen, hidden []string
	}{
		{name: "two peers: our copies and the other member's copies are left out", peer: a, members: []types.UID{b, a},
			want: v1alpha1.OwnershipLabel + " notin (uid-b,uid-local)", seen: []string{"", "uid-a", "uid-c"}, hidden: []string{"uid-local", "uid-b"}},
		{name: "status flows back: our copies are kept", peer: a, members: []types.UID{a, b}, keepOwn: true,
			want: v1alpha1.OwnershipLabel + " notin (uid-b)", seen: []string{"", "uid-local", "uid-c"}, hidden: []string{"uid-b"}},
		{name: "a single peer, status flows back: nothing left out", peer: a, members: []types.UID{a}, keepOwn: true, want: "", seen: []string{"", "uid-local"}},
		{name: "invalid label values are not left out", peer: a, members: []types.UID{a, "not a label value!", c},
			want: v1alpha1.OwnershipLabel + " notin (uid-c,uid-local)", seen: []string{""}, hidden: []string{"uid-c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := uselessCopies(local, tc.peer, tc.members, tc.keepOwn)
			if got != tc.want {
				t.Errorf("selector %q, want %q", got, tc.want)
			}
			sel, err := labels.Parse(got)
			if err != nil {
				t.Fatalf("the API server would refuse %q: %v", got, err)
			}
			set := func(v string) labels.Set {
				if v == "" {
					return labels.Set{"app": "x"} // an original: no ownership label
				}
				return labels.Set{v1alpha1.OwnershipLabel: v}
			}
			for _, v := range tc.seen {
				if !sel.Matches(set(v)) {
					t.Errorf("an object labelled %q is left out", v)
				}
			}
			for _, v := range tc.hidden {
				if sel.Matches(set(v)) {
					t.Errorf("an object labelled %q is kept", v)
				}
			}
		})
	}
}

// TestOffered: a peer offers its own objects and copies of non-members' objects, not its
// copies of ours or of other members' (which its informer may hold for syncStatusBack).
func TestOffered(t *testing.T) {
	const local, peer, other, gone types.UID = "uid-local", "uid-peer", "uid-other", "uid-gone"
	members := []types.UID{peer, other}
	for _, tc := range []struct {
		origin types.UID
		want   bool
	}{
		{origin: "", want: true},
		{origin: peer, want: true},
		{origin: gone, want: true},
		{origin: local, want: false},
		{origin: other, want: false},
	} {
		u := &unstructured.Unstructured{Object: map[string]any{}}
		if tc.origin != "" {
			u.SetAnnotations(map[string]string{v1alpha1.OwnershipAnnotation: string(tc.origin)})
		}
		if got := offered(u, local, peer, members); got != tc.want {
			t.Errorf("offered, origin %q = %v, want %v", tc.origin, got, tc.want)
		}
	}
}

// TestWaitForViews: a create waits for the unseen sources within createWait from when
// the object was queued, and past it only for sources whose connection is being made.
func TestWaitForViews(t *testing.T) {
	const a, b types.UID = "uid-a", "uid-b"
	it := item{namespace: "ns", name: "cm"}
	for _, tc := range []struct {
		name               string
		queued             time.Duration // ago; 0: not queued
		unseen, connecting map[types.UID]bool
		want               bool
	}{
		{name: "nothing unseen", queued: time.Second, want: false},
		{name: "one unseen", queued: time.Second, unseen: map[types.UID]bool{a: true}, want: true},
		{name: "waited long enough", queued: createWait + time.Second, unseen: map[types.UID]bool{a: true}, want: false},
		{name: "not queued", unseen: map[types.UID]bool{a: true}, want: false},
		{name: "past createWait, one connecting", queued: createWait + time.Second, unseen: map[types.UID]bool{a: true, b: true}, connecting: map[types.UID]bool{b: true}, want: true},
		{name: "connecting but not unseen", queued: createWait + time.Second, unseen: map[types.UID]bool{a: true}, connecting: map[types.UID]bool{b: true}, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))
			e := &Engine{opts: Options{Clock: clk}}
			if tc.queued > 0 {
				e.seen.Store(it, clk.Now().Add(-tc.queued))
			}
			if got := e.waitForViews(it, tc.unseen, tc.connecting); got != tc.want {
				t.Errorf("waitForViews = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestWatchersCovers(t *testing.T) {
	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	ws := newWatchers()
	ws.all[scope{cluster: "a", gvk: cm, namespace: "ns"}] = &watcher{}
	ws.all[scope{cluster: "b", gvk: cm}] = &watcher{}
	for _, tc := range []struct {
		cluster, namespace string
		want               bool
	}{
		{"a", "ns", true},
		{"a", "other", false},
		{"b", "any", true},
		{"c", "ns", false},
	} {
		if got := ws.covers(tc.cluster, cm, tc.namespace); got != tc.want {
			t.Errorf("covers(%s, %s) = %v, want %v", tc.cluster, tc.namespace, got, tc.want)
		}
	}
}

// fakeInformer is an informer whose store and sync state the test sets.
type fakeInformer struct {
	toolscache.SharedIndexInformer
	synced bool
	store  toolscache.Store
}

func (f *fakeInformer) HasSynced() bool            { return f.synced }
func (f *fakeInformer) GetStore() toolscache.Store { return f.store }

// listed returns a synced watcher whose informer holds objs as the engine caches them.
func listed(t *testing.T, gvk schema.GroupVersionKind, objs ...*unstructured.Unstructured) *watcher {
	t.Helper()
	store := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
	for _, o := range objs {
		c, err := compact(o.DeepCopy(), gvk)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	return &watcher{informer: &fakeInformer{synced: true, store: store}}
}

func cmObj(ns, name string, lbls map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetResourceVersion("1")
	u.SetLabels(lbls)
	return u
}

// TestLookupOverlappingScopes: scopes of one cluster and kind may have different label
// selectors (each from the rules reading it), so an object is looked for in every scope
// that covers its key, and is absent only when every one of them has synced without it.
func TestLookupOverlappingScopes(t *testing.T) {
	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	web := cmObj("ns", "web", map[string]string{"app": "web"})
	unsynced := &watcher{informer: &fakeInformer{store: toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)}}
	for _, tc := range []struct {
		name              string
		scopes            map[scope]*watcher
		wantObj, wantSync bool
	}{
		{name: "in the all-namespaces scope, not in the namespace's narrower one",
			scopes:  map[scope]*watcher{{cluster: "p", gvk: cm, namespace: "ns"}: listed(t, cm), {cluster: "p", gvk: cm}: listed(t, cm, web)},
			wantObj: true, wantSync: true},
		{name: "in neither: absent",
			scopes:   map[scope]*watcher{{cluster: "p", gvk: cm, namespace: "ns"}: listed(t, cm), {cluster: "p", gvk: cm}: listed(t, cm)},
			wantSync: true},
		{name: "absent from one, the other not synced: unknown",
			scopes: map[scope]*watcher{{cluster: "p", gvk: cm, namespace: "ns"}: listed(t, cm), {cluster: "p", gvk: cm}: unsynced}},
		{name: "found in one, the other not synced: found",
			scopes:  map[scope]*watcher{{cluster: "p", gvk: cm, namespace: "ns"}: listed(t, cm, web), {cluster: "p", gvk: cm}: unsynced},
			wantObj: true, wantSync: true},
		{name: "the watch of the key by name",
			scopes:  map[scope]*watcher{{cluster: "p", gvk: cm, namespace: "ns"}: listed(t, cm), {cluster: "p", gvk: cm, namespace: "ns", name: "web"}: listed(t, cm, web)},
			wantObj: true, wantSync: true},
		{name: "no scope covers it: unknown",
			scopes: map[scope]*watcher{{cluster: "p", gvk: cm, namespace: "other"}: listed(t, cm, web)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := newWatchers()
			ws.all = tc.scopes
			obj, synced, err := ws.lookup("p", cm, "ns", "web")
			if err != nil {
				t.Fatal(err)
			}
			if (obj != nil) != tc.wantObj || synced != tc.wantSync {
				t.Errorf("lookup = %v, synced %v; want object %v, synced %v", obj, synced, tc.wantObj, tc.wantSync)
			}
			if obj != nil && (obj.GetName() != "web" || obj.GetLabels()["app"] != "web") {
				t.Errorf("lookup returned %v", obj.Object)
			}
		})
	}
}

func TestNoteWatches(t *testing.T) {
	compile := func(spec v1alpha1.ResourceSyncRuleSpec) *ruleEntry {
		rsr := &v1alpha1.ResourceSyncRule{ObjectMeta: metav1.ObjectMeta{Name: "r"}, Spec: spec}
		c, err := rules.Compile(rsr)
		if err != nil {
			t.Fatal(err)
		}
		return newEntry(rsr, c, nil, false)
	}
	gvk := v1alpha1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	byLabel := []v1alpha1.SyncRule{{Matches: []v1alpha1.SyncRuleMatch{{Labels: []metav1.LabelSelector{{MatchLabels: map[string]string{"app": "web"}}}}}}}
	byNS := []v1alpha1.SyncRule{{Matches: []v1alpha1.SyncRuleMatch{{Namespaces: []string{"a"}}}}}
	for _, tc := range []struct {
		name       string
		r          *ruleEntry
		scopes     []string
		everyLocal bool
		narrowed   bool
		message    string
	}{
		{"by label", compile(v1alpha1.ResourceSyncRuleSpec{GVK: gvk, Rules: byLabel}), []string{"app in (web)"}, false, true, "carry only labels app in (web); this cluster watches only its copies"},
		{"by namespace", compile(v1alpha1.ResourceSyncRuleSpec{GVK: gvk, Rules: byNS}), []string{""}, true, true, "carry only namespaces a; this cluster watches every object"},
		{"every object", compile(v1alpha1.ResourceSyncRuleSpec{GVK: gvk, Rules: []v1alpha1.SyncRule{{}}}), []string{""}, false, false, "selects by neither namespaces nor a label"},
		{"a label, but the watch is shared with a rule taking every label", compile(v1alpha1.ResourceSyncRuleSpec{GVK: gvk, Rules: byLabel}), []string{""}, false, false, "shares them with rules that select every label"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := noteWatches(tc.r, tc.scopes, tc.everyLocal)
			if n.Narrowed != tc.narrowed || !strings.Contains(n.Message, tc.message) || n.Reason == "" {
				t.Errorf("noteWatches = %+v, want narrowed %v and a message with %q", n, tc.narrowed, tc.message)
			}
		})
	}
}

// TestInTheWayBounded: beyond maxKeyWatches objects of a kind in the way of copies, the
// local informers of the kind go back to carrying every object instead of one watch per
// object; an object that is a copy (the cache was behind) is left to its own event.
func TestInTheWayBounded(t *testing.T) {
	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	made := cmObj("ns", "made-here", map[string]string{"app": "x"})
	copied := cmObj("ns", "a-copy", map[string]string{v1alpha1.OwnershipLabel: "uid-peer"})
	dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme(), made, copied)
	ri := dyn.Resource(gvr).Namespace("ns")
	e := &Engine{watchers: newWatchers(), refresh: make(chan struct{}, 1), log: logr.Discard()}
	for i := range maxKeyWatches {
		e.watchers.all[keyScope(cm, "ns", fmt.Sprintf("other-%d", i))] = &watcher{cancel: func() {}}
	}
	e.inTheWay(context.Background(), item{gvk: cm, namespace: "ns", name: "a-copy"}, ri)
	if got := e.localSelector(cm); got != copiesSelector {
		t.Fatalf("after a copy was found: local selector %q, want %q", got, copiesSelector)
	}
	e.inTheWay(context.Background(), item{gvk: cm, namespace: "ns", name: "made-here"}, ri)
	if got := e.localSelector(cm); got != "" {
		t.Errorf("after %d objects in the way: local selector %q, want every object", maxKeyWatches+1, got)
	}
	if !e.everyLocal([]schema.GroupVersionKind{cm}) {
		t.Error("everyLocal: false, want true")
	}
	select {
	case <-e.refresh:
	default:
		t.Error("the watches were not derived again")
	}
	if got := e.localSelector(schema.GroupVersionKind{Version: "v1", Kind: "Secret"}); got != copiesSelector {
		t.Errorf("another kind: local selector %q, want %q", got, copiesSelector)
	}
}
