package engine

import (
	"fmt"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner"
)

// A member may make any number of rules, and the built-in rule copies them to every
// member: each rule costs watches (its scopes, times the peers) and work. The engine runs
// at most Options.MaxRules of them, the first by name; the others are not compiled, not
// watched and not run, and their status says so (Ready False, TooManyRulesError). When a
// rule that runs goes away, or the cap is raised, the first rule by name past the cap
// runs. The built-in rule always runs and does not count.

// DefaultMaxRules is the default cap on the ResourceSyncRules the engine runs.
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

// isCapped reports whether r is past the cap on rules.
func isCapped(r *ruleEntry) bool {
	_, ok := r.err.(*TooManyRulesError)
	return ok
}

// cappedEntry returns the entry of a rule past the cap, without compiling it, or nil
// when the rule would be among the first MaxRules by name. A rule past the cap changes
// nothing of the others: the rules that run all sort before it (capRules is not needed).
func (e *Engine) cappedEntry(rsr *v1alpha1.ResourceSyncRule) *ruleEntry {
	e.mu.RLock()
	before := 0
	for name, r := range e.rules {
		if !r.builtin && name < rsr.Name {
			if before++; before >= e.opts.MaxRules {
				break
			}
		}
	}
	e.mu.RUnlock()
	if before < e.opts.MaxRules {
		return nil
	}
	return newEntry(rsr, nil, &TooManyRulesError{Name: rsr.Name, Limit: e.opts.MaxRules}, false)
}

// capRules makes the rules that run the first MaxRules by name (the built-in rule
// aside): a running rule past them stops, a capped rule among them is compiled and
// runs. A rule comes or goes at a time, so one pass over the rules (never a sort) moves
// the one rule at the edge. Called with e.mu held.
func (e *Engine) capRules() {
	for {
		running, lastRunning, firstCapped := 0, "", ""
		for name, r := range e.rules {
			switch {
			case r.builtin:
			case isCapped(r):
				if firstCapped == "" || name < firstCapped {
					firstCapped = name
				}
			default:
				running++
				if name > lastRunning {
					lastRunning = name
				}
			}
		}
		switch {
		case running > e.opts.MaxRules || (running == e.opts.MaxRules && firstCapped != "" && firstCapped < lastRunning):
			r := e.rules[lastRunning]
			e.rules[lastRunning] = newEntry(r.rsr, nil, &TooManyRulesError{Name: lastRunning, Limit: e.opts.MaxRules}, false)
		case running < e.opts.MaxRules && firstCapped != "":
			r := e.rules[firstCapped]
			compiled, err := planner.CompileRule(r.rsr)
			e.rules[firstCapped] = newEntry(r.rsr, compiled, err, false)
		default:
			return
		}
	}
}
