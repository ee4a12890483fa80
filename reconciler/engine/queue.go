package engine

import (
	"context"
	"errors"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/engine/views"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner"
)

// ownWriteWait bounds how long a copy created by the engine and not yet in the local
// cache is waited for before it is created again.
const ownWriteWait = 5 * time.Second

// errAppeared: a create found the object already there (the local cache was behind).
var errAppeared = errors.New("the object already exists")

// appearedRetry is how soon a copy whose create found it already there is looked at
// again (its informer event usually queues it sooner).
const appearedRetry = 100 * time.Millisecond

// unsyncedRetry is how soon a copy is looked at again when its origin's view had not
// synced yet.
const unsyncedRetry = time.Second

// A create waits up to createWait (from when the object was first queued) for the views
// of sources that are not known yet (unseenSources: readable sources still syncing, and
// peers in their first contact), looking again every createRetry (every unsyncedRetry
// while only peers not readable yet are waited for, waitRetry): one of them may have
// the object too, with a lower cluster ID, and which origin a copy follows must not
// depend on which view synced first.
const (
	createWait  = 10 * time.Second
	createRetry = 250 * time.Millisecond
)

// onEvent maps a change in a watched scope to the local objects it may affect: the
// views' handler (views.Handler).
func (e *Engine) onEvent(s views.Scope, oldC, newC *views.Cached) {
	now := e.opts.Clock.Now()
	if s.Cluster == "" {
		// A change of the local object alone: reconcile tells the event of the engine's
		// own write from any other.
		for _, c := range []*views.Cached{oldC, newC} {
			if c != nil {
				e.addLocal(itemOf(c, s.GVK), now)
			}
		}
		if newC == nil && oldC != nil {
			e.ownWrites.Delete(itemOf(oldC, s.GVK).target())
		}
		return
	}
	rules := e.snapshot()
	content := false
	for _, r := range rules {
		content = content || (r.compiled != nil && r.compiled.GVK == s.GVK && r.compiled.ReadsContent())
	}
	e.onPeerEvent(s, rules, e.decode(s, oldC, content), e.decode(s, newC, content), now)
}

// itemOf is the work item of the cached object c, of kind gvk. Its strings are copies: an
// item outlives the cached version it was made from (in the queue, the write history),
// and a substring would keep that whole version in memory.
func itemOf(c *views.Cached, gvk schema.GroupVersionKind) item {
	return item{gvk: gvk, namespace: strings.Clone(c.Namespace()), name: strings.Clone(c.Name())}
}

// decode returns the object of an informer's views.Cached (nil for nil): in full when a
// rule matches its kind by content, else only what mapping a peer's event to local
// objects reads (MetadataOnly), a fraction of the cost.
func (e *Engine) decode(s views.Scope, c *views.Cached, content bool) *unstructured.Unstructured {
	if c == nil {
		return nil
	}
	decode := c.MetadataOnly
	if content {
		decode = c.Object
	}
	u, err := decode(s.GVK)
	if err != nil {
		e.log.Error(err, "reading a cached object", "scope", s.String())
		return nil
	}
	return u
}

// onPeerEvent maps a change of a peer's object to the local objects the rules may
// affect. It reads the objects' kind, namespace, name, labels and annotations, a Secret's
// type (MembershipObject), and their content only when a rule of their kind matches by
// content (Rule.ReadsContent).
func (e *Engine) onPeerEvent(s views.Scope, rules []*ruleEntry, oldObj, newObj *unstructured.Unstructured, now time.Time) {
	for _, r := range rules {
		if r.compiled == nil {
			continue
		}
		if r.rsr.Spec.SyncStatusBack && planner.ContainsGVK(r.compiled.TargetGVKs, s.GVK) {
			// A peer's copy of one of our objects: its status flows back to the original.
			for _, o := range []*unstructured.Unstructured{oldObj, newObj} {
				if o == nil || types.UID(o.GetAnnotations()[v1alpha1.OwnershipAnnotation]) != e.opts.LocalID {
					continue
				}
				for _, src := range r.compiled.SourceKeys(types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}) {
					e.add(item{gvk: r.compiled.GVK, namespace: src.Namespace, name: src.Name, back: true}, now)
				}
			}
		}
		if r.compiled.GVK != s.GVK {
			continue
		}
		for _, o := range []*unstructured.Unstructured{oldObj, newObj} {
			if t, ok := planner.TargetOf(r.compiled, e.opts.LocalID, o); ok {
				e.add(item{gvk: t.GVK, namespace: t.Key.Namespace, name: t.Key.Name}, now)
			}
		}
	}
}

// add queues it for a reconcile: its source, a rule, a peer or the policy changed, or it
// is looked at again.
func (e *Engine) add(it item, now time.Time) {
	e.seen.LoadOrStore(it, now)
	e.full.Store(it, struct{}{})
	e.queue.Add(it)
}

// addLocal queues it for a change of the local object alone. A reconcile that only such
// changes asked for, and that finds the object as the engine last wrote it, has nothing to
// do (reconcile): that is the event of its own write, which came before the write
// returned.
func (e *Engine) addLocal(it item, now time.Time) {
	e.seen.LoadOrStore(it, now)
	e.queue.Add(it)
}

func (e *Engine) processNext(ctx context.Context, cache **sourceCache) bool {
	it, shutdown := e.queue.Get()
	if shutdown {
		return false
	}
	defer e.queue.Done(it)
	var requeue time.Duration
	var err error
	ctx = withReconcileStart(ctx, e.opts.Clock.Now())
	if it.back {
		err = e.reconcileBack(ctx, it)
	} else {
		requeue, err = e.reconcile(ctx, it, cache)
	}
	switch {
	case err != nil:
		e.opts.Metrics.errors.WithLabelValues(it.gvk.Kind).Inc()
		e.log.V(1).Info("sync failed, retrying", "object", it.String(), "error", err.Error())
		e.full.Store(it, struct{}{})
		e.queue.AddRateLimited(it)
	case requeue > 0:
		e.full.Store(it, struct{}{})
		e.queue.AddAfter(it, requeue)
	default:
		e.queue.Forget(it)
		e.seen.Delete(it)
	}
	return true
}
