package engine

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/engine/rulestatus"
	"github.com/kubectl-registry/kubectl-registry/reconciler/engine/views"
	"github.com/kubectl-registry/kubectl-registry/reconciler/engine/writer"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner"
)

// copyWriter is the write side the engine calls: *writer.Writer, the local cluster's
// clients per identity.
type copyWriter interface {
	// Mapping returns the local REST mapping of a kind, kept until ForgetMappings.
	Mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error)
	ForgetMappings(gvks ...schema.GroupVersionKind)
	// Of returns the identity that writes what comes from origin through rule.
	Of(policy planner.Policy, origin types.UID, rule string, del bool) (writer.Identity, error)
	// Resource and Client return the dynamic client, as an identity, of a kind's objects
	// in a namespace.
	Resource(as writer.Identity, m *meta.RESTMapping, ns string) (dynamic.ResourceInterface, error)
	Client(as writer.Identity, gvk schema.GroupVersionKind, ns string) (dynamic.ResourceInterface, error)
	// Write creates or updates a copy and returns it as stored.
	Write(ctx context.Context, as writer.Identity, t writer.Target, obj *unstructured.Unstructured, update bool) (*unstructured.Unstructured, error)
	// EnsureNamespace creates the namespace of a copy when it is missing and a rule
	// (createdBy) creates namespaces.
	EnsureNamespace(ctx context.Context, as writer.Identity, ns, createdBy string) error
}

// target is the write of the copy it.
func (i item) target() writer.Target {
	return writer.Target{GVK: i.gvk, Namespace: i.namespace, Name: i.name}
}

// execute carries out an action and records the outcome for the rules' status.
func (e *Engine) execute(ctx context.Context, it item, act planner.Action, entries []*ruleEntry) error {
	rule := ""
	if act.Source != nil {
		rule = act.Source.Rule
	}
	entry := func(name string) *ruleEntry {
		for _, r := range entries {
			if r.rsr.Name == name {
				return r
			}
		}
		return nil
	}
	w, ri, err := e.writeClient(ctx, it, act)
	if err != nil {
		return err
	}
	// statusErr is the failure of the status write that follows the write of a copy whose
	// rule syncs status (writeCopyStatus).
	var statusErr error
	switch act.Type {
	case planner.ActionNone:
		if act.Withheld != "" {
			return e.withheld(it, act, entry)
		}
		if r := entry(rule); r != nil {
			r.track.Record(it, true, "", rulestatus.Failure{})
			unholdOthers(it, rule, entries)
		} else if act.Source == nil && act.Object == nil {
			for _, r := range entries {
				r.track.Record(it, false, "", rulestatus.Failure{})
			}
		}
		return nil
	case planner.ActionConflict:
		if r := entry(rule); r != nil {
			r.track.Record(it, false, act.Reason, rulestatus.Failure{})
		}
		e.opts.Metrics.conflicts.WithLabelValues(rule).Inc()
		return nil
	case planner.ActionCreate:
		created, done, err := e.createCopy(ctx, w, it, act, ri, entry(rule))
		if done {
			return err
		}
		statusErr = e.writeCopyStatus(ctx, it, ri, act, created)
	case planner.ActionUpdate:
		sent := e.opts.Clock.Now()
		updated, err := e.writes.Write(ctx, w, it.target(), act.Object, true)
		e.observeStages(ctx, it, sent, err)
		if err != nil {
			return e.writeFailed(ctx, it, act, entry(rule), ri, fmt.Errorf("updating %s: %w", it, err))
		}
		e.written(it, act.Source, updated)
		statusErr = e.writeCopyStatus(ctx, it, ri, act, updated)
	case planner.ActionDelete:
		uid := act.Object.GetUID()
		sent := e.opts.Clock.Now()
		err := ri.Delete(ctx, it.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		e.observeStages(ctx, it, sent, err)
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting %s: %w", it, err)
		}
		for _, r := range entries {
			r.track.Record(it, false, "", rulestatus.Failure{})
		}
		rule = act.Object.GetLabels()[v1alpha1.RuleLabel]
	}
	return e.recordWrite(it, act, rule, entry(rule), entries, statusErr)
}

