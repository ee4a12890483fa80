package engine

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-registry/kubectl-registry/reconciler/planner"
)

// settle asks Settle whether the copy chosen from src is written now, given the recent
// writes of it.
func (e *Engine) settle(it item, src *planner.Candidate, observed *unstructured.Unstructured) planner.Verdict {
	e.histMu.Lock()
	rec, ok := e.history[it]
	h := rec.history()
	e.histMu.Unlock()
	if !ok {
		return planner.Verdict{} // not written recently
	}
	in := planner.SettleInput{History: h, Desired: planner.Digest(src.Object, src.SyncStatus), Missing: observed == nil, Now: e.opts.Clock.Now(), Policy: e.opts.Settle}
	if observed != nil {
		in.Drift = src.Drift(observed, src.SyncStatus)
	}
	h, v := planner.Settle(in)
	e.histMu.Lock()
	e.history[it] = newWriteRecord(h)
	e.histMu.Unlock()
	return v
}

// held records a copy that is not rewritten: on the rule's status, in the metrics and,
// when the hold starts, in the log and as an event on the rule.
func (e *Engine) held(it item, rule string, v planner.Verdict, entries []*ruleEntry) {
	unholdOthers(it, rule, entries)
	for _, r := range entries {
		if r.rsr.Name != rule {
			continue
		}
		r.hold(it, v.Reason)
		if v.Started && e.opts.Recorder != nil && !r.builtin {
			e.opts.Recorder.Eventf(r.rsr, corev1.EventTypeWarning, ReasonChangedAfterWrite, "%s: %s", it, v.Reason)
		}
	}
	if v.Started {
		e.opts.Metrics.held.WithLabelValues(rule).Inc()
		e.log.Info("holding a copy that is changed after each write", "object", it.String(), "rule", rule, "reason", v.Reason, "until", v.Until.UTC().Format(time.RFC3339))
	}
}

// written remembers a write of the copy chosen from src, whose stored object is stored.
func (e *Engine) written(it item, src *planner.Candidate, stored *unstructured.Unstructured) {
	var changed []string
	if stored != nil {
		// Status is written separately (syncStatus) and may be set by the local cluster.
		changed = src.Drift(stored, false)
	}
	if len(changed) > 0 {
		e.opts.Metrics.changedOnWrite.WithLabelValues(src.Rule).Inc()
		e.log.Info("the cluster changed a copy on write", "object", it.String(), "rule", src.Rule, "changed", changed)
	}
	if stored != nil && !src.SyncStatus {
		// Kept whether or not the cluster changed the write: a create is not made twice
		// while the local cache lacks it (a rule that changes meanwhile asks to write
		// again, and the create found the copy already there).
		e.ownWrites.Store(it, ownWrite{resourceVersion: stored.GetResourceVersion(), at: e.opts.Clock.Now(), changed: len(changed) > 0})
	}
	d := planner.Digest(src.Object, src.SyncStatus)
	now := e.opts.Clock.Now()
	e.histMu.Lock()
	defer e.histMu.Unlock()
	e.history[it] = newWriteRecord(e.history[it].history().Written(d, changed, now, e.opts.Settle))
}

// writeRecord is how the engine keeps a WriteHistory: the common one (a single write,
// stored as written, never held) without its slices, for a smaller entry per copy written
// within the last Window; any other in full.
type writeRecord struct {
	desired string
	at      time.Time
	full    *planner.WriteHistory
}

func newWriteRecord(h planner.WriteHistory) writeRecord {
	if len(h.Writes) == 1 && len(h.Changed) == 0 && h.Holds == 0 && h.HeldUntil.IsZero() && h.Reason == "" {
		return writeRecord{desired: h.Desired, at: h.Writes[0]}
	}
	return writeRecord{full: &h}
}

// history returns the WriteHistory the record keeps (the zero one for the zero record).
func (r writeRecord) history() planner.WriteHistory {
	switch {
	case r.full != nil:
		return *r.full
	case r.at.IsZero():
		return planner.WriteHistory{Desired: r.desired}
	}
	return planner.WriteHistory{Desired: r.desired, Writes: []time.Time{r.at}}
}

// forgetHistory drops the write histories Settle no longer needs.
func (e *Engine) forgetHistory(now time.Time) {
	e.ownWrites.Range(func(k, v any) bool {
		if now.Sub(v.(ownWrite).at) > time.Minute {
			e.ownWrites.Delete(k) // its event came before the write returned, or never
		}
		return true
	})
	e.histMu.Lock()
	defer e.histMu.Unlock()
	for it, rec := range e.history {
		if rec.history().Forgettable(now, e.opts.Settle) {
			delete(e.history, it)
		}
	}
	if len(e.history) == 0 {
		e.history = map[item]writeRecord{} // a Go map keeps its size: let the one of a burst go
	}
}
