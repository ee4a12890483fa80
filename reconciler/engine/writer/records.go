package writer

import (
	"sync"
	"time"

	"github.com/kubectl-registry/kubectl-registry/reconciler/planner"
)

// Records are what the engine remembers of its recent writes of each copy, for Settle.
type Records struct {
	mu sync.Mutex
	by map[Target]record
}

// NewRecords returns empty Records.
func NewRecords() *Records {
	return &Records{by: map[Target]record{}}
}

// Get returns the write history of t, and whether there is one.
func (r *Records) Get(t Target) (planner.WriteHistory, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, ok := r.by[t]
	return rec.history(), ok
}

// Set keeps h as the write history of t.
func (r *Records) Set(t Target, h planner.WriteHistory) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.by[t] = newRecord(h)
}

// Update keeps next of the write history of t (the zero one when there is none) as its
// history.
func (r *Records) Update(t Target, next func(planner.WriteHistory) planner.WriteHistory) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.by[t] = newRecord(next(r.by[t].history()))
}

// Delete forgets the write history of t.
func (r *Records) Delete(t Target) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.by, t)
}

// Forget drops the write histories Settle, under policy, no longer needs at now.
func (r *Records) Forget(now time.Time, policy planner.SettlePolicy) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for t, rec := range r.by {
		if rec.history().Forgettable(now, policy) {
			delete(r.by, t)
		}
	}
	if len(r.by) == 0 {
		r.by = map[Target]record{} // a Go map keeps its size: let the one of a burst go
	}
}

// record is how Records keep a WriteHistory: the common one (a single write, stored as
// written, never held) without its slices, for a smaller entry per copy written within
// the last Window; any other in full.
type record struct {
	desired string
	at      time.Time
	full    *planner.WriteHistory
}

func newRecord(h planner.WriteHistory) record {
	if len(h.Writes) == 1 && len(h.Changed) == 0 && h.Holds == 0 && h.HeldUntil.IsZero() && h.Reason == "" {
		return record{desired: h.Desired, at: h.Writes[0]}
	}
	return record{full: &h}
}

// history returns the WriteHistory the record keeps (the zero one for the zero record).
func (r record) history() planner.WriteHistory {
	switch {
	case r.full != nil:
		return *r.full
	case r.at.IsZero():
		return planner.WriteHistory{Desired: r.desired}
	}
	return planner.WriteHistory{Desired: r.desired, Writes: []time.Time{r.at}}
}
