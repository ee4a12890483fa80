package engine

import (
	"context"
	"encoding/json"
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
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner"
)

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
			r.record(it, true, "", failure{})
			unholdOthers(it, rule, entries)
		} else if act.Source == nil && act.Object == nil {
			for _, r := range entries {
				r.record(it, false, "", failure{})
			}
		}
		return nil
	case planner.ActionConflict:
		if r := entry(rule); r != nil {
			r.record(it, false, act.Reason, failure{})
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
		updated, err := e.writeCopy(ctx, w, it, ri, act.Object, true)
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
			r.record(it, false, "", failure{})
		}
		rule = act.Object.GetLabels()[v1alpha1.RuleLabel]
	}
	return e.recordWrite(it, act, rule, entry(rule), entries, statusErr)
}

// createCopy creates the copy it of act, with its namespace when the rule creates
// namespaces, and returns it as stored; done is true when there is nothing more to do
// (the namespace is missing, the copy appeared meanwhile or the write failed), with what
// execute returns.
func (e *Engine) createCopy(ctx context.Context, w *writer, it item, act planner.Action, ri dynamic.ResourceInterface, r *ruleEntry) (created *unstructured.Unstructured, done bool, err error) {
	if err := e.ensureNamespace(ctx, w, it, r); err != nil {
		f := planner.ClassifyWriteError(err)
		if r != nil {
			r.record(it, false, "", failure{f.Reason, f.String()})
		}
		if f.Reason == v1alpha1.ReasonNamespaceMissing {
			return nil, true, nil // looked at again when the rule or the object changes
		}
		return nil, true, err
	}
	sent := e.opts.Clock.Now()
	created, err = e.writeCopy(ctx, w, it, ri, act.Object, false)
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
	var statusFailure failure
	if statusErr != nil {
		f := planner.ClassifyWriteError(statusErr)
		e.opts.Metrics.refused.WithLabelValues(rule, f.Reason).Inc()
		statusFailure = failure{f.Reason, fmt.Sprintf("status: %s", f.String())}
		e.log.Info("the status of a copy was not written; retrying", "object", it.String(), "rule", rule, "reason", f.Reason, "error", statusErr.Error())
	}
	if r := entry; r != nil {
		unholdOthers(it, rule, entries)
		r.record(it, act.Type != planner.ActionDelete && statusErr == nil, "", statusFailure)
		r.mu.Lock()
		r.lastSync = e.opts.Clock.Now()
		r.mu.Unlock()
	}
	return statusErr
}

// writeCopy creates obj, the copy it, or updates it, and returns the object stored. With a
// REST client of the local cluster (Options.Config), the API server's answer is decoded as
// the informers decode objects (decodeCached, without managedFields, which no caller
// reads): the dynamic client's JSON serializer unmarshals the whole answer twice, once to
// read its kind, and was a tenth of a peer controller's CPU in a burst. Without one (the
// fakes of unit tests), the dynamic client ri writes. Both are w's: the identity of the
// member the copy comes from (identity.go).
func (e *Engine) writeCopy(ctx context.Context, w *writer, it item, ri dynamic.ResourceInterface, obj *unstructured.Unstructured, update bool) (*unstructured.Unstructured, error) {
	if w.rest == nil {
		if update {
			return ri.Update(ctx, obj, metav1.UpdateOptions{FieldManager: v1alpha1.FieldManager})
		}
		return ri.Create(ctx, obj, metav1.CreateOptions{FieldManager: v1alpha1.FieldManager})
	}
	m, err := e.mapping(it.gvk)
	if err != nil {
		return nil, fmt.Errorf("kind %s is not served by the local cluster: %w", it.gvk, err)
	}
	body, err := json.Marshal(obj.Object) // as the dynamic client encodes it
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", it, err)
	}
	path := resourcePath(m, it.namespace)
	var req *rest.Request
	if update {
		req = w.rest.Put().AbsPath(append(path, it.name)...).SpecificallyVersionedParams(&metav1.UpdateOptions{FieldManager: v1alpha1.FieldManager}, metav1.ParameterCodec, metav1.SchemeGroupVersion)
	} else {
		req = w.rest.Post().AbsPath(path...).SpecificallyVersionedParams(&metav1.CreateOptions{FieldManager: v1alpha1.FieldManager}, metav1.ParameterCodec, metav1.SchemeGroupVersion)
	}
	var stored cachedObject
	if err := req.Body(body).Do(ctx).Into(&stored); err != nil {
		return nil, err
	}
	return stored.object(it.gvk)
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
		r.drifted(it, act.Reason)
		return nil
	}
	r.record(it, act.Withheld == planner.ActionUpdate, "", failure{}) // CreateOnly: the copy is the cluster's now
	return nil
}

