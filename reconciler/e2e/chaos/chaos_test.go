package chaos

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/e2e/harness"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

var (
	objects = flag.Int("chaos.objects", 1000, "ConfigMaps written on the origin in each scenario's burst")
	bound   = flag.Duration("chaos.bound", 3*time.Minute, "how long each scenario may take from the start of its burst until both peers hold exactly the origin's objects")
)

const (
	origin = "origin"
	peer1  = "peer1"
	peer2  = "peer2"

	// burstWorkers write the burst concurrently: "created at once".
	burstWorkers = 16
	// minCut is how long the origin stays cut off at least: long enough for the peers
	// to declare it unreachable (health interval 300ms x 3) and for their watches to fail.
	minCut = 10 * time.Second
	// What client-go's leader election logs when it campaigns and when it takes the Lease.
	leaseWanted   = "Attempting to acquire leader lease"
	leaseAcquired = "Successfully acquired lease"
	// What the controller logs when it starts its reconcilers as leader, and when it
	// stops them after failing to renew the Lease.
	leading   = "leading: starting the reconcilers"
	leaseLost = "lost the leader election Lease"
	// leaseName is the Lease harness.Serve elects the leader with.
	leaseName = "registry-e2e"
	// takeOverBound is how soon the standby of a crashed leader must lead and run its
	// reconcilers with the default leader election timing (15 s), plus slack for a
	// loaded machine.
	takeOverBound = 15*time.Second + 5*time.Second
)

var bed *testbed.Bed

func TestMain(m *testing.M) {
	os.Exit(testbed.Main(m, testbed.Options{Names: []string{origin, peer1, peer2}, CRDDirectoryPaths: []string{"../../../manifests/crds"}}, &bed))
}

