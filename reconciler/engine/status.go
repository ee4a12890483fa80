package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/peers"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner"
	"github.com/kubectl-registry/kubectl-registry/reconciler/rules"
)

// ReasonChangedAfterWrite is v1alpha1.ReasonChangedAfterWrite.
const ReasonChangedAfterWrite = v1alpha1.ReasonChangedAfterWrite

// writeStatuses brings every rule's status up to date (written only when it changed) and
// runs the deletion policy of rules being deleted.
func (e *Engine) writeStatuses(ctx context.Context) {
	e.forgetHistory(e.opts.Clock.Now())
	e.opts.Metrics.overCap.Reset()
	for _, s := range e.watchers.overCapScopes() {
		e.opts.Metrics.overCap.WithLabelValues(s.cluster, s.gvk.Kind).Inc()
	}
	for _, r := range e.snapshot() {
		r.mu.Lock()
		nHeld, nDrift := len(r.held), len(r.drift)
		r.mu.Unlock()
		e.opts.Metrics.heldObjects.WithLabelValues(r.rsr.Name).Set(float64(nHeld))
		e.opts.Metrics.driftObjects.WithLabelValues(r.rsr.Name).Set(float64(nDrift))
		if r.builtin {
			continue
		}
		if err := e.finalize(ctx, r); err != nil {
			e.log.Error(err, "applying the deletion policy", "rule", r.rsr.Name)
		}
		if r.rsr.DeletionTimestamp != nil {
			continue
		}
		if err := e.writeStatus(ctx, r); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			e.log.Error(err, "writing the rule status", "rule", r.rsr.Name)
		}
	}
}

// Status computes a rule's status from the engine's view.
func (e *Engine) status(ctx context.Context, r *ruleEntry) v1alpha1.ResourceSyncRuleStatus {
	st := *r.rsr.Status.DeepCopy()
	st.ObservedGeneration = r.rsr.Generation
	set := func(t string, ok bool, reason, msg string) {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: r.rsr.Generation})
	}

	var src sourceStates
	st.Sources, src = e.sourceStates(ctx, r)

	t := r.tally()
	st.SyncedObjects, st.Conflicts, st.Drift = t.synced, t.conflicts, t.drift
	if !t.lastSync.IsZero() {
		ls := metav1.NewTime(t.lastSync.Truncate(time.Second))
		st.LastSyncTime = &ls
	}

	var refusal *planner.Refusal
	if r.compiled != nil {
		if policy, err := e.policy(ctx); err == nil {
			refusal = policy.RuleAllowed(r.rsr, r.compiled)
		}
	}
	if refusal != nil {
		set(v1alpha1.RuleConditionAllowed, false, refusal.Reason, refusal.Message)
	} else {
		set(v1alpha1.RuleConditionAllowed, true, v1alpha1.ReasonAllowed, "")
	}
	var invalid *rules.InvalidRuleError
	switch rerr := r.getErr(); {
	case rerr != nil && isCapped(r):
		set(v1alpha1.RuleConditionReady, false, v1alpha1.ReasonTooManyRules, rerr.Error())
	case rerr != nil && asInvalid(rerr, &invalid):
		set(v1alpha1.RuleConditionReady, false, v1alpha1.ReasonInvalidRule, rerr.Error())
	case rerr != nil:
		set(v1alpha1.RuleConditionReady, false, v1alpha1.ReasonUnknownKind, rerr.Error())
	case refusal != nil:
		set(v1alpha1.RuleConditionReady, false, refusal.Reason, "the rule does not run in this cluster: "+refusal.Message)
	default:
		set(v1alpha1.RuleConditionReady, true, v1alpha1.ReasonSynced, fmt.Sprintf("%d objects synced", st.SyncedObjects))
	}
	e.setHealth(set, t, src)
	r.mu.Lock()
	note := r.watch
	r.mu.Unlock()
	if note.reason != "" {
		set(v1alpha1.RuleConditionWatchesNarrowed, note.narrowed, note.reason, note.message)
	}
	if r.rsr.Spec.SyncMode == v1alpha1.SyncModeReportOnly {
		if st.Drift > 0 {
			set(v1alpha1.RuleConditionDrifted, true, v1alpha1.ReasonDrift,
				fmt.Sprintf("%d copies differ from their sources; syncMode ReportOnly writes nothing: %s", st.Drift, t.driftList))
		} else {
			set(v1alpha1.RuleConditionDrifted, false, v1alpha1.ReasonNoDrift, "")
		}
	} else {
		meta.RemoveStatusCondition(&st.Conditions, v1alpha1.RuleConditionDrifted)
	}
	return st
}

