package engine

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/engine/rulestatus"
	"github.com/kubectl-registry/kubectl-registry/reconciler/engine/views"
	"github.com/kubectl-registry/kubectl-registry/reconciler/engine/writer"
	"github.com/kubectl-registry/kubectl-registry/reconciler/peers"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner"
	"github.com/kubectl-registry/kubectl-registry/reconciler/rules"
)

// DefaultWorkers is how many objects are reconciled at once.
const DefaultWorkers = 8

// Peers are the peer connections the engine reads: *peers.Manager, or a fake in tests.
type Peers interface {
	// List returns every peer, by name.
	List() []peers.Peer
	// Shared is List without the copy: the caller only reads it.
	Shared() []peers.Peer
	// Subscribe registers ch for an event whenever a peer or its cache changes.
	Subscribe(ch chan<- event.GenericEvent)
	// WatchFeatures starts (true) or stops the watch of the peers' ClusterFeatures,
	// which only rules that select their sources by them read.
	WatchFeatures(on bool)
}

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
	// Dynamic writes the copies in the local cluster.
	Dynamic dynamic.Interface
	// Config and HTTPClient are the local cluster's REST config and HTTP client, which
	// the informers list and watch with (views.Client). Without a Config, Dynamic lists
	// and watches too (the fakes of unit tests).
	Config     *rest.Config
	HTTPClient *http.Client
	// Mapper resolves kinds in the local cluster.
	Mapper meta.RESTMapper
	Peers  Peers
	// Workers is how many objects are reconciled at once.
	Workers  int
	Recorder record.EventRecorder
	Metrics  *Metrics
	// Settle bounds the rewrites of a copy that the local cluster changes after each
	// write; zero means DefaultSettlePolicy.
	Settle planner.SettlePolicy
	// MaxPeerObjects caps the objects the watch of one peer's scope holds (a kind, in a
	// namespace a rule reads or in all of them, under the rules' label selector); a peer
	// offering more is not watched there, and its copies are kept (views/objectcap.go).
	// Zero means DefaultMaxPeerObjects.
	MaxPeerObjects int
	// OverCapRetry is the first wait before a scope over the cap is tried again (backing
	// off while it stays over); zero means DefaultOverCapRetry.
	OverCapRetry time.Duration
	// MaxRules caps the ResourceSyncRules the engine runs, the first by name; the others
	// do not run and say so (rulecap.go). The built-in rule always runs. Zero means
	// DefaultMaxRules.
	MaxRules int
	// Clock is the time of the engine's decisions: the settle windows and holds, the waits
	// for first contacts and for the views before a create, the backoffs of the refresh
	// and of scopes over the cap, the work queue's delays, the rules' last sync times.
	// Nil means clock.RealClock{}; unit tests pass k8s.io/utils/clock/testing's FakeClock.
	Clock clock.WithTickerAndDelayedExecution
}

// DefaultMaxPeerObjects is the default of Options.MaxPeerObjects:
// views.DefaultMaxPeerObjects.
const DefaultMaxPeerObjects = views.DefaultMaxPeerObjects

// DefaultOverCapRetry is the default of Options.OverCapRetry: views.DefaultOverCapRetry.
const DefaultOverCapRetry = views.DefaultOverCapRetry

// localClient is how the engine reaches the local cluster.
func (e *Engine) localClient() views.Client {
	return views.Client{Dynamic: e.opts.Dynamic, Config: e.opts.Config, HTTPClient: e.opts.HTTPClient}
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
	builtin  bool
	// pending is true on the entry of a rule seen changed, until assemble compiles it
	// (or caps it); it carries the old entry's tracking meanwhile.
	pending bool
	// namespaces the rule reads from sources; nil means all.
	namespaces []string

	// track is what the rule knows of the objects it covers, for its status.
	track *rulestatus.Tracker[item]

	mu  sync.Mutex
	err error
	// peerScopes are the peers' scopes the rule reads its sources from (set by
	// doRefresh).
	peerScopes []views.Scope
}

