package engine

import (
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner"
)

// recordOverlaps reports, on every rule of entries that asks for the object it but does
// not write it, which rule writes it instead and why (planner.RuleWhy): one rule writes
// each copy, and a member's rule that matches another member's objects is told it does
// not. The overlaps of the rules that no longer ask for it are forgotten.
func recordOverlaps(it item, act planner.Action, cands []planner.Candidate, entries []*ruleEntry) {
	why := map[string]string{}
	if chosen := act.Source; chosen != nil {
		for _, c := range cands {
			if c.Rule != chosen.Rule && c.Origin == chosen.Origin {
				if _, ok := why[c.Rule]; !ok {
					why[c.Rule] = planner.RuleWhy(*chosen, c)
				}
			}
		}
	}
	for _, r := range entries {
		r.overlap(it, why[r.rsr.Name])
	}
}

// overlap records (or, with an empty reason, forgets) that another rule writes it.
func (r *ruleEntry) overlap(it item, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if reason == "" {
		delete(r.overlaps, it)
		return
	}
	if r.overlaps[it] == reason {
		return
	}
	r.forget(it)
	r.overlaps[it] = reason
}