// setHealth sets the Conflict and Degraded conditions of a rule (set) from its tally and
// its sources.
func (e *Engine) setHealth(set func(t string, ok bool, reason, msg string), t ruleTally, src sourceStates) {
	overlapMsg := ""
	if t.nOverlaps > 0 {
		overlapMsg = fmt.Sprintf("%d objects this rule matches are written by another rule, which takes precedence: %s", t.nOverlaps, t.overlaps)
	}
	switch {
	case t.conflicts > 0:
		set(v1alpha1.RuleConditionConflict, true, v1alpha1.ReasonObjectConflict,
			joinMsg(fmt.Sprintf("%d local objects without the ownership mark are in the way and were not touched: %s", t.conflicts, t.conflictList), overlapMsg))
	case t.nOverlaps > 0:
		set(v1alpha1.RuleConditionConflict, true, v1alpha1.ReasonRuleOverlap, overlapMsg)
	default:
		set(v1alpha1.RuleConditionConflict, false, v1alpha1.ReasonNoConflicts, "")
	}
	heldMsg := ""
	if t.nHeld > 0 {
		heldMsg = fmt.Sprintf("%d copies are changed by something else after each write and are no longer rewritten on every change (held, backing off up to %s; "+
			"if a local controller, an HPA or a mutating webhook owns the fields, list them in the rule's spec.ignoreFields; otherwise stop the other writer): %s",
			t.nHeld, e.opts.Settle.MaxHold, t.held)
	}
	failuresMsg := ""
	if t.nFailures > 0 {
		failuresMsg = fmt.Sprintf("%d objects fail to sync: %s", t.nFailures, t.failures)
	}
	switch {
	case len(src.tooMany) > 0:
		set(v1alpha1.RuleConditionDegraded, true, src.tooManyReason, joinMsg(joinMsg(strings.Join(src.tooMany, "; "), failuresMsg), heldMsg))
	case t.nFailures > 0:
		set(v1alpha1.RuleConditionDegraded, true, failureReason(t.failureReasons), joinMsg(fmt.Sprintf("%d objects fail to sync: %s", t.nFailures, t.failures), heldMsg))
	case src.failing > 0:
		set(v1alpha1.RuleConditionDegraded, true, v1alpha1.ReasonSourceFailing, joinMsg(fmt.Sprintf("%d sources fail; see status.sources", src.failing), heldMsg))
	case t.nHeld > 0:
		set(v1alpha1.RuleConditionDegraded, true, ReasonChangedAfterWrite, heldMsg)
	default:
		set(v1alpha1.RuleConditionDegraded, false, v1alpha1.ReasonAllSourcesOK, "")
	}
}

// ruleTally is what a rule's entry tracks, counted and summarized for its status.
type ruleTally struct {
	synced, conflicts, drift int32
	lastSync                 time.Time
	// conflictList, failures, driftList, held and overlaps summarize the first objects of
	// each, with their reasons; failureReasons counts the failures by reason.
	conflictList, failures, driftList, held, overlaps string
	nFailures, nHeld, nOverlaps                       int
	failureReasons                                    map[string]int
}

// tally counts and summarizes what the entry tracks, under its lock.
func (r *ruleEntry) tally() ruleTally {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := ruleTally{synced: int32(len(r.synced)), conflicts: int32(len(r.conflicts)), drift: int32(len(r.drift)), lastSync: r.lastSync,
		conflictList: summarize(r.conflicts, 5), driftList: summarizeReasons(r.drift, 5),
		nHeld: len(r.held), held: summarizeReasons(r.held, 5), nOverlaps: len(r.overlaps), overlaps: summarizeReasons(r.overlaps, 5),
		nFailures: len(r.failures), failureReasons: map[string]int{}}
	failureMsgs := make(map[item]string, len(r.failures))
	for it, f := range r.failures {
		failureMsgs[it] = f.message
		t.failureReasons[f.reason]++
	}
	t.failures = summarizeReasons(failureMsgs, 5)
	return t
}

// sourceStates are how a rule's sources fare: those failing, and those over the cap on
// objects or the byte limits (tooMany, with their reason).
type sourceStates struct {
	failing       int
	tooMany       []string
	tooManyReason string
}

