package writer

import (
	"sync"
	"time"
)

// OwnWrite is a write of the engine that no reconcile has seen in the local cache yet.
type OwnWrite struct {
	ResourceVersion string
	At              time.Time
	// decidedBefore is set when a reconcile of the copy ran while the local cache did not
	// have the write yet: its decision was made on the copy as it was before, so the
	// write's own event must be looked at in full (a delete at the origin right after the
	// write, seen while the local cache still lacked the copy, decided nothing).
	decidedBefore bool
	// Changed is set when the cluster stored the write changed (an admission webhook,
	// defaulting): its event is looked at in full, for Settle to hold the copy.
	Changed bool
}

// Reconciled is what a reconcile that finds the local copy at observedRV does with the
// engine's pending write w: next is the write as it is kept afterwards (nil: forgotten,
// the local cache has it), and skip says that the reconcile has nothing to do. full says
// that something other than a change of the local object queued it (its source, a rule,
// a peer, a retry).
//
// A reconcile queued only by the event of the write itself is skipped when the local
// cache has the write and no reconcile ran on the copy as it was before: the write's
// source, the rules and the peers queue the copy by their own events when they change
// (while the write's reconcile ran, the queue held it to be looked at again). A reconcile
// that runs while the cache lacks the write decided on the copy as it was before (a
// delete at the origin right after the write decides nothing while the copy seems
// absent), so the write's event is then looked at in full. So is the event of a write
// the cluster changed on the way: the next decision asks to write again, and Settle holds.
func (w OwnWrite) Reconciled(observedRV string, full bool) (next *OwnWrite, skip bool) {
	if observedRV == w.ResourceVersion {
		return nil, !full && !w.decidedBefore && !w.Changed
	}
	marked := w
	marked.decidedBefore = true
	return &marked, false
}

// OwnWrites hold, per copy, the engine's last write of it (of a copy whose status is not
// synced), until the local cache has it: a create is not made twice meanwhile, and the
// write's own event is not looked at again when the cluster stored it as written.
type OwnWrites struct {
	m sync.Map // Target -> OwnWrite
}

// Load returns the pending write of t.
func (o *OwnWrites) Load(t Target) (OwnWrite, bool) {
	w, ok := o.m.Load(t)
	if !ok {
		return OwnWrite{}, false
	}
	return w.(OwnWrite), true
}

// Store keeps w as the pending write of t.
func (o *OwnWrites) Store(t Target, w OwnWrite) { o.m.Store(t, w) }

// Delete forgets the pending write of t.
func (o *OwnWrites) Delete(t Target) { o.m.Delete(t) }

// CompareAndDelete forgets the pending write of t if it is old.
func (o *OwnWrites) CompareAndDelete(t Target, old OwnWrite) bool {
	return o.m.CompareAndDelete(t, old)
}

// CompareAndSwap keeps next as the pending write of t if it is old (not if the copy's
// delete dropped it meanwhile).
func (o *OwnWrites) CompareAndSwap(t Target, old, next OwnWrite) bool {
	return o.m.CompareAndSwap(t, old, next)
}

// Forget drops the writes made more than a minute before now: their event came before
// the write returned, or never.
func (o *OwnWrites) Forget(now time.Time) {
	o.m.Range(func(k, v any) bool {
		if now.Sub(v.(OwnWrite).At) > time.Minute {
			o.m.Delete(k)
		}
		return true
	})
}
