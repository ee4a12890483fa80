package views

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	toolscache "k8s.io/client-go/tools/cache"
)

func TestWatchersCovers(t *testing.T) {
	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	ws := New(Options{})
	ws.all[Scope{Cluster: "a", GVK: cm, Namespace: "ns"}] = &watcher{}
	ws.all[Scope{Cluster: "b", GVK: cm}] = &watcher{}
	for _, tc := range []struct {
		cluster, namespace string
		want               bool
	}{
		{"a", "ns", true},
		{"a", "other", false},
		{"b", "any", true},
		{"c", "ns", false},
	} {
		if got := ws.Covers(tc.cluster, cm, tc.namespace); got != tc.want {
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
		local             bool // looked up in the local cluster, not in peer p
		scopes            map[Scope]*watcher
		wantObj, wantSync bool
	}{
		{name: "in the all-namespaces scope, not in the namespace's narrower one",
			scopes:  map[Scope]*watcher{{Cluster: "p", GVK: cm, Namespace: "ns"}: listed(t, cm), {Cluster: "p", GVK: cm}: listed(t, cm, web)},
			wantObj: true, wantSync: true},
		{name: "in neither: absent",
			scopes:   map[Scope]*watcher{{Cluster: "p", GVK: cm, Namespace: "ns"}: listed(t, cm), {Cluster: "p", GVK: cm}: listed(t, cm)},
			wantSync: true},
		{name: "absent from one, the other not synced: unknown",
			scopes: map[Scope]*watcher{{Cluster: "p", GVK: cm, Namespace: "ns"}: listed(t, cm), {Cluster: "p", GVK: cm}: unsynced}},
		{name: "found in one, the other not synced: found",
			scopes:  map[Scope]*watcher{{Cluster: "p", GVK: cm, Namespace: "ns"}: listed(t, cm, web), {Cluster: "p", GVK: cm}: unsynced},
			wantObj: true, wantSync: true},
		{name: "the local watch of the key by name", local: true,
			scopes:  map[Scope]*watcher{{GVK: cm, Namespace: "ns"}: listed(t, cm), KeyScope(cm, "ns", "web"): listed(t, cm, web)},
			wantObj: true, wantSync: true},
		{name: "a peer's scope by name is not read (Ensure refuses it)",
			scopes:   map[Scope]*watcher{{Cluster: "p", GVK: cm, Namespace: "ns"}: listed(t, cm), {Cluster: "p", GVK: cm, Namespace: "ns", Name: "web"}: listed(t, cm, web)},
			wantSync: true},
		{name: "no scope covers it: unknown",
			scopes: map[Scope]*watcher{{Cluster: "p", GVK: cm, Namespace: "other"}: listed(t, cm, web)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := New(Options{})
			ws.all = tc.scopes
			cluster := "p"
			if tc.local {
				cluster = ""
			}
			obj, synced, err := ws.Lookup(cluster, cm, "ns", "web")
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

// TestNewScope: a scope is normalised by the cluster's mapper: a cluster-scoped kind has
// no namespace; a kind the cluster does not serve is an error that names the cluster.
func TestNewScope(t *testing.T) {
	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	node := schema.GroupVersionKind{Version: "v1", Kind: "Node"}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(cm, meta.RESTScopeNamespace)
	mapper.Add(node, meta.RESTScopeRoot)
	for _, tc := range []struct {
		cluster string
		gvk     schema.GroupVersionKind
		want    Scope
		wantErr string
	}{
		{cluster: "", gvk: cm, want: Scope{GVK: cm, Namespace: "ns"}},
		{cluster: "east", gvk: node, want: Scope{Cluster: "east", GVK: node}},
		{cluster: "", gvk: schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, wantErr: "is not served by cluster local"},
	} {
		got, err := NewScope(tc.cluster, tc.gvk, "ns", mapper)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("NewScope(%q, %s) = %v, want an error with %q", tc.cluster, tc.gvk.Kind, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("NewScope(%q, %s) = %+v, %v; want %+v", tc.cluster, tc.gvk.Kind, got, err, tc.want)
		}
	}
}

// TestWatchersByScope: what the engine asks of the informers by scope: which run, of
// which kinds, how many local objects are watched by name, what a synced scope holds and
// why one has not synced, and a stopped scope runs no more.
func TestWatchersByScope(t *testing.T) {
	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	secret := schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	local := Scope{GVK: cm, Namespace: "ns"}
	peer := Scope{Cluster: "east", GVK: cm}
	keyA, keyB := KeyScope(cm, "ns", "a"), KeyScope(cm, "ns", "b")
	stopped := 0
	unsynced := &watcher{informer: &fakeInformer{store: toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)}}
	unsynced.setErr(errors.New("forbidden"))
	ws := New(Options{})
	ws.all = map[Scope]*watcher{
		local: listed(t, cm, cmObj("ns", "web", nil)),
		peer:  unsynced,
		keyA:  {cancel: func() { stopped++ }},
		keyB:  {cancel: func() { stopped++ }},
		// A peer's scope by name is not a local watch of an object in the way.
		{Cluster: "east", GVK: cm, Namespace: "ns", Name: "a"}: {},
	}
	if !ws.Running(local) || ws.Running(Scope{GVK: secret, Namespace: "ns"}) {
		t.Error("Running: want the local scope only")
	}
	if !ws.WatchesKind("", cm) || !ws.WatchesKind("east", cm) || ws.WatchesKind("", secret) || ws.WatchesKind("west", cm) {
		t.Error("WatchesKind: want ConfigMaps, here and on east only")
	}
	if n := ws.KeyWatches(cm); n != 2 {
		t.Errorf("KeyWatches = %d, want 2", n)
	}
	if objs, ok := ws.Objects(local, time.Second); !ok || len(objs) != 1 || objs[0].Name() != "web" {
		t.Errorf("Objects of the synced scope = %v, %v; want web", objs, ok)
	}
	if _, ok := ws.Objects(peer, 50*time.Millisecond); ok {
		t.Error("Objects of a scope that has not synced: ok")
	}
	for _, tc := range []struct {
		s       Scope
		running bool
		err     string
	}{{local, true, ""}, {peer, true, "forbidden"}, {Scope{Cluster: "west", GVK: cm}, false, ""}} {
		running, err := ws.SyncErr(tc.s)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if running != tc.running || got != tc.err {
			t.Errorf("SyncErr(%s) = %v, %q; want %v, %q", tc.s, running, got, tc.running, tc.err)
		}
	}
	ws.Stop(keyA)
	ws.Stop(keyA)
	if ws.Running(keyA) || stopped != 1 || ws.KeyWatches(cm) != 1 {
		t.Errorf("after Stop: running %v, cancelled %d times, %d watches by name; want stopped once, 1 left", ws.Running(keyA), stopped, ws.KeyWatches(cm))
	}
}

// configMapClient returns the kind and resource of ConfigMaps, a mapper of them, and a
// fake dynamic client holding objs.
func configMapClient(objs ...runtime.Object) (schema.GroupVersionKind, schema.GroupVersionResource, meta.RESTMapper, *dynamicfake.FakeDynamicClient) {
	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(cm, meta.RESTScopeNamespace)
	return cm, gvr, mapper, dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "ConfigMapList"}, objs...)
}

// watchFirst returns Watchers running the informer of the ConfigMaps of namespace ns of
// the peer "first" through dyn, and its scope.
func watchFirst(ctx context.Context, t *testing.T, cm schema.GroupVersionKind, mapper meta.RESTMapper, dyn *dynamicfake.FakeDynamicClient, h Handler) (*Watchers, Scope) {
	t.Helper()
	ws := New(Options{})
	s := Scope{Cluster: "first", GVK: cm, Namespace: "ns"}
	if err := ws.Ensure(ctx, s, "", 0, Client{Dynamic: dyn}, mapper, h); err != nil {
		t.Fatal(err)
	}
	return ws, s
}

// TestWaitSyncedEndsWithTheInformer: a wait for a scope whose informer is stopped before
// it syncs (its scope dropped, its peer's connection changed) ends then, not after its
// whole timeout: every refresh waits for each scope it queues, and waits left polling a
// stopped informer for a minute cost the idle member its CPU.
func TestWaitSyncedEndsWithTheInformer(t *testing.T) {
	cm, _, mapper, dyn := configMapClient()
	block := make(chan struct{})
	defer close(block)
	dyn.PrependReactor("list", "configmaps", func(clienttesting.Action) (bool, runtime.Object, error) {
		<-block // the list never answers: the informer never syncs
		return true, nil, errors.New("closed")
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ws, s := watchFirst(ctx, t, cm, mapper, dyn, func(Scope, *Cached, *Cached) {})
	done := make(chan bool, 1)
	go func() { done <- ws.WaitSynced(s, time.Minute) }()
	time.Sleep(100 * time.Millisecond)
	ws.Stop(s)
	select {
	case synced := <-done:
		if synced {
			t.Error("WaitSynced = true for an informer that never synced")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WaitSynced still waits 5 s after its informer was stopped")
	}
}

// TestSyncErrOfAFailedList: a scope whose list fails reports why (SyncErr) while it has
// not synced: the informer's list records its error.
func TestSyncErrOfAFailedList(t *testing.T) {
	cm, gvr, mapper, dyn := configMapClient()
	dyn.PrependReactor("list", "configmaps", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(gvr.GroupResource(), "", errors.New("no"))
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ws, s := watchFirst(ctx, t, cm, mapper, dyn, func(Scope, *Cached, *Cached) {})
	deadline := time.Now().Add(10 * time.Second)
	for {
		running, err := ws.SyncErr(s)
		if !running {
			t.Fatal("SyncErr: the scope does not run")
		}
		if err != nil {
			if !apierrors.IsForbidden(err) {
				t.Errorf("SyncErr = %v, want the list's Forbidden", err)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("SyncErr reports no error 10 s after the list failed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHandlerGetsEveryChange: the handler gets each add, update and delete in order, with
// the old and new objects.
func TestHandlerGetsEveryChange(t *testing.T) {
	cm, gvr, mapper, dyn := configMapClient(cmObj("ns", "a", map[string]string{"v": "1"}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := make(chan string, 10)
	v := func(c *Cached) string {
		u, err := c.MetadataOnly(cm)
		if err != nil {
			return err.Error()
		}
		return u.GetLabels()["v"]
	}
	h := func(_ Scope, o, n *Cached) {
		ev, c := "add", n
		switch {
		case o != nil && n != nil:
			ev = "update " + v(o) + "->" + v(n)
		case n == nil:
			ev, c = "delete", o
		}
		events <- ev + " " + c.Name()
	}
	ws, s := watchFirst(ctx, t, cm, mapper, dyn, h)
	if !ws.WaitSynced(s, 10*time.Second) {
		t.Fatal("not synced")
	}
	res := dyn.Resource(gvr).Namespace("ns")
	if _, err := res.Update(ctx, cmObj("ns", "a", map[string]string{"v": "2"}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := res.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 3 {
		select {
		case ev := <-events:
			got = append(got, ev)
		case <-time.After(10 * time.Second):
			t.Fatalf("events so far %q; want 3", got)
		}
	}
	want := []string{"add a", "update 1->2 a", "delete a"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestEnsureRefusesAPeersScopeByName: only the local cluster's objects are watched by
// name; Lookup reads a peer's kind from its namespace's and all namespaces' scopes.
func TestEnsureRefusesAPeersScopeByName(t *testing.T) {
	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	ws := New(Options{})
	err := ws.Ensure(context.Background(), Scope{Cluster: "p", GVK: cm, Namespace: "ns", Name: "web"}, "", 0, Client{}, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "only the local cluster's objects are watched by name") {
		t.Errorf("Ensure of a peer's scope by name: %v; want it refused", err)
	}
	if ws.Running(Scope{Cluster: "p", GVK: cm, Namespace: "ns", Name: "web"}) {
		t.Error("the refused scope runs")
	}
}
