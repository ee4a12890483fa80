package views

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/peers"
)

// A member is a stranger: it may offer any number of objects to a rule. The watch of one
// peer's scope (a kind, in a namespace or in all of them, under the label selector of the
// rules that read it) holds at most the cap of them (Ensure's limit: the engine's
// MaxPeerObjects, --max-peer-objects). Over the cap, the scope is not
// watched, so its objects are not kept in memory: the objects are counted as the lists and
// event streams bring them, before the informer queues them (streamCount), and the informer
// stops at cap+1, while it lists (the initial stream of a watch-list, or the pages of a
// list) or once it watches. A scope over the cap is a view
// that failed, not a view of a peer without objects: the copies already made from that
// peer are kept as they are (deletion needs a positive observation). The scope is tried
// again after a while, backing off, and syncs again once the peer is back under the cap.

// DefaultMaxPeerObjects is the default cap on the objects one peer's watch of a scope
// holds: twice the 10,000 synced objects that make bench's memory target (so that a
// group syncing that many from one namespace runs far from it), and low enough that one
// peer filling one scope stays well under the Deployment's memory limit.
const DefaultMaxPeerObjects = 20000

// DefaultOverCapRetry is how long a scope over the cap waits before it is tried again;
// the wait doubles on each refusal in a row, up to maxOverCapBackoff times it.
const DefaultOverCapRetry = time.Minute

// maxOverCapBackoff bounds the backoff of a scope over the cap, as a multiple of the
// retry period.
const maxOverCapBackoff = 8

// overCapPageSize is the page size of the lists that count a scope's objects when the
// API server does not stream the initial objects of a watch.
const overCapPageSize = 500

// TooManyObjectsError says that a peer offers more objects in a scope than the cap.
type TooManyObjectsError struct {
	// Peer is the peer's Cluster name; Kind the kind; Namespace the namespace read (""
	// for all namespaces, or a cluster-scoped kind).
	Peer, Kind, Namespace string
	// Seen is how many objects were seen before the watch stopped (more than Limit).
	Seen int
	// Limit is the cap.
	Limit int
	// Retry is how long the scope waits, from the refusal, before it is tried again.
	Retry time.Duration
	// TooLarge is set when the scope was refused not for its count but because the peer
	// answered it over a byte limit (peers.LimitTransport): a response over
	// --max-peer-response-bytes, or an object or watch event over
	// --max-peer-object-bytes. Seen is then 0.
	TooLarge *peers.TooLargeError
}

// Reason is the rule condition reason of the refusal: TooManyObjects, or
// ResponseTooLarge for a scope refused over a byte limit.
func (e *TooManyObjectsError) Reason() string {
	if e.TooLarge != nil {
		return v1alpha1.ReasonResponseTooLarge
	}
	return v1alpha1.ReasonTooManyObjects
}

// Error says which peer, kind and namespace, over which cap or byte limit, that the
// copies are kept, and when the scope is tried again.
func (e *TooManyObjectsError) Error() string {
	where := "in all namespaces"
	if e.Namespace != "" {
		where = "in namespace " + e.Namespace
	}
	if e.TooLarge != nil {
		return fmt.Sprintf("peer %s answered the watch of kind %s %s over a byte limit (%s): "+
			"it is not watched and the copies already made from %s are kept as they are; tried again every %s",
			e.Peer, e.Kind, where, e.TooLarge.Error(), e.Peer, e.Retry.Round(time.Second))
	}
	return fmt.Sprintf("peer %s offers more than %d objects of kind %s %s (at least %d seen; the cap is %d per watch, --max-peer-objects on this cluster): "+
		"they are not watched and the copies already made from %s are kept as they are; tried again every %s",
		e.Peer, e.Limit, e.Kind, where, e.Seen, e.Limit, e.Peer, e.Retry.Round(time.Second))
}

// overCap is the state of a scope over the cap.
type overCap struct {
	// selector is the label selector the scope was refused with: another one is tried
	// at once.
	selector string
	seen     int
	limit    int
	// tooLarge is set when the scope was refused over a byte limit.
	tooLarge *peers.TooLargeError
	// retry is when the scope is tried again; delay the last wait, for the backoff.
	retry time.Time
	delay time.Duration
}

func (c *overCap) err(s Scope) *TooManyObjectsError {
	return &TooManyObjectsError{Peer: s.Cluster, Kind: s.GVK.Kind, Namespace: s.Namespace, Seen: c.seen, Limit: c.limit, Retry: c.delay, TooLarge: c.tooLarge}
}

