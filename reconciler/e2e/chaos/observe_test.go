package chaos

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// observer watches the ConfigMaps of one namespace of one peer for a whole scenario and
// counts, per name, how often a copy appeared and how often one went away. It watches the
// API server directly, not through the proxy, and relists after its watch breaks (an API
// server restart): a copy missing from the relist counts as deleted, one with a new UID
// as deleted and added again.
type observer struct {
	cluster  string
	informer cache.SharedIndexInformer

	mu      sync.Mutex
	added   map[string]int
	deleted map[string]int
}

func observe(t *testing.T, cluster string, cs kubernetes.Interface, ns string) *observer {
	t.Helper()
	o := &observer{cluster: cluster, added: map[string]int{}, deleted: map[string]int{}}
	lw := cache.NewFilteredListWatchFromClient(cs.CoreV1().RESTClient(), "configmaps", ns, func(*metav1.ListOptions) {})
	o.informer = cache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, cache.Indexers{})
	_, err := o.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if cm, ok := obj.(*corev1.ConfigMap); ok {
				o.count(o.added, cm.Name)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			before, ok1 := oldObj.(*corev1.ConfigMap)
			after, ok2 := newObj.(*corev1.ConfigMap)
			if ok1 && ok2 && before.UID != after.UID {
				o.count(o.deleted, before.Name)
				o.count(o.added, after.Name)
			}
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if cm, ok := obj.(*corev1.ConfigMap); ok {
				o.count(o.deleted, cm.Name)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go o.informer.RunWithContext(ctx)
	syncCtx, cancelSync := context.WithTimeout(ctx, 30*time.Second)
	defer cancelSync()
	if !cache.WaitForCacheSync(syncCtx.Done(), o.informer.HasSynced) {
		t.Fatalf("watching the ConfigMaps of %s on %s: not synced within 30s", ns, cluster)
	}
	return o
}

func (o *observer) count(m map[string]int, name string) {
	o.mu.Lock()
	m[name]++
	o.mu.Unlock()
}

// caughtUp fails unless the observer has seen exactly the objects of list, at the same
// resource versions: every event up to the list has been counted.
func (o *observer) caughtUp(list []corev1.ConfigMap) error {
	want := map[string]string{}
	for _, cm := range list {
		want[cm.Name] = cm.ResourceVersion
	}
	got := map[string]string{}
	for _, obj := range o.informer.GetStore().List() {
		cm := obj.(*corev1.ConfigMap)
		got[cm.Name] = cm.ResourceVersion
	}
	if !maps.Equal(want, got) {
		return fmt.Errorf("the watch of %s has not caught up: %d objects seen, %d listed", o.cluster, len(got), len(list))
	}
	return nil
}

// verdict returns the names that should exist but whose copy was deleted (or replaced)
// at least once, the names whose copy was created more than once, and how many copies of
// objects deleted at the origin went away as they should.
func (o *observer) verdict(want map[string]map[string]string) (lost, duplicated []string, rightlyDeleted int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for name, n := range o.deleted {
		if _, ok := want[name]; ok {
			lost = append(lost, fmt.Sprintf("%s (%d deletes)", name, n))
		} else {
			rightlyDeleted += n
		}
	}
	for name, n := range o.added {
		if n > 1 {
			duplicated = append(duplicated, fmt.Sprintf("%s (created %d times)", name, n))
		}
	}
	slices.Sort(lost)
	slices.Sort(duplicated)
	return lost, duplicated, rightlyDeleted
}
