package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/peers"
)

// Which origin a new copy follows must not depend on which peer this controller came to
// see first: planner.Choose picks the lowest origin cluster ID among the candidates, and
// before a create the engine waits, boundedly, for the sources whose view is not known
// yet (unseenSources): then every member, however its controller started, picks alike.

// connectWait bounds how long after its first contact a peer whose connection is still
// being made is waited for (connecting): a member of the group that this cluster knows but
// has not connected to yet, a connection whose first check is under way, one read with
// the bootstrap credential until its issued one opens, or its view of the kind still
// syncing. At a start under load this takes longer than createWait, and a create made
// meanwhile would follow whichever peer came up first. A peer whose connection failed is
// not waited for past its first contact.
const connectWait = time.Minute

// firstContacts remembers when the engine first listed each peer. For createWait after
// that, the peer is in its first contact: its connection, reader token and watches are
// still coming up, so whatever view of it is missing (not connected, not watched yet,
// not synced) is waited for. After that only a view that is syncing is waited for, and a
// connection still being made within connectWait; a peer that has failed is not: a
// choice among the readable sources is made.
type firstContacts struct {
	mu    sync.Mutex
	first map[types.UID]time.Time
}

func newFirstContacts() *firstContacts {
	return &firstContacts{first: map[types.UID]time.Time{}}
}

// age records that peer id is listed at now and returns how long ago it was first
// listed (0 the first time).
func (f *firstContacts) age(id types.UID, now time.Time) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	first, ok := f.first[id]
	if !ok {
		f.first[id] = now
		return 0
	}
	return now.Sub(first)
}

// beingMade reports whether the connection to p is still being made: its first check
// under way (no state, and no check failed yet), or Ready but not yet read with its own
// credential or not synced. A connection whose checks failed (any other state, or no
// state and the reason of a failure) is not.
func beingMade(p peers.Peer) bool {
	switch p.State {
	case "":
		return p.Reason == v1alpha1.ReasonClusterNotConnected
	case v1alpha1.ClusterStateReady:
		return p.Bootstrap || !p.Synced
	}
	return false
}

// unseenSources returns the sources whose view of the object is not known yet, which a
// create waits for: a readable source whose view has not synced (unsynced) unless it
// fails (failing), any source in its first contact whose view is missing, whether it
// is not readable yet, not watched yet or not synced (firstContact, readable), and any
// source whose connection is being made (connecting).
func unseenSources(unsynced, failing, firstContact, readable, connecting map[types.UID]bool) map[types.UID]bool {
	out := map[types.UID]bool{}
	for id := range unsynced {
		if unsynced[id] && (!failing[id] || firstContact[id]) {
			out[id] = true
		}
	}
	for id := range firstContact {
		if firstContact[id] && !readable[id] {
			out[id] = true
		}
	}
	for id := range connecting {
		if connecting[id] {
			out[id] = true
		}
	}
	return out
}

// connectingSources returns the sources a create waits for past createWait: those whose
// connection is being made (beingMade, or not connected at all) within connectWait of
// their first contact (young), and the young readable sources whose view of the kind is
// still syncing (unsynced, and not failing or only not started yet: unstarted).
func connectingSources(beingMade, young, unsynced, failing, unstarted map[types.UID]bool) map[types.UID]bool {
	// Over the sets that are small once the peers are connected, not over young: at a
	// first sync, every peer is young for a minute, and every create asks.
	out := map[types.UID]bool{}
	for id := range beingMade {
		if beingMade[id] && young[id] {
			out[id] = true
		}
	}
	for id := range unsynced {
		if unsynced[id] && young[id] && (!failing[id] || unstarted[id]) {
			out[id] = true
		}
	}
	return out
}

// waitRetry is how soon a create that waits for the unseen sources is looked at again:
// soon while a readable source's view is syncing, less often while the only ones waited
// for are peers not readable yet (their views, once synced, queue the objects they have;
// a second is what a create of an object they do not have may lose).
func waitRetry(unseen, readable map[types.UID]bool) time.Duration {
	for id := range unseen {
		if unseen[id] && readable[id] {
			return createRetry
		}
	}
	return unsyncedRetry
}

// memberList is what unlistedMembers reads of the local Clusters: the IDs of the
// members a create may wait for. Listing the Clusters for every create cost a twelfth of
// a first sync at 100 peers; the list is made again only after a change of a Cluster
// (changed, called by the engine's handler of the Clusters' events), and on every call
// when no handler calls changed (tracked false: an engine not started, in unit tests).
type memberList struct {
	// gen counts the changes; made is the gen the list was made at.
	gen     atomic.Uint64
	tracked atomic.Bool
	mu      sync.Mutex
	made    uint64
	ok      bool
	ids     []types.UID
}

// changed records a change of a Cluster.
func (m *memberList) changed() { m.gen.Add(1) }

// waitable returns the IDs of the members of the group this cluster knows (its peer
// Clusters, localID excluded) that are not disabled or being deleted, and whose
// Cluster's state says they may still be connected: no state yet, or last seen Ready.
// The caller must not change the slice.
func (m *memberList) waitable(ctx context.Context, c client.Reader, localID types.UID) []types.UID {
	gen := m.gen.Load() // before the list: a change while it is made moves it
	tracked := m.tracked.Load()
	m.mu.Lock()
	if tracked && m.ok && m.made == gen {
		ids := m.ids
		m.mu.Unlock()
		return ids
	}
	m.mu.Unlock()
	var list v1alpha1.ClusterList
	// Read only: the cache's Clusters themselves, not deep copies.
	if err := c.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	var ids []types.UID
	for i := range list.Items {
		c := &list.Items[i]
		id := c.Spec.ClusterID
		if id == "" || id == localID || c.Disabled() || c.DeletionTimestamp != nil {
			continue
		}
		if st := c.Status.State; st != "" && st != v1alpha1.ClusterStateReady {
			continue
		}
		ids = append(ids, id)
	}
	m.mu.Lock()
	m.made, m.ok, m.ids = gen, true, ids
	m.mu.Unlock()
	return ids
}
