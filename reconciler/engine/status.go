package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/engine/rulestatus"
	"github.com/kubectl-registry/kubectl-registry/reconciler/engine/views"
	"github.com/kubectl-registry/kubectl-registry/reconciler/peers"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner"
)

// ReasonChangedAfterWrite is v1alpha1.ReasonChangedAfterWrite.
const ReasonChangedAfterWrite = v1alpha1.ReasonChangedAfterWrite

// writeStatuses brings every rule's status up to date (written only when it changed) and
// runs the deletion policy of rules being deleted.
func (e *Engine) writeStatuses(ctx context.Context) {
	e.forgetHistory(e.opts.Clock.Now())
	e.opts.Metrics.overCap.Reset()
	for _, s := range e.views.OverCapScopes() {
		e.opts.Metrics.overCap.WithLabelValues(s.Cluster, s.GVK.Kind).Inc()
	}
	for _, r := range e.snapshot() {
		nHeld, nDrift := r.track.HeldAndDrifted()
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

// status computes a rule's status from the engine's view: its sources, what it tracks,
// and this cluster's policy.
func (e *Engine) status(ctx context.Context, r *ruleEntry) v1alpha1.ResourceSyncRuleStatus {
	in := rulestatus.Input{Rule: r.rsr, Sources: e.sourceStates(ctx, r), Tally: r.track.Tally(), MaxHold: e.opts.Settle.MaxHold}
	if r.compiled != nil {
		if policy, err := e.policy(ctx); err == nil {
			in.Refusal = policy.RuleAllowed(r.rsr, r.compiled)
		}
	}
	in.Err, in.Capped = r.getErr(), isCapped(r)
	in.Watch = r.track.Watch()
	return rulestatus.Compute(in)
}

// sourceStates returns the state of each peer as a source of the rule r: unreachable,
// not selected by its features, syncing (with the objects it offers) or failing.
func (e *Engine) sourceStates(ctx context.Context, r *ruleEntry) (out rulestatus.Sources) {
	out.TooManyReason = v1alpha1.ReasonTooManyObjects
	if r.compiled == nil {
		return out
	}
	all := e.opts.Peers.List()
	members := memberIDs(all)
	gvk := r.compiled.GVK
	decode := func(c *views.Cached) (*unstructured.Unstructured, error) { return c.Object(gvk) }
	if !r.compiled.ReadsContent() {
		decode = func(c *views.Cached) (*unstructured.Unstructured, error) { return c.MetadataOnly(gvk) }
	}
	for _, p := range all {
		src := v1alpha1.RuleSource{Cluster: p.Name}
		switch {
		case p.Ready && p.Bootstrap:
			src.State, src.Message = v1alpha1.SourceUnreachable, "waiting for the reader credential the peer issues this cluster (it is read with its bootstrap credential, which reads none of its objects); its copies are kept as they are"
		case !p.Ready || !p.Readable():
			src.State, src.Message = v1alpha1.SourceUnreachable, "the peer is not Ready; its copies are kept as they are"
		case r.compiled.NeedsFeatures() && !featuresKnown(ctx, p):
			src.State, src.Message = v1alpha1.SourceUnreachable, "the peer's ClusterFeatures are being read (clusterFeatureMatch selects by them); its copies are kept as they are"
		case !r.compiled.Sources(peerFeatures(ctx, p)):
			src.State, src.Message = v1alpha1.SourceNotSelected, "the peer's ClusterFeatures do not satisfy clusterFeatureMatch"
		default:
			src.State = v1alpha1.SourceSyncing
			if err := e.sourceError(p.Name, r); err != nil {
				src.State, src.Message = v1alpha1.SourceFailing, err.Error()
				var over *views.TooManyObjectsError
				if errors.As(err, &over) {
					if over.TooLarge != nil {
						out.TooManyReason = over.Reason()
					}
					out.TooMany = append(out.TooMany, err.Error())
				} else {
					out.Failing++
				}
			}
			// What the peer offers: not its copies of our objects or of other members'
			// (its informer may hold them for syncStatusBack).
			src.Objects = int32(e.views.Count(p.Name, gvk, r.compiled, decode, func(o *unstructured.Unstructured) bool {
				if !offered(o, e.opts.LocalID, p.ClusterID, members) {
					return false
				}
				_, ok := r.compiled.Match(o)
				return ok
			}))
		}
		out.States = append(out.States, src)
	}
	return out
}

// sourceError returns the error of the rule's informers on the peer, if any.
func (e *Engine) sourceError(peer string, r *ruleEntry) error {
	nss := r.namespaces
	if nss == nil {
		nss = []string{""}
	}
	found := false
	for _, ns := range nss {
		for _, s := range []views.Scope{{Cluster: peer, GVK: r.compiled.GVK, Namespace: ns}, {Cluster: peer, GVK: r.compiled.GVK}} {
			if err := e.views.OverCapErr(s); err != nil {
				return err
			}
			if running, err := e.views.SyncErr(s); running {
				found = true
				if err != nil {
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

// offered reports whether a peer's object is one the peer offers as a source: its own or
// a copy of an object of a cluster that is not a member (not a copy uselessCopies would
// leave out, whatever the informer's selector).
func offered(u *unstructured.Unstructured, local, peer types.UID, members []types.UID) bool {
	origin := types.UID(u.GetAnnotations()[v1alpha1.OwnershipAnnotation])
	return origin == "" || origin == peer || (origin != local && !slices.Contains(members, origin))
}

// writeStatus brings the status of rule r up to date, the rule as read kept as r's.
func (e *Engine) writeStatus(ctx context.Context, r *ruleEntry) error {
	return e.statuses.Write(ctx, r.rsr.Name, func(cur *v1alpha1.ResourceSyncRule) v1alpha1.ResourceSyncRuleStatus {
		r.rsr = cur
		return e.status(ctx, r)
	})
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
	var cache *sourceCache
	snap, _, err := e.snapshotFor(ctx, gvk, &cache)
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
