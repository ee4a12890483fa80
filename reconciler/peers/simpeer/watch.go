package simpeer

import (
	"errors"
	"fmt"
)

// Errors of starting a watch from a resourceVersion.
var (
	// errExpired: the version is older than the store's history (410 Gone, reason
	// Expired, as an API server answers after a compaction).
	errExpired = errors.New("too old resource version")
	// errTooLarge: the version is newer than the store's (an API server waits up to 3 s
	// for it, then answers 504 with cause ResourceVersionTooLarge).
	errTooLarge = errors.New("too large resource version")
)

// watcherBuffer is how many events a watcher may be behind; one further behind is
// ended, as an API server's watch cache ends a watcher that does not keep up (the
// client resumes from the last version it read).
const watcherBuffer = 1024

// watcher is one open watch of a resource.
type watcher struct {
	resource  string
	namespace string
	sel       selectors
	ch        chan event
	// overflow is closed when the watcher fell behind by more than its buffer; dropped
	// says so, under the store's lock.
	overflow chan struct{}
	dropped  bool
}

// deliver hands ev to the watcher, or ends it when it is too far behind. Called with the
// store's lock held.
func (w *watcher) deliver(ev event) {
	if w.dropped {
		return
	}
	select {
	case w.ch <- ev:
	default:
		w.dropped = true
		close(w.overflow)
	}
}

// translate returns what the watcher sees of ev: an API server's watch with selectors
// sends a change that makes an object match as ADDED, and one that makes it stop
// matching as DELETED (with the object's new state).
func (w *watcher) translate(ev event) (typ string, o *object, ok bool) {
	match := func(o *object) bool {
		return o != nil && (w.namespace == "" || o.namespace == w.namespace) && w.sel.matches(o)
	}
	was, is := match(ev.old), match(ev.new)
	switch {
	case ev.typ == "DELETED" && was:
		return "DELETED", ev.new, true
	case ev.typ == "DELETED":
		return "", nil, false
	case was && is:
		return "MODIFIED", ev.new, true
	case is:
		return "ADDED", ev.new, true
	case was:
		return "DELETED", ev.new, true
	}
	return "", nil, false
}

// watchStart is what a new watch sends first: the current objects (initial) at version
// rv, or the events of the history after the version it resumes from (replay).
type watchStart struct {
	initial []*object
	replay  []event
	rv      uint64
}

// watch registers a watcher of resource r in namespace ("" for all) and returns what it
// sends first: with initial, every object that matches now (a watch from version "" or
// "0", or a watch-list); otherwise the history after version from.
func (s *store) watch(r Resource, namespace string, sel selectors, initial bool, from uint64) (*watcher, watchStart, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.objects[r.Key()]; !ok {
		return nil, watchStart{}, fmt.Errorf("%w: %s", ErrUnknown, r.Key())
	}
	start := watchStart{rv: s.rv}
	switch {
	case initial:
		start.initial = s.listLocked(r, namespace, sel)
	case from < s.compacted:
		return nil, watchStart{}, errExpired
	case from > s.rv:
		return nil, watchStart{}, errTooLarge
	default:
		for _, ev := range s.history {
			if ev.rv > from && ev.resource == r.Key() {
				start.replay = append(start.replay, ev)
			}
		}
	}
	w := &watcher{resource: r.Key(), namespace: namespace, sel: sel, ch: make(chan event, watcherBuffer), overflow: make(chan struct{})}
	if s.watchers[r.Key()] == nil {
		s.watchers[r.Key()] = map[*watcher]struct{}{}
	}
	s.watchers[r.Key()][w] = struct{}{}
	return w, start, nil
}

// unwatch removes the watcher.
func (s *store) unwatch(w *watcher) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.watchers[w.resource], w)
}

// currentRV returns the store's resourceVersion.
func (s *store) currentRV() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rv
}
