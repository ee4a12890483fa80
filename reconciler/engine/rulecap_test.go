package engine

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"testing"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/peers"
)

func capRule(name string) *v1alpha1.ResourceSyncRule {
	return &v1alpha1.ResourceSyncRule{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1},
		Spec: v1alpha1.ResourceSyncRuleSpec{GVK: v1alpha1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}}}
}

// TestRuleCap: the engine runs the first MaxRules rules by name and the built-in rule;
// the others are not compiled and say so, and move in as rules before them go.
func TestRuleCap(t *testing.T) {
	e, err := New(Options{LocalID: "uid-local", LocalName: "local", Namespace: "cluster-registry", Peers: &peers.Manager{}, Metrics: NewMetrics(nil), MaxRules: 3})
	if err != nil {
		t.Fatal(err)
	}
	running := func() (run, capped []string) {
		t.Helper()
		for _, r := range e.snapshot() {
			switch {
			case r.builtin:
				if r.compiled == nil {
					t.Error("the built-in rule does not run")
				}
			case isCapped(r):
				if r.compiled != nil {
					t.Errorf("the capped rule %s is compiled", r.rsr.Name)
				}
				capped = append(capped, r.rsr.Name)
			default:
				if r.compiled == nil {
					t.Errorf("the rule %s does not run: %v", r.rsr.Name, r.err)
				}
				run = append(run, r.rsr.Name)
			}
		}
		return run, capped
	}
	check := func(what string, wantRun, wantCapped []string) {
		t.Helper()
		run, capped := running()
		if !slices.Equal(run, wantRun) || !slices.Equal(capped, wantCapped) {
			t.Errorf("%s: running %v, capped %v; want %v, %v", what, run, capped, wantRun, wantCapped)
		}
	}
	// 10,000 rules in any order, as a hostile member's relayed rules arrive.
	var names []string
	for i := range 10000 {
		names = append(names, fmt.Sprintf("r-%05d", (i*7919)%10000))
	}
	for _, n := range names {
		e.ruleChanged(capRule(n))
	}
	sort.Strings(names)
	check("10,000 rules", names[:3], names[3:])
	var tooMany *TooManyRulesError
	for _, r := range e.snapshot() {
		if r.rsr.Name == names[3] {
			tooMany, _ = r.err.(*TooManyRulesError)
		}
	}
	if tooMany == nil || tooMany.Reason() != v1alpha1.ReasonTooManyRules || tooMany.Limit != 3 {
		t.Fatalf("the error of a capped rule: %v", tooMany)
	}
	// A rule before them by name runs; the last of the three stops.
	e.ruleChanged(capRule("a"))
	check("a rule first by name", []string{"a", names[0], names[1]}, append([]string{names[2]}, names[3:]...))
	// A rule that runs goes: the first capped one runs.
	e.ruleDeleted(context.Background(), capRule(names[0]))
	check("a running rule deleted", []string{"a", names[1], names[2]}, names[3:])
	// A capped rule changes: still capped.
	changed := capRule(names[5])
	changed.Generation = 2
	e.ruleChanged(changed)
	check("a capped rule changed", []string{"a", names[1], names[2]}, names[3:])
}

// TestReservedRuleName: a ResourceSyncRule with the built-in rule's name (made here, or
// copied from a member) neither replaces the built-in rule nor runs, and its deletion
// does not apply a deletion policy to the built-in rule's copies.
func TestReservedRuleName(t *testing.T) {
	e, err := New(Options{LocalID: "uid-local", LocalName: "local", Namespace: "cluster-registry", Peers: &peers.Manager{}, Metrics: NewMetrics(nil)})
	if err != nil {
		t.Fatal(err)
	}
	e.log = logr.Discard()
	t.Cleanup(e.queue.ShutDown)
	impostor := capRule(v1alpha1.CoreRuleName)
	impostor.Spec.GVK = v1alpha1.GroupVersionKind{Group: v1alpha1.GroupVersion.Group, Version: v1alpha1.GroupVersion.Version, Kind: "Cluster"}
	impostor.Spec.DeletionPolicy = v1alpha1.DeletionPolicyDelete
	e.ruleChanged(impostor)
	e.ruleDeleted(context.Background(), impostor)
	rules := e.snapshot()
	if len(rules) != 1 || !rules[0].builtin || rules[0].compiled == nil || rules[0].compiled.GVK.Kind != "ResourceSyncRule" {
		t.Fatalf("rules after a rule named %s came and went: %+v", v1alpha1.CoreRuleName, rules)
	}
}
