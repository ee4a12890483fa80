package peers

import (
	"context"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// A peer's ClusterFeatures are read only for the rules that select their sources by them
// (clusterFeatureMatch): a peer's cache watches them only while the Manager is told to
// (WatchFeatures), so a group whose rules select no source by features holds no informer,
// no watch and no goroutine for them on any peer (#33: no informers for kinds no rule
// reads). Until a peer's ClusterFeatures have synced they are unknown (Peer.Features):
// a rule then reads nothing of that peer and keeps its copies, as for a peer not read.

// WatchFeatures starts (on) or stops the watch of every peer's ClusterFeatures, now and
// in every cache built later. A peer read with its bootstrap credential, which may not
// read them, never watches them.
func (m *Manager) WatchFeatures(on bool) {
	if m.features.Swap(on) == on {
		return
	}
	m.mu.Lock()
	conns := make([]*conn, 0, len(m.conns))
	for _, c := range m.conns {
		conns = append(conns, c)
	}
	m.mu.Unlock()
	for _, c := range conns {
		c.syncFeatures()
	}
}

// Features returns the peer's ClusterFeatures and true, or false while they are not
// known: the peer is not connected and synced, it is read with its bootstrap
// credential, or its ClusterFeatures are not watched (WatchFeatures) or not synced yet.
func (p Peer) Features(ctx context.Context) ([]v1alpha1.ClusterFeature, bool) {
	rd := p.Reader()
	if rd == nil || p.Bootstrap || (p.features != nil && !p.features()) {
		return nil, false
	}
	var list v1alpha1.ClusterFeatureList
	if err := rd.List(ctx, &list); err != nil {
		return nil, false
	}
	return list.Items, true
}

// featuresUnwatched is Peer.features while a connection's cache does not watch the
// peer's ClusterFeatures.
func featuresUnwatched() bool { return false }

// setCache records cch, run under ctx, as the connection's cache, then starts its watch
// of the peer's ClusterFeatures if the Manager wants it.
func (c *conn) setCache(ctx context.Context, cch cache.Cache) {
	c.recordCache(ctx, cch)
	c.syncFeatures()
}

// clearCache records that the connection has no cache (serve stopped it).
func (c *conn) clearCache() { c.recordCache(context.Background(), nil) }

func (c *conn) recordCache(ctx context.Context, cch cache.Cache) {
	c.fmu.Lock()
	c.mu.Lock()
	c.cache, c.cacheCtx, c.featureWatched = cch, ctx, false
	c.mu.Unlock()
	c.fmu.Unlock()
	c.set(func(p *Peer) { p.features = featuresUnwatched })
}

// syncFeatures starts or stops the watch of the peer's ClusterFeatures in the
// connection's cache, as the Manager wants; each change notifies the subscribers (the
// rules that select by features read them again).
func (c *conn) syncFeatures() {
	c.fmu.Lock()
	defer c.fmu.Unlock()
	c.mu.Lock()
	cch, ctx, watched, bootstrap := c.cache, c.cacheCtx, c.featureWatched, c.peer.Bootstrap
	c.mu.Unlock()
	want := c.m.features.Load() && cch != nil && !bootstrap
	name := c.snapshot().Name
	switch {
	case want && !watched:
		reg, err := watchKind(ctx, cch, &v1alpha1.ClusterFeature{}, func() { c.m.notify(name) })
		if err != nil {
			c.m.log.Error(err, "watching a peer's ClusterFeatures", "cluster", name)
			return
		}
		c.mu.Lock()
		c.featureWatched = true
		c.mu.Unlock()
		// Known once the handler has had every object of the first list; then the
		// subscribers are told, even when the peer has none (no event says so).
		c.set(func(p *Peer) { p.features = reg.HasSynced })
		go func() {
			if toolscache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
				c.m.notify(name)
			}
		}()
	case !want && watched:
		if cch != nil {
			if err := cch.RemoveInformer(ctx, &v1alpha1.ClusterFeature{}); err != nil {
				c.m.log.Error(err, "stopping the watch of a peer's ClusterFeatures", "cluster", name)
			}
		}
		c.mu.Lock()
		c.featureWatched = false
		c.mu.Unlock()
		c.set(func(p *Peer) { p.features = featuresUnwatched })
		c.m.notify(name)
	}
}

// notifyOnChange is the event handler of a peer's informer: notify on every add and
// delete, and on an update that changes more than a Cluster's heartbeats (Changed).
func notifyOnChange(notify func()) toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { notify() },
		UpdateFunc: func(old, updated any) {
			if Changed(old, updated) {
				notify()
			}
		},
		DeleteFunc: func(any) { notify() },
	}
}
