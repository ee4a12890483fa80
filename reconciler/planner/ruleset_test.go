package planner

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

func TestAssembleRules(t *testing.T) {
	rule := func(name string, valid bool) *v1alpha1.ResourceSyncRule {
		r := &v1alpha1.ResourceSyncRule{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.ResourceSyncRuleSpec{GVK: v1alpha1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}}}
		if !valid {
			r.Spec.GVK.Kind = ""
		}
		return r
	}
	state := func(states []RuleState) []string {
		var out []string
		for _, s := range states {
			switch {
			case s.Builtin && s.Runs():
				out = append(out, s.Spec.Name+" builtin")
			case s.Runs():
				out = append(out, s.Spec.Name+" runs")
			case s.Capped():
				out = append(out, s.Spec.Name+" capped")
			default:
				out = append(out, s.Spec.Name+" invalid")
			}
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		specs []*v1alpha1.ResourceSyncRule
		max   int
		want  []string
	}{
		{name: "the built-in rule alone", max: 2, want: []string{"core-resourcesyncrules builtin"}},
		{name: "by name, the built-in rule in its place and not counted", max: 2,
			specs: []*v1alpha1.ResourceSyncRule{rule("zeta", true), rule("alpha", true), rule("delta", true)},
			want:  []string{"alpha runs", "core-resourcesyncrules builtin", "delta runs", "zeta capped"}},
		{name: "an invalid rule counts toward the cap", max: 2,
			specs: []*v1alpha1.ResourceSyncRule{rule("b", false), rule("a", true), rule("c", true)},
			want:  []string{"a runs", "b invalid", "c capped", "core-resourcesyncrules builtin"}},
		{name: "a rule with the built-in rule's name never replaces it", max: 5,
			specs: []*v1alpha1.ResourceSyncRule{rule(v1alpha1.CoreRuleName, true), rule("x", true)},
			want:  []string{"core-resourcesyncrules builtin", "x runs"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, state(AssembleRules(tc.specs, tc.max, nil))); diff != "" {
				t.Errorf("AssembleRules (-want +got):\n%s", diff)
			}
		})
	}
}