// statusWriter writes the status of the rules: rulestatus.Writer.
type statusWriter interface {
	// Write reads the rule named name, computes its status and patches it when it
	// changed.
	Write(ctx context.Context, name string, compute func(cur *v1alpha1.ResourceSyncRule) v1alpha1.ResourceSyncRuleStatus) error
}

// clusterViews are the views of the clusters' objects the engine reads, the local
// cluster's and the peers': an informer per scope, started and stopped by the refresh
// (peerviews.go), read while the engine plans and writes (reconcile.go, writes.go) and
// reports (status.go). views.Watchers implements it; the engine's tests use fakes.
type clusterViews interface {
	// Ensure starts the informer of scope s, with a label selector and a cap on its
	// objects (0: none), listing and watching through client; h receives its changes.
	Ensure(ctx context.Context, s views.Scope, selector string, limit int, client views.Client, mapper meta.RESTMapper, h views.Handler) error
	// Retain stops the informers whose scope keep rejects; Stop the one of s.
	Retain(keep func(views.Scope) bool)
	Stop(s views.Scope)
	// Lookup returns the object at a key as the cluster's informers covering it hold it,
	// decoded (nil when absent); synced is false when its absence is not proven.
	// LookupCached does not decode it: its caller must not change it.
	Lookup(cluster string, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, bool, error)
	LookupCached(cluster string, gvk schema.GroupVersionKind, namespace, name string) (*views.Cached, bool, error)
	// Covers reports whether an informer runs for the kind in the namespace (its own or
	// all namespaces); Running whether the informer of s runs; WatchesKind whether an
	// informer of the kind runs in the cluster.
	Covers(cluster string, gvk schema.GroupVersionKind, namespace string) bool
	Running(s views.Scope) bool
	WatchesKind(cluster string, gvk schema.GroupVersionKind) bool
	// KeyWatches counts the local watches of objects of the kind by name.
	KeyWatches(gvk schema.GroupVersionKind) int
	// Objects waits up to d for the informer of s to sync and returns what it holds;
	// WaitSynced only waits.
	Objects(s views.Scope, d time.Duration) ([]*views.Cached, bool)
	WaitSynced(s views.Scope, d time.Duration) bool
	// Count counts the objects of the kind in the cluster's informers that match.
	Count(cluster string, gvk schema.GroupVersionKind, matcher any, decode func(*views.Cached) (*unstructured.Unstructured, error), match func(*unstructured.Unstructured) bool) int
	// SyncErr reports whether the informer of s runs and the error it has not synced for.
	SyncErr(s views.Scope) (running bool, err error)
	// OverCapErr returns the error of a scope over the cap on objects (a
	// *views.TooManyObjectsError); OverCapScopes those scopes.
	OverCapErr(s views.Scope) error
	OverCapScopes() []views.Scope
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

// unholdOthers forgets that the copy is held by any rule but rule: another rule's
// candidate was chosen for it.
func unholdOthers(it item, rule string, entries []*ruleEntry) {
	for _, r := range entries {
		if r.rsr.Name != rule {
			r.track.Unhold(it)
		}
	}
}

// Engine runs the rules. It is a manager.Runnable that needs leader election.
type Engine struct {
	opts Options
	// views are the informers of the clusters' objects (package views).
	views   clusterViews
	queue   workqueue.TypedRateLimitingInterface[item]
	refresh chan struct{}
	seen    sync.Map // item -> time the event that queued it arrived
	// scopePasses coalesces the refreshes' passes over each scope (enqueueScope).
	scopePasses passes[views.Scope]
	// contacts says which peers are in their first contact, for the wait before a create.
	contacts *firstContacts
	// clusters caches the Clusters' content for templates (clusterObject).
	clusterMu sync.Mutex
	clusters  map[string]clusterContent
	// ownWrites holds, per copy, the engine's last write (of a copy whose status is not
	// synced), until the local cache has it.
	ownWrites writer.OwnWrites
	// full holds the queued items that something other than a change of the local object
	// queued (add, a retry): their reconcile is never skipped as the echo of a write.
	full sync.Map // item -> struct{}

	retryDelay time.Duration

	// writes writes in the local cluster, as the members' identities (package writer).
	writes copyWriter
	// statuses writes the rules' status (package rulestatus).
	statuses statusWriter
	// records are what the engine remembers of its recent writes of each copy, for
	// Settle.
	records *writer.Records

	// policy is this cluster's consent as last computed; valid until a SyncPolicy or a
	// Cluster changes.
	policyMu    sync.Mutex
	policyValid bool
	policyVal   planner.Policy
	// noPolicyKind is set when the cluster does not serve SyncPolicies.
	noPolicyKind bool

	local localWatches
	// members are the local Clusters the wait before a create reads (unlistedMembers).
	members memberList

	mu      sync.RWMutex
	rules   map[string]*ruleEntry
	mappers map[string]peerMapper
	log     logr.Logger
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
	if opts.MaxRules <= 0 {
		opts.MaxRules = DefaultMaxRules
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	e := &Engine{
		opts: opts,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedMaxOfRateLimiter(
				workqueue.NewTypedItemExponentialFailureRateLimiter[item](200*time.Millisecond, 5*time.Minute),
			), workqueue.TypedRateLimitingQueueConfig[item]{Name: "resourcesyncrules", Clock: opts.Clock}),
		refresh:  make(chan struct{}, 1),
		rules:    map[string]*ruleEntry{},
		mappers:  map[string]peerMapper{},
		records:  writer.NewRecords(),
		contacts: newFirstContacts(),
	}
	w, err := writer.New(writerOptions(opts))
	if err != nil {
		return nil, err
	}
	e.writes = w
	e.statuses = rulestatus.Writer{Client: opts.Client}
	e.views = views.New(views.Options{Retry: opts.OverCapRetry, Clock: opts.Clock, OnOver: e.overCap, OnUnder: e.underCap})
	core, err := rules.Compile(planner.CoreRule())
	if err != nil {
		return nil, fmt.Errorf("compiling the built-in rule: %w", err)
	}
	e.rules[v1alpha1.CoreRuleName] = newEntry(planner.CoreRule(), core, nil, true)
	return e, nil
}

// writerOptions are the options of the engine's writer: the local cluster's clients, its
// REST clients decoding the answers to writes as the informers decode objects.
func writerOptions(opts Options) writer.Options {
	return writer.Options{
		Namespace: opts.Namespace, Dynamic: opts.Dynamic, Config: opts.Config, HTTPClient: opts.HTTPClient,
		RESTClient: func(hc *http.Client) (rest.Interface, error) {
			return views.Client{Config: opts.Config, HTTPClient: hc}.RESTClient(schema.GroupVersionKind{})
		},
		NewAnswer: func() writer.Answer { return &views.Cached{} },
		Mapper:    opts.Mapper, Reader: opts.Client,
	}
}

func newEntry(rsr *v1alpha1.ResourceSyncRule, compiled *rules.Rule, err error, builtin bool) *ruleEntry {
	var namespaces []string
	if compiled != nil {
		if nss, restricted := compiled.SourceNamespaces(); restricted {
			namespaces = append([]string{}, nss...)
		}
	}
	return &ruleEntry{rsr: rsr, compiled: compiled, err: err, builtin: builtin, namespaces: namespaces, track: rulestatus.NewTracker[item]()}
}

// keepTracking takes over what old tracked of the rule's objects, for a rule compiled
// again.
func (r *ruleEntry) keepTracking(old *ruleEntry) {
	r.track, r.peerScopes = old.track, old.peerScopes
}

// watchLocal registers the engine's handlers of this cluster's ResourceSyncRules (the
// rules it runs), SyncPolicies and Clusters (its policy) and namespaces' Pod Security
// labels.
func (e *Engine) watchLocal(ctx context.Context) error {
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
				e.ruleDeleted(ctx, r)
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
	if err := e.trackMembers(ctx); err != nil {
		return err
	}
	// And after a change of a namespace's Pod Security label (policy.go).
	if err := e.watchNamespaceLevels(ctx); err != nil {
		return err
	}
	return nil
}

// trackMembers makes any change of a Cluster, its status included, read the members a
// create may wait for again (unlistedMembers).
func (e *Engine) trackMembers(ctx context.Context) error {
	inf, err := e.opts.Cache.GetInformer(ctx, &v1alpha1.Cluster{})
	if err != nil {
		return fmt.Errorf("watching Clusters: %w", err)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { e.members.changed() },
		UpdateFunc: func(any, any) { e.members.changed() },
		DeleteFunc: func(any) { e.members.changed() },
	}); err != nil {
		return fmt.Errorf("watching Clusters: %w", err)
	}
	e.members.tracked.Store(true)
	return nil
}

