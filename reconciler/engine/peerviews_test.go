package engine

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/peers"
	"github.com/kubectl-registry/kubectl-registry/reconciler/rules"
)

// refusingReader fails the test when read: what a peer read with its bootstrap
// credential must not be asked (a read of a kind the credential may not read would wait
// for an informer that never syncs).
type refusingReader struct{ t *testing.T }

func (r refusingReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	r.t.Error("the bootstrap peer was read (Get)")
	return nil
}

func (r refusingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	r.t.Error("the bootstrap peer was read (List)")
	return nil
}

// featuresReader returns one ClusterFeature.
type featuresReader struct{ refusingReader }

func (featuresReader) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	list.(*v1alpha1.ClusterFeatureList).Items = []v1alpha1.ClusterFeature{{Spec: v1alpha1.ClusterFeatureSpec{FeatureName: "f"}}}
	return nil
}

// TestPeerFeaturesOfABootstrapPeer: the ClusterFeatures of a peer read with its
// bootstrap credential are not asked for (none), those of a peer read with a credential
// of its own are.
func TestPeerFeaturesOfABootstrapPeer(t *testing.T) {
	boot := peers.Connected("x", "uid-x", refusingReader{t})
	boot.Bootstrap = true
	if got := peerFeatures(context.Background(), boot); got != nil {
		t.Errorf("features of a bootstrap peer: %v, want none", got)
	}
	full := peers.Connected("x", "uid-x", featuresReader{refusingReader{t}})
	if got := peerFeatures(context.Background(), full); len(got) != 1 {
		t.Errorf("features of a peer read with its own credential: %v, want one", got)
	}
}

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

func TestNoteWatches(t *testing.T) {
	compile := func(spec v1alpha1.ResourceSyncRuleSpec) *ruleEntry {
		rsr := &v1alpha1.ResourceSyncRule{ObjectMeta: metav1.ObjectMeta{Name: "r"}, Spec: spec}
		c, err := rules.Compile(rsr)
		if err != nil {
			t.Fatal(err)
		}
		return newEntry(rsr, c, nil, false)
	}
	gvk := v1alpha1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	byLabel := []v1alpha1.SyncRule{{Matches: []v1alpha1.SyncRuleMatch{{Labels: []metav1.LabelSelector{{MatchLabels: map[string]string{"app": "web"}}}}}}}
	byNS := []v1alpha1.SyncRule{{Matches: []v1alpha1.SyncRuleMatch{{Namespaces: []string{"a"}}}}}
	for _, tc := range []struct {
		name       string
		r          *ruleEntry
		scopes     []string
		everyLocal bool
		narrowed   bool
		message    string
	}{
		{"by label", compile(v1alpha1.ResourceSyncRuleSpec{GVK: gvk, Rules: byLabel}), []string{"app in (web)"}, false, true, "carry only labels app in (web); this cluster watches only its copies"},
		{"by namespace", compile(v1alpha1.ResourceSyncRuleSpec{GVK: gvk, Rules: byNS}), []string{""}, true, true, "carry only namespaces a; this cluster watches every object"},
		{"every object", compile(v1alpha1.ResourceSyncRuleSpec{GVK: gvk, Rules: []v1alpha1.SyncRule{{}}}), []string{""}, false, false, "selects by neither namespaces nor a label"},
		{"a label, but the watch is shared with a rule taking every label", compile(v1alpha1.ResourceSyncRuleSpec{GVK: gvk, Rules: byLabel}), []string{""}, false, false, "shares them with rules that select every label"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := noteWatches(tc.r, tc.scopes, tc.everyLocal)
			if n.Narrowed != tc.narrowed || !strings.Contains(n.Message, tc.message) || n.Reason == "" {
				t.Errorf("noteWatches = %+v, want narrowed %v and a message with %q", n, tc.narrowed, tc.message)
			}
		})
	}
}

// TestNeedFeatures: the peers' ClusterFeatures are watched while a rule that is not
// being deleted selects its sources by them.
func TestNeedFeatures(t *testing.T) {
	entry := func(features bool, deleting bool) *ruleEntry {
		rsr := &v1alpha1.ResourceSyncRule{ObjectMeta: metav1.ObjectMeta{Name: "r"}, Spec: v1alpha1.ResourceSyncRuleSpec{
			GVK: v1alpha1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}}}
		if features {
			rsr.Spec.ClusterFeatureMatches = []v1alpha1.ClusterFeatureMatch{{FeatureName: "gpu"}}
		}
		c, err := rules.Compile(rsr)
		if err != nil {
			t.Fatal(err)
		}
		if deleting {
			rsr.DeletionTimestamp = &metav1.Time{}
		}
		return newEntry(rsr, c, nil, false)
	}
	uncompiled := entry(true, false)
	uncompiled.compiled = nil
	for _, tc := range []struct {
		name  string
		rules []*ruleEntry
		want  bool
	}{
		{"no rule", nil, false},
		{"rules that select no source by features", []*ruleEntry{entry(false, false), entry(false, true)}, false},
		{"a rule that selects by features", []*ruleEntry{entry(false, false), entry(true, false)}, true},
		{"only a rule being deleted selects by features", []*ruleEntry{entry(true, true)}, false},
		{"only a rule that does not compile", []*ruleEntry{uncompiled}, false},
	} {
		if got := needFeatures(tc.rules); got != tc.want {
			t.Errorf("%s: needFeatures %t, want %t", tc.name, got, tc.want)
		}
	}
}
