package engine

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
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

// TestWaitForViews: a create waits for sources whose view is still syncing, not for ones
// whose view fails, and not beyond createWait from when the object was queued.
func TestWaitForViews(t *testing.T) {
	const a, b types.UID = "uid-a", "uid-b"
	it := item{namespace: "ns", name: "cm"}
	for _, tc := range []struct {
		name              string
		queued            time.Duration // ago; 0: not queued
		unsynced, failing map[types.UID]bool
		want              bool
	}{
		{name: "all synced", queued: time.Second, want: false},
		{name: "one syncing", queued: time.Second, unsynced: map[types.UID]bool{a: true}, want: true},
		{name: "one failing", queued: time.Second, unsynced: map[types.UID]bool{a: true}, failing: map[types.UID]bool{a: true}, want: false},
		{name: "one failing, one syncing", queued: time.Second, unsynced: map[types.UID]bool{a: true, b: true}, failing: map[types.UID]bool{a: true}, want: true},
		{name: "waited long enough", queued: createWait + time.Second, unsynced: map[types.UID]bool{a: true}, want: false},
		{name: "not queued", unsynced: map[types.UID]bool{a: true}, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &Engine{}
			if tc.queued > 0 {
				e.seen.Store(it, time.Now().Add(-tc.queued))
			}
			if got := e.waitForViews(it, tc.unsynced, tc.failing); got != tc.want {
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