// writeFailed handles a create or update of a copy that the local API server refused:
// the refusal is classified and reported on the rule. Content refused for good (an
// immutable field) is not retried until the source changes, or, with onImmutableChange
// Recreate, the copy is deleted and created anew; other refusals are retried with
// backoff (the returned error).
func (e *Engine) writeFailed(ctx context.Context, it item, act planner.Action, r *ruleEntry, ri dynamic.ResourceInterface, err error) error {
	e.forgetMappings(it.gvk)
	f := planner.ClassifyWriteError(err)
	rule := act.Source.Rule
	e.opts.Metrics.refused.WithLabelValues(rule, f.Reason).Inc()
	if f.Lasting && act.Type == planner.ActionUpdate && recreates(r) {
		return e.recreate(ctx, it, act, r, ri, f.String())
	}
	if r != nil {
		r.record(it, false, "", failure{f.Reason, fmt.Sprintf("%s: %s", act.Type, f.String())})
		if f.Lasting && e.opts.Recorder != nil && !r.builtin {
			e.opts.Recorder.Eventf(r.rsr, corev1.EventTypeWarning, f.Reason, "%s: %s", it, f.String())
		}
	}
	if !f.Lasting {
		return err
	}
	now := e.opts.Clock.Now()
	d := planner.Digest(act.Source.Object, act.Source.SyncStatus)
	e.histMu.Lock()
	e.history[it] = newWriteRecord(e.history[it].history().Refused(d, f.Reason, f.String(), now, e.opts.Settle))
	e.histMu.Unlock()
	e.log.Info("the cluster refused a copy for good; not written again until its source changes", "object", it.String(), "rule", rule, "reason", f.Reason, "fields", f.Fields)
	return nil
}

// refused records a copy this cluster's policy refuses: on the rule's status, in the
// metrics and, when it is new, as a Warning event on the rule.
func (e *Engine) refused(it item, r *ruleEntry, ref planner.Refusal) {
	r.mu.Lock()
	prev, known := r.failures[it]
	r.mu.Unlock()
	r.record(it, false, "", failure{ref.Reason, ref.Message})
	if known && prev.message == ref.Message {
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
		r.record(it, false, "", failure{v1alpha1.ReasonImmutableField, fmt.Sprintf("%s; deleting it to recreate it failed: %v", why, err)})
		return fmt.Errorf("deleting %s to recreate it: %w", it, err)
	}
	e.histMu.Lock()
	delete(e.history, it) // the refusal was of the old copy
	e.histMu.Unlock()
	e.log.Info("recreating a copy whose source changed an immutable field", "object", it.String(), "rule", rule, "why", why)
	e.opts.Metrics.writes.WithLabelValues(rule, "recreate").Inc()
	if e.opts.Recorder != nil && !r.builtin {
		e.opts.Recorder.Eventf(r.rsr, corev1.EventTypeNormal, "Recreated", "%s: deleted to be created anew: %s", it, why)
	}
	r.record(it, false, "", failure{})
	return nil
}

// resource returns the controller's own dynamic client of the objects of kind gvk in
// namespace ns, which reads them.
func (e *Engine) resource(gvk schema.GroupVersionKind, ns string) (dynamic.ResourceInterface, error) {
	m, err := e.mapping(gvk)
	if err != nil {
		return nil, fmt.Errorf("kind %s is not served by the local cluster: %w", gvk, err)
	}
	return e.self().resource(m, ns), nil
}

