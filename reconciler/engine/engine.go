// Package engine is the ResourceSyncRule sync engine: for every rule it pulls the
// matching objects of the rule's kind from every peer that qualifies as a source and
// writes the mutated copies into the local cluster, and only there.
//
// One informer per (cluster, kind, namespace) serves every rule; events are coalesced per
// local object in a rate-limited work queue served by several workers. The decisions are
// pure and shared with the CLI: package rules matches and mutates, Decide plans. The
// safety rules are Decide's: an object without the ownership mark is never touched, and a
// copy is deleted only when its origin, seen through a healthy synced watch, no longer has
// it. ResourceSyncRules themselves travel through a built-in rule, unless they carry the
// resource-sync-disabled annotation.
package engine

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/peers"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner"
	"github.com/kubectl-registry/kubectl-registry/reconciler/rules"
)

// DefaultWorkers is how many objects are reconciled at once.
const DefaultWorkers = 8

// ownWrite is a write of the engine that no reconcile has seen in the local cache yet.
type ownWrite struct {
	resourceVersion string
	at              time.Time
	// decidedBefore is set when a reconcile of the copy ran while the local cache did not
	// have the write yet: its decision was made on the copy as it was before, so the
	// write's own event must be looked at in full (a delete at the origin right after the
	// write, seen while the local cache still lacked the copy, decided nothing).
	decidedBefore bool
}

// reconciled is what a reconcile that finds the local copy at observedRV does with the
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
// absent), so the write's event is then looked at in full.
func (w ownWrite) reconciled(observedRV string, full bool) (next *ownWrite, skip bool) {
	if observedRV == w.resourceVersion {
		return nil, !full && !w.decidedBefore
	}
	marked := w
	marked.decidedBefore = true
	return &marked, false
}

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

// Options configure the Engine.
type Options struct {
	LocalID   types.UID
	LocalName string
	// Namespace is the registry namespace, whose objects rules never write.
	Namespace string
	// Client reads ResourceSyncRules, Clusters and Namespaces (cached) and writes
	// rule status and namespaces.
	Client client.Client
	// Cache is the manager's cache, for the ResourceSyncRule informer.
	Cache cache.Cache
	// Dynamic writes and watches the copies in the local cluster.
	Dynamic dynamic.Interface
	// Mapper resolves kinds in the local cluster.
	Mapper meta.RESTMapper
	Peers  *peers.Manager
	// Workers is how many objects are reconciled at once.
	Workers  int
	Recorder record.EventRecorder
	Metrics  *Metrics
	// Settle bounds the rewrites of a copy that the local cluster changes after each
	// write; zero means DefaultSettlePolicy.
	Settle planner.SettlePolicy
	// MaxPeerObjects caps the objects the watch of one peer's scope holds (a kind, in a
	// namespace a rule reads or in all of them, under the rules' label selector); a peer
	// offering more is not watched there, and its copies are kept (objectcap.go). Zero
	// means DefaultMaxPeerObjects.
	MaxPeerObjects int
	// OverCapRetry is the first wait before a scope over the cap is tried again (backing
	// off while it stays over); zero means DefaultOverCapRetry.
	OverCapRetry time.Duration
}

// item is one local object.
type item struct {
	gvk       schema.GroupVersionKind
	namespace string
	name      string
	// back marks a local original whose copies' status flows back to it.
	back bool
}

func (i item) String() string {
	if i.namespace == "" {
		return i.gvk.Kind + " " + i.name
	}
	return i.gvk.Kind + " " + i.namespace + "/" + i.name
}

// ruleEntry is one rule the engine runs.
type ruleEntry struct {
	rsr      *v1alpha1.ResourceSyncRule
	compiled *rules.Rule
	err      error
	builtin  bool
	// namespaces the rule reads from sources; nil means all.
	namespaces []string

	mu        sync.Mutex
	conflicts map[item]string
	failures  map[item]failure
	synced    map[item]bool
	// drift are the writes a ReportOnly rule withholds, with the reason.
	drift map[item]string
	// held are the copies not rewritten because something changes them after each
	// write, with the reason.
	held     map[item]string
	lastSync time.Time
	// watch says how the rule's watches are narrowed, and peerScopes are the peers'
	// scopes it reads its sources from (set by doRefresh).
	watch      watchNote
	peerScopes []scope
}

// localWatches are the kinds whose local informers carry every object, not only copies
// (see inTheWay).
type localWatches struct {
	mu    sync.Mutex
	every map[schema.GroupVersionKind]bool
}

func (r *ruleEntry) setErr(err error) {
	r.mu.Lock()
	r.err = err
	r.mu.Unlock()
}

func (r *ruleEntry) getErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// failure is an object a rule cannot sync: the condition reason and what happened.
type failure struct {
	reason, message string
}

// forget drops what the rule knows of the object; r.mu is held.
func (r *ruleEntry) forget(it item) {
	delete(r.conflicts, it)
	delete(r.failures, it)
	delete(r.synced, it)
	delete(r.held, it)
	delete(r.drift, it)
}

func (r *ruleEntry) record(it item, synced bool, conflict string, fail failure) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forget(it)
	switch {
	case conflict != "":
		r.conflicts[it] = conflict
	case fail.message != "":
		r.failures[it] = fail
	case synced:
		r.synced[it] = true
	}
}

// drifted records a write the rule's ReportOnly mode withholds.
func (r *ruleEntry) drifted(it item, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forget(it)
	r.drift[it] = reason
}

