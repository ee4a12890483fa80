package syncrules

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/e2e/harness"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

// clusterIDs returns the cluster ID (kube-system UID) of each named cluster of the bed.
func clusterIDs(t *testing.T, names ...string) map[string]types.UID {
	t.Helper()
	out := map[string]types.UID{}
	for _, n := range names {
		id, err := bed.Cluster(n).KubeSystemUID(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		out[n] = id
	}
	return out
}

// lowestID returns which of the named clusters has the lowest cluster ID: the origin a
// new copy follows when they all offer the object.
func lowestID(t *testing.T, names ...string) string {
	t.Helper()
	ids := clusterIDs(t, names...)
	sorted := append([]string(nil), names...)
	sort.Slice(sorted, func(i, j int) bool { return ids[sorted[i]] < ids[sorted[j]] })
	return sorted[0]
}

const originNS = "origin-test"

// originSighting is one state of a copy seen by the test: which object, from which
// origin, with what content.
type originSighting struct {
	uid    types.UID
	origin string
	from   string
}

// TestDeterministicOrigin: when two members offer the same object, the third member's
// copy follows the one with the lower cluster ID, whatever the order in which the
// clusters come up. Each of the three clusters offers two objects and is the sink of a
// third, offered by the two others. The controllers start one after the other, each
// cluster's API server reachable by its peers only from when its controller starts: once
// in the order of the cluster IDs, once in the reverse order. Each time every copy follows
// the origin with the lower ID, is written exactly once (a create; no update, no
// delete: no provisional origin, no flapping), and nothing more is written.
func TestDeterministicOrigin(t *testing.T) {
	testbed.SkipIfNoAssets(t)
	names := []string{"first", "second", "third"}
	cl, ctls := harness.FormGroupControllers(t, bed, nil, names...)
	harness.Grant(t, cl, "", "configmaps")
	ids := clusterIDs(t, names...)
	byID := append([]string(nil), names...)
	sort.Slice(byID, func(i, j int) bool { return ids[byID[i]] < ids[byID[j]] })
	t.Logf("clusters by ID: %s (%s), %s (%s), %s (%s)", byID[0], ids[byID[0]], byID[1], ids[byID[1]], byID[2], ids[byID[2]])

	// The clients of the test reach the API servers directly: cutting a cluster only
	// cuts its peers off.
	direct := map[string]client.Client{}
	for _, n := range names {
		c, err := client.New(bed.Cluster(n).DirectConfig(), client.Options{Scheme: cl[n].Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		direct[n] = c
	}
	ctx := context.Background()
	for _, n := range names {
		if err := direct[n].Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: originNS}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	applyRule(t, cl["first"], `
apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata:
  name: origins
spec:
  groupVersionKind: {version: v1, kind: ConfigMap}
  rules:
  - match:
    - namespaces: [`+originNS+`]
`)
	t.Cleanup(func() {
		for _, n := range names {
			_ = bed.Cluster(n).Heal()
			_ = direct[n].Delete(ctx, &v1alpha1.ResourceSyncRule{ObjectMeta: metav1.ObjectMeta{Name: "origins"}})
			_ = direct[n].DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(originNS))
		}
	})
	harness.Eventually(t, 30*time.Second, "the rule reaches every member", func() error {
		for _, n := range names {
			if _, err := rule(direct[n], "origins"); err != nil {
				return fmt.Errorf("%s: %w", n, err)
			}
		}
		return nil
	})
	for _, n := range names {
		ctls[n].Stop(t)
	}

	// Every pair of clusters offers an object; the third cluster is its sink.
	type offer struct {
		name, sink string
		origins    []string
	}
	var offers []offer
	for i, sink := range names {
		origins := slices.Delete(slices.Clone(names), i, i+1)
		o := offer{name: "shared-" + strings.Join(origins, "-"), sink: sink, origins: origins}
		offers = append(offers, o)
		for _, origin := range origins {
			if err := direct[origin].Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: originNS, Name: o.name},
				Data:       map[string]string{"from": origin},
			}); err != nil {
				t.Fatal(err)
			}
		}
	}

	for _, order := range [][]string{byID, {byID[2], byID[1], byID[0]}} {
		t.Run("started in the order "+strings.Join(order, ", "), func(t *testing.T) {
			// No copies, every cluster unreachable by its peers and no controller running.
			for _, o := range offers {
				err := direct[o.sink].Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: originNS, Name: o.name}})
				if err != nil && !apierrors.IsNotFound(err) {
					t.Fatal(err)
				}
			}
			// The scrapers are made first (a token each, through the proxy), so that the
			// start times below are kept.
			metrics, addrs := map[string]harness.Metrics{}, map[string]string{}
			for _, n := range names {
				addrs[n] = harness.FreeAddr(t)
				metrics[n] = harness.MetricsAt(t, bed.Cluster(n), addrs[n])
			}
			for _, n := range names {
				if err := bed.Cluster(n).Cut(); err != nil {
					t.Fatal(err)
				}
			}

			// Watch the sinks from now on: every state of every copy is recorded.
			var mu sync.Mutex
			seen := map[string][]originSighting{}
			pollCtx, stopPolling := context.WithCancel(ctx)
			var polling sync.WaitGroup
			polling.Add(1)
			go func() {
				defer polling.Done()
				for pollCtx.Err() == nil {
					for _, o := range offers {
						var cm corev1.ConfigMap
						if err := direct[o.sink].Get(pollCtx, client.ObjectKey{Namespace: originNS, Name: o.name}, &cm); err != nil {
							continue
						}
						s := originSighting{uid: cm.UID, origin: cm.Annotations[v1alpha1.OwnershipAnnotation], from: cm.Data["from"]}
						mu.Lock()
						if l := seen[o.name]; len(l) == 0 || l[len(l)-1] != s {
							seen[o.name] = append(l, s)
						}
						mu.Unlock()
					}
					time.Sleep(50 * time.Millisecond)
				}
			}()
			defer func() { stopPolling(); polling.Wait() }()

			// The clusters come up one after the other, 1.5 s apart: each reachable by its
			// peers from when its controller starts. (A controller retries a peer it cannot
			// reach after 1, 2, 4 s...: the last cluster is reachable by the first one's
			// third try, well within the first one's 10 s wait.)
			started := time.Now().Add(-time.Second)
			for i, n := range order {
				if i > 0 {
					time.Sleep(1500 * time.Millisecond)
				}
				if err := bed.Cluster(n).Heal(); err != nil {
					t.Fatal(err)
				}
				ctls[n] = harness.Serve(t, bed.Cluster(n), "--metrics-bind-address", addrs[n])
			}
			for _, n := range order {
				harness.Eventually(t, 60*time.Second, "the controller of "+n+" leads", func() error {
					var l coordinationv1.Lease
					if err := direct[n].Get(ctx, client.ObjectKey{Namespace: v1alpha1.DefaultNamespace, Name: "registry-e2e"}, &l); err != nil {
						return err
					}
					if l.Spec.HolderIdentity == nil || l.Spec.AcquireTime == nil || l.Spec.AcquireTime.Time.Before(started) {
						return fmt.Errorf("the lease is not acquired by the new controller: %+v", l.Spec)
					}
					return nil
				})
			}

			want := func(o offer) originSighting {
				lowest := o.origins[0]
				if ids[o.origins[1]] < ids[lowest] {
					lowest = o.origins[1]
				}
				return originSighting{origin: string(ids[lowest]), from: lowest}
			}
			harness.Eventually(t, 60*time.Second, "every sink has its copy", func() error {
				for _, o := range offers {
					var cm corev1.ConfigMap
					if err := direct[o.sink].Get(ctx, client.ObjectKey{Namespace: originNS, Name: o.name}, &cm); err != nil {
						return fmt.Errorf("%s: %w", o.sink, err)
					}
				}
				return nil
			})
			// Longer than the wait before a create for a view that is syncing (10 s; a
			// connection still being made is waited for up to a minute, but every sink
			// has its copy already): a copy made from a provisional origin would have been
			// replaced by now, and any later write would be visible.
			time.Sleep(12 * time.Second)
			stopPolling()
			polling.Wait()

			mu.Lock()
			defer mu.Unlock()
			for _, o := range offers {
				w := want(o)
				got := seen[o.name]
				if len(got) != 1 || got[0].origin != w.origin || got[0].from != w.from {
					t.Errorf("%s's copy of %s (offered by %s): seen %+v, want only the copy of %s (origin %s)",
						o.sink, o.name, strings.Join(o.origins, " and "), got, w.from, w.origin)
				}
			}
			for _, n := range names {
				// Every op counts: create, update, delete and recreate.
				for op, want := range map[string]float64{`op="create"`: 1, "": 1} {
					sel := []string{`rule="origins"`}
					if op != "" {
						sel = append(sel, op)
					}
					got, err := harness.MetricSum(metrics[n], "kubectl_registry_sync_writes_total", sel...)
					if err != nil {
						t.Fatal(err)
					}
					if got != want {
						t.Errorf("the controller of %s made %v writes %v, want %v", n, got, sel, want)
					}
				}
			}
			for _, n := range names {
				ctls[n].Stop(t)
			}
		})
	}
}
