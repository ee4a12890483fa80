package engine

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/engine/rulestatus"
	"github.com/kubectl-registry/kubectl-registry/reconciler/engine/views"
	"github.com/kubectl-registry/kubectl-registry/reconciler/peers"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner"
	"github.com/kubectl-registry/kubectl-registry/reconciler/rules"
)

type peerMapper struct {
	cfg        *rest.Config
	credential uint64
	mapper     meta.RESTMapper
	client     views.Client
}

// peersFingerprint summarises what the rules depend on of the peers: who is Ready and
// connected, with which connection and credentials, and their ClusterFeatures.
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
			h.Write(cfg.CertData)
			fmt.Fprintf(&b, "%x/%d/", h.Sum64(), p.Credential())
		}
		features, known := p.Features(ctx)
		fmt.Fprintf(&b, "%t", known)
		for _, f := range features {
			fmt.Fprintf(&b, "|%s:%s", f.Name, f.ResourceVersion)
		}
		b.WriteString(";")
	}
	return b.String()
}

// peerClients returns the client and mapper of a peer, rebuilt when its config changes.
// The mapper is the connection's (peers.Peer.Mapper), which the membership's clients of
// the peer share: the kinds a rule reads are mapped by the group versions it names.
func (e *Engine) peerClients(p peers.Peer) (views.Client, meta.RESTMapper, error) {
	cfg, mapper := p.Config(), p.Mapper()
	// The peer's own HTTP client: it dials only the addresses this cluster allows and
	// refuses redirects.
	hc := p.HTTPClient()
	if cfg == nil || mapper == nil || hc == nil {
		return views.Client{}, nil, fmt.Errorf("peer %s is not connected", p.Name)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	// The token is not in the config: Credential changes with it.
	if pm, ok := e.mappers[p.Name]; ok && pm.credential == p.Credential() && pm.cfg.BearerToken == cfg.BearerToken &&
		pm.cfg.Host == cfg.Host && string(pm.cfg.CertData) == string(cfg.CertData) {
		pm.mapper = mapper
		e.mappers[p.Name] = pm
		return pm.client, pm.mapper, nil
	}
	dyn, err := dynamic.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return views.Client{}, nil, err
	}
	pm := peerMapper{cfg: cfg, credential: p.Credential(), mapper: mapper, client: views.Client{Dynamic: dyn, Config: cfg, HTTPClient: hc}}
	e.mappers[p.Name] = pm
	// The connection changed: its informers are rebuilt.
	e.views.Retain(func(s views.Scope) bool { return s.Cluster != p.Name })
	return pm.client, pm.mapper, nil
}