// sourceStates returns the state of each peer as a source of the rule r: unreachable,
// not selected by its features, syncing (with the objects it offers) or failing.
func (e *Engine) sourceStates(ctx context.Context, r *ruleEntry) (sources []v1alpha1.RuleSource, out sourceStates) {
	out.tooManyReason = v1alpha1.ReasonTooManyObjects
	if r.compiled == nil {
		return nil, out
	}
	all := e.opts.Peers.List()
	members := memberIDs(all)
	gvk := r.compiled.GVK
	decode := func(c *cachedObject) (*unstructured.Unstructured, error) { return c.object(gvk) }
	if !r.compiled.ReadsContent() {
		decode = func(c *cachedObject) (*unstructured.Unstructured, error) { return c.metadataOnly(gvk) }
	}
	for _, p := range all {
		src := v1alpha1.RuleSource{Cluster: p.Name}
		switch {
		case p.Ready && p.Bootstrap:
			src.State, src.Message = v1alpha1.SourceUnreachable, "waiting for the reader credential the peer issues this cluster (it is read with its bootstrap credential, which reads none of its objects); its copies are kept as they are"
		case !p.Ready || p.Config() == nil:
			src.State, src.Message = v1alpha1.SourceUnreachable, "the peer is not Ready; its copies are kept as they are"
		case !r.compiled.Sources(peerFeatures(ctx, p)):
			src.State, src.Message = v1alpha1.SourceNotSelected, "the peer's ClusterFeatures do not satisfy clusterFeatureMatch"
		default:
			src.State = v1alpha1.SourceSyncing
			if err := e.sourceError(p.Name, r); err != nil {
				src.State, src.Message = v1alpha1.SourceFailing, err.Error()
				var over *TooManyObjectsError
				if errors.As(err, &over) {
					if over.TooLarge != nil {
						out.tooManyReason = over.Reason()
					}
					out.tooMany = append(out.tooMany, err.Error())
				} else {
					out.failing++
				}
			}
			// What the peer offers: not its copies of our objects or of other members'
			// (its informer may hold them for syncStatusBack).
			src.Objects = int32(e.watchers.count(p.Name, gvk, r.compiled, decode, func(o *unstructured.Unstructured) bool {
				if !offered(o, e.opts.LocalID, p.ClusterID, members) {
					return false
				}
				_, ok := r.compiled.Match(o)
				return ok
			}))
		}
		sources = append(sources, src)
	}
	return sources, out
}

// failureReason is the Degraded reason of objects that fail for reasons: the one
// reason they share, or CopiesFailing.
func failureReason(reasons map[string]int) string {
	if len(reasons) == 1 {
		for r := range reasons {
			return r
		}
	}
	return v1alpha1.ReasonCopiesFailing
}

func joinMsg(msg, more string) string {
	if more == "" {
		return msg
	}
	return msg + "; " + more
}

func asInvalid(err error, target **rules.InvalidRuleError) bool {
	ie, ok := err.(*rules.InvalidRuleError)
	if ok {
		*target = ie
	}
	return ok
}

// sourceError returns the error of the rule's informers on the peer, if any.
func (e *Engine) sourceError(peer string, r *ruleEntry) error {
	nss := r.namespaces
	if nss == nil {
		nss = []string{""}
	}
	found := false
	for _, ns := range nss {
		for _, s := range []scope{{cluster: peer, gvk: r.compiled.GVK, namespace: ns}, {cluster: peer, gvk: r.compiled.GVK}} {
			if err := e.watchers.overCapErr(s); err != nil {
				return err
			}
			if w, ok := e.watchers.get(s); ok {
				found = true
				if err := w.lastErr(); err != nil && !w.informer.HasSynced() {
					// What the peer answered stays in the log; the status has its class.
					_, class := peers.Classify(err)
					return fmt.Errorf("reading %s from the peer: %s", r.compiled.GVK.Kind, class)
				}
			}
		}
	}
	if !found {
		return fmt.Errorf("kind %s cannot be read from the peer (is it served there?)", r.compiled.GVK)
	}
	return nil
}

func (e *Engine) writeStatus(ctx context.Context, r *ruleEntry) error {
	var cur v1alpha1.ResourceSyncRule
	if err := e.opts.Client.Get(ctx, client.ObjectKey{Name: r.rsr.Name}, &cur); err != nil {
		return err
	}
	r.rsr = cur.DeepCopy()
	st := e.status(ctx, r)
	if apiequality.Semantic.DeepEqual(cur.Status, st) {
		return nil
	}
	before := cur.DeepCopy()
	cur.Status = st
	return e.opts.Client.Status().Patch(ctx, &cur, client.MergeFrom(before), client.FieldOwner(v1alpha1.FieldManager))
}