// Start runs the engine until ctx is done.
func (e *Engine) Start(ctx context.Context) error {
	e.log = logr.FromContextOrDiscard(ctx).WithName("sync")
	if err := e.watchLocal(ctx); err != nil {
		return err
	}
	peerEvents := make(chan event.GenericEvent, 256)
	e.opts.Peers.Subscribe(peerEvents)

	var wg sync.WaitGroup
	for i := 0; i < e.opts.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var cache *sourceCache // this worker's (snapshotFor)
			for e.processNext(ctx, &cache) {
			}
		}()
	}
	lastPeers := e.peersFingerprint(ctx)
	statusTicker := e.opts.Clock.NewTicker(2 * time.Second)
	defer statusTicker.Stop()
	e.triggerRefresh()
	for {
		select {
		case <-ctx.Done():
			e.queue.ShutDown()
			e.views.Retain(func(views.Scope) bool { return false })
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
			<-e.opts.Clock.After(50 * time.Millisecond)
			e.drainRefresh()
			e.doRefresh(ctx)
		case <-statusTicker.C():
			e.writeStatuses(ctx)
		}
	}
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
	if rsr.Name == v1alpha1.CoreRuleName {
		// The built-in rule's name is reserved: a ResourceSyncRule of that name (made
		// here, or copied from a member) never replaces it, nor runs (AssembleRules).
		e.log.Info("ignoring a ResourceSyncRule with the built-in rule's reserved name", "rule", rsr.Name)
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
	entry := newEntry(rsr, nil, nil, false)
	entry.pending = true
	if old, ok := e.rules[rsr.Name]; ok && !old.builtin {
		entry.keepTracking(old)
	}
	e.rules[rsr.Name] = entry
	e.assemble()
	e.mu.Unlock()
	e.triggerRefresh()
}