// createCopy creates the copy it of act, with its namespace when the rule creates
// namespaces, and returns it as stored; done is true when there is nothing more to do
// (the namespace is missing, the copy appeared meanwhile or the write failed), with what
// execute returns.
func (e *Engine) createCopy(ctx context.Context, w writer.Identity, it item, act planner.Action, ri dynamic.ResourceInterface, r *ruleEntry) (created *unstructured.Unstructured, done bool, err error) {
	createdBy := "" // the rule, when it creates the namespaces of its copies
	if r != nil && r.rsr.Spec.CreateNamespaces {
		createdBy = r.rsr.Name
	}
	if err := e.writes.EnsureNamespace(ctx, w, it.namespace, createdBy); err != nil {
		f := planner.ClassifyWriteError(err)
		if r != nil {
			r.track.Record(it, false, "", rulestatus.Failure{Reason: f.Reason, Message: f.String()})
		}
		if f.Reason == v1alpha1.ReasonNamespaceMissing {
			return nil, true, nil // looked at again when the rule or the object changes
		}
		return nil, true, err
	}
	sent := e.opts.Clock.Now()
	created, err = e.writes.Write(ctx, w, it.target(), act.Object, false)
	e.observeStages(ctx, it, sent, err)
	if apierrors.IsAlreadyExists(err) {
		// The local cache had not seen it yet (its event queues the copy again), or an
		// object made here, which the local informers do not hold, is in the way.
		e.inTheWay(ctx, it, ri)
		return nil, true, fmt.Errorf("%s appeared meanwhile: %w", it, errAppeared)
	}
	if err != nil {
		return nil, true, e.writeFailed(ctx, it, act, r, ri, fmt.Errorf("creating %s: %w", it, err))
	}
	e.written(it, act.Source, created)
	return created, false, nil
}

// recordWrite records a write of the copy it made for act by rule (entry, nil when the
// rule is gone) in the metrics and the rules' status, with the failure of the status
// write that followed it (statusErr), which it returns.
func (e *Engine) recordWrite(it item, act planner.Action, rule string, entry *ruleEntry, entries []*ruleEntry, statusErr error) error {
	e.log.Info("synced", "op", string(act.Type), "object", it.String(), "rule", rule, "reason", act.Reason)
	e.opts.Metrics.writes.WithLabelValues(rule, string(act.Type)).Inc()
	if t, ok := e.seen.Load(it); ok {
		e.opts.Metrics.latency.WithLabelValues(rule).Observe(e.opts.Clock.Since(t.(time.Time)).Seconds())
	}
	// The copy is written, its status may not be. A failed status write is not only
	// logged: logged alone, it waited for another event of the copy or of its source,
	// and the copy kept a stale status meanwhile. It is reported on the rule and counted
	// as a refused write, and returned, so that the copy is looked at again with backoff
	// (processNext counts it in errors_total): the next reconcile finds the status
	// differing from the source's and writes it again.
	var statusFailure rulestatus.Failure
	if statusErr != nil {
		f := planner.ClassifyWriteError(statusErr)
		e.opts.Metrics.refused.WithLabelValues(rule, f.Reason).Inc()
		statusFailure = rulestatus.Failure{Reason: f.Reason, Message: fmt.Sprintf("status: %s", f.String())}
		e.log.Info("the status of a copy was not written; retrying", "object", it.String(), "rule", rule, "reason", f.Reason, "error", statusErr.Error())
	}
	if r := entry; r != nil {
		unholdOthers(it, rule, entries)
		r.track.Record(it, act.Type != planner.ActionDelete && statusErr == nil, "", statusFailure)
		r.track.Synced(e.opts.Clock.Now())
	}
	return statusErr
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
		e.ownWrites.Store(it.target(), writer.OwnWrite{ResourceVersion: stored.GetResourceVersion(), At: e.opts.Clock.Now(), Changed: len(changed) > 0})
	}
	d := planner.Digest(src.Object, src.SyncStatus)
	now := e.opts.Clock.Now()
	e.records.Update(it.target(), func(h planner.WriteHistory) planner.WriteHistory {
		return h.Written(d, changed, now, e.opts.Settle)
	})
}

// reconcileStart is the context key of the time the current reconcile started.
type reconcileStart struct{}

// withReconcileStart records in ctx that a reconcile starts at t (processNext).
func withReconcileStart(ctx context.Context, t time.Time) context.Context {
	return context.WithValue(ctx, reconcileStart{}, t)
}

// observeStages records the stages of a write of it sent at sent: from the change seen
// (the first event that queued it) to the start of the reconcile, from there to the
// request, and the request itself. A failed write is not a write: not recorded.
func (e *Engine) observeStages(ctx context.Context, it item, sent time.Time, err error) {
	if err != nil {
		return
	}
	now := e.opts.Clock.Now()
	e.opts.Metrics.stages.WithLabelValues("write").Observe(now.Sub(sent).Seconds())
	start, ok := ctx.Value(reconcileStart{}).(time.Time)
	if !ok {
		return
	}
	e.opts.Metrics.stages.WithLabelValues("decide").Observe(sent.Sub(start).Seconds())
	if t, ok := e.seen.Load(it); ok {
		e.opts.Metrics.stages.WithLabelValues("queue").Observe(start.Sub(t.(time.Time)).Seconds())
	}
}

