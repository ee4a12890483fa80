package engine

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/peers"
)

// TestFirstContacts: a peer's age counts from when the engine first lists it, whatever
// happens meanwhile.
func TestFirstContacts(t *testing.T) {
	f := newFirstContacts()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	steps := []struct {
		id   types.UID
		at   time.Duration
		want time.Duration
	}{
		{"a", 0, 0},
		{"a", 9 * time.Second, 9 * time.Second},
		{"b", 9 * time.Second, 0}, // b is first listed later: its own age
		{"a", 10 * time.Second, 10 * time.Second},
		{"b", 18 * time.Second, 9 * time.Second},
		{"a", time.Hour, time.Hour},
	}
	for _, s := range steps {
		if got := f.age(s.id, t0.Add(s.at)); got != s.want {
			t.Errorf("age(%s, +%s) = %s, want %s", s.id, s.at, got, s.want)
		}
	}
}

// TestUnseenSources: what a create waits for.
func TestUnseenSources(t *testing.T) {
	type ids = map[types.UID]bool
	tests := []struct {
		name                                                  string
		unsynced, failing, firstContact, readable, connecting ids
		want                                                  ids
	}{
		{name: "every view known", readable: ids{"a": true, "b": true}, firstContact: ids{"a": false, "b": false}, want: ids{}},
		{name: "a readable view still syncing", unsynced: ids{"a": true}, readable: ids{"a": true}, want: ids{"a": true}},
		{name: "a failing view is not waited for", unsynced: ids{"a": true}, failing: ids{"a": true}, readable: ids{"a": true}, firstContact: ids{"a": false}, want: ids{}},
		{name: "in its first contact, a view not watched yet is waited for", unsynced: ids{"a": true}, failing: ids{"a": true}, readable: ids{"a": true}, firstContact: ids{"a": true}, want: ids{"a": true}},
		{name: "in its first contact, a peer not readable yet is waited for", readable: ids{"a": false, "b": true}, firstContact: ids{"a": true, "b": true}, want: ids{"a": true}},
		{name: "after its first contact, a peer not readable is not waited for", readable: ids{"a": false}, firstContact: ids{"a": false}, want: ids{}},
		{name: "after its first contact, a peer whose connection is being made is waited for", readable: ids{"a": false}, firstContact: ids{"a": false}, connecting: ids{"a": true}, want: ids{"a": true}},
		{name: "a member not listed yet is waited for while connecting", connecting: ids{"c": true}, want: ids{"c": true}},
		{name: "explicit false entries count for nothing", unsynced: ids{"a": false}, readable: ids{"a": true}, firstContact: ids{"a": false}, connecting: ids{"a": false}, want: ids{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := unseenSources(tt.unsynced, tt.failing, tt.firstContact, tt.readable, tt.connecting)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("unseenSources (-want +got):\n%s", diff)
			}
		})
	}
}