// ruleDeleted forgets a deleted rule; ctx is the engine's run context (Start's), which
// the deletion of its copies runs under.
func (e *Engine) ruleDeleted(ctx context.Context, rsr *v1alpha1.ResourceSyncRule) {
	if rsr.Name == v1alpha1.CoreRuleName {
		return // never ran (ruleChanged): its deletion policy is not applied to the built-in rule's copies
	}
	e.mu.Lock()
	if r, ok := e.rules[rsr.Name]; ok && !r.builtin {
		delete(e.rules, rsr.Name)
		e.opts.Metrics.heldObjects.DeleteLabelValues(rsr.Name)
		e.assemble()
	}
	e.mu.Unlock()
	if rsr.Spec.DeletionPolicy == v1alpha1.DeletionPolicyDelete {
		// Seen going away before its finalizer was in place: apply the policy anyway.
		if compiled, err := rules.Compile(rsr); err == nil {
			go func() {
				since := e.opts.Clock.Now()
				for {
					pending, err := e.deleteRuleCopies(ctx, rsr.Name, compiled.TargetGVKs, since)
					if err != nil {
						e.log.Error(err, "deleting the copies of a deleted rule", "rule", rsr.Name)
					}
					if err != nil || !pending {
						return
					}
					select {
					case <-ctx.Done():
						return
					case <-e.opts.Clock.After(time.Second):
					}
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
