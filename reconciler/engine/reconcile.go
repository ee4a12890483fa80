package engine

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/engine/rulestatus"
	"github.com/kubectl-registry/kubectl-registry/reconciler/engine/views"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner"
)

// reconcile brings one local object to what the rules ask for: its view (observe), the
// plan of the planner's snapshot (snapshotFor, PlanKey), and the writer (write).
func (e *Engine) reconcile(ctx context.Context, it item, cache **sourceCache) (time.Duration, error) {
	observed, retry, done, err := e.observe(it)
	if done || err != nil {
		return retry, err
	}
	snap, vs, err := e.snapshotFor(ctx, it.gvk, cache)
	if err != nil {
		return 0, err
	}
	plan := snap.PlanKey(planner.Target{GVK: it.gvk, Key: types.NamespacedName{Namespace: it.namespace, Name: it.name}}, observed)
	if plan.Membership {
		// The membership sync owns the Clusters and their reader Secrets: no rule writes
		// them, and a rule that tries is reported (its copy is refused by the policy).
		e.recordFailures(it, plan.Gathered, vs.entries, "")
		return 0, nil
	}
	return e.write(ctx, it, observed, plan, vs)
}

// observe returns the local object of it (nil when absent), or done with when to look
// again: the local view has not synced, the event is the engine's own write, or a copy is
// being deleted.
func (e *Engine) observe(it item) (observed *unstructured.Unstructured, retry time.Duration, done bool, err error) {
	_, full := e.full.LoadAndDelete(it)
	cached, synced, err := e.views.LookupCached("", it.gvk, it.namespace, it.name)
	if err != nil {
		return nil, 0, true, err
	}
	if !synced {
		if !e.views.WatchesKind("", it.gvk) {
			return nil, 0, true, nil // no rule watches this kind any more
		}
		return nil, time.Second, true, nil
	}
	if ow, pending := e.ownWrites.Load(it.target()); pending {
		// Told before the copy is decoded: the event of the engine's own write, the most
		// common reconcile of a copy, costs a lookup.
		observedRV := ""
		if cached != nil {
			observedRV = cached.ResourceVersion()
		}
		switch next, skip := ow.Reconciled(observedRV, full); {
		case next == nil:
			e.ownWrites.CompareAndDelete(it.target(), ow)
			if skip && !e.keyWatched(it) {
				return nil, 0, true, nil // else on, for settledKey to stop the watch of the key
			}
		case *next != ow:
			e.ownWrites.CompareAndSwap(it.target(), ow, *next) // not if the copy's delete dropped it meanwhile
		}
	}
	if cached != nil {
		if observed, err = cached.Object(it.gvk); err != nil {
			return nil, 0, true, err
		}
	}
	e.settledKey(it, observed)
	if observed != nil && observed.GetDeletionTimestamp() != nil && observed.GetAnnotations()[v1alpha1.OwnershipAnnotation] != "" {
		// A copy being deleted (to be recreated, or with its namespace): nothing is written
		// to it; it is looked at again once it is gone.
		return nil, 2 * time.Second, true, nil
	}
	return observed, 0, false, nil
}

// settledKey stops the watch of the object at it's key once it is no longer in the way:
// gone (observed nil, with every covering informer synced) or a copy the local informers
// hold again.
func (e *Engine) settledKey(it item, observed *unstructured.Unstructured) {
	if observed != nil && !hasCopyLabel(observed) {
		return
	}
	if e.keyWatched(it) {
		e.views.Stop(views.KeyScope(it.gvk, it.namespace, it.name))
	}
}

// keyWatched reports whether the key of it is watched by name (inTheWay).
func (e *Engine) keyWatched(it item) bool {
	return e.views.Running(views.KeyScope(it.gvk, it.namespace, it.name))
}

// recordFailures reports on the rules the objects they failed to mutate (a template error
// or limit) and the copies the policy refused, but for the rule synced, whose write made
// them moot. They are reported after the action is recorded, which would clear them; not
// retried: a change of the object or the rule brings them back.
func (e *Engine) recordFailures(it item, g planner.Gathered, entries []*ruleEntry, synced string) {
	for rule, fails := range g.Failures {
		if rule == synced {
			continue // another source's object synced it
		}
		for _, r := range entries {
			if r.rsr.Name == rule {
				r.track.Record(it, false, "", rulestatus.Failure{Reason: v1alpha1.ReasonMutationFailed, Message: fails[0]})
			}
		}
	}
	for rule, refs := range g.Refusals {
		if rule == synced {
			continue
		}
		for _, r := range entries {
			if r.rsr.Name == rule {
				e.refused(it, r, refs[0])
			}
		}
	}
}

// recordOverlaps reports, on every rule of entries that asks for the object it but does
// not write it, which rule writes it instead and why (rulestatus.Overlaps). The overlaps
// of the rules that no longer ask for it are forgotten.
func recordOverlaps(it item, act planner.Action, cands []planner.Candidate, entries []*ruleEntry) {
	why := rulestatus.Overlaps(act, cands)
	for _, r := range entries {
		r.track.Overlap(it, why[r.rsr.Name])
	}
}

