package planner

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// TestGatherUnsynced: absence in a view that has not synced proves nothing. The origin is
// neither gone nor present but reported Unsynced, so that the engine looks at the copy
// again once the view has synced (a delete made while the origin's view was being rebuilt
// must still reach the copy).
func TestGatherUnsynced(t *testing.T) {
	const origin types.UID = "uid-origin"
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	rules := gatherRules(t)
	target := types.NamespacedName{Namespace: "ns", Name: "cm"}
	copyOf := gatherCopy(origin, "cms")

	for _, tc := range []struct {
		name         string
		readable     bool
		synced       bool
		wantGone     map[types.UID]bool
		wantUnsynced map[types.UID]bool
	}{
		{name: "synced and absent: gone", readable: true, synced: true, wantGone: map[types.UID]bool{origin: true}, wantUnsynced: map[types.UID]bool{}},
		{name: "not synced: unknown, to look at again", readable: true, synced: false, wantGone: map[types.UID]bool{}, wantUnsynced: map[types.UID]bool{origin: true}},
		{name: "not readable: unknown, waits for the peer", readable: false, wantGone: map[types.UID]bool{}, wantUnsynced: map[types.UID]bool{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := Source{Name: "origin", ClusterID: origin, Readable: tc.readable,
				Lookup: func(schema.GroupVersionKind, string, string) (*unstructured.Unstructured, bool) {
					return nil, tc.synced
				}}
			g := Gather("uid-local", nil, Policy{}, rules, []Source{src}, gvk, target, copyOf)
			if diff := cmp.Diff(tc.wantGone, g.OriginGone); diff != "" {
				t.Errorf("OriginGone (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantUnsynced, g.Unsynced); diff != "" {
				t.Errorf("Unsynced (-want +got):\n%s", diff)
			}
			if act := Decide(Input{LocalID: "uid-local", Observed: copyOf, OriginGone: g.OriginGone}); (act.Type == ActionDelete) != tc.wantGone[origin] {
				t.Errorf("Decide = %s", act.Type)
			}
		})
	}
}

// TestGatherQuarantined: the objects of a cluster disabled or departed here are not
// copied through any member that still reads it, and its copies here are not deleted.
func TestGatherQuarantined(t *testing.T) {
	const (
		local   types.UID = "uid-local"
		relay   types.UID = "uid-relay"
		blocked types.UID = "uid-blocked"
	)
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	rules := gatherRules(t)
	target := types.NamespacedName{Namespace: "ns", Name: "cm"}
	cm := func(origin types.UID) *unstructured.Unstructured { return gatherCopy(origin, "cms") }
	// The relay holds its copy of the blocked cluster's object.
	src := Source{Name: "relay", ClusterID: relay, Readable: true,
		Lookup: func(schema.GroupVersionKind, string, string) (*unstructured.Unstructured, bool) {
			return cm(blocked), true
		}}
	// The blocked cluster is a member this cluster knows (it has its Cluster) but does
	// not read: its objects may arrive through the relay.
	blockedCluster := v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "blocked"}, Spec: v1alpha1.ClusterSpec{ClusterID: blocked}}
	for _, tc := range []struct {
		name        string
		policy      Policy
		wantCands   int
		wantRefused []string
	}{
		{name: "not quarantined: the relay's copy is a candidate", policy: PolicyOf(nil, []v1alpha1.Cluster{blockedCluster}, v1alpha1.DefaultNamespace, local), wantCands: 1},
		{name: "not a member known here: refused, whatever the relay says", policy: Policy{}, wantCands: 0, wantRefused: []string{v1alpha1.ReasonUnknownOrigin}},
		{name: "quarantined: no candidate", policy: Policy{}.Quarantine(blocked), wantCands: 0},
		{name: "disabled here", policy: PolicyOf(nil, []v1alpha1.Cluster{{
			ObjectMeta: metav1.ObjectMeta{Name: "blocked", Annotations: map[string]string{v1alpha1.ClusterDisabledAnnotation: "true"}},
			Spec:       v1alpha1.ClusterSpec{ClusterID: blocked}}}, v1alpha1.DefaultNamespace, local), wantCands: 0},
		{name: "departed, as the local Cluster records", policy: PolicyOf(nil, []v1alpha1.Cluster{{
			ObjectMeta: metav1.ObjectMeta{Name: "local", Annotations: map[string]string{v1alpha1.LeftClustersAnnotation: string(blocked) + "@2026-01-01T00:00:00Z"}},
			Spec:       v1alpha1.ClusterSpec{ClusterID: local}}}, v1alpha1.DefaultNamespace, local), wantCands: 0},
		{name: "departures recorded on another Cluster are not this cluster's", policy: PolicyOf(nil, []v1alpha1.Cluster{{
			ObjectMeta: metav1.ObjectMeta{Name: "other", Annotations: map[string]string{v1alpha1.LeftClustersAnnotation: string(blocked) + "@2026-01-01T00:00:00Z"}},
			Spec:       v1alpha1.ClusterSpec{ClusterID: relay}}, blockedCluster}, v1alpha1.DefaultNamespace, local), wantCands: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			observed := cm(blocked)
			g := Gather(local, nil, tc.policy, rules, []Source{src}, gvk, target, observed)
			if len(g.Candidates) != tc.wantCands {
				t.Errorf("%d candidates, want %d", len(g.Candidates), tc.wantCands)
			}
			var refused []string
			for _, r := range g.Refusals["cms"] {
				refused = append(refused, r.Reason)
			}
			if diff := cmp.Diff(tc.wantRefused, refused); diff != "" {
				t.Errorf("refusals (-want +got):\n%s", diff)
			}
			if len(g.OriginGone) != 0 {
				t.Errorf("OriginGone %v: a quarantined cluster's copies are kept", g.OriginGone)
			}
		})
	}
}