// writeCopyStatus writes the status of a copy just created or updated (stored, as the API
// server returned it) when its rule syncs status: the status subresource ignores the
// status of a create or an update, so it is a write of its own.
func (e *Engine) writeCopyStatus(ctx context.Context, it item, ri dynamic.ResourceInterface, act planner.Action, stored *unstructured.Unstructured) error {
	if !act.Source.SyncStatus {
		return nil
	}
	st, ok := act.Object.Object["status"]
	if !ok {
		return nil
	}
	stored.Object["status"] = st
	_, err := ri.UpdateStatus(ctx, stored, metav1.UpdateOptions{FieldManager: v1alpha1.FieldManager})
	if apierrors.IsNotFound(err) {
		// The kind has no status subresource (the write carried the status), or the copy
		// is gone meanwhile (its delete event queues it again): nothing to retry.
		return nil
	}
	if err != nil {
		return fmt.Errorf("writing the status of %s: %w", it, err)
	}
	return nil
}

// withheld records a write the rule's syncMode holds back: drift for a ReportOnly rule,
// a copy left to the cluster for a CreateOnly rule.
func (e *Engine) withheld(it item, act planner.Action, entry func(string) *ruleEntry) error {
	r := entry(act.Rule())
	if r == nil {
		return nil
	}
	if r.rsr.Spec.SyncMode == v1alpha1.SyncModeReportOnly {
		r.track.Drifted(it, act.Reason)
		return nil
	}
	r.track.Record(it, act.Withheld == planner.ActionUpdate, "", rulestatus.Failure{}) // CreateOnly: the copy is the cluster's now
	return nil
}

// writeFailed handles a create or update of a copy that the local API server refused:
// the refusal is classified and reported on the rule. Content refused for good (an
// immutable field) is not retried until the source changes, or, with onImmutableChange
// Recreate, the copy is deleted and created anew; other refusals are retried with
// backoff (the returned error).
func (e *Engine) writeFailed(ctx context.Context, it item, act planner.Action, r *ruleEntry, ri dynamic.ResourceInterface, err error) error {
	e.writes.ForgetMappings(it.gvk)
	f := planner.ClassifyWriteError(err)
	rule := act.Source.Rule
	e.opts.Metrics.refused.WithLabelValues(rule, f.Reason).Inc()
	if f.Lasting && act.Type == planner.ActionUpdate && recreates(r) {
		return e.recreate(ctx, it, act, r, ri, f.String())
	}
	if r != nil {
		r.track.Record(it, false, "", rulestatus.Failure{Reason: f.Reason, Message: fmt.Sprintf("%s: %s", act.Type, f.String())})
		if f.Lasting && e.opts.Recorder != nil && !r.builtin {
			e.opts.Recorder.Eventf(r.rsr, corev1.EventTypeWarning, f.Reason, "%s: %s", it, f.String())
		}
	}
	if !f.Lasting {
		return err
	}
	now := e.opts.Clock.Now()
	d := planner.Digest(act.Source.Object, act.Source.SyncStatus)
	e.records.Update(it.target(), func(h planner.WriteHistory) planner.WriteHistory {
		return h.Refused(d, f.Reason, f.String(), now, e.opts.Settle)
	})
	e.log.Info("the cluster refused a copy for good; not written again until its source changes", "object", it.String(), "rule", rule, "reason", f.Reason, "fields", f.Fields)
	return nil
}

// refused records a copy this cluster's policy refuses: on the rule's status, in the
// metrics and, when it is new, as a Warning event on the rule.
func (e *Engine) refused(it item, r *ruleEntry, ref planner.Refusal) {
	prev, known := r.track.Failed(it)
	r.track.Record(it, false, "", rulestatus.Failure{Reason: ref.Reason, Message: ref.Message})
	if known && prev.Message == ref.Message {
		return
	}
	e.opts.Metrics.refused.WithLabelValues(r.rsr.Name, ref.Reason).Inc()
	e.log.Info("a copy is refused here", "object", it.String(), "rule", r.rsr.Name, "reason", ref.Reason, "message", ref.Message)
	if e.opts.Recorder != nil && !r.builtin {
		e.opts.Recorder.Eventf(r.rsr, corev1.EventTypeWarning, ref.Reason, "%s", ref.Message)
	}
}

// recreates reports whether the rule replaces copies whose source changed an immutable
// field.
func recreates(r *ruleEntry) bool {
	return r != nil && r.rsr.Spec.OnImmutableChange == v1alpha1.ImmutableChangeRecreate
}