// hold records that the copy is held: not rewritten, for reason.
func (r *ruleEntry) hold(it item, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forget(it)
	r.held[it] = reason
}

// unhold forgets that the copy is held by this rule.
func (r *ruleEntry) unhold(it item) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.held, it)
}

// unholdOthers forgets that the copy is held by any rule but rule: another rule's
// candidate was chosen for it.
func unholdOthers(it item, rule string, entries []*ruleEntry) {
	for _, r := range entries {
		if r.rsr.Name != rule {
			r.unhold(it)
		}
	}
}

// Engine runs the rules. It is a manager.Runnable that needs leader election.
type Engine struct {
	opts     Options
	watchers *watchers
	queue    workqueue.TypedRateLimitingInterface[item]
	refresh  chan struct{}
	seen     sync.Map // item -> time the event that queued it arrived
	// contacts says which peers are in their first contact, for the wait before a create.
	contacts *firstContacts
	// clusters caches the Clusters' content for templates (clusterObject).
	clusterMu sync.Mutex
	clusters  map[string]clusterContent
	// ownWrites holds, per copy, the resourceVersion of the engine's last write when the
	// cluster stored it as written, until the local cache has it: a create is not made
	// twice meanwhile.
	ownWrites sync.Map // item -> ownWrite
	// full holds the queued items that something other than a change of the local object
	// queued (add, a retry): their reconcile is never skipped as the echo of a write.
	full sync.Map // item -> struct{}

	retryDelay time.Duration

	// mappings are the local REST mappings of the kinds written (mapping).
	mappingMu sync.Mutex
	mappings  map[schema.GroupVersionKind]*meta.RESTMapping

	// history is what the engine remembers of its recent writes of each copy, for
	// Settle.
	histMu  sync.Mutex
	history map[item]writeRecord

	// policy is this cluster's consent as last computed; valid until a SyncPolicy or a
	// Cluster changes.
	policyMu    sync.Mutex
	policyValid bool
	policyVal   planner.Policy
	// noPolicyKind is set when the cluster does not serve SyncPolicies.
	noPolicyKind bool

	local localWatches

	mu      sync.RWMutex
	rules   map[string]*ruleEntry
	mappers map[string]peerMapper
	log     logr.Logger
	ctx     context.Context
}

type peerMapper struct {
	cfg    *rest.Config
	mapper *restmapper.DeferredDiscoveryRESTMapper
	client dynamic.Interface
}

// New returns an Engine; nothing runs until Start.
func New(opts Options) (*Engine, error) {
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics(nil)
	}
	if opts.Settle == (planner.SettlePolicy{}) {
		opts.Settle = planner.DefaultSettlePolicy()
	}
	if opts.MaxPeerObjects <= 0 {
		opts.MaxPeerObjects = DefaultMaxPeerObjects
	}
	if opts.OverCapRetry <= 0 {
		opts.OverCapRetry = DefaultOverCapRetry
	}
	e := &Engine{
		opts:     opts,
		watchers: newWatchers(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedMaxOfRateLimiter(
				workqueue.NewTypedItemExponentialFailureRateLimiter[item](200*time.Millisecond, 5*time.Minute),
			), workqueue.TypedRateLimitingQueueConfig[item]{Name: "resourcesyncrules"}),
		refresh:  make(chan struct{}, 1),
		rules:    map[string]*ruleEntry{},
		mappers:  map[string]peerMapper{},
		history:  map[item]writeRecord{},
		contacts: newFirstContacts(),
	}
	e.watchers.retry = opts.OverCapRetry
	e.watchers.onOver, e.watchers.onUnder = e.overCap, e.underCap
	core, err := rules.Compile(planner.CoreRule())
	if err != nil {
		return nil, fmt.Errorf("compiling the built-in rule: %w", err)
	}
	e.rules[v1alpha1.CoreRuleName] = newEntry(planner.CoreRule(), core, nil, true)
	return e, nil
}

func newEntry(rsr *v1alpha1.ResourceSyncRule, compiled *rules.Rule, err error, builtin bool) *ruleEntry {
	var namespaces []string
	if compiled != nil {
		if nss, restricted := compiled.SourceNamespaces(); restricted {
			namespaces = append([]string{}, nss...)
		}
	}
	return &ruleEntry{rsr: rsr, compiled: compiled, err: err, builtin: builtin, namespaces: namespaces,
		conflicts: map[item]string{}, failures: map[item]failure{}, synced: map[item]bool{}, held: map[item]string{}, drift: map[item]string{}}
}