// doRefresh starts the informers the rules need, stops the others, and queues every
// object they know, so that every rule is re-evaluated.
func (e *Engine) doRefresh(ctx context.Context) {
	e.writes.ForgetMappings()
	rules := e.snapshot()
	// The peers' ClusterFeatures are watched only while a rule selects by them.
	e.opts.Peers.WatchFeatures(needFeatures(rules))
	all := e.opts.Peers.List()
	rp := newRefreshPlan()
	for _, r := range rules {
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
		if s.Cluster == "" {
			localKinds[s.GVK] = true
		}
	}
	e.views.Retain(func(s views.Scope) bool {
		return rp.needed[s] || (s.Cluster == "" && s.Name != "" && localKinds[s.GVK])
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
	needed map[views.Scope]bool
	// failed is set when a scope could not be made or watched: the refresh is tried
	// again, backing off.
	failed bool
	// peerScopes are the peers' scopes, in the order the rules and peers ask for them
	// (peerOrder).
	peerScopes map[views.Scope]*peerScope
	peerOrder  []views.Scope
	// ruleScopes are the peers' scopes each rule reads its sources from.
	ruleScopes map[*ruleEntry][]views.Scope
}

// peerScope is one peer's scope some rules read.
type peerScope struct {
	peer    types.UID
	client  views.Client
	mapper  meta.RESTMapper
	keepOwn bool
	// alts are the label alternatives of the rules reading the scope: its informer
	// selects what any of them may match.
	alts []labels.Selector
}

func newRefreshPlan() *refreshPlan {
	return &refreshPlan{needed: map[views.Scope]bool{}, peerScopes: map[views.Scope]*peerScope{}, ruleScopes: map[*ruleEntry][]views.Scope{}}
}

// wantPeer adds the peer p's scope s to the plan, for a rule reading it with the label
// alternatives alts (keepOwn: a rule needs the peer's copies of our objects there).
func (rp *refreshPlan) wantPeer(s views.Scope, p peers.Peer, client views.Client, mapper meta.RESTMapper, keepOwn bool, alts []labels.Selector) {
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
			s, err := views.NewScope("", gvk, ns, e.opts.Mapper)
			if err != nil {
				r.setErr(err)
				rp.failed = true
				continue
			}
			rp.needed[s] = true
			if err := e.views.Ensure(ctx, s, e.localSelector(gvk), 0, e.localClient(), e.opts.Mapper, e.onEvent); err != nil {
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
		if !p.Ready || !p.Readable() {
			continue
		}
		pc, mapper, err := e.peerClients(p)
		if err != nil {
			rp.failed = true
			continue
		}
		for _, ns := range srcNS {
			s, err := views.NewScope(p.Name, r.compiled.GVK, ns, mapper)
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
				s, err := views.NewScope(p.Name, gvk, ns, mapper)
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
func (e *Engine) startPeerScopes(ctx context.Context, rp *refreshPlan, members []types.UID) map[views.Scope]string {
	selectors := map[views.Scope]string{}
	for _, s := range rp.peerOrder {
		ps := rp.peerScopes[s]
		selectors[s] = sourceSelector(ps.alts)
		err := e.views.Ensure(ctx, s, joinSelectors(selectors[s], uselessCopies(e.opts.LocalID, ps.peer, members, ps.keepOwn)), e.opts.MaxPeerObjects, ps.client, ps.mapper, e.onEvent)
		var tooMany *views.TooManyObjectsError
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
func (e *Engine) noteRuleWatches(rp *refreshPlan, selectors map[views.Scope]string) {
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

// enqueueScope waits for the scope's informer to sync and queues what it knows. Calls
// for one scope are coalesced (passes): a call made while another waits for the scope to
// sync is served by it.
func (e *Engine) enqueueScope(s views.Scope) {
	e.scopePasses.run(s, func(begin func()) {
		if !e.views.WaitSynced(s, time.Minute) {
			return
		}
		begin()
		e.enqueueObjects(s)
	})
}

// enqueueObjects queues what the informer of scope s holds once it has synced.
func (e *Engine) enqueueObjects(s views.Scope) {
	objs, ok := e.views.Objects(s, time.Minute)
	if !ok {
		return
	}
	now := e.opts.Clock.Now()
	for _, c := range objs {
		if s.Cluster == "" {
			// Every local object, even one as the engine wrote it: the rules may have changed.
			e.add(itemOf(c, s.GVK), now)
			continue
		}
		e.onEvent(s, nil, c)
	}
}

// overCap reports a scope that went over the cap: in the log each time, and as a Warning
// event on the rules that read it when it was not over the cap before. The scope is
// derived again once its wait is over.
func (e *Engine) overCap(s views.Scope, err *views.TooManyObjectsError, first bool) {
	e.opts.Clock.AfterFunc(err.Retry, e.triggerRefresh)
	if err.TooLarge != nil {
		e.log.Info("a peer answered over a byte limit: not watched, its copies are kept", "scope", s.String(), "refused", err.TooLarge.What, "limit", err.TooLarge.Limit, "retryIn", err.Retry.String())
	} else {
		e.log.Info("a peer offers more objects than the cap: not watched, its copies are kept", "scope", s.String(), "seen", err.Seen, "cap", err.Limit, "retryIn", err.Retry.String())
	}
	if !first || e.opts.Recorder == nil {
		return
	}
	for _, r := range e.snapshot() {
		r.mu.Lock()
		reads := slices.Contains(r.peerScopes, s)
		r.mu.Unlock()
		if reads && !r.builtin {
			e.opts.Recorder.Eventf(r.rsr, corev1.EventTypeWarning, err.Reason(), "%s", err.Error())
		}
	}
}

// underCap is called when a scope that was over the cap synced under it: every object is
// looked at again, the copies kept meanwhile among them.
func (e *Engine) underCap(s views.Scope) {
	e.log.Info("a peer is back under the cap on objects: watched again", "scope", s.String())
	e.triggerRefresh()
}

// copiesSelector is the label selector of the local informers: the copies, which all
// carry the ownership label (planner.Mark). Objects made in this cluster, which rules
// never write, are not watched: one matters only when it is in the way of a copy, and
// the create of that copy finds it (inTheWay).
var copiesSelector = v1alpha1.OwnershipLabel

// localSelector is the label selector of the local informers of the kind: the copies,
// unless too many objects made here are in the way of copies (inTheWay).
func (e *Engine) localSelector(gvk schema.GroupVersionKind) string {
	e.local.mu.Lock()
	defer e.local.mu.Unlock()
	if e.local.every[gvk] {
		return ""
	}
	return copiesSelector
}

// everyLocal reports whether the local informers of one of the kinds carry every object.
func (e *Engine) everyLocal(gvks []schema.GroupVersionKind) bool {
	e.local.mu.Lock()
	defer e.local.mu.Unlock()
	for _, g := range gvks {
		if e.local.every[g] {
			return true
		}
	}
	return false
}

// uselessCopies returns the label selector of a peer's informer that leaves out the
// copies on that peer which decide nothing here (see Gather): copies of the local
// cluster's objects (unless keepOwn: their status flows back), and copies of the objects
// of the other members, which this cluster reads from their origins directly. Values that
// are not valid label values are not left out.
func uselessCopies(local, peer types.UID, members []types.UID, keepOwn bool) string {
	var ids []string
	add := func(id types.UID) {
		if id != "" && len(validation.IsValidLabelValue(string(id))) == 0 {
			ids = append(ids, string(id))
		}
	}
	if !keepOwn {
		add(local)
	}
	for _, m := range members {
		if m != peer && m != local {
			add(m)
		}
	}
	if len(ids) == 0 {
		return ""
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	return v1alpha1.OwnershipLabel + " notin (" + strings.Join(ids, ",") + ")"
}

// joinSelectors ANDs label selectors given as strings ("" selects everything).
func joinSelectors(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, ",")
}

// sourceSelector is the label selector of a peer's informer read by rules whose label
// alternatives are alts: what every one of them may match (rules.CommonSelector), or ""
// when they share no label requirement.
func sourceSelector(alts []labels.Selector) string {
	return rules.CommonSelector(alts).String()
}

// noteWatches describes the watches of rule r: the namespaces it reads and the label
// selector of its peers' informers (shared, the selector of the scopes it uses: the
// common requirements of every rule reading them).
func noteWatches(r *ruleEntry, scopeSelectors []string, everyLocal bool) rulestatus.WatchNote {
	kind := r.compiled.GVK.Kind
	local := "; this cluster watches only its copies"
	if everyLocal {
		local = fmt.Sprintf("; this cluster watches every object of the kind, since more than %d objects made here are in the way of copies", maxKeyWatches)
	}
	var by []string
	if r.namespaces != nil {
		by = append(by, "namespaces "+strings.Join(r.namespaces, ", "))
	}
	own := rules.CommonSelector(r.compiled.LabelAlternatives()).String()
	shared := own != ""
	for _, s := range scopeSelectors {
		shared = shared && s != ""
	}
	if shared {
		sel := own
		if len(scopeSelectors) > 0 {
			sel = scopeSelectors[0]
		}
		by = append(by, "labels "+sel)
	}
	if len(by) == 0 {
		msg := fmt.Sprintf("the peers' watches of %s carry every object of the kind: the rule selects by neither namespaces nor a label that every match entry requires", kind)
		if own != "" {
			msg = fmt.Sprintf("the peers' watches of %s carry every object of the kind: the rule shares them with rules that select every label", kind)
		}
		return rulestatus.WatchNote{Reason: v1alpha1.ReasonEveryObjectWatched, Message: msg + local}
	}
	return rulestatus.WatchNote{Narrowed: true, Reason: v1alpha1.ReasonWatchesNarrowed,
		Message: fmt.Sprintf("the peers' watches of %s carry only %s", kind, strings.Join(by, " and ")) + local}
}

// peerFeatures returns the peer's ClusterFeatures; none while they are not known (it is
// read with its bootstrap credential, which may not read them, or they are not synced
// yet): a rule that selects by them then reads nothing of the peer and keeps its
// copies, as for a peer not read (the planner's sources not selected count as unknown).
func peerFeatures(ctx context.Context, p peers.Peer) []v1alpha1.ClusterFeature {
	features, _ := p.Features(ctx)
	return features
}

// featuresKnown reports whether the peer's ClusterFeatures are known (peers.Peer.Features).
func featuresKnown(ctx context.Context, p peers.Peer) bool {
	_, known := p.Features(ctx)
	return known
}

// needFeatures reports whether a rule of rules selects its sources by the peers'
// ClusterFeatures.
func needFeatures(rules []*ruleEntry) bool {
	for _, r := range rules {
		if r.compiled != nil && r.rsr.DeletionTimestamp == nil && r.compiled.NeedsFeatures() {
			return true
		}
	}
	return false
}

func (e *Engine) localCluster(ctx context.Context) map[string]any {
	return e.clusterObject(ctx, e.opts.LocalName)
}

func (e *Engine) peerCluster(ctx context.Context, name string) map[string]any {
	return e.clusterObject(ctx, name)
}

// clusterObject returns the content of the local Cluster named name for templates. The
// conversion is kept per resourceVersion: every reconcile asks for it, of every peer, and
// templates only read it. The cache's Cluster is read without a deep copy (c shares its
// maps and slices): only its resourceVersion is read, and the conversion, which copies.
func (e *Engine) clusterObject(ctx context.Context, name string) map[string]any {
	var c v1alpha1.Cluster
	if err := e.opts.Client.Get(ctx, client.ObjectKey{Name: name}, &c, client.UnsafeDisableDeepCopy); err != nil {
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
