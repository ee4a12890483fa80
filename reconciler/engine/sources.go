package engine

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/engine/views"
	"github.com/kubectl-registry/kubectl-registry/reconciler/peers"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner"
)

// sourceViews is what the engine knows of the sources' views while it plans one local
// object, besides the plan's snapshot: the rules that cover its kind, and what the
// lookups met.
type sourceViews struct {
	// entries are the rules that may write objects of the kind (not being deleted).
	entries []*ruleEntry
	// failingViews are the readable sources whose view fails to sync; overCapViews the
	// sources whose view is over the cap on objects. Nil until a lookup meets one.
	failingViews, overCapViews map[types.UID]bool
	// unstarted are the sources whose view of the kind has no watch (not started yet, or
	// the peer does not serve the kind). Nil until a lookup meets one.
	unstarted map[types.UID]bool
	// listed are the peers listed when the snapshot was taken (the sources' cache: read
	// only), made into the sets below (waitSets) only for a create or a change of origin,
	// not for every object.
	listed *sourceCache
	// firstContact are the peers in their first contact, readable the peers listed (true:
	// readable), young those within connectWait of their first contact, beingMade those
	// whose connection is being made: for the wait before a create (waitSets).
	firstContact, readable, young, beingMade map[types.UID]bool
	// setsShared is true while the sets are the cache's, which must not be changed.
	setsShared bool
}

// record notes what a lookup of the view of the source id met when it was not synced:
// err, and whether an informer covers the view (covered).
func (vs *sourceViews) record(id types.UID, err error, covered bool) {
	if err != nil || !covered {
		vs.failingViews = setTrue(vs.failingViews, id) // failing, or never started (the peer does not serve the kind)
		if err == nil {
			vs.unstarted = setTrue(vs.unstarted, id) // or the watch is not started yet (a peer just connected)
		}
	}
	var tooMany *views.TooManyObjectsError
	if errors.As(err, &tooMany) {
		vs.overCapViews = setTrue(vs.overCapViews, id)
	}
}

// setTrue sets m[id], making m when it is nil, and returns m.
func setTrue(m map[types.UID]bool, id types.UID) map[types.UID]bool {
	if m == nil {
		m = map[types.UID]bool{}
	}
	m[id] = true
	return m
}

// listedPeer is what the wait before a create reads of a peer listed.
type listedPeer struct {
	id                  types.UID
	readable, beingMade bool
}

func listedOf(p *peers.Peer) listedPeer {
	return listedPeer{id: p.ClusterID, readable: p.Ready && p.Readable(), beingMade: beingMade(*p)}
}

// sourceCache is one worker's planner sources, one per peer listed, made again only
// when what the engine reads of the peers list changes: snapshotFor runs for every
// object, and making a source per peer for each (two functions and an entry of the wait's
// list a peer) was most of its cost at 100 peers. The sources' lookups record what they
// meet in vs, the views of the object being planned, which snapshotFor sets for each: a
// cache is used by one worker at a time.
type sourceCache struct {
	// peers are the peers the cache was made from, as listedPeer, in the list's order.
	peers   []listedPeer
	names   []string
	sources []planner.Source
	// readable are the peers listed (true: readable), for the wait before a create; read
	// only once made.
	readable map[types.UID]bool
	// first are the peers' first contacts (firstContacts), in the list's order.
	first []time.Time
	// sets are the last sets made for the wait before a create (waitSets), read only: they
	// hold until their until.
	sets *ageSets
	// vs and ctx are the views and the context of the object being planned.
	vs  *sourceViews
	ctx context.Context
}

// current reports whether the cache was made from the peers listed.
func (c *sourceCache) current(listed []peers.Peer) bool {
	if c == nil || len(c.peers) != len(listed) {
		return false
	}
	for i := range listed {
		if c.peers[i] != listedOf(&listed[i]) || c.names[i] != listed[i].Name {
			return false
		}
	}
	return true
}

