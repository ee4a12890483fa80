package engine

import (
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner"
	"github.com/kubectl-registry/kubectl-registry/reconciler/rules"
)

// The rules the engine runs are planner.AssembleRules of the ResourceSyncRules it sees,
// as sync-diff assembles them: the built-in rule, and the first Options.MaxRules by name;
// the others are not compiled, not watched and not run, and their status says so (Ready
// False, TooManyRulesError).

// DefaultMaxRules is the default cap on the ResourceSyncRules the engine runs.
const DefaultMaxRules = planner.DefaultMaxRules

// TooManyRulesError is the error of a rule past the cap on rules.
type TooManyRulesError = planner.TooManyRulesError

// isCapped reports whether r is past the cap on rules.
func isCapped(r *ruleEntry) bool {
	_, ok := r.err.(*TooManyRulesError)
	return ok
}

// assemble makes e.rules what planner.AssembleRules says of the rules' specs: a rule
// that comes in under the cap is compiled, one that goes past it stops. The compiled
// rule (and the tracking) of a rule whose spec did not change and whose place under the
// cap did not either is kept as it is. Called with e.mu held.
func (e *Engine) assemble() {
	specs := make([]*v1alpha1.ResourceSyncRule, 0, len(e.rules))
	for _, r := range e.rules {
		if !r.builtin {
			specs = append(specs, r.rsr)
		}
	}
	compile := func(rsr *v1alpha1.ResourceSyncRule) (*rules.Rule, error) {
		if r := e.rules[rsr.Name]; r != nil && !r.pending && !isCapped(r) {
			return r.compiled, r.err
		}
		return planner.CompileRule(rsr)
	}
	for _, st := range planner.AssembleRules(specs, e.opts.MaxRules, compile) {
		if st.Builtin {
			continue
		}
		r := e.rules[st.Spec.Name]
		if !r.pending && isCapped(r) == st.Capped() {
			continue
		}
		next := newEntry(st.Spec, st.Compiled, st.Err, false)
		if r.pending && !st.Capped() {
			next.keepTracking(r)
		}
		e.rules[st.Spec.Name] = next
	}
}
