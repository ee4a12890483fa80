package engine

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/peers"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner"
)

type peerMapper struct {
	cfg    *rest.Config
	mapper *restmapper.DeferredDiscoveryRESTMapper
	client clusterClient
}

// peersFingerprint summarises what the rules depend on of the peers: who is Ready and
// connected, with which credentials, and their ClusterFeatures.
func (e *Engine) peersFingerprint(ctx context.Context) string {
	var b strings.Builder
	now := e.opts.Clock.Now()
	for _, p := range e.opts.Peers.List() {
		e.contacts.age(p.ClusterID, now)
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

// peerClients returns the client and mapper of a peer, rebuilt when its config changes.
func (e *Engine) peerClients(p peers.Peer) (clusterClient, meta.RESTMapper, error) {
	cfg := p.Config()
	if cfg == nil {
		return clusterClient{}, nil, fmt.Errorf("peer %s is not connected", p.Name)
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
		return clusterClient{}, nil, fmt.Errorf("peer %s is not connected", p.Name)
	}
	dc, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, hc)
	if err != nil {
		return clusterClient{}, nil, err
	}
	dyn, err := dynamic.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return clusterClient{}, nil, err
	}
	pm := peerMapper{cfg: cfg, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)), client: clusterClient{dyn: dyn, cfg: cfg, hc: hc}}
	e.mappers[p.Name] = pm
	// The connection changed: its informers are rebuilt.
	e.watchers.retain(func(s scope) bool { return s.cluster != p.Name })
	return pm.client, pm.mapper, nil
}

// doRefresh starts the informers the rules need, stops the others, and queues every
// object they know, so that every rule is re-evaluated.
func (e *Engine) doRefresh(ctx context.Context) {
	e.writes.ForgetMappings()
	all := e.opts.Peers.List()
	rp := newRefreshPlan()
	for _, r := range e.snapshot() {
		if r.compiled == nil {
			continue
		}
		r.setErr(nil)
		if r.rsr.DeletionTimestamp != nil {
			continue
		}
		e.watchLocalScopes(ctx, r, rp)
		e.wantPeerScopes(r, all, rp)
	}
	// The peers' informers are started once every rule is seen: a scope that some rule
	// needs the peer's copies of our objects in (syncStatusBack) keeps them.
	selectors := e.startPeerScopes(ctx, rp, memberIDs(all))
	e.noteRuleWatches(rp, selectors)
	// A watch of an object in the way of a copy (inTheWay) lasts while its kind is
	// watched here.
	localKinds := map[schema.GroupVersionKind]bool{}
	for s := range rp.needed {
		if s.cluster == "" {
			localKinds[s.gvk] = true
		}
	}
	e.watchers.retain(func(s scope) bool {
		return rp.needed[s] || (s.cluster == "" && s.name != "" && localKinds[s.gvk])
	})
	if rp.failed {
		// A kind was not served yet (a CRD being installed) or a peer's discovery
		// failed: try again, backing off.
		e.retryDelay = min(max(2*e.retryDelay, time.Second), time.Minute)
		e.opts.Clock.AfterFunc(e.retryDelay, e.triggerRefresh)
	} else {
		e.retryDelay = 0
	}
	// Re-evaluate everything: local copies and what the sources have.
	for s := range rp.needed {
		go e.enqueueScope(s)
	}
}

// refreshPlan is what a refresh gathers of the scopes the rules need.
type refreshPlan struct {
	// needed are every scope a rule needs, local and the peers'.
	needed map[scope]bool
	// failed is set when a scope could not be made or watched: the refresh is tried
	// again, backing off.
	failed bool
	// peerScopes are the peers' scopes, in the order the rules and peers ask for them
	// (peerOrder).
	peerScopes map[scope]*peerScope
	peerOrder  []scope
	// ruleScopes are the peers' scopes each rule reads its sources from.
	ruleScopes map[*ruleEntry][]scope
}

// peerScope is one peer's scope some rules read.
type peerScope struct {
	peer    types.UID
	client  clusterClient
	mapper  meta.RESTMapper
	keepOwn bool
	// alts are the label alternatives of the rules reading the scope: its informer
	// selects what any of them may match.
	alts []labels.Selector
}

func newRefreshPlan() *refreshPlan {
	return &refreshPlan{needed: map[scope]bool{}, peerScopes: map[scope]*peerScope{}, ruleScopes: map[*ruleEntry][]scope{}}
}

// wantPeer adds the peer p's scope s to the plan, for a rule reading it with the label
// alternatives alts (keepOwn: a rule needs the peer's copies of our objects there).
func (rp *refreshPlan) wantPeer(s scope, p peers.Peer, client clusterClient, mapper meta.RESTMapper, keepOwn bool, alts []labels.Selector) {
	rp.needed[s] = true
	ps := rp.peerScopes[s]
	if ps == nil {
		ps = &peerScope{peer: p.ClusterID, client: client, mapper: mapper}
		rp.peerScopes[s] = ps
		rp.peerOrder = append(rp.peerOrder, s)
	}
	ps.keepOwn = ps.keepOwn || keepOwn
	ps.alts = append(ps.alts, alts...)
}