// TestConnectingSources: the sources a create waits for past createWait are the young
// ones whose connection is being made or whose view of the kind is syncing; a failing
// view, or any source past connectWait, is not.
func TestConnectingSources(t *testing.T) {
	type ids = map[types.UID]bool
	tests := []struct {
		name                                           string
		beingMade, young, unsynced, failing, unstarted ids
		want                                           ids
	}{
		{name: "a young connection being made", beingMade: ids{"a": true}, young: ids{"a": true}, want: ids{"a": true}},
		{name: "a young view syncing", young: ids{"a": true}, unsynced: ids{"a": true}, want: ids{"a": true}},
		{name: "a young view failing", young: ids{"a": true}, unsynced: ids{"a": true}, failing: ids{"a": true}, want: ids{}},
		{name: "a young view not started yet", young: ids{"a": true}, unsynced: ids{"a": true}, failing: ids{"a": true}, unstarted: ids{"a": true}, want: ids{"a": true}},
		{name: "a young peer whose view is known", young: ids{"a": true}, want: ids{}},
		{name: "past connectWait nothing", beingMade: ids{"a": true}, unsynced: ids{"a": true}, young: ids{"a": false}, want: ids{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := connectingSources(tt.beingMade, tt.young, tt.unsynced, tt.failing, tt.unstarted)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("connectingSources (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBeingMade: a connection is being made until its first check answers, and while it
// is Ready but not synced or read with the bootstrap credential; a failed one is not.
func TestBeingMade(t *testing.T) {
	for _, tc := range []struct {
		p    peers.Peer
		want bool
	}{
		{peers.Peer{Reason: v1alpha1.ReasonClusterNotConnected}, true},
		{peers.Peer{Reason: v1alpha1.ReasonClusterUnreachable}, false}, // its first check failed
		{peers.Peer{State: v1alpha1.ClusterStateReady, Ready: true}, true},
		{peers.Peer{State: v1alpha1.ClusterStateReady, Ready: true, Synced: true, Bootstrap: true}, true},
		{peers.Peer{State: v1alpha1.ClusterStateReady, Ready: true, Synced: true}, false},
		{peers.Peer{State: v1alpha1.ClusterStateFailed}, false},
		{peers.Peer{State: v1alpha1.ClusterStateInvalidAuthInfo}, false},
	} {
		if got := beingMade(tc.p); got != tc.want {
			t.Errorf("beingMade(%+v) = %v, want %v", tc.p, got, tc.want)
		}
	}
}

// TestWaitRetry: a wait for a syncing view looks again soon, a wait for peers that are
// not readable yet once a second.
func TestWaitRetry(t *testing.T) {
	type ids = map[types.UID]bool
	for _, tc := range []struct {
		name             string
		unseen, readable ids
		want             time.Duration
	}{
		{name: "a readable view syncing", unseen: ids{"a": true}, readable: ids{"a": true}, want: createRetry},
		{name: "a peer not readable yet", unseen: ids{"a": true}, readable: ids{"a": false}, want: unsyncedRetry},
		{name: "both", unseen: ids{"a": true, "b": true}, readable: ids{"a": false, "b": true}, want: createRetry},
	} {
		if got := waitRetry(tc.unseen, tc.readable); got != tc.want {
			t.Errorf("%s: waitRetry = %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestUnlistedMembers: a member this cluster knows but the peers manager does not list
// is waited for as a connection being made, within connectWait of when the engine first
// noticed it; not the local cluster, a listed peer, a disabled member, or one whose
// Cluster says it cannot be connected.
func TestUnlistedMembers(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cluster := func(name string, id types.UID, state v1alpha1.ClusterState, annotations map[string]string) client.Object {
		return &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
			Spec: v1alpha1.ClusterSpec{ClusterID: id}, Status: v1alpha1.ClusterStatus{State: state}}
	}
	cl := crfake.NewClientBuilder().WithScheme(scheme).WithObjects(
		cluster("local", "uid-local", v1alpha1.ClusterStateReady, nil),
		cluster("listed", "uid-listed", v1alpha1.ClusterStateReady, nil),
		cluster("restarting", "uid-restarting", v1alpha1.ClusterStateReady, nil), // last seen Ready
		cluster("new", "uid-new", "", nil),
		cluster("no-secret", "uid-no-secret", v1alpha1.ClusterStateMissingAuthInfo, nil),
		cluster("failed", "uid-failed", v1alpha1.ClusterStateFailed, nil),
		cluster("disabled", "uid-disabled", "", map[string]string{v1alpha1.ClusterDisabledAnnotation: "true"}),
	).Build()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	e := &Engine{opts: Options{Client: cl, Clock: clk, LocalID: "uid-local"}, contacts: newFirstContacts()}
	fresh := func() *sourceViews {
		return &sourceViews{readable: map[types.UID]bool{"uid-listed": true}, young: map[types.UID]bool{}, beingMade: map[types.UID]bool{}}
	}
	vs := fresh()
	e.unlistedMembers(context.Background(), vs)
	want := map[types.UID]bool{"uid-restarting": true, "uid-new": true}
	if diff := cmp.Diff(want, vs.beingMade); diff != "" {
		t.Errorf("being made (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, vs.young); diff != "" {
		t.Errorf("young (-want +got):\n%s", diff)
	}
	clk.Step(connectWait)
	vs = fresh()
	e.unlistedMembers(context.Background(), vs)
	if len(vs.beingMade) != 0 || len(vs.young) != 0 {
		t.Errorf("after connectWait: being made %v, young %v; want none", vs.beingMade, vs.young)
	}
}

// TestMemberListMadeAgainOnChange: the members a create may wait for are listed again
// after a change of a Cluster, and only then while the engine tracks the changes; on
// every call while it does not.
func TestMemberListMadeAgainOnChange(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	a := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: v1alpha1.ClusterSpec{ClusterID: "uid-a"}}
	cl := crfake.NewClientBuilder().WithScheme(scheme).WithObjects(a).Build()
	ctx := context.Background()
	add := func(name string) {
		t.Helper()
		if err := cl.Create(ctx, &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.ClusterSpec{ClusterID: types.UID("uid-" + name)}}); err != nil {
			t.Fatal(err)
		}
	}
	var m memberList
	if diff := cmp.Diff([]types.UID{"uid-a"}, m.waitable(ctx, cl, "uid-local")); diff != "" {
		t.Errorf("untracked (-want +got):\n%s", diff)
	}
	add("b")
	if diff := cmp.Diff([]types.UID{"uid-a", "uid-b"}, m.waitable(ctx, cl, "uid-local")); diff != "" {
		t.Errorf("untracked, after a create (-want +got):\n%s", diff)
	}
	m.tracked.Store(true)
	m.changed()
	m.waitable(ctx, cl, "uid-local")
	add("c")
	if diff := cmp.Diff([]types.UID{"uid-a", "uid-b"}, m.waitable(ctx, cl, "uid-local")); diff != "" {
		t.Errorf("tracked, no change recorded (-want +got):\n%s", diff)
	}
	m.changed()
	if diff := cmp.Diff([]types.UID{"uid-a", "uid-b", "uid-c"}, m.waitable(ctx, cl, "uid-local")); diff != "" {
		t.Errorf("tracked, after a change (-want +got):\n%s", diff)
	}
}