// Start runs the engine until ctx is done.
func (e *Engine) Start(ctx context.Context) error {
	e.log = logr.FromContextOrDiscard(ctx).WithName("sync")
	e.ctx = ctx
	inf, err := e.opts.Cache.GetInformer(ctx, &v1alpha1.ResourceSyncRule{})
	if err != nil {
		return fmt.Errorf("watching ResourceSyncRules: %w", err)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { e.ruleChanged(o) },
		UpdateFunc: func(_, n any) { e.ruleChanged(n) },
		DeleteFunc: func(o any) {
			if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if r, ok := o.(*v1alpha1.ResourceSyncRule); ok {
				e.ruleDeleted(r)
			}
		},
	}); err != nil {
		return fmt.Errorf("watching ResourceSyncRules: %w", err)
	}
	// The policy is computed again after any change of a SyncPolicy (then every object is
	// looked at again: a kind may be allowed or refused now) or of a Cluster (its reader
	// Secret is the registry's; disabled, or recording departures, it quarantines).
	for _, w := range []struct {
		obj     client.Object
		refresh bool
	}{{&v1alpha1.SyncPolicy{}, true}, {&v1alpha1.Cluster{}, false}} {
		inf, err := e.opts.Cache.GetInformer(ctx, w.obj)
		if err != nil && w.refresh && meta.IsNoMatchError(err) {
			// An installation whose CRDs predate SyncPolicy: the default policy holds.
			e.log.Info("the SyncPolicy kind is not installed in this cluster: the default policy applies; run kubectl registry install to add it")
			e.noPolicyKind = true
			continue
		}
		if err != nil {
			return fmt.Errorf("watching %T: %w", w.obj, err)
		}
		refresh := w.refresh
		changed := func() {
			e.policyMu.Lock()
			e.policyValid = false
			e.policyMu.Unlock()
			if refresh {
				e.triggerRefresh()
			}
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: func(any) { changed() },
			UpdateFunc: func(o, n any) {
				if oo, ok := o.(client.Object); ok {
					if no, ok := n.(client.Object); ok && oo.GetGeneration() == no.GetGeneration() && oo.GetGeneration() != 0 && !refresh &&
						sameQuarantine(oo.GetAnnotations(), no.GetAnnotations()) {
						return // a Cluster's status: its name, Secret and quarantine are the same
					}
				}
				changed()
			},
			DeleteFunc: func(any) { changed() },
		}); err != nil {
			return fmt.Errorf("watching %T: %w", w.obj, err)
		}
	}
	peerEvents := make(chan event.GenericEvent, 256)
	e.opts.Peers.Subscribe(peerEvents)

	var wg sync.WaitGroup
	for i := 0; i < e.opts.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e.processNext(ctx) {
			}
		}()
	}
	lastPeers := e.peersFingerprint(ctx)
	statusTicker := time.NewTicker(2 * time.Second)
	defer statusTicker.Stop()
	e.triggerRefresh()
	for {
		select {
		case <-ctx.Done():
			e.queue.ShutDown()
			e.watchers.retain(func(scope) bool { return false })
			wg.Wait()
			return nil
		case <-peerEvents:
			// Peers notify on every change of their registry objects; only a change of
			// their state or ClusterFeatures changes what the rules read.
			if fp := e.peersFingerprint(ctx); fp != lastPeers {
				lastPeers = fp
				e.triggerRefresh()
			}
		case <-e.refresh:
			// Coalesce bursts of rule and peer events.
			time.Sleep(50 * time.Millisecond)
			e.drainRefresh()
			e.doRefresh(ctx)
		case <-statusTicker.C:
			e.writeStatuses(ctx)
		}
	}
}

// peersFingerprint summarises what the rules depend on of the peers: who is Ready and
// connected, with which credentials, and their ClusterFeatures.
func (e *Engine) peersFingerprint(ctx context.Context) string {
	var b strings.Builder
	now := time.Now()
	for _, p := range e.opts.Peers.List() {
		e.contacts.seen(p.ClusterID, now, createWait)
		cfg := p.Config()
		fmt.Fprintf(&b, "%s/%s/%t/%t/", p.Name, p.ClusterID, p.Ready, cfg != nil)
		if cfg != nil {
			h := fnv.New64a()
			h.Write([]byte(cfg.Host))
			h.Write([]byte(cfg.BearerToken))
			h.Write(cfg.CertData)
			fmt.Fprintf(&b, "%x/", h.Sum64())
		}
		for _, f := range peerFeatures(ctx, p) {
			fmt.Fprintf(&b, "|%s:%s", f.Name, f.ResourceVersion)
		}
		b.WriteString(";")
	}
	return b.String()
}

func (e *Engine) triggerRefresh() {
	select {
	case e.refresh <- struct{}{}:
	default:
	}
}

func (e *Engine) drainRefresh() {
	for {
		select {
		case <-e.refresh:
		default:
			return
		}
	}
}

func (e *Engine) ruleChanged(o any) {
	rsr, ok := o.(*v1alpha1.ResourceSyncRule)
	if !ok {
		return
	}
	rsr = rsr.DeepCopy()
	e.mu.Lock()
	if old, ok := e.rules[rsr.Name]; ok && !old.builtin && old.rsr.Generation == rsr.Generation &&
		(old.rsr.DeletionTimestamp == nil) == (rsr.DeletionTimestamp == nil) {
		// Only status or metadata changed: nothing to re-evaluate.
		old.rsr = rsr
		e.mu.Unlock()
		return
	}
	e.mu.Unlock()
	compiled, err := planner.CompileRule(rsr)
	entry := newEntry(rsr, compiled, err, false)
	e.mu.Lock()
	if old, ok := e.rules[rsr.Name]; ok && !old.builtin {
		entry.conflicts, entry.failures, entry.synced, entry.held, entry.drift, entry.lastSync, entry.watch, entry.peerScopes = old.conflicts, old.failures, old.synced, old.held, old.drift, old.lastSync, old.watch, old.peerScopes
	}
	e.rules[rsr.Name] = entry
	e.mu.Unlock()
	e.triggerRefresh()
}