// sourcesFor returns the cache of sources for the peers listed: c when it is current,
// else a new one (the engine's contacts record the peers' first contact).
func (e *Engine) sourcesFor(c *sourceCache, listed []peers.Peer) *sourceCache {
	if c.current(listed) {
		return c
	}
	now := e.opts.Clock.Now()
	c = &sourceCache{peers: make([]listedPeer, len(listed)), names: make([]string, len(listed)), first: make([]time.Time, len(listed)),
		sources: make([]planner.Source, len(listed)), readable: make(map[types.UID]bool, len(listed))}
	for i := range listed {
		p := &listed[i]
		name, id := p.Name, p.ClusterID
		lp := listedOf(p)
		c.peers[i], c.names[i], c.readable[id] = lp, name, lp.readable
		c.first[i] = now.Add(-e.contacts.age(id, now))
		c.sources[i] = planner.Source{
			Name: name, ClusterID: id, Readable: lp.readable,
			Cluster: func() map[string]any { return e.peerCluster(c.ctx, name) },
			Lookup: func(gvk schema.GroupVersionKind, ns, n string) (*unstructured.Unstructured, bool) {
				obj, synced, err := e.views.Lookup(name, gvk, ns, n)
				if !synced {
					c.vs.record(id, err, err == nil && e.views.Covers(name, gvk, ns))
				}
				return obj, synced
			},
		}
	}
	return c
}

// ageSets are the sets of the peers listed that the wait before a create reads, by
// their first contact: in it (firstContact, createWait), young (connectWait), and young
// with a connection being made (beingMade). They change only when a peer's age crosses
// createWait or connectWait: at until.
type ageSets struct {
	firstContact, young, beingMade map[types.UID]bool
	until                          time.Time
}

// waitSets sets in vs the sets the wait before a create reads from the peers listed. They
// are the cache's, made again when a peer's age has crossed createWait or connectWait
// since, and read only (unlistedMembers copies them before it adds to them): at a first
// sync every create waits, and making them for each, with 100 peers young, cost as much
// as its write.
func (e *Engine) waitSets(vs *sourceViews) {
	c := vs.listed
	now := e.opts.Clock.Now()
	if c.sets == nil || !now.Before(c.sets.until) {
		c.sets = c.makeWaitSets(now)
	}
	vs.readable, vs.firstContact, vs.young, vs.beingMade = c.readable, c.sets.firstContact, c.sets.young, c.sets.beingMade
	vs.setsShared = true
}

// makeWaitSets makes the wait's sets of the peers at now.
func (c *sourceCache) makeWaitSets(now time.Time) *ageSets {
	ws := &ageSets{firstContact: map[types.UID]bool{}, young: map[types.UID]bool{}, beingMade: map[types.UID]bool{}, until: now.Add(connectWait)}
	for i, p := range c.peers {
		age := now.Sub(c.first[i])
		if age < createWait {
			ws.firstContact[p.id] = true
			ws.until = minTime(ws.until, c.first[i].Add(createWait))
		}
		if age < connectWait {
			ws.young[p.id] = true
			ws.until = minTime(ws.until, c.first[i].Add(connectWait))
			if p.beingMade {
				ws.beingMade[p.id] = true
			}
		}
	}
	return ws
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// snapshotFor returns the planner's snapshot of this cluster for objects of gvk, built
// from the engine's rules, its peers' views and this cluster's policy: the one way the
// engine asks what the sources want of a local object (reconcile, and the deletion
// policy of a rule, which deletes only copies no other rule asks for), as sync-diff asks
// it of what it read. The lookups record in vs what they meet. cache is the caller's
// cache of sources (*cache, nil for none yet), which it must not share with another
// goroutine while it uses the snapshot.
func (e *Engine) snapshotFor(ctx context.Context, gvk schema.GroupVersionKind, cache **sourceCache) (planner.Snapshot, *sourceViews, error) {
	vs := &sourceViews{}
	s := planner.Snapshot{LocalID: e.opts.LocalID}
	for _, r := range e.snapshot() {
		if r.compiled == nil || r.rsr.DeletionTimestamp != nil || !planner.ContainsGVK(r.compiled.TargetGVKs, gvk) {
			continue
		}
		vs.entries = append(vs.entries, r)
		s.Rules = append(s.Rules, planner.Rule{Spec: r.rsr, Compiled: r.compiled})
	}
	// The peers' ClusterFeatures are listed only for rules that select sources by them.
	needFeatures := false
	for _, r := range s.Rules {
		needFeatures = needFeatures || r.Compiled.NeedsFeatures()
	}
	// Read only: the peers manager's snapshots, not a copy (this runs for every object).
	listed := e.opts.Peers.Shared()
	c := e.sourcesFor(*cache, listed)
	*cache, c.vs, c.ctx, vs.listed = c, vs, ctx, c
	s.Sources = c.sources
	for i := range s.Sources {
		s.Sources[i].Features = nil
		if needFeatures {
			s.Sources[i].Features = peerFeatures(ctx, listed[i])
		}
	}
	policy, err := e.policy(ctx)
	if err != nil {
		return s, vs, err
	}
	s.Policy = policy
	s.LocalCluster = e.localCluster(ctx)
	return s, vs, nil
}
