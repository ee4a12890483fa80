package views

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/peers"
	"github.com/kubectl-registry/kubectl-registry/reconciler/peers/hostilepeer"
)

// TestEnsureTooLarge: a peer's API server that answers the watch of a scope with a 300 MB
// ConfigMap, in the list or in a watch event after two small ones, is read through the
// byte limits: the scope is refused like one over the cap on objects (ResponseTooLarge),
// not watched until it is tried again, and neither the engine nor the client read more
// than a few MiB of it.
func TestEnsureTooLarge(t *testing.T) {
	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(cm, meta.RESTScopeNamespace)
	for _, in := range []string{hostilepeer.InList, hostilepeer.InWatch} {
		t.Run(in, func(t *testing.T) {
			srv := hostilepeer.New("uid-hostile")
			defer srv.Close()
			srv.BigObjectBytes, srv.BigIn = 300<<20, in
			var transportRefusals int
			hc := peers.Limited(srv.Client(), peers.Limits{}, func(*peers.TooLargeError) { transportRefusals++ })
			cfg := &rest.Config{Host: srv.URL}
			ws := New(Options{})
			ws.retry = time.Hour
			overs := make(chan *TooManyObjectsError, 4)
			ws.onOver = func(_ Scope, err *TooManyObjectsError, _ bool) { overs <- err }
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			defer ws.Retain(func(Scope) bool { return false })

			runtime.GC()
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			s := Scope{Cluster: "hostile", GVK: cm, Namespace: "hostile"}
			if err := ws.Ensure(ctx, s, "", DefaultMaxPeerObjects, Client{Config: cfg, HTTPClient: hc}, mapper, func(Scope, *Cached, *Cached) {}); err != nil {
				t.Fatal(err)
			}
			var over *TooManyObjectsError
			select {
			case over = <-overs:
			case <-time.After(30 * time.Second):
				t.Fatal("the scope was not refused within 30s")
			}
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			written := srv.Written.Load()
			t.Logf("the server wrote %d MiB of its 300 MB object; Go heap %d MiB before, %d MiB after, %d MiB allocated meanwhile",
				written>>20, before.HeapAlloc>>20, after.HeapAlloc>>20, (after.TotalAlloc-before.TotalAlloc)>>20)
			if over.TooLarge == nil || over.TooLarge.What != peers.TooLargeObject || over.Reason() != v1alpha1.ReasonResponseTooLarge {
				t.Fatalf("refused with %+v, want an object over the limit", over)
			}
			for _, want := range []string{"peer hostile", "kind ConfigMap in namespace hostile", "3 MiB", "--max-peer-object-bytes", "are kept"} {
				if !strings.Contains(over.Error(), want) {
					t.Errorf("the refusal does not say %q: %s", want, over.Error())
				}
			}
			if err := ws.OverCapErr(s); !errors.As(err, &over) || over.TooLarge == nil {
				t.Errorf("the scope's error: %v", err)
			}
			if _, running := ws.get(s); running {
				t.Error("the refused scope is still watched")
			}
			if err := ws.Ensure(ctx, s, "", DefaultMaxPeerObjects, Client{Config: cfg, HTTPClient: hc}, mapper, nil); err == nil {
				t.Error("the refused scope started again before its wait")
			}
			if transportRefusals != 0 {
				t.Errorf("the engine's refusal reached the connection's hook %d times", transportRefusals)
			}
			if written > 64<<20 {
				t.Errorf("the server wrote %d MiB: the object was read far past the limit", written>>20)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
				t.Errorf("%d MiB allocated while refusing the scope", alloc>>20)
			}
		})
	}
}