// write carries out the plan of it: after the waits a create or a change of origin makes
// (views still syncing, the engine's own create not seen yet) and the settle of content
// someone else keeps changing (hold), the writer's execute.
func (e *Engine) write(ctx context.Context, it item, observed *unstructured.Unstructured, plan planner.KeyPlan, vs *sourceViews) (time.Duration, error) {
	g, entries, act := plan.Gathered, vs.entries, plan.Action
	if act.Type == planner.ActionCreate || planner.TakesOver(act, observed) {
		// The origin this copy starts from (or changes to) is chosen for good: wait for the
		// views that may still offer one with a lower cluster ID.
		e.waitSets(vs)
		e.unlistedMembers(ctx, vs)
		connecting := connectingSources(vs.beingMade, vs.young, g.Unsynced, vs.failingViews, vs.unstarted)
		unseen := unseenSources(g.Unsynced, vs.failingViews, vs.firstContact, vs.readable, connecting)
		if e.waitForViews(it, unseen, connecting) {
			return waitRetry(unseen, vs.readable), nil
		}
		if len(unseen) > 0 {
			e.log.Info("creating a copy without waiting longer for the views of some sources", "object", it.String(), "sources", sortedIDs(unseen))
		}
	}
	if act.Type == planner.ActionCreate {
		if w, pending := e.ownWrites.Load(it.target()); pending && e.opts.Clock.Since(w.At) < ownWriteWait {
			// Created by this engine a moment ago, and the local cache has not seen it yet:
			// wait for it rather than create it twice.
			return appearedRetry, nil
		}
	}
	if act.Type == planner.ActionCreate || act.Type == planner.ActionUpdate {
		if v := e.settle(it, act.Source, observed); v.Hold {
			return e.hold(ctx, it, act, g, entries, v)
		}
	}
	err := e.execute(ctx, it, act, entries)
	if errors.Is(err, errAppeared) {
		return appearedRetry, nil
	}
	syncedBy := ""
	if err == nil && act.Source != nil && act.Type != planner.ActionConflict {
		syncedBy = act.Source.Rule
	}
	e.recordFailures(it, g, entries, syncedBy)
	if err == nil {
		recordOverlaps(it, act, g.Candidates, entries)
	}
	if err == nil && act.Type == planner.ActionNone && observed != nil {
		// A copy whose origin is readable but not synced yet (a peer reconnected, a new
		// process or leader): whether the origin still has the object is not known. Look
		// again once it has synced, or a delete made meanwhile would never reach the copy:
		// the origin's informer, once synced, only enqueues the objects it still has.
		// A view over the cap is not waited for: the copy is kept as it is, and looked at
		// again when the view syncs under the cap (underCap).
		if origin := types.UID(observed.GetAnnotations()[v1alpha1.OwnershipAnnotation]); origin != "" && g.Unsynced[origin] && !vs.overCapViews[origin] {
			return unsyncedRetry, nil
		}
	}
	return 0, err
}

// hold does not write the create or update act that the settle verdict v holds: content
// the API server refused for good waits for the source to change, or is recreated when
// the rule says so (it may have been refused before the rule did); content someone else
// keeps changing is held, backing off.
func (e *Engine) hold(ctx context.Context, it item, act planner.Action, g planner.Gathered, entries []*ruleEntry, v planner.Verdict) (time.Duration, error) {
	if v.Rejected {
		for _, r := range entries {
			if r.rsr.Name != act.Source.Rule {
				continue
			}
			if act.Type == planner.ActionUpdate && v.RejectedReason == v1alpha1.ReasonImmutableField && recreates(r) {
				_, ri, err := e.writeClient(ctx, it, act)
				if err != nil {
					return 0, err
				}
				return 0, e.recreate(ctx, it, act, r, ri, v.Reason)
			}
			r.track.Record(it, false, "", rulestatus.Failure{Reason: v.RejectedReason, Message: v.Reason})
		}
	} else {
		e.held(it, act.Source.Rule, v, entries)
	}
	e.recordFailures(it, g, entries, act.Source.Rule)
	return max(v.Until.Sub(e.opts.Clock.Now()), time.Second), nil
}

// waitForViews reports whether a create of it waits for the views of the unseen
// sources: within createWait of when it was queued, or as long as one of them is
// connecting (bounded by connectWait after that source's first contact).
func (e *Engine) waitForViews(it item, unseen, connecting map[types.UID]bool) bool {
	for id := range unseen {
		if unseen[id] && connecting[id] {
			return true
		}
	}
	first, ok := e.seen.Load(it)
	if !ok || e.opts.Clock.Since(first.(time.Time)) > createWait {
		return false
	}
	for id := range unseen {
		if unseen[id] {
			return true
		}
	}
	return false
}

// unlistedMembers adds to vs the members of the group this cluster knows (its peer
// Clusters, not disabled) that the peers manager does not list yet: at a start their
// connections are not made yet, and a create must not follow a peer only because it was
// connected first. Each is young and being made within connectWait of when the engine
// first noticed it, unless its Cluster's state says it cannot be connected (no usable
// reader Secret, or failed): only a Cluster with no state yet or last seen Ready is
// waited for.
func (e *Engine) unlistedMembers(ctx context.Context, vs *sourceViews) {
	now := e.opts.Clock.Now()
	for _, id := range e.members.waitable(ctx, e.opts.Client, e.opts.LocalID) {
		if _, listed := vs.readable[id]; listed {
			continue
		}
		if e.contacts.age(id, now) < connectWait {
			if vs.setsShared {
				vs.young, vs.beingMade, vs.setsShared = maps.Clone(vs.young), maps.Clone(vs.beingMade), false
			}
			vs.young[id], vs.beingMade[id] = true, true
		}
	}
}

// sortedIDs returns the IDs set in m, sorted, for a log line.
func sortedIDs(m map[types.UID]bool) []string {
	out := make([]string, 0, len(m))
	for id, ok := range m {
		if ok {
			out = append(out, string(id))
		}
	}
	slices.Sort(out)
	return out
}
