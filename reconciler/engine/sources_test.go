package engine

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/peers"
)

// read is a peer whose objects are read.
func read(name string, id types.UID) peers.Peer {
	return peers.Connected(name, id, nil).WithConfig(&rest.Config{}, nil, nil)
}

// newSourcesEngine is an engine on fakes, reading the peers ps through the views fake,
// with a fake clock.
func newSourcesEngine(t *testing.T, ps *peerList, fake *fakeViews, objs ...client.Object) (*Engine, *clocktesting.FakeClock) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(cmGVK, meta.RESTScopeNamespace)
	clk := clocktesting.NewFakeClock(fakeStart)
	e, err := New(Options{LocalID: "uid-local", LocalName: "local", Namespace: v1alpha1.DefaultNamespace,
		Client: crfake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build(), Mapper: mapper, Peers: ps, Metrics: NewMetrics(nil), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	e.log = logr.Discard()
	t.Cleanup(e.queue.ShutDown)
	e.views = fake
	return e, clk
}

// sourceStates lists the snapshot's sources as name=readable.
func sourceStates(e *Engine, cache **sourceCache) ([]string, error) {
	snap, _, err := e.snapshotFor(context.Background(), cmGVK, cache)
	var out []string
	for _, s := range snap.Sources {
		r := "unread"
		if s.Readable {
			r = "read"
		}
		out = append(out, s.Name+"="+string(s.ClusterID)+"="+r)
	}
	return out, err
}

// TestSourcesFollowThePeers: a worker's sources are made once for the peers listed, and
// made again whenever what the engine reads of them changes, in place included.
func TestSourcesFollowThePeers(t *testing.T) {
	ps := &peerList{list: []peers.Peer{read("a", "uid-a"), {Name: "b", ClusterID: "uid-b"}}}
	fake := &fakeViews{}
	fake.hold("a", cmGVK, &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"namespace": "ns", "name": "cm"}}})
	e, _ := newSourcesEngine(t, ps, fake)
	var cache *sourceCache
	steps := []struct {
		name   string
		change func()
		want   []string
	}{
		{"first", func() {}, []string{"a=uid-a=read", "b=uid-b=unread"}},
		{"b read, in place", func() { ps.list[1] = read("b", "uid-b") }, []string{"a=uid-a=read", "b=uid-b=read"}},
		{"a not Ready, in place", func() { ps.list[0].Ready = false }, []string{"a=uid-a=unread", "b=uid-b=read"}},
		{"a another cluster, in place", func() { ps.list[0] = read("a", "uid-a2") }, []string{"a=uid-a2=read", "b=uid-b=read"}},
		{"a renamed, in place", func() { ps.list[0] = read("a2", "uid-a2") }, []string{"a2=uid-a2=read", "b=uid-b=read"}},
		{"c added", func() { ps.list = append(ps.list, read("c", "uid-c")) }, []string{"a2=uid-a2=read", "b=uid-b=read", "c=uid-c=read"}},
		{"b gone", func() { ps.list = []peers.Peer{ps.list[0], ps.list[2]} }, []string{"a2=uid-a2=read", "c=uid-c=read"}},
	}
	for _, s := range steps {
		s.change()
		got, err := sourceStates(e, &cache)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(s.want, got); diff != "" {
			t.Errorf("%s: sources (-want +got):\n%s", s.name, diff)
		}
	}
	// The same peers: the same sources.
	before := cache
	if _, err := sourceStates(e, &cache); err != nil {
		t.Fatal(err)
	}
	if cache != before {
		t.Errorf("the sources were made again for the same peers")
	}
	// A lookup reads the peer's view.
	ps.list = []peers.Peer{read("a", "uid-a")}
	snap, _, err := e.snapshotFor(context.Background(), cmGVK, &cache)
	if err != nil {
		t.Fatal(err)
	}
	if obj, synced := snap.Sources[0].Lookup(cmGVK, "ns", "cm"); !synced || obj == nil {
		t.Errorf("lookup of a's ns/cm: %v, synced %v; want the object", obj, synced)
	}
}

