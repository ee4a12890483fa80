package engine

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	toolscache "k8s.io/client-go/tools/cache"
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
	// err is the last list/watch error (forbidden, unknown kind...), for rule status.
	mu  sync.Mutex
	err error
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
type handler func(s scope, oldObj, newObj *unstructured.Unstructured)

// ensure starts the informer of scope s if it is not running. mapper resolves the kind;
// client lists and watches.
func (ws *watchers) ensure(ctx context.Context, s scope, client dynamic.Interface, mapper meta.RESTMapper, h handler) error {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if _, ok := ws.all[s]; ok {
		return nil
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
			return ri.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return ri.Watch(ctx, opts)
		},
	}
	inf := toolscache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, 0, toolscache.Indexers{})
	w := &watcher{informer: inf}
	_ = inf.SetTransform(func(o any) (any, error) {
		if u, ok := o.(*unstructured.Unstructured); ok {
			u.SetManagedFields(nil)
		}
		return o, nil
	})
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *toolscache.Reflector, err error) {
		w.setErr(err)
	})
	_, _ = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) { h(s, nil, asUnstructured(o)) },
		UpdateFunc: func(o, n any) {
			w.setErr(nil)
			h(s, asUnstructured(o), asUnstructured(n))
		},
		DeleteFunc: func(o any) { h(s, asUnstructured(o), nil) },
	})
	wctx, cancel := context.WithCancel(ctx)
	w.cancel = cancel
	ws.all[s] = w
	go inf.RunWithContext(wctx)
	return nil
}

func asUnstructured(o any) *unstructured.Unstructured {
	switch t := o.(type) {
	case *unstructured.Unstructured:
		return t
	case toolscache.DeletedFinalStateUnknown:
		u, _ := t.Obj.(*unstructured.Unstructured)
		return u
	}
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
		return item.(*unstructured.Unstructured), true, nil
	}
	return nil, false, nil
}

// list returns every object of the kind in the cluster's synced informers.
func (ws *watchers) list(cluster string, gvk schema.GroupVersionKind) []*unstructured.Unstructured {
	ws.mu.Lock()
	var ws2 []*watcher
	for s, w := range ws.all {
		if s.cluster == cluster && s.gvk == gvk {
			ws2 = append(ws2, w)
		}
	}
	ws.mu.Unlock()
	seen := map[string]bool{}
	var out []*unstructured.Unstructured
	for _, w := range ws2 {
		for _, item := range w.informer.GetStore().List() {
			u := item.(*unstructured.Unstructured)
			k := u.GetNamespace() + "/" + u.GetName()
			if !seen[k] {
				seen[k] = true
				out = append(out, u)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].GetNamespace()+"/"+out[i].GetName() < out[j].GetNamespace()+"/"+out[j].GetName()
	})
	return out
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