// watchLocalScopes starts the local informers of the kinds rule r writes, in the
// namespaces it writes them to.
func (e *Engine) watchLocalScopes(ctx context.Context, r *ruleEntry, rp *refreshPlan) {
	locNS := planner.LocalNamespaces(r.rsr, r.compiled)
	if locNS == nil {
		locNS = []string{""}
	}
	for _, gvk := range r.compiled.TargetGVKs {
		for _, ns := range locNS {
			s, err := e.scopeFor("", gvk, ns, e.opts.Mapper)
			if err != nil {
				r.setErr(err)
				rp.failed = true
				continue
			}
			rp.needed[s] = true
			if err := e.watchers.ensure(ctx, s, e.localSelector(gvk), 0, e.localClient(), e.opts.Mapper, e.onEvent); err != nil {
				r.setErr(err)
				rp.failed = true
			}
		}
	}
}

// wantPeerScopes adds to the plan the scopes of the Ready peers that rule r reads: its
// sources, and the peers' copies of our objects when their status flows back.
func (e *Engine) wantPeerScopes(r *ruleEntry, all []peers.Peer, rp *refreshPlan) {
	srcNS := r.namespaces
	if srcNS == nil {
		srcNS = []string{""}
	}
	for _, p := range all {
		if !p.Ready || p.Config() == nil {
			continue
		}
		pc, mapper, err := e.peerClients(p)
		if err != nil {
			rp.failed = true
			continue
		}
		for _, ns := range srcNS {
			s, err := e.scopeFor(p.Name, r.compiled.GVK, ns, mapper)
			if err != nil {
				rp.failed = true
				continue // reported in the rule's source status
			}
			rp.wantPeer(s, p, pc, mapper, false, r.compiled.LabelAlternatives())
			rp.ruleScopes[r] = append(rp.ruleScopes[r], s)
		}
		if !r.rsr.Spec.SyncStatusBack {
			continue
		}
		// The peers' copies of our objects, whose status flows back.
		locNS := planner.LocalNamespaces(r.rsr, r.compiled)
		if locNS == nil {
			locNS = []string{""}
		}
		for _, gvk := range r.compiled.TargetGVKs {
			for _, ns := range locNS {
				s, err := e.scopeFor(p.Name, gvk, ns, mapper)
				if err != nil {
					rp.failed = true
					continue
				}
				// Every label: the copies' labels are what the rule wrote there.
				rp.wantPeer(s, p, pc, mapper, true, []labels.Selector{labels.Everything()})
			}
		}
	}
}

// startPeerScopes starts the informers of the peers' scopes of the plan, each selecting
// what any rule reading it may match, and returns those selectors.
func (e *Engine) startPeerScopes(ctx context.Context, rp *refreshPlan, members []types.UID) map[scope]string {
	selectors := map[scope]string{}
	for _, s := range rp.peerOrder {
		ps := rp.peerScopes[s]
		selectors[s] = sourceSelector(ps.alts)
		err := e.watchers.ensure(ctx, s, joinSelectors(selectors[s], uselessCopies(e.opts.LocalID, ps.peer, members, ps.keepOwn)), e.opts.MaxPeerObjects, ps.client, ps.mapper, e.onEvent)
		var tooMany *TooManyObjectsError
		switch {
		case err == nil:
		case errors.As(err, &tooMany):
			// A scope over the cap waiting to be tried again: the rules that read it report
			// it (sourceError), and overCap scheduled the refresh that tries it.
		default:
			// A view that did not start: the rules report the peer's kind as not readable
			// (sourceError); the refresh is tried again, backing off.
			e.log.V(1).Info("watching a peer's objects failed", "scope", s.String(), "error", err.Error())
			rp.failed = true
		}
	}
	return selectors
}

// noteRuleWatches records on each rule how its watches are narrowed, and the peers'
// scopes it reads.
func (e *Engine) noteRuleWatches(rp *refreshPlan, selectors map[scope]string) {
	for _, r := range e.snapshot() {
		if r.compiled == nil || r.builtin {
			continue
		}
		var sels []string
		for _, s := range rp.ruleScopes[r] {
			sels = append(sels, selectors[s])
		}
		note := noteWatches(r, sels, e.everyLocal(r.compiled.TargetGVKs))
		r.track.SetWatch(note)
		r.mu.Lock()
		r.peerScopes = rp.ruleScopes[r]
		r.mu.Unlock()
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
	now := e.opts.Clock.Now()
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

// peerFeatures returns the peer's ClusterFeatures; none while it is read with its
// bootstrap credential, which may not read them.
func peerFeatures(ctx context.Context, p peers.Peer) []v1alpha1.ClusterFeature {
	rd := p.Reader()
	if rd == nil || p.Bootstrap {
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