// TestSourceLookupsRecordForTheirObject: the sources a worker keeps record what their
// lookups meet in the views of the object being planned, not of one planned before.
func TestSourceLookupsRecordForTheirObject(t *testing.T) {
	ps := &peerList{list: []peers.Peer{read("a", "uid-a"), read("b", "uid-b")}}
	fake := &fakeViews{}
	fake.hold("b", cmGVK) // a's view of ConfigMaps is not watched
	e, _ := newSourcesEngine(t, ps, fake)
	var cache *sourceCache
	_, first, err := e.snapshotFor(context.Background(), cmGVK, &cache)
	if err != nil {
		t.Fatal(err)
	}
	snap, second, err := e.snapshotFor(context.Background(), cmGVK, &cache)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range snap.Sources {
		s.Lookup(cmGVK, "ns", "cm")
	}
	want := map[types.UID]bool{"uid-a": true}
	if diff := cmp.Diff(want, second.failingViews); diff != "" {
		t.Errorf("the second object's failing views (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, second.unstarted); diff != "" {
		t.Errorf("the second object's unstarted views (-want +got):\n%s", diff)
	}
	if len(first.failingViews) != 0 || len(first.unstarted) != 0 {
		t.Errorf("the first object's views got the second's lookups: failing %v, unstarted %v", first.failingViews, first.unstarted)
	}
}

// TestWaitSetsFollowFirstContacts: the peers a create waits for as young or in their
// first contact count from when the engine first listed each, a peer added later
// included, whether or not the worker's sources were made again meanwhile.
func TestWaitSetsFollowFirstContacts(t *testing.T) {
	being := read("a", "uid-a")
	being.Synced = false // Ready, not synced yet: being made
	ps := &peerList{list: []peers.Peer{being}}
	e, clk := newSourcesEngine(t, ps, &fakeViews{})
	var cache *sourceCache
	type ids = map[types.UID]bool
	steps := []struct {
		name                           string
		after                          time.Duration
		change                         func()
		firstContact, young, beingMade ids
	}{
		{name: "first listed", firstContact: ids{"uid-a": true}, young: ids{"uid-a": true}, beingMade: ids{"uid-a": true}},
		{name: "after createWait", after: createWait, young: ids{"uid-a": true}, beingMade: ids{"uid-a": true}},
		{name: "synced", change: func() { ps.list[0] = read("a", "uid-a") }, young: ids{"uid-a": true}},
		{name: "after connectWait", after: connectWait - createWait},
		{name: "b added", after: time.Second, change: func() { ps.list = append(ps.list, read("b", "uid-b")) },
			firstContact: ids{"uid-b": true}, young: ids{"uid-b": true}},
		{name: "b after createWait", after: createWait, young: ids{"uid-b": true}},
		{name: "b after connectWait", after: connectWait - createWait},
	}
	for _, s := range steps {
		clk.Step(s.after)
		if s.change != nil {
			s.change()
		}
		_, vs, err := e.snapshotFor(context.Background(), cmGVK, &cache)
		if err != nil {
			t.Fatal(err)
		}
		e.waitSets(vs)
		for _, c := range []struct {
			what      string
			got, want ids
		}{{"first contact", vs.firstContact, s.firstContact}, {"young", vs.young, s.young}, {"being made", vs.beingMade, s.beingMade}} {
			if c.want == nil {
				c.want = ids{}
			}
			if diff := cmp.Diff(c.want, c.got); diff != "" {
				t.Errorf("%s: %s (-want +got):\n%s", s.name, c.what, diff)
			}
		}
	}
}

// TestWaitSetsKeptFromUnlistedMembers: a member the peers manager does not list yet is
// added to one create's sets, not to the sets the worker keeps for the next.
func TestWaitSetsKeptFromUnlistedMembers(t *testing.T) {
	ps := &peerList{list: []peers.Peer{read("a", "uid-a")}}
	e, clk := newSourcesEngine(t, ps, &fakeViews{}, &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "z"}, Spec: v1alpha1.ClusterSpec{ClusterID: "uid-z"}})
	var cache *sourceCache
	plan := func() *sourceViews {
		_, vs, err := e.snapshotFor(context.Background(), cmGVK, &cache)
		if err != nil {
			t.Fatal(err)
		}
		e.waitSets(vs)
		return vs
	}
	type ids = map[types.UID]bool
	first := plan()
	e.unlistedMembers(context.Background(), first)
	if diff := cmp.Diff(ids{"uid-a": true, "uid-z": true}, first.young); diff != "" {
		t.Errorf("young with the unlisted member (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(ids{"uid-z": true}, first.beingMade); diff != "" {
		t.Errorf("being made with the unlisted member (-want +got):\n%s", diff)
	}
	clk.Step(time.Second)
	next := plan()
	if diff := cmp.Diff(ids{"uid-a": true}, next.young); diff != "" {
		t.Errorf("the next create's young peers (-want +got):\n%s", diff)
	}
	if len(next.beingMade) != 0 {
		t.Errorf("the next create's peers being made: %v, want none", next.beingMade)
	}
}