func (e *Engine) ruleDeleted(rsr *v1alpha1.ResourceSyncRule) {
	e.mu.Lock()
	if r, ok := e.rules[rsr.Name]; ok && !r.builtin {
		delete(e.rules, rsr.Name)
		e.opts.Metrics.heldObjects.DeleteLabelValues(rsr.Name)
	}
	e.mu.Unlock()
	if rsr.Spec.DeletionPolicy == v1alpha1.DeletionPolicyDelete {
		// Seen going away before its finalizer was in place: apply the policy anyway.
		if compiled, err := rules.Compile(rsr); err == nil {
			go func() {
				if err := e.deleteRuleCopies(e.ctx, rsr.Name, compiled.TargetGVKs); err != nil {
					e.log.Error(err, "deleting the copies of a deleted rule", "rule", rsr.Name)
				}
			}()
		}
	}
	e.triggerRefresh()
}

// snapshot returns the rules, sorted by name.
func (e *Engine) snapshot() []*ruleEntry {
	e.mu.RLock()
	defer e.mu.RUnlock()
	out := make([]*ruleEntry, 0, len(e.rules))
	for _, r := range e.rules {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].rsr.Name < out[j].rsr.Name })
	return out
}

// peerClients returns the dynamic client and mapper of a peer, rebuilt when its config
// changes.
func (e *Engine) peerClients(p peers.Peer) (dynamic.Interface, meta.RESTMapper, error) {
	cfg := p.Config()
	if cfg == nil {
		return nil, nil, fmt.Errorf("peer %s is not connected", p.Name)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if pm, ok := e.mappers[p.Name]; ok && pm.cfg.BearerToken == cfg.BearerToken && pm.cfg.Host == cfg.Host && string(pm.cfg.CertData) == string(cfg.CertData) {
		return pm.client, pm.mapper, nil
	}
	// The peer's own HTTP client: it dials only the addresses this cluster allows and
	// refuses redirects.
	hc := p.HTTPClient()
	if hc == nil {
		return nil, nil, fmt.Errorf("peer %s is not connected", p.Name)
	}
	dc, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, nil, err
	}
	dyn, err := dynamic.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, nil, err
	}
	pm := peerMapper{cfg: cfg, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)), client: dyn}
	e.mappers[p.Name] = pm
	// The connection changed: its informers are rebuilt.
	e.watchers.retain(func(s scope) bool { return s.cluster != p.Name })
	return pm.client, pm.mapper, nil
}

// doRefresh starts the informers the rules need, stops the others, and queues every
// object they know, so that every rule is re-evaluated.
func (e *Engine) doRefresh(ctx context.Context) {
	e.forgetMappings()
	needed := map[scope]bool{}
	failed := false
	all := e.opts.Peers.List()
	// The peers' informers are started once every rule is seen: a scope that some rule
	// needs the peer's copies of our objects in (syncStatusBack) keeps them.
	type peerScope struct {
		peer    types.UID
		dyn     dynamic.Interface
		mapper  meta.RESTMapper
		keepOwn bool
		// alts are the label alternatives of the rules reading the scope: its informer
		// selects what any of them may match.
		alts []labels.Selector
	}
	peerScopes := map[scope]*peerScope{}
	var peerOrder []scope // in the order the rules and peers ask for them
	members := memberIDs(all)
	wantPeer := func(s scope, p peers.Peer, dyn dynamic.Interface, mapper meta.RESTMapper, keepOwn bool, alts []labels.Selector) {
		needed[s] = true
		ps := peerScopes[s]
		if ps == nil {
			ps = &peerScope{peer: p.ClusterID, dyn: dyn, mapper: mapper}
			peerScopes[s] = ps
			peerOrder = append(peerOrder, s)
		}
		ps.keepOwn = ps.keepOwn || keepOwn
		ps.alts = append(ps.alts, alts...)
	}
	ruleScopes := map[*ruleEntry][]scope{} // the peers' scopes each rule reads its sources from
	for _, r := range e.snapshot() {
		if r.compiled == nil {
			continue
		}
		r.setErr(nil)
		if r.rsr.DeletionTimestamp != nil {
			continue
		}
		srcNS := r.namespaces
		if srcNS == nil {
			srcNS = []string{""}
		}
		for _, gvk := range r.compiled.TargetGVKs {
			locNS := planner.LocalNamespaces(r.rsr, r.compiled)
			if locNS == nil {
				locNS = []string{""}
			}
			for _, ns := range locNS {
				s, err := e.scopeFor("", gvk, ns, e.opts.Mapper)
				if err != nil {
					r.setErr(err)
					failed = true
					continue
				}
				needed[s] = true
				if err := e.watchers.ensure(ctx, s, e.localSelector(gvk), 0, e.opts.Dynamic, e.opts.Mapper, e.onEvent); err != nil {
					r.setErr(err)
					failed = true
				}
			}
		}
		for _, p := range all {
			if !p.Ready || p.Config() == nil {
				continue
			}
			dyn, mapper, err := e.peerClients(p)
			if err != nil {
				failed = true
				continue
			}
			for _, ns := range srcNS {
				s, err := e.scopeFor(p.Name, r.compiled.GVK, ns, mapper)
				if err != nil {
					failed = true
					continue // reported in the rule's source status
				}
				wantPeer(s, p, dyn, mapper, false, r.compiled.LabelAlternatives())
				ruleScopes[r] = append(ruleScopes[r], s)
			}
			if r.rsr.Spec.SyncStatusBack {
				// The peers' copies of our objects, whose status flows back.
				locNS := planner.LocalNamespaces(r.rsr, r.compiled)
				if locNS == nil {
					locNS = []string{""}
				}
				for _, gvk := range r.compiled.TargetGVKs {
					for _, ns := range locNS {
						s, err := e.scopeFor(p.Name, gvk, ns, mapper)
						if err != nil {
							failed = true
							continue
						}
						// Every label: the copies' labels are what the rule wrote there.
						wantPeer(s, p, dyn, mapper, true, []labels.Selector{labels.Everything()})
					}
				}
			}
		}
	}
	selectors := map[scope]string{}
	for _, s := range peerOrder {
		ps := peerScopes[s]
		selectors[s] = sourceSelector(ps.alts)
		_ = e.watchers.ensure(ctx, s, joinSelectors(selectors[s], uselessCopies(e.opts.LocalID, ps.peer, members, ps.keepOwn)), e.opts.MaxPeerObjects, ps.dyn, ps.mapper, e.onEvent)
	}
	for _, r := range e.snapshot() {
		if r.compiled == nil || r.builtin {
			continue
		}
		var sels []string
		for _, s := range ruleScopes[r] {
			sels = append(sels, selectors[s])
		}
		note := noteWatches(r, sels, e.everyLocal(r.compiled.TargetGVKs))
		r.mu.Lock()
		r.watch = note
		r.peerScopes = ruleScopes[r]
		r.mu.Unlock()
	}
	// A watch of an object in the way of a copy (inTheWay) lasts while its kind is
	// watched here.
	localKinds := map[schema.GroupVersionKind]bool{}
	for s := range needed {
		if s.cluster == "" {
			localKinds[s.gvk] = true
		}
	}
	e.watchers.retain(func(s scope) bool { return needed[s] || (s.cluster == "" && s.name != "" && localKinds[s.gvk]) })
	if failed {
		// A kind was not served yet (a CRD being installed) or a peer's discovery
		// failed: try again, backing off.
		e.retryDelay = min(max(2*e.retryDelay, time.Second), time.Minute)
		time.AfterFunc(e.retryDelay, e.triggerRefresh)
	} else {
		e.retryDelay = 0
	}
	// Re-evaluate everything: local copies and what the sources have.
	for s := range needed {
		go e.enqueueScope(s)
	}
}

