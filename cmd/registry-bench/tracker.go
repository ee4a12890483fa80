package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	watchtools "k8s.io/client-go/tools/watch"
)

// deletedMark is the value a tracker records for a deleted object.
const deletedMark = "\x00deleted"

// tracker watches the ConfigMaps of one namespace on one cluster and records, with the
// bench's single clock, when each (name, data["v"]) state and each deletion was first seen.
type tracker struct {
	cluster, namespace string

	mu     sync.Mutex
	seen   map[string]time.Time // name + "=" + value (or deletedMark) -> first seen
	added  map[string]time.Time // name -> first time present
	adds   []string             // names in the order they became present
	notify chan struct{}        // closed and replaced on every event
}

type watcherFunc func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)

func (f watcherFunc) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return f(ctx, opts)
}

// startTracker lists the namespace (for a resource version) and watches it until ctx ends.
func startTracker(ctx context.Context, cs kubernetes.Interface, cluster, namespace string) (*tracker, error) {
	t := &tracker{cluster: cluster, namespace: namespace, seen: map[string]time.Time{}, added: map[string]time.Time{}, notify: make(chan struct{})}
	list, err := cs.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("%s: listing ConfigMaps in %s: %w", cluster, namespace, err)
	}
	now := time.Now()
	for i := range list.Items {
		t.record(&list.Items[i], watch.Added, now)
	}
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, watcherFunc(func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		return cs.CoreV1().ConfigMaps(namespace).Watch(ctx, o)
	}))
	if err != nil {
		return nil, fmt.Errorf("%s: watching ConfigMaps in %s: %w", cluster, namespace, err)
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
				now := time.Now()
				if cm, ok := ev.Object.(*corev1.ConfigMap); ok {
					t.record(cm, ev.Type, now)
				}
			}
		}
	}()
	return t, nil
}

func (t *tracker) record(cm *corev1.ConfigMap, typ watch.EventType, now time.Time) {
	key := cm.Name + "=" + cm.Data["v"]
	t.mu.Lock()
	defer t.mu.Unlock()
	switch typ {
	case watch.Added, watch.Modified:
		if _, ok := t.added[cm.Name]; !ok {
			t.added[cm.Name] = now
			t.adds = append(t.adds, cm.Name)
		}
	case watch.Deleted:
		key = cm.Name + "=" + deletedMark
		delete(t.added, cm.Name)
	default:
		return
	}
	if _, ok := t.seen[key]; !ok {
		t.seen[key] = now
	}
	close(t.notify)
	t.notify = make(chan struct{})
}

// wait returns when name was first seen with value (deletedMark: deleted).
func (t *tracker) wait(ctx context.Context, name, value string) (time.Time, error) {
	key := name + "=" + value
	for {
		t.mu.Lock()
		at, ok := t.seen[key]
		ch := t.notify
		t.mu.Unlock()
		if ok {
			return at, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("%s/%s: %s %s not seen on %s: %w", t.namespace, name, what(value), value, t.cluster, ctx.Err())
		}
	}
}

func what(value string) string {
	if value == deletedMark {
		return "deletion"
	}
	return "value"
}

// waitAll returns when all names are present and the latest time one of them first appeared.
// Each wake-up looks only at the objects that appeared since the last one, so waiting for
// 10,000 objects costs the bench next to nothing while the controllers are measured.
func (t *tracker) waitAll(ctx context.Context, names []string) (time.Time, error) {
	pending := make(map[string]bool, len(names))
	for _, n := range names {
		pending[n] = true
	}
	var last time.Time
	check := func(n string) {
		if !pending[n] {
			return
		}
		if at, ok := t.added[n]; ok {
			delete(pending, n)
			if at.After(last) {
				last = at
			}
		}
	}
	t.mu.Lock()
	for _, n := range names {
		check(n)
	}
	next := len(t.adds)
	t.mu.Unlock()
	for {
		t.mu.Lock()
		for _, n := range t.adds[next:] {
			check(n)
		}
		next = len(t.adds)
		ch := t.notify
		t.mu.Unlock()
		if len(pending) == 0 {
			return last, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("%d of %d objects (%s...) not on %s: %w", len(pending), len(names), strings.TrimRight(names[0], "0123456789"), t.cluster, ctx.Err())
		}
	}
}
