package engine

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

	"github.com/kubectl-registry/kubectl-registry/reconciler/engine/views"
)

// TestPassesCoalesce: requests made before a pass begins are served by it; any number
// made after it began get one more pass; a pass that ends without beginning serves none;
// passes of different keys run apart.
func TestPassesCoalesce(t *testing.T) {
	type step struct {
		// begin: the pass begins; requests: how many requests arrive while the pass waits
		// before beginning, and after.
		begin         bool
		before, after int
	}
	for _, tc := range []struct {
		name  string
		steps []step // one per pass, in order
		want  int    // passes run
	}{
		{"one request", []step{{begin: true}}, 1},
		{"requests before it began are served", []step{{begin: true, before: 5}}, 1},
		{"requests after it began get one more pass", []step{{begin: true, after: 5}, {begin: true}}, 2},
		{"both", []step{{begin: true, before: 3, after: 3}, {begin: true, before: 2}}, 2},
		{"a pass that never began serves none", []step{{before: 2}, {begin: true}}, 2},
		{"nor does one with no request while it ran", []step{{}}, 1},
		{"a pass asked for after it began that never begins", []step{{begin: true, after: 1}, {before: 1}, {begin: true}}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p passes[string]
			ran := 0
			var wg sync.WaitGroup
			request := func() {
				wg.Add(1)
				go func() {
					defer wg.Done()
					p.run("k", func(func()) { t.Error("a coalesced request ran a pass of its own") })
				}()
			}
			// requests waits until the n requests sent have returned: each one is served
			// by the pass running, so it returns at once.
			requests := func(n int) {
				for range n {
					request()
				}
				wg.Wait()
			}
			p.run("k", func(begin func()) {
				if ran >= len(tc.steps) {
					t.Fatalf("pass %d: more passes than %d", ran+1, len(tc.steps))
				}
				st := tc.steps[ran]
				ran++
				requests(st.before)
				if st.begin {
					begin()
				}
				requests(st.after)
			})
			if ran != tc.want {
				t.Errorf("%d passes, want %d", ran, tc.want)
			}
			if len(p.running) != 0 {
				t.Errorf("running after the last pass: %v", p.running)
			}
		})
	}
}

// TestPassesOfKeysRunApart: a pass of one key does not serve or hold another's.
func TestPassesOfKeysRunApart(t *testing.T) {
	var p passes[string]
	release := make(chan struct{})
	started := make(chan string, 2)
	var wg sync.WaitGroup
	for _, k := range []string{"a", "b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.run(k, func(begin func()) {
				begin()
				started <- k
				<-release
			})
		}()
	}
	var got []string
	for range 2 {
		select {
		case k := <-started:
			got = append(got, k)
		case <-time.After(5 * time.Second):
			t.Fatalf("passes started: %v; want a and b at once", got)
		}
	}
	close(release)
	wg.Wait()
	if got[0] == got[1] || len(p.running) != 0 {
		t.Errorf("passes %v, running %v", got, p.running)
	}
}

// TestRefreshesWhileAScopeSyncsWaitOnce: the passes the refreshes ask of a scope whose
// informer has not synced (a peer slow to answer, or one that never does) wait as one:
// every request after the first returns at once, and the one pass queues what the scope
// holds once it has synced.
func TestRefreshesWhileAScopeSyncsWaitOnce(t *testing.T) {
	cm := func(name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
		u.SetNamespace("ns")
		u.SetName(name)
		return u
	}
	te := newTestEngine(t, cm("a"), cm("b"))
	release := make(chan struct{})
	te.dyn.PrependReactor("list", "configmaps", func(clienttesting.Action) (bool, runtime.Object, error) {
		<-release // the scope syncs only once released
		return false, nil, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := te.e
	s := views.Scope{GVK: cmGVK, Namespace: "ns"}
	if err := e.views.Ensure(ctx, s, "", 0, e.localClient(), e.opts.Mapper, func(views.Scope, *views.Cached, *views.Cached) {}); err != nil {
		t.Fatal(err)
	}
	first := make(chan struct{})
	go func() {
		e.enqueueScope(s)
		close(first)
	}()
	waiting := func() bool {
		e.scopePasses.mu.Lock()
		defer e.scopePasses.mu.Unlock()
		return e.scopePasses.running[s] != nil
	}
	for deadline := time.Now().Add(5 * time.Second); !waiting(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first pass never started")
		}
	}
	for i := range 10 {
		done := make(chan struct{})
		go func() {
			e.enqueueScope(s)
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			close(release)
			t.Fatalf("request %d waits for the scope to sync: not served by the pass that waits", i+2)
		}
	}
	if e.queue.Len() != 0 {
		t.Fatalf("%d items queued before the scope synced", e.queue.Len())
	}
	close(release)
	select {
	case <-first:
	case <-time.After(10 * time.Second):
		t.Fatal("the pass did not end 10 s after the scope could sync")
	}
	if e.queue.Len() != 2 || waiting() {
		t.Errorf("after the pass: %d items queued (want a and b), a pass still running %v", e.queue.Len(), waiting())
	}
}