// memberIDs returns the cluster IDs of the peers.
func memberIDs(all []peers.Peer) []types.UID {
	ids := make([]types.UID, 0, len(all))
	for _, p := range all {
		ids = append(ids, p.ClusterID)
	}
	return ids
}

// scopeFor normalises a scope: cluster-scoped kinds have no namespace.
func (e *Engine) scopeFor(cluster string, gvk schema.GroupVersionKind, ns string, mapper meta.RESTMapper) (scope, error) {
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		if rm, ok := mapper.(*restmapper.DeferredDiscoveryRESTMapper); ok {
			rm.Reset()
		}
		return scope{}, fmt.Errorf("kind %s is not served by cluster %s: %w", gvk, clusterName(cluster), err)
	}
	if m.Scope.Name() == meta.RESTScopeNameRoot {
		ns = ""
	}
	return scope{cluster: cluster, gvk: gvk, namespace: ns}, nil
}

// enqueueScope waits for the scope's informer to sync and queues what it knows.
func (e *Engine) enqueueScope(s scope) {
	if !e.watchers.waitSynced(s, time.Minute) {
		return
	}
	w, ok := e.watchers.get(s)
	if !ok {
		return
	}
	now := time.Now()
	for _, o := range w.informer.GetStore().List() {
		c := asCached(o)
		if s.cluster == "" {
			// Every local object, even one as the engine wrote it: the rules may have changed.
			e.add(c.item(s.gvk), now)
			continue
		}
		e.onEvent(s, nil, c)
	}
}

// onEvent maps a change in a watched scope to the local objects it may affect.
func (e *Engine) onEvent(s scope, oldC, newC *cachedObject) {
	now := time.Now()
	if s.cluster == "" {
		// A change of the local object alone: reconcile tells the event of the engine's
		// own write from any other.
		for _, c := range []*cachedObject{oldC, newC} {
			if c != nil {
				e.addLocal(c.item(s.gvk), now)
			}
		}
		if newC == nil && oldC != nil {
			e.ownWrites.Delete(oldC.item(s.gvk))
		}
		return
	}
	e.onPeerEvent(s, e.decode(s, oldC), e.decode(s, newC), now)
}

// decode returns the object of an informer's cachedObject (nil for nil).
func (e *Engine) decode(s scope, c *cachedObject) *unstructured.Unstructured {
	if c == nil {
		return nil
	}
	u, err := c.object(s.gvk)
	if err != nil {
		e.log.Error(err, "reading a cached object", "scope", s.String())
		return nil
	}
	return u
}