// finalize keeps the finalizer of a rule with deletionPolicy Delete and, once the rule is
// being deleted, deletes its copies and lets it go.
func (e *Engine) finalize(ctx context.Context, r *ruleEntry) error {
	var cur v1alpha1.ResourceSyncRule
	if err := e.opts.Client.Get(ctx, client.ObjectKey{Name: r.rsr.Name}, &cur); err != nil {
		return client.IgnoreNotFound(err)
	}
	wantFinalizer := cur.Spec.DeletionPolicy == v1alpha1.DeletionPolicyDelete
	has := controllerutil.ContainsFinalizer(&cur, v1alpha1.RuleFinalizer)
	if cur.DeletionTimestamp == nil {
		if wantFinalizer == has {
			return nil
		}
		before := cur.DeepCopy()
		if wantFinalizer {
			controllerutil.AddFinalizer(&cur, v1alpha1.RuleFinalizer)
		} else {
			controllerutil.RemoveFinalizer(&cur, v1alpha1.RuleFinalizer)
		}
		return e.opts.Client.Patch(ctx, &cur, client.MergeFrom(before), client.FieldOwner(v1alpha1.FieldManager))
	}
	if !has {
		return nil
	}
	if r.compiled != nil {
		pending, err := e.deleteRuleCopies(ctx, cur.Name, r.compiled.TargetGVKs, cur.DeletionTimestamp.Time)
		if err != nil {
			return err
		}
		if pending {
			return nil // the finalizer stays until another rule's views tell (handOverWait)
		}
	}
	before := cur.DeepCopy()
	controllerutil.RemoveFinalizer(&cur, v1alpha1.RuleFinalizer)
	return e.opts.Client.Patch(ctx, &cur, client.MergeFrom(before), client.FieldOwner(v1alpha1.FieldManager))
}

// handOverWait bounds how long the deletion policy of a rule waits for the views that
// tell whether another rule still asks for one of its copies.
const handOverWait = time.Minute

// deleteRuleCopies deletes the copies the rule wrote (labelled with its name and marked
// with an origin: never an object made here) that no other rule asks for
// (planner.KeepOnRuleDelete): a copy another rule asks for is left to it, so a rule that
// took copies over (or a hostile member's rule deleted with deletionPolicy Delete) never
// deletes what another rule keeps. pending is true when some copies wait, since the rule's
// deletion at since, for the views that tell.
func (e *Engine) deleteRuleCopies(ctx context.Context, rule string, gvks []schema.GroupVersionKind, since time.Time) (pending bool, err error) {
	sel := labels.SelectorFromSet(labels.Set{v1alpha1.RuleLabel: rule}).String()
	for _, gvk := range gvks {
		p, err := e.deleteCopies(ctx, gvk, sel, since)
		if err != nil {
			return false, err
		}
		pending = pending || p
	}
	return pending, nil
}

func (e *Engine) deleteCopies(ctx context.Context, gvk schema.GroupVersionKind, selector string, since time.Time) (pending bool, err error) {
	m, err := e.opts.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return false, nil // the kind is gone: so are its copies
	}
	list, err := e.opts.Dynamic.Resource(m.Resource).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return false, fmt.Errorf("listing the copies of %s: %w", gvk.Kind, err)
	}
	snap, _, err := e.snapshotFor(ctx, gvk)
	if err != nil {
		return false, err
	}
	for i := range list.Items {
		o := &list.Items[i]
		if o.GetAnnotations()[v1alpha1.OwnershipAnnotation] == "" {
			continue // never delete what was made here
		}
		it := item{gvk: gvk, namespace: o.GetNamespace(), name: o.GetName()}
		switch keep, wait := snap.OnRuleDelete(planner.Target{GVK: gvk, Key: types.NamespacedName{Namespace: it.namespace, Name: it.name}}, o); {
		case keep:
			e.add(it, e.opts.Clock.Now()) // the rule that asks for it takes it over
			continue
		case wait && e.opts.Clock.Since(since) < handOverWait:
			pending = true
			continue
		}
		w, err := e.writes.Of(snap.Policy, types.UID(o.GetAnnotations()[v1alpha1.OwnershipAnnotation]), o.GetLabels()[v1alpha1.RuleLabel], true)
		if err != nil {
			return false, err
		}
		ri, err := e.writes.Resource(w, m, o.GetNamespace())
		if err != nil {
			return false, err
		}
		uid := o.GetUID()
		if err := ri.Delete(ctx, o.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("deleting %s %s/%s: %w", gvk.Kind, o.GetNamespace(), o.GetName(), err)
		}
	}
	return pending, nil
}

// summarizeReasons lists the first objects of m, by name, each with its reason.
func summarizeReasons(m map[item]string, max int) string {
	keys := make([]item, 0, len(m))
	for it := range m {
		keys = append(keys, it)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	var parts []string
	for i, it := range keys {
		if i == max {
			parts = append(parts, fmt.Sprintf("and %d more", len(keys)-max))
			break
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", it, m[it]))
	}
	return strings.Join(parts, ", ")
}

func summarize(m map[item]string, max int) string {
	keys := make([]string, 0, len(m))
	for it := range m {
		keys = append(keys, it.String())
	}
	sort.Strings(keys)
	more := ""
	if len(keys) > max {
		more = fmt.Sprintf(" and %d more", len(keys)-max)
		keys = keys[:max]
	}
	return strings.Join(keys, ", ") + more
}
