package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/peers"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner"
)

// peerList are the peers of an engine under test, which a test may replace as it goes.
type peerList struct{ list []peers.Peer }

func (p *peerList) List() []peers.Peer                { return append([]peers.Peer(nil), p.list...) }
func (p *peerList) Shared() []peers.Peer              { return p.list }
func (*peerList) Subscribe(chan<- event.GenericEvent) {}
func (*peerList) WatchFeatures(bool)                  {}

// samePlanFixture is the snapshot of testdata/sameplan/fixture.yaml (module root), which
// plugin/syncdiff TestSamePlan plans too.
type samePlanFixture struct {
	Self     string                      `json:"self"`
	Clusters []v1alpha1.Cluster          `json:"clusters"`
	Rules    []v1alpha1.ResourceSyncRule `json:"rules"`
	Peers    map[string][]map[string]any `json:"peers"`
	Objects  []map[string]any            `json:"objects"`
}

// TestSamePlan: the engine plans the shared snapshot as sync-diff does. The engine's path
// is its own: the rules as ruleChanged assembles them, the peers' and the local objects
// in its caches, the policy from its client, and snapshotFor + PlanKey as reconcile asks
// them; the answer for each local object must be testdata/sameplan/plan.golden's.
func TestSamePlan(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "sameplan")
	data, err := os.ReadFile(filepath.Join(dir, "fixture.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var f samePlanFixture
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		t.Fatal(err)
	}
	golden, err := os.ReadFile(filepath.Join(dir, "plan.golden"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, l := range strings.Split(string(golden), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			want = append(want, l)
		}
	}

	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	var localID types.UID
	var objs []client.Object
	for i := range f.Clusters {
		objs = append(objs, &f.Clusters[i])
		if f.Clusters[i].Name == f.Self {
			localID = f.Clusters[i].Spec.ClusterID
		}
	}
	var localCMs []*unstructured.Unstructured
	for _, o := range f.Objects {
		u := &unstructured.Unstructured{Object: o}
		if u.GetKind() == "Namespace" {
			objs = append(objs, &corev1.Namespace{ObjectMeta: *objectMeta(u)})
			continue
		}
		localCMs = append(localCMs, u)
	}
	var ps []peers.Peer
	fake := &fakeViews{}
	fake.hold("", cmGVK, localCMs...)
	for _, c := range f.Clusters {
		switch cms, read := f.Peers[c.Name]; {
		case !planner.IsSource(localID, &c):
			// The clusters reconciler connects no peer of a disabled Cluster.
		case read:
			ps = append(ps, peers.Connected(c.Name, c.Spec.ClusterID, nil).WithConfig(&rest.Config{}, nil, nil))
			var us []*unstructured.Unstructured
			for _, o := range cms {
				us = append(us, &unstructured.Unstructured{Object: o})
			}
			fake.hold(c.Name, cmGVK, us...)
		default:
			ps = append(ps, peers.Peer{Name: c.Name, ClusterID: c.Spec.ClusterID}) // not read here
		}
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(cmGVK, meta.RESTScopeNamespace)
	e, err := New(Options{LocalID: localID, LocalName: f.Self, Namespace: v1alpha1.DefaultNamespace,
		Client: crfake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build(), Mapper: mapper, Peers: &peerList{list: ps}, Metrics: NewMetrics(nil)})
	if err != nil {
		t.Fatal(err)
	}
	e.log = logr.Discard()
	t.Cleanup(e.queue.ShutDown)
	for i := range f.Rules {
		e.ruleChanged(&f.Rules[i])
	}
	e.views = fake

	// Every local object a rule may write: the targets of the peers' objects, and the
	// local copies.
	targets := map[planner.Target]bool{}
	for _, r := range e.snapshot() {
		if r.compiled == nil {
			continue
		}
		for _, cms := range f.Peers {
			for _, o := range cms {
				if tg, ok := planner.TargetOf(r.compiled, localID, &unstructured.Unstructured{Object: o}); ok {
					targets[tg] = true
				}
			}
		}
	}
	for _, u := range localCMs {
		if u.GetAnnotations()[v1alpha1.OwnershipAnnotation] != "" {
			targets[planner.Target{GVK: cmGVK, Key: types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}}] = true
		}
	}
	var got []string
	var cache *sourceCache // one for every target, as a worker's
	for tg := range targets {
		observed, synced, err := e.views.Lookup("", tg.GVK, tg.Key.Namespace, tg.Key.Name)
		if err != nil || !synced {
			t.Fatalf("local lookup of %v: synced %v, %v", tg, synced, err)
		}
		snap, _, err := e.snapshotFor(context.Background(), tg.GVK, &cache)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, samePlanLines(tg, observed, snap.PlanKey(tg, observed))...)
	}
	sort.Strings(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the engine's plan of the shared snapshot (-golden +engine):\n%s", diff)
	}
}

// samePlanLines writes what the engine does to one local object as the shared golden
// file has it.
func samePlanLines(tg planner.Target, observed *unstructured.Unstructured, plan planner.KeyPlan) []string {
	if plan.Membership {
		return nil
	}
	ref := tg.GVK.Kind + " " + tg.Key.Namespace + "/" + tg.Key.Name
	var out []string
	for rule := range plan.Failures {
		out = append(out, fmt.Sprintf("failed %s rule=%s", ref, rule))
	}
	for rule, refs := range plan.Refusals {
		for _, r := range refs {
			out = append(out, fmt.Sprintf("refused %s rule=%s: %s", ref, rule, r.Reason))
		}
	}
	act := plan.Action
	if act.Type == planner.ActionNone {
		return out
	}
	rule, from, origin := "", "", types.UID("")
	switch {
	case act.Source != nil:
		rule, from, origin = act.Source.Rule, act.Source.Peer, act.Source.Origin
	case observed != nil:
		rule, origin = observed.GetLabels()[v1alpha1.RuleLabel], types.UID(observed.GetAnnotations()[v1alpha1.OwnershipAnnotation])
	}
	return append(out, fmt.Sprintf("%s %s rule=%s from=%s origin=%s", act.Type, ref, rule, from, origin))
}

func objectMeta(u *unstructured.Unstructured) *metav1.ObjectMeta {
	return &metav1.ObjectMeta{Name: u.GetName(), Labels: u.GetLabels()}
}