// onPeerEvent maps a change of a peer's object to the local objects it may affect.
func (e *Engine) onPeerEvent(s scope, oldObj, newObj *unstructured.Unstructured, now time.Time) {
	for _, r := range e.snapshot() {
		if r.compiled == nil {
			continue
		}
		if r.rsr.Spec.SyncStatusBack && planner.ContainsGVK(r.compiled.TargetGVKs, s.gvk) {
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
		if r.compiled.GVK != s.gvk {
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

func (e *Engine) processNext(ctx context.Context) bool {
	it, shutdown := e.queue.Get()
	if shutdown {
		return false
	}
	defer e.queue.Done(it)
	var requeue time.Duration
	var err error
	if it.back {
		err = e.reconcileBack(ctx, it)
	} else {
		requeue, err = e.reconcile(ctx, it)
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

// reconcile brings one local object to what the rules ask for.
func (e *Engine) reconcile(ctx context.Context, it item) (time.Duration, error) {
	_, full := e.full.LoadAndDelete(it)
	observed, synced, err := e.watchers.lookup("", it.gvk, it.namespace, it.name)
	if err != nil {
		return 0, err
	}
	if !synced {
		if _, any := e.anyLocalScope(it.gvk); !any {
			return 0, nil // no rule watches this kind any more
		}
		return time.Second, nil
	}
	e.settledKey(it, observed)
	if w, pending := e.ownWrites.Load(it); pending {
		ow := w.(ownWrite)
		observedRV := ""
		if observed != nil {
			observedRV = observed.GetResourceVersion()
		}
		switch next, skip := ow.reconciled(observedRV, full); {
		case next == nil:
			e.ownWrites.CompareAndDelete(it, ow)
			if skip {
				return 0, nil
			}
		case *next != ow:
			e.ownWrites.CompareAndSwap(it, ow, *next) // not if the copy's delete dropped it meanwhile
		}
	}
	membership := observed != nil && planner.MembershipObject(observed)
	if observed != nil && observed.GetDeletionTimestamp() != nil && observed.GetAnnotations()[v1alpha1.OwnershipAnnotation] != "" {
		// A copy being deleted (to be recreated, or with its namespace): nothing is written
		// to it; it is looked at again once it is gone.
		return 2 * time.Second, nil
	}
	target := types.NamespacedName{Namespace: it.namespace, Name: it.name}
	var entries []*ruleEntry
	var ruleSet []planner.Rule
	for _, r := range e.snapshot() {
		if r.compiled == nil || r.rsr.DeletionTimestamp != nil || !planner.ContainsGVK(r.compiled.TargetGVKs, it.gvk) {
			continue
		}
		entries = append(entries, r)
		ruleSet = append(ruleSet, planner.Rule{Spec: r.rsr, Compiled: r.compiled})
	}
	// The peers' ClusterFeatures are listed only for rules that select sources by them.
	needFeatures := false
	for _, r := range ruleSet {
		needFeatures = needFeatures || r.Compiled.NeedsFeatures()
	}
	var sources []planner.Source
	failingViews := map[types.UID]bool{} // readable sources whose view fails to sync
	overCapViews := map[types.UID]bool{} // sources whose view is over the cap on objects
	// Peers in their first contact, and the readable peers, for the wait before a create.
	firstContact, readable := map[types.UID]bool{}, map[types.UID]bool{}
	now := time.Now()
	for _, p := range e.opts.Peers.List() {
		name, id := p.Name, p.ClusterID
		firstContact[id] = e.contacts.seen(id, now, createWait)
		readable[id] = p.Ready && p.Config() != nil
		var features []v1alpha1.ClusterFeature
		if needFeatures {
			features = peerFeatures(ctx, p)
		}
		sources = append(sources, planner.Source{
			Name: p.Name, ClusterID: p.ClusterID, Readable: readable[id],
			Features: features, Cluster: e.peerCluster(ctx, p.Name),
			Lookup: func(gvk schema.GroupVersionKind, ns, n string) (*unstructured.Unstructured, bool) {
				obj, synced, err := e.watchers.lookup(name, gvk, ns, n)
				if !synced && (err != nil || !e.watchers.covers(name, gvk, ns)) {
					failingViews[id] = true // failing, or never started (the peer does not serve the kind)
				}
				var tooMany *TooManyObjectsError
				if !synced && errors.As(err, &tooMany) {
					overCapViews[id] = true
				}
				return obj, synced
			},
		})
	}
	policy, err := e.policy(ctx)
	if err != nil {
		return 0, err
	}
	g := planner.Gather(e.opts.LocalID, e.localCluster(ctx), policy, ruleSet, sources, it.gvk, target, observed)
	// The objects a rule failed to mutate (a template error or limit) are reported on the
	// rule after the action is recorded, which would clear them; not retried: a change of
	// the object or the rule brings them back.
	recordFailures := func(synced string) {
		for rule, fails := range g.Failures {
			if rule == synced {
				continue // another source's object synced it
			}
			for _, r := range entries {
				if r.rsr.Name == rule {
					r.record(it, false, "", failure{v1alpha1.ReasonMutationFailed, fails[0]})
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
	if membership {
		// The membership sync owns the Clusters and their reader Secrets: no rule writes
		// them, and a rule that tries is reported (its copy is refused by the policy).
		recordFailures("")
		return 0, nil
	}
	act := planner.Decide(g.Input(e.opts.LocalID, observed))
	if act.Type == planner.ActionCreate || planner.TakesOver(act, observed) {
		// The origin this copy starts from (or changes to) is chosen for good: wait for the
		// views that may still offer one with a lower cluster ID.
		if unseen := unseenSources(g.Unsynced, failingViews, firstContact, readable); e.waitForViews(it, unseen, nil) {
			return waitRetry(unseen, readable), nil
		}
	}
	if act.Type == planner.ActionCreate {
		if w, pending := e.ownWrites.Load(it); pending && time.Since(w.(ownWrite).at) < ownWriteWait {
			// Created by this engine a moment ago, and the local cache has not seen it yet:
			// wait for it rather than create it twice.
			return appearedRetry, nil
		}
	}
	if act.Type == planner.ActionCreate || act.Type == planner.ActionUpdate {
		if v := e.settle(it, act.Source, observed); v.Hold {
			if v.Rejected {
				// Content the API server refused for good waits for the source to change, or
				// is recreated when the rule says so (it may have been refused before the
				// rule did).
				for _, r := range entries {
					if r.rsr.Name != act.Source.Rule {
						continue
					}
					if act.Type == planner.ActionUpdate && v.RejectedReason == v1alpha1.ReasonImmutableField && recreates(r) {
						ri, err := e.resource(it.gvk, it.namespace)
						if err != nil {
							return 0, err
						}
						return 0, e.recreate(ctx, it, act, r, ri, v.Reason)
					}
					r.record(it, false, "", failure{v.RejectedReason, v.Reason})
				}
				recordFailures(act.Source.Rule)
				return max(time.Until(v.Until), time.Second), nil
			}
			e.held(it, act.Source.Rule, v, entries)
			recordFailures(act.Source.Rule)
			return max(time.Until(v.Until), time.Second), nil
		}
	}
	err = e.execute(ctx, it, act, entries)
	if errors.Is(err, errAppeared) {
		return appearedRetry, nil
	}
	syncedBy := ""
	if err == nil && act.Source != nil && act.Type != planner.ActionConflict {
		syncedBy = act.Source.Rule
	}
	recordFailures(syncedBy)
	if err == nil && act.Type == planner.ActionNone && observed != nil {
		// A copy whose origin is readable but not synced yet (a peer reconnected, a new
		// process or leader): whether the origin still has the object is not known. Look
		// again once it has synced, or a delete made meanwhile would never reach the copy:
		// the origin's informer, once synced, only enqueues the objects it still has.
		// A view over the cap is not waited for: the copy is kept as it is, and looked at
		// again when the view syncs under the cap (underCap).
		if origin := types.UID(observed.GetAnnotations()[v1alpha1.OwnershipAnnotation]); origin != "" && g.Unsynced[origin] && !overCapViews[origin] {
			return unsyncedRetry, nil
		}
	}
	return 0, err
}

// waitForViews reports whether a create of it waits for the views of sources that are
// still syncing (unsynced, and not failing), within createWait of when it was queued.
func (e *Engine) waitForViews(it item, unsynced, failing map[types.UID]bool) bool {
	first, ok := e.seen.Load(it)
	if !ok || time.Since(first.(time.Time)) > createWait {
		return false
	}
	for id := range unsynced {
		if !failing[id] {
			return true
		}
	}
	return false
}

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
	in := planner.SettleInput{History: h, Desired: planner.Digest(src.Object, src.SyncStatus), Missing: observed == nil, Now: time.Now(), Policy: e.opts.Settle}
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
	} else if stored != nil && !src.SyncStatus {
		e.ownWrites.Store(it, ownWrite{resourceVersion: stored.GetResourceVersion(), at: time.Now()})
	}
	d := planner.Digest(src.Object, src.SyncStatus)
	now := time.Now()
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

func (e *Engine) anyLocalScope(gvk schema.GroupVersionKind) (scope, bool) {
	e.watchers.mu.Lock()
	defer e.watchers.mu.Unlock()
	for s := range e.watchers.all {
		if s.cluster == "" && s.gvk == gvk {
			return s, true
		}
	}
	return scope{}, false
}

func peerFeatures(ctx context.Context, p peers.Peer) []v1alpha1.ClusterFeature {
	rd := p.Reader()
	if rd == nil {
		return nil
	}
	var list v1alpha1.ClusterFeatureList
	if err := rd.List(ctx, &list); err != nil {
		return nil
	}
	return list.Items
}

func (e *Engine) localCluster(ctx context.Context) map[string]any {
	return e.clusterObject(ctx, e.opts.LocalName)
}

func (e *Engine) peerCluster(ctx context.Context, name string) map[string]any {
	return e.clusterObject(ctx, name)
}

// clusterObject returns the content of the local Cluster named name for templates. The
// conversion is kept per resourceVersion: every reconcile asks for it, and templates only
// read it.
func (e *Engine) clusterObject(ctx context.Context, name string) map[string]any {
	var c v1alpha1.Cluster
	if err := e.opts.Client.Get(ctx, client.ObjectKey{Name: name}, &c); err != nil {
		return nil
	}
	e.clusterMu.Lock()
	defer e.clusterMu.Unlock()
	if cached, ok := e.clusters[name]; ok && cached.resourceVersion == c.ResourceVersion && c.ResourceVersion != "" {
		return cached.content
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&c)
	if err != nil {
		return nil
	}
	if e.clusters == nil {
		e.clusters = map[string]clusterContent{}
	}
	e.clusters[name] = clusterContent{resourceVersion: c.ResourceVersion, content: m}
	return m
}

// clusterContent is a Cluster converted for templates, at one resourceVersion.
type clusterContent struct {
	resourceVersion string
	content         map[string]any
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
	ri, err := e.resource(it.gvk, it.namespace)
	if err != nil {
		return err
	}
	opts := metav1.CreateOptions{FieldManager: v1alpha1.FieldManager}
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
		if err := e.ensureNamespace(ctx, it, entry(rule)); err != nil {
			f := planner.ClassifyWriteError(err)
			if r := entry(rule); r != nil {
				r.record(it, false, "", failure{f.Reason, f.String()})
			}
			if f.Reason == v1alpha1.ReasonNamespaceMissing {
				return nil // looked at again when the rule or the object changes
			}
			return err
		}
		created, err := ri.Create(ctx, act.Object, opts)
		if apierrors.IsAlreadyExists(err) {
			// The local cache had not seen it yet (its event queues the copy again), or an
			// object made here, which the local informers do not hold, is in the way.
			e.inTheWay(ctx, it, ri)
			return fmt.Errorf("%s appeared meanwhile: %w", it, errAppeared)
		}
		if err != nil {
			return e.writeFailed(ctx, it, act, entry(rule), ri, fmt.Errorf("creating %s: %w", it, err))
		}
		e.written(it, act.Source, created)
		if act.Source.SyncStatus {
			if st, ok := act.Object.Object["status"]; ok {
				created.Object["status"] = st
				if _, err := ri.UpdateStatus(ctx, created, metav1.UpdateOptions{FieldManager: v1alpha1.FieldManager}); err != nil {
					// The copy is there; its status follows on the next change or resync.
					e.log.Error(err, "writing the status of a copy", "object", it.String(), "rule", rule)
				}
			}
		}
	case planner.ActionUpdate:
		updated, err := ri.Update(ctx, act.Object, metav1.UpdateOptions{FieldManager: v1alpha1.FieldManager})
		if err != nil {
			return e.writeFailed(ctx, it, act, entry(rule), ri, fmt.Errorf("updating %s: %w", it, err))
		}
		e.written(it, act.Source, updated)
		if act.Source.SyncStatus {
			if st, ok := act.Object.Object["status"]; ok {
				updated.Object["status"] = st
				if _, err := ri.UpdateStatus(ctx, updated, metav1.UpdateOptions{FieldManager: v1alpha1.FieldManager}); err != nil {
					e.log.Error(err, "writing the status of a copy", "object", it.String(), "rule", rule)
				}
			}
		}
	case planner.ActionDelete:
		uid := act.Object.GetUID()
		err := ri.Delete(ctx, it.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting %s: %w", it, err)
		}
		for _, r := range entries {
			r.record(it, false, "", failure{})
		}
		rule = act.Object.GetLabels()[v1alpha1.RuleLabel]
	}
	e.log.Info("synced", "op", string(act.Type), "object", it.String(), "rule", rule, "reason", act.Reason)
	e.opts.Metrics.writes.WithLabelValues(rule, string(act.Type)).Inc()
	if t, ok := e.seen.Load(it); ok {
		e.opts.Metrics.latency.WithLabelValues(rule).Observe(time.Since(t.(time.Time)).Seconds())
	}
	if r := entry(rule); r != nil {
		unholdOthers(it, rule, entries)
		r.record(it, act.Type != planner.ActionDelete, "", failure{})
		r.mu.Lock()
		r.lastSync = time.Now()
		r.mu.Unlock()
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
	now := time.Now()
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

// policy returns this cluster's consent to what rules write: its SyncPolicies and the
// registry's own objects (the reader Secrets of its Clusters). A cluster whose API has no
// SyncPolicy kind yet (an older installation) has the default policy; any other error
// fails the reconcile (it is retried), never loosening the policy.
func (e *Engine) policy(ctx context.Context) (planner.Policy, error) {
	e.policyMu.Lock()
	defer e.policyMu.Unlock()
	if e.policyValid {
		return e.policyVal, nil
	}
	p, err := e.computePolicy(ctx)
	if err != nil {
		return planner.Policy{}, err
	}
	e.policyVal, e.policyValid = p, true
	return p, nil
}

// computePolicy reads the policy from the cache.
func (e *Engine) computePolicy(ctx context.Context) (planner.Policy, error) {
	var pols v1alpha1.SyncPolicyList
	if e.noPolicyKind {
		// none
	} else if err := e.opts.Client.List(ctx, &pols); err != nil && !meta.IsNoMatchError(err) {
		return planner.Policy{}, fmt.Errorf("reading this cluster's SyncPolicies: %w", err)
	}
	var clusters v1alpha1.ClusterList
	if err := e.opts.Client.List(ctx, &clusters); err != nil {
		return planner.Policy{}, fmt.Errorf("listing Clusters: %w", err)
	}
	return planner.PolicyOf(pols.Items, clusters.Items, e.opts.Namespace, e.opts.LocalID), nil
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

func (e *Engine) resource(gvk schema.GroupVersionKind, ns string) (dynamic.ResourceInterface, error) {
	m, err := e.mapping(gvk)
	if err != nil {
		return nil, fmt.Errorf("kind %s is not served by the local cluster: %w", gvk, err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return e.opts.Dynamic.Resource(m.Resource).Namespace(ns), nil
	}
	return e.opts.Dynamic.Resource(m.Resource), nil
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
func (e *Engine) ensureNamespace(ctx context.Context, it item, r *ruleEntry) error {
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
	ns = corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: it.namespace, Annotations: map[string]string{v1alpha1.CreatedByAnnotation: r.rsr.Name}}}
	if err := e.opts.Client.Create(ctx, &ns, client.FieldOwner(v1alpha1.FieldManager)); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", it.namespace, err)
	}
	return nil
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

// sameQuarantine reports whether two versions of a Cluster quarantine the same clusters
// (annotations do not change a Cluster's generation).
func sameQuarantine(a, b map[string]string) bool {
	for _, k := range []string{v1alpha1.ClusterDisabledAnnotation, v1alpha1.LeftClustersAnnotation} {
		if a[k] != b[k] {
			return false
		}
	}
	return true
}
