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
	h, ok := e.records.Get(it.target())
	if !ok {
		return planner.Verdict{} // not written recently
	}
	in := planner.SettleInput{History: h, Desired: planner.Digest(src.Object, src.SyncStatus), Missing: observed == nil, Now: e.opts.Clock.Now(), Policy: e.opts.Settle}
	if observed != nil {
		in.Drift = src.Drift(observed, src.SyncStatus)
	}
	h, v := planner.Settle(in)
	e.records.Set(it.target(), h)
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
		r.track.Hold(it, v.Reason)
		if v.Started && e.opts.Recorder != nil && !r.builtin {
			e.opts.Recorder.Eventf(r.rsr, corev1.EventTypeWarning, ReasonChangedAfterWrite, "%s: %s", it, v.Reason)
		}
	}
	if v.Started {
		e.opts.Metrics.held.WithLabelValues(rule).Inc()
		e.log.Info("holding a copy that is changed after each write", "object", it.String(), "rule", rule, "reason", v.Reason, "until", v.Until.UTC().Format(time.RFC3339))
	}
}

// forgetHistory drops the write histories Settle no longer needs, and the own writes
// whose event came before the write returned, or never.
func (e *Engine) forgetHistory(now time.Time) {
	e.ownWrites.Forget(now)
	e.records.Forget(now, e.opts.Settle)
}