// nextOverCapDelay is the wait before a scope refused again is tried: base the first
// time, then twice the last wait, up to maxOverCapBackoff times base.
func nextOverCapDelay(prev, base time.Duration) time.Duration {
	if prev <= 0 {
		return base
	}
	return min(2*prev, maxOverCapBackoff*base)
}

// overLimit reports whether n objects are more than the cap limit (0: no cap).
func overLimit(n, limit int) bool {
	return limit > 0 && n > limit
}

// listCapped lists through list, in pages, until it has every object or more than limit
// (0: no cap, one list as asked). Over the cap it returns a nil list and how many objects
// it saw: at most limit+overCapPageSize are held at once.
func listCapped(ctx context.Context, opts metav1.ListOptions, limit int, list func(context.Context, metav1.ListOptions) (*cachedList, error)) (*cachedList, int, error) {
	if limit <= 0 {
		l, err := list(ctx, opts)
		if err != nil {
			return nil, 0, err
		}
		return l, len(l.Items), nil
	}
	// Pages are read from a consistent snapshot (resourceVersion unset): the watch cache
	// may ignore the limit of a list at resourceVersion 0.
	opts.ResourceVersion, opts.ResourceVersionMatch, opts.Continue = "", "", ""
	var out *cachedList
	for {
		opts.Limit = int64(min(overCapPageSize, limit+1))
		page, err := list(ctx, opts)
		if err != nil {
			return nil, 0, err
		}
		if out == nil {
			out = page
		} else {
			out.Items = append(out.Items, page.Items...)
		}
		if overLimit(len(out.Items), limit) {
			return nil, len(out.Items), nil
		}
		if page.Continue == "" {
			out.Continue = ""
			return out, len(out.Items), nil
		}
		opts.Continue = page.Continue
	}
}

// streamCount is the number of objects a scope's informer holds, as its lists and event
// streams say: set by a list, reset by a watch-list stream (its initial events rebuild the
// whole state), and moved by the Added and Deleted events of every watch, which resume
// from where the last one stopped. It is counted before the informer queues anything, so
// the informer never holds more than one object over the cap.
type streamCount struct {
	mu sync.Mutex
	n  int
}

func (c *streamCount) set(n int) {
	c.mu.Lock()
	c.n = n
	c.mu.Unlock()
}

func (c *streamCount) add(d int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n += d
	return c.n
}

// cappedWatch forwards a watch's events, counting the objects in count (from zero for a
// watch-list stream: initial) and calling over, then stopping, once there are more than
// limit; synced is called when the initial events of a watch-list end.
type cappedWatch struct {
	inner watch.Interface
	out   chan watch.Event
	stop  chan struct{}
	once  sync.Once
}

func newCappedWatch(inner watch.Interface, count *streamCount, initial bool, limit int, over func(seen int), synced func()) watch.Interface {
	c := &cappedWatch{inner: inner, out: make(chan watch.Event), stop: make(chan struct{})}
	if initial {
		count.set(0)
	}
	go c.run(count, initial, limit, over, synced)
	return c
}

func (c *cappedWatch) run(count *streamCount, initial bool, limit int, over func(int), synced func()) {
	defer close(c.out)
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-c.stop:
			return
		case ev, ok = <-c.inner.ResultChan():
			if !ok {
				return
			}
		}
		delta := 0
		switch ev.Type {
		case watch.Added:
			delta = 1
		case watch.Deleted:
			delta = -1
		case watch.Bookmark:
			if initial && initialEventsEnd(ev.Object) {
				initial = false
				synced()
			}
		}
		// An event counts once delivered: one the informer never got (stopped meanwhile)
		// comes again on the watch that resumes.
		if n := count.add(0) + delta; delta != 0 && overLimit(n, limit) {
			c.Stop()
			over(n)
			return
		}
		select {
		case c.out <- ev:
			count.add(delta)
		case <-c.stop:
			return
		}
	}
}

func (c *cappedWatch) Stop() {
	c.once.Do(func() {
		close(c.stop)
		c.inner.Stop()
	})
}

func (c *cappedWatch) ResultChan() <-chan watch.Event { return c.out }

// initialEventsEnd reports whether a bookmark ends the initial events of a watch-list.
func initialEventsEnd(o any) bool {
	m, err := meta.Accessor(o)
	return err == nil && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true"
}