// TestGatherReadsClusterOnlyOfOffers: a source's Cluster is read for the copies it
// offers, when their templates are rendered, and not for the sources that hold no such
// object: the engine asks every peer of every object, and reading a peer's Cluster costs
// a cache read and, when it changed, a conversion.
func TestGatherReadsClusterOnlyOfOffers(t *testing.T) {
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	rsr := &v1alpha1.ResourceSyncRule{
		ObjectMeta: metav1.ObjectMeta{Name: "cms"},
		Spec: v1alpha1.ResourceSyncRuleSpec{GVK: v1alpha1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Rules: []v1alpha1.SyncRule{{
			Mutations: v1alpha1.Mutations{Overrides: []v1alpha1.OverlayPatch{{Path: "data.from", Value: "{{ .Cluster.metadata.name }}"}}},
		}}},
	}
	compiled, err := CompileRule(rsr)
	if err != nil {
		t.Fatal(err)
	}
	target := types.NamespacedName{Namespace: "ns", Name: "cm"}
	obj := &unstructured.Unstructured{Object: map[string]any{"data": map[string]any{}}}
	obj.SetAPIVersion("v1")
	obj.SetKind("ConfigMap")
	obj.SetNamespace("ns")
	obj.SetName("cm")
	reads := map[string]int{}
	source := func(name string, id types.UID, has bool) Source {
		return Source{Name: name, ClusterID: id, Readable: true,
			Cluster: func() map[string]any {
				reads[name]++
				return map[string]any{"metadata": map[string]any{"name": name}}
			},
			Lookup: func(schema.GroupVersionKind, string, string) (*unstructured.Unstructured, bool) {
				if has {
					return obj.DeepCopy(), true
				}
				return nil, true
			}}
	}
	sources := []Source{source("empty", "uid-a", false), source("holder", "uid-b", true), source("other", "uid-c", false)}
	g := Gather("uid-local", nil, Policy{}, []Rule{{Spec: rsr, Compiled: compiled}}, sources, gvk, target, nil)
	if len(g.Candidates) != 1 {
		t.Fatalf("candidates: got %d, want 1 (failures %v)", len(g.Candidates), g.Failures)
	}
	if got, _, _ := unstructured.NestedString(g.Candidates[0].Object.Object, "data", "from"); got != "holder" {
		t.Errorf("the copy's data.from: got %q, want the holder's Cluster name", got)
	}
	if diff := cmp.Diff(map[string]int{"holder": 1}, reads); diff != "" {
		t.Errorf("Cluster reads by source (-want +got):\n%s", diff)
	}
}

// TestGatherEvidenceOfTheMarkOnly: the deletion evidence is gathered for the observed
// copy's origin only (Decide reads no other), whatever the other sources hold, and not
// at all for a local object that is no copy of a rule's or for none.
func TestGatherEvidenceOfTheMarkOnly(t *testing.T) {
	const origin, other, syncing types.UID = "uid-a", "uid-b", "uid-c"
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	rules := gatherRules(t)
	target := types.NamespacedName{Namespace: "ns", Name: "cm"}
	source := func(id types.UID, synced bool) Source {
		return Source{Name: string(id), ClusterID: id, Readable: true,
			Lookup: func(schema.GroupVersionKind, string, string) (*unstructured.Unstructured, bool) { return nil, synced }}
	}
	sources := []Source{source(origin, true), source(other, true), source(syncing, false)}
	for _, tc := range []struct {
		name     string
		observed *unstructured.Unstructured
		want     map[types.UID]bool
	}{
		{name: "a copy of the origin that has none", observed: gatherCopy(origin, "cms"), want: map[types.UID]bool{origin: true}},
		{name: "a copy of the origin still syncing", observed: gatherCopy(syncing, "cms"), want: map[types.UID]bool{}},
		{name: "a copy of no source", observed: gatherCopy("uid-unknown", "cms"), want: map[types.UID]bool{}},
		{name: "a copy of another rule", observed: gatherCopy(origin, "other"), want: map[types.UID]bool{}},
		{name: "no local object", want: map[types.UID]bool{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := Gather("uid-local", nil, Policy{}, rules, sources, gvk, target, tc.observed)
			if diff := cmp.Diff(tc.want, g.OriginGone); diff != "" {
				t.Errorf("OriginGone (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(map[types.UID]bool{syncing: true}, g.Unsynced); diff != "" {
				t.Errorf("Unsynced (-want +got):\n%s", diff)
			}
		})
	}
}

// gatherRules is a rule set of one rule, cms, copying every ConfigMap.
func gatherRules(t *testing.T) []Rule {
	t.Helper()
	rsr := &v1alpha1.ResourceSyncRule{
		ObjectMeta: metav1.ObjectMeta{Name: "cms"},
		Spec:       v1alpha1.ResourceSyncRuleSpec{GVK: v1alpha1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Rules: []v1alpha1.SyncRule{{}}},
	}
	compiled, err := CompileRule(rsr)
	if err != nil {
		t.Fatal(err)
	}
	return []Rule{{Spec: rsr, Compiled: compiled}}
}

// gatherCopy is the ConfigMap ns/cm, marked as copied from origin by rule (unmarked for
// no origin).
func gatherCopy(origin types.UID, rule string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetNamespace("ns")
	u.SetName("cm")
	if origin != "" {
		Mark(u, origin, rule)
	}
	return u
}
