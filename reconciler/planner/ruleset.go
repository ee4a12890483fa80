package planner

import (
	"fmt"
	"sort"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/rules"
)

// A member may make any number of rules, and the built-in rule copies them to every
// member: each rule costs watches (its scopes, times the peers) and work. A controller
// runs at most MaxRules of them, the first by name; the others are not compiled, not
// watched and not run, and their status says so (Ready False, TooManyRulesError). When a
// rule that runs goes away, or the cap is raised, the first rule by name past the cap
// runs. The built-in rule always runs and does not count.

// DefaultMaxRules is the default cap on the ResourceSyncRules a controller runs.
const DefaultMaxRules = 500

// TooManyRulesError is the error of a rule past the cap on rules.
type TooManyRulesError struct {
	// Name is the rule's name; Limit the cap.
	Name  string
	Limit int
}

// Reason is the rule's Ready reason.
func (e *TooManyRulesError) Reason() string { return v1alpha1.ReasonTooManyRules }

func (e *TooManyRulesError) Error() string {
	return fmt.Sprintf("%s: this cluster runs at most %d ResourceSyncRules (--max-rules), the first by name, and this one is past them: it does not run; "+
		"delete rules or raise --max-rules", v1alpha1.ReasonTooManyRules, e.Limit)
}

// RuleState is a ResourceSyncRule as a controller holds it: compiled and run, or not
// run and why.
type RuleState struct {
	// Spec is the rule; Builtin is true for the built-in rule (CoreRule).
	Spec    *v1alpha1.ResourceSyncRule
	Builtin bool
	// Compiled is the compiled rule when it runs; Err says why it does not (invalid:
	// *rules.InvalidRuleError or another compile error; past the cap: *TooManyRulesError).
	Compiled *rules.Rule
	Err      error
}

// Runs reports whether the rule runs.
func (s RuleState) Runs() bool { return s.Err == nil && s.Compiled != nil }

// Capped reports whether the rule is past the cap on rules.
func (s RuleState) Capped() bool {
	_, ok := s.Err.(*TooManyRulesError)
	return ok
}

// Compiler compiles a rule; CompileRule, or a cache of it.
type Compiler func(*v1alpha1.ResourceSyncRule) (*rules.Rule, error)

// AssembleRules returns the rules a controller runs, by name: the built-in rule, and the
// first maxRules of specs by name (those being deleted included: they run until their
// finalizer is done), each compiled with compile (CompileRule when nil); the rules past
// the cap are not compiled and carry a TooManyRulesError. A spec named as the built-in
// rule is ignored: the built-in rule cannot be replaced.
func AssembleRules(specs []*v1alpha1.ResourceSyncRule, maxRules int, compile Compiler) []RuleState {
	if compile == nil {
		compile = CompileRule
	}
	sorted := make([]*v1alpha1.ResourceSyncRule, 0, len(specs))
	for _, s := range specs {
		if s.Name != v1alpha1.CoreRuleName {
			sorted = append(sorted, s)
		}
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	core := CoreRule()
	coreCompiled, coreErr := compile(core)
	out := make([]RuleState, 0, len(sorted)+1)
	builtinAdded := false
	addBuiltin := func() {
		out = append(out, RuleState{Spec: core, Builtin: true, Compiled: coreCompiled, Err: coreErr})
		builtinAdded = true
	}
	for i, s := range sorted {
		if !builtinAdded && s.Name > core.Name {
			addBuiltin()
		}
		st := RuleState{Spec: s}
		if i >= maxRules {
			st.Err = &TooManyRulesError{Name: s.Name, Limit: maxRules}
		} else {
			st.Compiled, st.Err = compile(s)
		}
		out = append(out, st)
	}
	if !builtinAdded {
		addBuiltin()
	}
	return out
}

// Running returns the rules of states that run, for a Snapshot.
func Running(states []RuleState) []Rule {
	out := make([]Rule, 0, len(states))
	for _, s := range states {
		if s.Runs() {
			out = append(out, Rule{Spec: s.Spec, Compiled: s.Compiled})
		}
	}
	return out
}
