package main

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	watchtools "k8s.io/client-go/tools/watch"
)

// copier is the floor: it watches one namespace on the origin and writes each event to the
// peers as it comes (create, update, delete), with admin clients and no controller logic.
// Each peer has `workers` goroutines; an object's events always go to the same one, in order.
type copier struct {
	writes atomic.Int64
	errors atomic.Int64

	mu sync.Mutex
	// times are the durations of its successful write requests since the last
	// takeWriteTimes: what the registry's write stage is compared with.
	times []time.Duration
}

// timed runs the write request f and records its duration when it succeeds.
func (c *copier) timed(f func() error) error {
	start := time.Now()
	err := f()
	if err == nil {
		c.mu.Lock()
		c.times = append(c.times, time.Since(start))
		c.mu.Unlock()
	}
	return err
}

// takeWriteTimes returns the durations recorded since the last call and forgets them.
func (c *copier) takeWriteTimes() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.times
	c.times = nil
	return out
}

func startCopier(ctx context.Context, origin kubernetes.Interface, peers []kubernetes.Interface, namespace string, workers int) (*copier, error) {
	c := &copier{}
	list, err := origin.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, watcherFunc(func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		return origin.CoreV1().ConfigMaps(namespace).Watch(ctx, o)
	}))
	if err != nil {
		return nil, err
	}
	var queues [][]chan watch.Event
	for _, p := range peers {
		var qs []chan watch.Event
		for range workers {
			q := make(chan watch.Event, 4096)
			qs = append(qs, q)
			go c.work(ctx, p, q)
		}
		queues = append(queues, qs)
	}
	go func() {
		defer rw.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-rw.ResultChan():
				if !ok {
					return
				}
				cm, ok := ev.Object.(*corev1.ConfigMap)
				if !ok {
					continue
				}
				h := fnv.New32a()
				_, _ = h.Write([]byte(cm.Name))
				for _, qs := range queues {
					qs[int(h.Sum32())%len(qs)] <- ev
				}
			}
		}
	}()
	return c, nil
}

func (c *copier) work(ctx context.Context, peer kubernetes.Interface, q <-chan watch.Event) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-q:
			if err := c.apply(ctx, peer, ev); err != nil && ctx.Err() == nil {
				c.errors.Add(1)
				fmt.Fprintln(os.Stderr, "floor copier:", err)
			}
		}
	}
}

func (c *copier) apply(ctx context.Context, peer kubernetes.Interface, ev watch.Event) error {
	src := ev.Object.(*corev1.ConfigMap)
	cms := peer.CoreV1().ConfigMaps(src.Namespace)
	switch ev.Type {
	case watch.Deleted:
		c.writes.Add(1)
		err := c.timed(func() error { return cms.Delete(ctx, src.Name, metav1.DeleteOptions{}) })
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	case watch.Added, watch.Modified:
		cp := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: src.Name, Namespace: src.Namespace, Labels: src.Labels, Annotations: src.Annotations},
			Data:       src.Data, BinaryData: src.BinaryData,
		}
		if ev.Type == watch.Added {
			c.writes.Add(1)
			err := c.timed(func() error { _, err := cms.Create(ctx, cp, metav1.CreateOptions{}); return err })
			if !apierrors.IsAlreadyExists(err) {
				return err
			}
		}
		// ConfigMaps allow unconditional updates: one request, no Get.
		c.writes.Add(1)
		err := c.timed(func() error { _, err := cms.Update(ctx, cp, metav1.UpdateOptions{}); return err })
		if apierrors.IsNotFound(err) {
			_, err = cms.Create(ctx, cp, metav1.CreateOptions{})
		}
		return err
	}
	return nil
}
