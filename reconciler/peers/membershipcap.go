package peers

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// A peer's membership (its Clusters, the Secrets of its registry namespace, its
// ClusterFeatures) is read into one cache per peer (membershipCache). A member relays
// what it likes: each informer of that cache holds at most Options.MaxMembershipObjects objects, counted as
// the lists and event streams bring them, and every answer is read through the byte
// limits (limits.go). A peer over either is refused: its cache is stopped and dropped,
// the peer counts as not Ready (so nothing it relays is taken, and the copies made from
// it are kept, as for an unreachable peer), its Cluster's Ready condition says why
// (reason MembershipRefused), and it is read again after Options.RefusalRetry, doubling
// up to maxRefusalBackoff times it while it stays refused.

// DefaultRefusalRetry is the first wait before a refused peer is read again.
const DefaultRefusalRetry = time.Minute

// maxRefusalBackoff bounds the wait before a refused peer is read again, as a multiple
// of the retry period.
const maxRefusalBackoff = 8

func nextRefusalDelay(prev, base time.Duration) time.Duration {
	if prev <= 0 {
		return base
	}
	return min(2*prev, maxRefusalBackoff*base)
}

// TooManyMembershipObjectsError says that a peer offers more objects of a kind to its
// membership cache than the cap.
type TooManyMembershipObjectsError struct {
	Kind  string
	Limit int
}

func (e *TooManyMembershipObjectsError) Error() string {
	return fmt.Sprintf("the peer offers more than %d objects of kind %s to the membership (the cap, --max-peer-membership-objects on this cluster)", e.Limit, e.Kind)
}

// refuse refuses the peer's answers for why: its cache is stopped, and it is not Ready
// until it is read again (run). The first refusal counts until then.
func (c *conn) refuse(why string) {
	c.mu.Lock()
	first := c.refusal == ""
	if first {
		c.refusal = why
	}
	stop := c.stopCache
	c.mu.Unlock()
	if !first {
		return
	}
	if stop != nil {
		stop()
	}
	select {
	case c.refused <- struct{}{}:
	default:
	}
	c.m.log.Info("a peer's answers are refused", "cluster", c.snapshot().Name, "why", why)
	c.set(func(p *Peer) {
		p.State, p.Ready, p.Reason = v1alpha1.ClusterStateFailed, false, v1alpha1.ReasonMembershipRefused
		p.Message = "the peer is not read (its membership and relays are ignored, the copies made from it are kept): " + why + "; it is read again after a while, backing off"
		p.Synced, p.reader, p.config, p.http = false, nil, nil, nil
	})
}

// newInformer is the membership cache's informer constructor: the informer of lw,
// holding at most MaxMembershipObjects objects (refused beyond).
func (c *conn) newInformer(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, idx toolscache.Indexers) toolscache.SharedIndexInformer {
	limit := c.m.opts.MaxMembershipObjects
	kind := reflect.TypeOf(obj).Elem().Name()
	inner := toolscache.ToListerWatcherWithContext(lw)
	count := &memberCount{}
	over := func() error {
		err := &TooManyMembershipObjectsError{Kind: kind, Limit: limit}
		c.refuse(err.Error())
		return err
	}
	capped := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			l, err := inner.ListWithContext(ctx, opts)
			if err != nil {
				return nil, err
			}
			n := meta.LenList(l)
			if n > limit {
				return nil, over()
			}
			count.set(n)
			return l, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			w, err := inner.WatchWithContext(ctx, opts)
			if err != nil {
				return nil, err
			}
			if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
				count.set(0)
			}
			return newCountingWatch(w, count, limit, func() { _ = over() }), nil
		},
	}
	if l, ok := lw.(*toolscache.ListWatch); ok {
		capped.DisableChunking = l.DisableChunking
	}
	return toolscache.NewSharedIndexInformer(capped, obj, resync, idx)
}

// memberCount is the number of objects an informer holds, as its lists and event streams
// say.
type memberCount struct {
	mu sync.Mutex
	n  int
}

func (c *memberCount) set(n int) {
	c.mu.Lock()
	c.n = n
	c.mu.Unlock()
}

func (c *memberCount) add(d int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n += d
	return c.n
}

// countingWatch forwards a watch's events, counting the objects added and deleted, and
// stops (calling over) at one past the cap, before the informer gets that event.
type countingWatch struct {
	inner watch.Interface
	out   chan watch.Event
	stop  chan struct{}
	once  sync.Once
}

func newCountingWatch(inner watch.Interface, count *memberCount, limit int, over func()) watch.Interface {
	w := &countingWatch{inner: inner, out: make(chan watch.Event), stop: make(chan struct{})}
	go func() {
		defer close(w.out)
		for {
			var ev watch.Event
			var ok bool
			select {
			case <-w.stop:
				return
			case ev, ok = <-inner.ResultChan():
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
			}
			if delta > 0 && count.add(0)+delta > limit {
				w.Stop()
				over()
				return
			}
			select {
			case w.out <- ev:
				count.add(delta)
			case <-w.stop:
				return
			}
		}
	}()
	return w
}

func (w *countingWatch) Stop() {
	w.once.Do(func() {
		close(w.stop)
		w.inner.Stop()
	})
}

func (w *countingWatch) ResultChan() <-chan watch.Event { return w.out }
