package engine

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Which origin a new copy follows must not depend on which peer this controller came to
// see first: planner.Choose picks the lowest origin cluster ID among the candidates, and
// before a create the engine waits, boundedly, for the sources whose view is not known
// yet (unseenSources): then every member, however its controller started, picks alike.

// firstContacts remembers when the engine first listed each peer. For createWait after
// that, the peer is in its first contact: its connection, reader token and watches are
// still coming up, so whatever view of it is missing (not connected, not watched yet,
// not synced) is waited for. After that only a view that is syncing is waited for; a
// peer that has failed is not: a choice among the readable sources is made.
type firstContacts struct {
	mu    sync.Mutex
	first map[types.UID]time.Time
}

func newFirstContacts() *firstContacts {
	return &firstContacts{first: map[types.UID]time.Time{}}
}

// seen records that peer id is listed at now and reports whether it is still in its
// first contact (listed first less than bound ago).
func (f *firstContacts) seen(id types.UID, now time.Time, bound time.Duration) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	first, ok := f.first[id]
	if !ok {
		f.first[id] = now
		return true
	}
	return now.Sub(first) < bound
}

// unseenSources returns the sources whose view of the object is not known yet, which a
// create waits for: a readable source whose view has not synced (unsynced) unless it
// fails (failing), and any source in its first contact whose view is missing, whether it
// is not readable yet, not watched yet or not synced (firstContact, readable).
func unseenSources(unsynced, failing, firstContact, readable map[types.UID]bool) map[types.UID]bool {
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