// TestChaos forms a group of three, then runs each fault against a burst of its own (in
// a namespace of its own) while the controllers keep running from one scenario to the
// next: no scenario may leave a controller that needs a restart.
func TestChaos(t *testing.T) {
	testbed.SkipIfNoAssets(t)
	if *objects < 3 {
		t.Fatalf("-chaos.objects must be at least 3, got %d", *objects)
	}
	g := formGroup(t)

	t.Run("a peer's API server is stopped and restarted", func(t *testing.T) {
		c := bed.Cluster(peer1)
		var stopped time.Time
		t.Cleanup(func() {
			if err := c.StartAPIServer(context.Background()); err != nil {
				t.Errorf("starting the API server of %s in cleanup: %v", c.Name, err)
			}
		})
		g.run(t, "apiserver", func(t *testing.T) {
			stopped = time.Now()
			if err := c.StopAPIServer(); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T) {
			// Down for longer than the leader election's renew deadline: the
			// controller loses its Lease and must ride the outage out.
			time.Sleep(time.Until(stopped.Add(minCut)))
			if err := c.StartAPIServer(t.Context()); err != nil {
				t.Fatal(err)
			}
			t.Logf("the API server of %s was down for %s", c.Name, since(stopped))
		})
		// g.run checked that the controller did not exit; it rode the outage out by
		// stopping its reconcilers and leading again.
		for _, ctl := range g.ctl[c.Name] {
			if !ctl.LogContains(leaseLost) {
				t.Errorf("the controller of %s (pid %d) did not log %q: the outage did not exercise the ride-out", c.Name, ctl.Pid(), leaseLost)
			}
		}
	})

	t.Run("the connection to the origin is cut and healed", func(t *testing.T) {
		c := bed.Cluster(origin)
		var cut time.Time
		t.Cleanup(func() { _ = c.Heal() })
		g.run(t, "cut", func(t *testing.T) {
			cut = time.Now()
			if err := c.Cut(); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T) {
			time.Sleep(time.Until(cut.Add(minCut)))
			if err := c.Heal(); err != nil {
				t.Fatal(err)
			}
			t.Logf("the origin was cut off for %s", since(cut))
		})
	})

	t.Run("a controller is killed with SIGKILL and restarted", func(t *testing.T) {
		var killed time.Time
		g.run(t, "sigkill", func(t *testing.T) {
			killed = time.Now()
			for _, ctl := range g.ctl[peer2] {
				ctl.Kill(t)
			}
			g.ctl[peer2] = nil
		}, func(t *testing.T) {
			g.ctl[peer2] = []*harness.Controller{harness.Serve(g.t, bed.Cluster(peer2))}
			t.Logf("the controller of %s was restarted %s after SIGKILL", peer2, since(killed))
		})
	})

	t.Run("the leader of two replicas is killed", func(t *testing.T) {
		standby := harness.Serve(g.t, bed.Cluster(peer1))
		var leader *harness.Controller
		harness.Eventually(t, 30*time.Second, "one leader and a standby on "+peer1, func() error {
			if !standby.LogContains(leaseWanted) {
				return errors.New("the second replica does not campaign yet")
			}
			var leaders []*harness.Controller
			for _, ctl := range g.ctl[peer1] {
				if ctl.LogContains(leaseAcquired) {
					leaders = append(leaders, ctl)
				}
			}
			if standby.LogContains(leaseAcquired) || len(leaders) != 1 {
				return fmt.Errorf("%d leaders among the first replicas, standby leads: %v", len(leaders), standby.LogContains(leaseAcquired))
			}
			leader = leaders[0]
			return nil
		})
		g.ctl[peer1] = append(g.ctl[peer1], standby)
		leases := g.direct[peer1].CoordinationV1().Leases(v1alpha1.DefaultNamespace)
		var takeOver <-chan takeOverTimes
		g.run(t, "leader", func(t *testing.T) {
			lease, err := leases.Get(t.Context(), leaseName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			holder := ptr.Deref(lease.Spec.HolderIdentity, "")
			killed := time.Now()
			leader.Kill(t)
			g.ctl[peer1] = slices.DeleteFunc(g.ctl[peer1], func(c *harness.Controller) bool { return c == leader })
			// Time the take-over while the burst goes on: the Lease changes hands, then
			// the standby starts its reconcilers.
			takeOver = watchTakeOver(t.Context(), killed, holder, standby, func(ctx context.Context) (string, error) {
				l, err := leases.Get(ctx, leaseName, metav1.GetOptions{})
				if err != nil {
					return "", err
				}
				return ptr.Deref(l.Spec.HolderIdentity, ""), nil
			})
		}, func(t *testing.T) {
			var took takeOverTimes
			select {
			case took = <-takeOver:
			case <-time.After(*bound):
				t.Fatalf("the standby of %s did not take over within %s of the leader's SIGKILL", peer1, *bound)
			}
			if took.lease == 0 || took.leading == 0 {
				t.Fatalf("the standby of %s did not take over: Lease taken after %s, reconcilers started after %s", peer1, took.lease, took.leading)
			}
			t.Logf("the standby of %s took the Lease %s and started its reconcilers %s after the leader was killed", peer1, took.lease, took.leading)
			if took.leading > takeOverBound {
				t.Errorf("the standby of %s started its reconcilers %s after the leader was killed, want at most %s (15 s by default, plus slack)", peer1, took.leading, takeOverBound)
			}
		})
	})
}

// takeOverTimes are how long after a leader's crash its standby held the Lease and had
// started its reconcilers; zero when it did not.
type takeOverTimes struct{ lease, leading time.Duration }

// watchTakeOver polls, every 100ms from killed on, who holds the Lease and whether the
// standby has started its reconcilers, and sends when both happened, or what happened
// when ctx is done or *bound has passed.
func watchTakeOver(ctx context.Context, killed time.Time, holder string, standby *harness.Controller, holderNow func(context.Context) (string, error)) <-chan takeOverTimes {
	out := make(chan takeOverTimes, 1)
	go func() {
		var took takeOverTimes
		defer func() { out <- took }()
		for time.Since(killed) < *bound && ctx.Err() == nil {
			if took.lease == 0 {
				if h, err := holderNow(ctx); err == nil && h != "" && h != holder {
					took.lease = time.Since(killed).Round(time.Millisecond)
				}
			}
			if took.leading == 0 && standby.LogContains(leading) {
				took.leading = time.Since(killed).Round(time.Millisecond)
			}
			if took.lease != 0 && took.leading != 0 {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return out
}

// group is the three clusters with their controllers.
type group struct {
	t        *testing.T // the top test: the controllers live as long as it does
	admin    map[string]client.Client
	direct   map[string]kubernetes.Interface // admin, straight to the API server (not cut)
	originID types.UID
	// ctl holds the controller replicas of each cluster that must be running.
	ctl map[string][]*harness.Controller
}

// formGroup runs a controller per cluster, swaps the origin's Cluster and Secret with
// each peer's, as the seed says, and lets peers read and write ConfigMaps.
func formGroup(t *testing.T) *group {
	t.Helper()
	names := []string{origin, peer1, peer2}
	g := &group{t: t, admin: map[string]client.Client{}, direct: map[string]kubernetes.Interface{}, ctl: map[string][]*harness.Controller{}}
	for _, n := range names {
		c := bed.Cluster(n)
		g.admin[n] = harness.Install(t, c)
		cs, err := kubernetes.NewForConfig(c.DirectConfig())
		if err != nil {
			t.Fatal(err)
		}
		g.direct[n] = cs
		g.ctl[n] = []*harness.Controller{harness.Serve(t, c)}
	}
	for _, n := range names {
		harness.Eventually(t, 60*time.Second, n+" bootstraps", func() error { return harness.LocalReady(g.admin[n], n) })
	}
	for _, n := range names[1:] {
		harness.Swap(t, g.admin[origin], g.admin[n], origin)
		harness.Swap(t, g.admin[n], g.admin[origin], n)
	}
	harness.Eventually(t, 60*time.Second, "the group forms", g.whole)
	id, err := bed.Cluster(origin).KubeSystemUID(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	g.originID = id
	g.grantConfigMaps(t)
	return g
}

// whole checks that every cluster knows the three, all Ready and synced.
func (g *group) whole() error {
	for n, cl := range g.admin {
		if err := harness.Members(cl, n, origin, peer1, peer2); err != nil {
			return err
		}
	}
	return nil
}

// grantConfigMaps lets peers read ConfigMaps and the members write them, the seed's
// way: ClusterRoles with the aggregation labels.
func (g *group) grantConfigMaps(t *testing.T) {
	t.Helper()
	harness.Grant(t, g.admin, "", "configmaps")
}

// run runs one scenario in namespace chaos-<name>: a rule on the origin syncs it to the
// peers; a burst of *objects ConfigMaps is created on the origin, inject is called once a
// third of them exist; then every tenth is updated and every fiftieth deleted, and end
// is called, which returns once the fault is over. Then both peers must converge to
// exactly the origin's objects within *bound of the burst's start, with no copy of an
// object that exists on the origin deleted on the way and none created twice, and every
// controller that the scenario did not kill itself must still run.
func (g *group) run(t *testing.T, name string, inject, end func(t *testing.T)) {
	// A name of its own per run: the bed is shared, and -count may run the test again.
	ns := fmt.Sprintf("chaos-%s-%d", name, time.Now().UnixMilli()%1000000)
	ctx := t.Context()
	src := g.direct[origin]
	if _, err := src.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	applyRule(t, g.admin[origin], fmt.Sprintf(`
apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata:
  name: %s
spec:
  groupVersionKind: {version: v1, kind: ConfigMap}
  createNamespaces: true
  rules:
  - match:
    - namespaces: [%s]
`, ns, ns))

	// A first object proves the rule runs on both peers before the clock starts.
	want := map[string]map[string]string{}
	probe := configMap(ns, "probe", map[string]string{"probe": "true"})
	if _, err := src.CoreV1().ConfigMaps(ns).Create(ctx, probe, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want[probe.Name] = probe.Data
	harness.Eventually(t, 60*time.Second, "the rule syncs the probe to both peers", func() error {
		for _, p := range []string{peer1, peer2} {
			if _, err := g.direct[p].CoreV1().ConfigMaps(ns).Get(ctx, probe.Name, metav1.GetOptions{}); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
		}
		return nil
	})
	observers := map[string]*observer{}
	for _, p := range []string{peer1, peer2} {
		observers[p] = observe(t, p, g.direct[p], ns)
	}

	n := *objects
	var mu sync.Mutex
	create := func(ctx context.Context, i int) error {
		cm := configMap(ns, objName(i), map[string]string{"i": strconv.Itoa(i), "v": "1", "payload": strings.Repeat("x", 64)})
		if _, err := src.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating %s: %w", cm.Name, err)
		}
		mu.Lock()
		want[cm.Name] = cm.Data
		mu.Unlock()
		return nil
	}
	began := time.Now()
	if err := parallel(ctx, 0, n/3, create); err != nil {
		t.Fatal(err)
	}
	injectedAt := since(began)
	inject(t)
	if err := parallel(ctx, n/3, n, create); err != nil {
		t.Fatal(err)
	}
	updated, deleted := 0, 0
	if err := parallel(ctx, 0, n, func(ctx context.Context, i int) error {
		name := objName(i)
		switch i % 50 {
		case 5, 15, 35, 45: // every tenth but the deleted ones
			patch := []byte(`{"data":{"v":"2"}}`)
			if _, err := src.CoreV1().ConfigMaps(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				return fmt.Errorf("updating %s: %w", name, err)
			}
			mu.Lock()
			data := maps.Clone(want[name])
			data["v"] = "2"
			want[name] = data
			updated++
			mu.Unlock()
		case 25:
			if err := src.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				return fmt.Errorf("deleting %s: %w", name, err)
			}
			mu.Lock()
			delete(want, name)
			deleted++
			mu.Unlock()
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	written := since(began)
	end(t)
	recovered := time.Now()

	// Two stages: every object of the origin is on both peers with its content, then the
	// copies of the objects deleted on the origin are gone too.
	remaining := func() time.Duration { return *bound - time.Since(began) }
	if err := poll(ctx, remaining(), func() error {
		g.checkRunning(t) // fails at once if a controller died: none may need a restart
		lists, err := g.list(ctx, ns)
		if err != nil {
			return err
		}
		return g.check(lists, want, false)
	}); err != nil {
		t.Fatalf("both peers hold the origin's %d objects with their content: not within %s of the burst's start: %v", len(want), *bound, err)
	}
	presentAt := time.Now()
	var lists map[string][]corev1.ConfigMap
	exact := poll(ctx, remaining(), func() error {
		g.checkRunning(t)
		var err error
		if lists, err = g.list(ctx, ns); err != nil {
			return err
		}
		return g.check(lists, want, true)
	})
	exactAt := time.Now()
	t.Logf("%s: %d created, %d updated, %d deleted on the origin in %s (fault injected at %s); the fault ended %s after the burst began",
		name, n, updated, deleted, written.Round(time.Millisecond), injectedAt.Round(time.Millisecond), recovered.Sub(began).Round(time.Millisecond))
	t.Logf("%s: every object on both peers %s after the fault ended, %s after the burst began",
		name, presentAt.Sub(recovered).Round(time.Millisecond), presentAt.Sub(began).Round(time.Millisecond))
	if exact != nil {
		t.Errorf("%s: copies of objects deleted on the origin are still on the peers %s after the burst began: %v", name, *bound, exact)
	} else {
		t.Logf("%s: both peers hold exactly the origin's objects %s after the fault ended, %s after the burst began",
			name, exactAt.Sub(recovered).Round(time.Millisecond), exactAt.Sub(began).Round(time.Millisecond))
	}
	if lists == nil {
		t.Fatal("no list of the peers' copies")
	}

	for _, p := range []string{peer1, peer2} {
		o := observers[p]
		// The watches may still be backing off after the fault: let them catch up before
		// counting (not part of the convergence time).
		harness.Eventually(t, time.Minute, "the watch of "+p+" catches up", func() error {
			return o.caughtUp(lists[p])
		})
		lost, dup, rightly := o.verdict(want)
		if len(lost) > 0 {
			t.Errorf("on %s, %d copies of objects that exist on the origin were deleted: %s", p, len(lost), strings.Join(lost[:min(len(lost), 20)], ", "))
		}
		if len(dup) > 0 {
			t.Errorf("on %s, %d copies were created more than once: %s", p, len(dup), strings.Join(dup[:min(len(dup), 20)], ", "))
		}
		t.Logf("on %s: %d copies deleted, all of objects deleted on the origin", p, rightly)
	}
	g.checkRunning(t)
	harness.Eventually(t, *bound, "the group is whole again", g.whole)
}

// list lists the ConfigMaps of ns on each peer.
func (g *group) list(ctx context.Context, ns string) (map[string][]corev1.ConfigMap, error) {
	lists := map[string][]corev1.ConfigMap{}
	for _, p := range []string{peer1, peer2} {
		l, err := g.direct[p].CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		lists[p] = l.Items
	}
	return lists, nil
}

// check fails unless each peer holds every wanted object with the origin's data and
// ownership mark and, with exact, nothing else: no copy of an object deleted on the
// origin, no copy under another name.
func (g *group) check(lists map[string][]corev1.ConfigMap, want map[string]map[string]string, exact bool) error {
	var errs []error
	for _, p := range []string{peer1, peer2} {
		var missing, extra, wrong []string
		seen := map[string]bool{}
		for _, cm := range lists[p] {
			seen[cm.Name] = true
			data, ok := want[cm.Name]
			switch {
			case !ok:
				extra = append(extra, cm.Name)
			case !maps.Equal(data, cm.Data) || cm.Annotations[v1alpha1.OwnershipAnnotation] != string(g.originID):
				wrong = append(wrong, cm.Name)
			}
		}
		for name := range want {
			if !seen[name] {
				missing = append(missing, name)
			}
		}
		if !exact {
			extra = nil
		}
		if len(missing)+len(extra)+len(wrong) > 0 {
			slices.Sort(missing)
			slices.Sort(extra)
			slices.Sort(wrong)
			errs = append(errs, fmt.Errorf("%s: %d missing (%s), %d extra (%s), %d differ from the origin (%s)", p,
				len(missing), first(missing), len(extra), first(extra), len(wrong), first(wrong)))
		}
	}
	return errors.Join(errs...)
}

// poll calls f every half second until it returns nil, and returns its last error if
// that does not happen within timeout.
func poll(ctx context.Context, timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// checkRunning fails the test for every controller that exited by itself, and starts a
// replacement so the next scenario still has a controller there.
func (g *group) checkRunning(t *testing.T) {
	t.Helper()
	for name, ctls := range g.ctl {
		for i, ctl := range ctls {
			if ctl.Running() {
				continue
			}
			t.Errorf("the controller of %s (pid %d) exited by itself: it would need a restart; its log ends with:\n%s", name, ctl.Pid(), ctl.LogTail(30))
			ctls[i] = harness.Serve(g.t, bed.Cluster(name))
		}
	}
}

func applyRule(t *testing.T, cl client.Client, y string) {
	t.Helper()
	var r v1alpha1.ResourceSyncRule
	if err := yaml.UnmarshalStrict([]byte(y), &r); err != nil {
		t.Fatal(err)
	}
	if err := cl.Create(t.Context(), &r); err != nil {
		t.Fatal(err)
	}
}

func configMap(ns, name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
}

func objName(i int) string { return fmt.Sprintf("burst-%05d", i) }

func since(t time.Time) time.Duration { return time.Since(t).Round(time.Millisecond) }

// first returns up to five names, for messages.
func first(names []string) string {
	if len(names) > 5 {
		return strings.Join(names[:5], ", ") + ", ..."
	}
	return strings.Join(names, ", ")
}

// parallel calls f for every i in [from, to) with burstWorkers goroutines and returns the
// first error.
func parallel(ctx context.Context, from, to int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range burstWorkers {
		wg.Go(func() {
			for i := range next {
				if err := f(ctx, i); err != nil {
					cancel(err)
				}
			}
		})
	}
feed:
	for i := from; i < to; i++ {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return nil
}