// recreate deletes a copy that cannot be updated to what its source asks for (why), so
// that its delete event brings it back, created from the source: once per change of the
// source, since the create that follows is of the new content.
func (e *Engine) recreate(ctx context.Context, it item, act planner.Action, r *ruleEntry, ri dynamic.ResourceInterface, why string) error {
	rule := act.Source.Rule
	uid := act.Object.GetUID()
	background := metav1.DeletePropagationBackground
	err := ri.Delete(ctx, it.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}, PropagationPolicy: &background})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		r.track.Record(it, false, "", rulestatus.Failure{Reason: v1alpha1.ReasonImmutableField, Message: fmt.Sprintf("%s; deleting it to recreate it failed: %v", why, err)})
		return fmt.Errorf("deleting %s to recreate it: %w", it, err)
	}
	e.records.Delete(it.target()) // the refusal was of the old copy
	e.log.Info("recreating a copy whose source changed an immutable field", "object", it.String(), "rule", rule, "why", why)
	e.opts.Metrics.writes.WithLabelValues(rule, "recreate").Inc()
	if e.opts.Recorder != nil && !r.builtin {
		e.opts.Recorder.Eventf(r.rsr, corev1.EventTypeNormal, "Recreated", "%s: deleted to be created anew: %s", it, why)
	}
	r.track.Record(it, false, "", rulestatus.Failure{})
	return nil
}

// writeClient returns the writer of act, the write of the copy it, and its dynamic
// client of it's kind and namespace: a copy is created, updated and deleted as the member
// it comes from (writer.Writer.Of); what writes nothing gets the controller's own.
func (e *Engine) writeClient(ctx context.Context, it item, act planner.Action) (writer.Identity, dynamic.ResourceInterface, error) {
	m, err := e.writes.Mapping(it.gvk)
	if err != nil {
		return writer.Self, nil, fmt.Errorf("kind %s is not served by the local cluster: %w", it.gvk, err)
	}
	w := writer.Self
	switch {
	case (act.Type == planner.ActionCreate || act.Type == planner.ActionUpdate) && act.Source != nil:
		policy, err := e.policy(ctx)
		if err != nil {
			return writer.Self, nil, err
		}
		// As the member whose API server served the copy: its origin when read from it,
		// the relaying member otherwise (the origin's ID in a relayed copy is a string
		// the relay writes, so it never lends the relay the origin's grants).
		if w, err = e.writes.Of(policy, act.Source.PeerID, act.Source.Rule, false); err != nil {
			return writer.Self, nil, err
		}
	case act.Type == planner.ActionDelete && act.Object != nil:
		policy, err := e.policy(ctx)
		if err != nil {
			return writer.Self, nil, err
		}
		origin := types.UID(act.Object.GetAnnotations()[v1alpha1.OwnershipAnnotation])
		if w, err = e.writes.Of(policy, origin, act.Object.GetLabels()[v1alpha1.RuleLabel], true); err != nil {
			return writer.Self, nil, err
		}
	}
	ri, err := e.writes.Resource(w, m, it.namespace)
	return w, ri, err
}

// inTheWay is called when the create of a copy found an object at its key that the local
// informers do not hold: one made in this cluster (no ownership label). The object is
// then watched by name, so that the copy's reconcile sees it (a conflict: it is never
// touched) and is queued again when it changes or goes away; a copy the cache has not
// seen yet is left to its own event.
//
// Each such object costs a watch; beyond maxKeyWatches of a kind, the local informers of
// the kind go back to carrying every object (localSelector), which then shows the objects
// in the way to every reconcile, and the rules say so.
//
// The watch runs until ctx is done (or the scope is retained no more): ctx is the
// engine's run context, which the workers pass down to every reconcile.
func (e *Engine) inTheWay(ctx context.Context, it item, ri dynamic.ResourceInterface) {
	obj, err := ri.Get(ctx, it.name, metav1.GetOptions{})
	if err != nil || hasCopyLabel(obj) {
		return
	}
	if e.views.KeyWatches(it.gvk) >= maxKeyWatches {
		e.local.mu.Lock()
		if e.local.every == nil {
			e.local.every = map[schema.GroupVersionKind]bool{}
		}
		first := !e.local.every[it.gvk]
		e.local.every[it.gvk] = true
		e.local.mu.Unlock()
		if first {
			e.log.Info("many objects made here are in the way of copies: watching every local object of the kind", "kind", it.gvk.String(), "watchedByName", maxKeyWatches)
			e.triggerRefresh()
		}
		return
	}
	s := views.KeyScope(it.gvk, it.namespace, it.name)
	if err := e.views.Ensure(ctx, s, "", 0, e.localClient(), e.opts.Mapper, e.onEvent); err != nil {
		e.log.Error(err, "watching an object in the way of a copy", "object", it.String())
		return
	}
	e.log.V(1).Info("an object without the ownership mark is in the way of a copy; watching it", "object", it.String())
}

// maxKeyWatches bounds the objects of one kind watched by name (inTheWay).
const maxKeyWatches = 100

// hasCopyLabel reports whether the local informers (copiesSelector) see u.
func hasCopyLabel(u *unstructured.Unstructured) bool {
	_, ok := u.GetLabels()[copiesSelector]
	return ok
}
