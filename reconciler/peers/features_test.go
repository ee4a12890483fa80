package peers

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
	"github.com/kubectl-registry/kubectl-registry/reconciler/peers/simpeer"
)

// TestFeaturesWatchedOnlyWhenAsked: a peer's cache watches its ClusterFeatures only
// while the Manager is told to (no watch, and the features unknown, before and after),
// the subscribers hear when they are known (a peer without any included), and a
// connection made while they are watched watches them from the start.
func TestFeaturesWatchedOnlyWhenAsked(t *testing.T) {
	g, err := simpeer.NewGroup()
	if err != nil {
		t.Fatal(err)
	}
	m := newManager(t, Options{HealthInterval: 100 * time.Millisecond, FailureThreshold: 1, MaxBackoff: 200 * time.Millisecond,
		Addresses: kubeconfig.AddressPolicy{AllowLoopback: true}})
	events := make(chan event.GenericEvent, 1024)
	m.Subscribe(events)
	ctx := t.Context()
	run(t, m, ctx)

	servers := map[string]*simpeer.Server{}
	connect := func(name string, features ...string) {
		t.Helper()
		srv := startSimPeer(t, g, name, simpeer.Options{})
		for _, f := range features {
			serve(t, srv, simpeer.ClusterFeatures, &v1alpha1.ClusterFeature{
				TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "ClusterFeature"},
				ObjectMeta: metav1.ObjectMeta{Name: f}, Spec: v1alpha1.ClusterFeatureSpec{FeatureName: f}})
		}
		servers[name] = srv
		ensureSimPeer(t, m, g, srv, name, false)
	}
	featureWatches := func(name string) int64 {
		return servers[name].Stats().Watches[simpeer.ClusterFeatures.Key()]
	}
	features := func(name string) ([]string, bool) {
		p, _ := m.Get(name)
		items, known := p.Features(ctx)
		var names []string
		for _, f := range items {
			names = append(names, f.Spec.FeatureName)
		}
		slices.Sort(names)
		return names, known
	}
	eventually := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !ok(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting until %s", what)
			}
		}
	}
	// heard holds the peers the subscribers heard of since drain.
	heard := map[string]bool{}
	hear := func() {
		for {
			select {
			case ev := <-events:
				heard[ev.Object.GetName()] = true
			default:
				return
			}
		}
	}
	drain := func() { hear(); clear(heard) }

	connect("east", "gpu")
	connect("west")
	for _, name := range []string{"east", "west"} {
		waitSynced(t, m, name)
		if got, known := features(name); known || got != nil {
			t.Errorf("%s: features %v known %t before they are asked for, want unknown", name, got, known)
		}
	}
	// The cache has started and not watched them: no watch was ever opened.
	time.Sleep(300 * time.Millisecond)
	for _, name := range []string{"east", "west"} {
		if n := featureWatches(name); n != 0 {
			t.Errorf("%s: %d watches of ClusterFeatures before they are asked for, want 0", name, n)
		}
	}

	drain()
	m.WatchFeatures(true)
	for name, want := range map[string][]string{"east": {"gpu"}, "west": nil} {
		eventually(name+"'s ClusterFeatures are known", func() bool { _, known := features(name); return known })
		if got, _ := features(name); !cmp.Equal(got, want) {
			t.Errorf("%s: features %v, want %v", name, got, want)
		}
		eventually("the subscribers hear of "+name+"'s ClusterFeatures", func() bool { hear(); return heard[name] })
		eventually(name+"'s ClusterFeatures are watched", func() bool { return featureWatches(name) == 1 })
	}

	// A peer connected while they are watched watches them from its first sync.
	connect("north", "gpu", "ssd")
	eventually("north's ClusterFeatures are known", func() bool { _, known := features("north"); return known })
	if got, _ := features("north"); !cmp.Equal(got, []string{"gpu", "ssd"}) {
		t.Errorf("north: features %v, want [gpu ssd]", got)
	}

	m.WatchFeatures(false)
	for _, name := range []string{"east", "west", "north"} {
		if got, known := features(name); known || got != nil {
			t.Errorf("%s: features %v known %t once no longer asked for, want unknown", name, got, known)
		}
		eventually(name+"'s watch of ClusterFeatures ends", func() bool { return featureWatches(name) == 0 })
	}
}