// writeClient returns the writer of act, the write of the copy it, and its dynamic
// client of it's kind and namespace: a copy is created, updated and deleted as the member
// it comes from (writerOf); what writes nothing gets the controller's own.
func (e *Engine) writeClient(ctx context.Context, it item, act planner.Action) (*writer, dynamic.ResourceInterface, error) {
	m, err := e.mapping(it.gvk)
	if err != nil {
		return nil, nil, fmt.Errorf("kind %s is not served by the local cluster: %w", it.gvk, err)
	}
	w := e.self()
	switch {
	case (act.Type == planner.ActionCreate || act.Type == planner.ActionUpdate) && act.Source != nil:
		policy, err := e.policy(ctx)
		if err != nil {
			return nil, nil, err
		}
		// As the member whose API server served the copy: its origin when read from it,
		// the relaying member otherwise (the origin's ID in a relayed copy is a string
		// the relay writes, so it never lends the relay the origin's grants).
		if w, err = e.writerOf(policy, act.Source.PeerID, act.Source.Rule, false); err != nil {
			return nil, nil, err
		}
	case act.Type == planner.ActionDelete && act.Object != nil:
		policy, err := e.policy(ctx)
		if err != nil {
			return nil, nil, err
		}
		origin := types.UID(act.Object.GetAnnotations()[v1alpha1.OwnershipAnnotation])
		if w, err = e.writerOf(policy, origin, act.Object.GetLabels()[v1alpha1.RuleLabel], true); err != nil {
			return nil, nil, err
		}
	}
	return w, w.resource(m, it.namespace), nil
}

// mapping returns the local REST mapping of gvk. A mapping is kept until the next refresh
// (the rules or the peers changed) or a failed write of its kind (the kind may no longer be
// served as it was): every write needs one, and the RESTMapper's lookup costs as much as a
// small reconcile.
func (e *Engine) mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	e.mappingMu.Lock()
	defer e.mappingMu.Unlock()
	if m, ok := e.mappings[gvk]; ok {
		return m, nil
	}
	m, err := e.opts.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	if e.mappings == nil {
		e.mappings = map[schema.GroupVersionKind]*meta.RESTMapping{}
	}
	e.mappings[gvk] = m
	return m, nil
}

// forgetMappings drops the kept REST mappings: every one (a refresh), or those of the
// kinds given.
func (e *Engine) forgetMappings(gvks ...schema.GroupVersionKind) {
	e.mappingMu.Lock()
	defer e.mappingMu.Unlock()
	if len(gvks) == 0 {
		e.mappings = nil
	}
	for _, gvk := range gvks {
		delete(e.mappings, gvk)
	}
}

// ensureNamespace creates the copy's namespace when it is missing and the rule allows it.
func (e *Engine) ensureNamespace(ctx context.Context, w *writer, it item, r *ruleEntry) error {
	if it.namespace == "" {
		return nil
	}
	var ns corev1.Namespace
	err := e.opts.Client.Get(ctx, client.ObjectKey{Name: it.namespace}, &ns)
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return err
	}
	if r == nil || !r.rsr.Spec.CreateNamespaces {
		return fmt.Errorf("%w: %s: create it, or set spec.createNamespaces on the rule", planner.ErrNamespaceMissing, it.namespace)
	}
	created := &unstructured.Unstructured{}
	created.SetAPIVersion("v1")
	created.SetKind("Namespace")
	created.SetName(it.namespace)
	created.SetAnnotations(map[string]string{v1alpha1.CreatedByAnnotation: r.rsr.Name})
	// As the member the copy comes from: whether a member may make namespaces here is
	// this cluster's RBAC's to say.
	nsr := w.dyn.Resource(corev1.SchemeGroupVersion.WithResource("namespaces"))
	if _, err := nsr.Create(ctx, created, metav1.CreateOptions{FieldManager: v1alpha1.FieldManager}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", it.namespace, err)
	}
	return nil
}
