package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// side is one system under measurement: the registry (namespace bench) or the floor
// (namespace bench-floor), with trackers on every peer.
type side struct {
	name      string
	namespace string
	peers     []*tracker
}

func (g *group) newSide(ctx context.Context, name, namespace string) (*side, error) {
	s := &side{name: name, namespace: namespace}
	for _, n := range g.peers() {
		t, err := startTracker(ctx, g.cs[n], n, namespace)
		if err != nil {
			return nil, err
		}
		s.peers = append(s.peers, t)
	}
	return s, nil
}

// aloneResult is what the floor did with the registry's controllers stopped.
type aloneResult struct {
	latency  map[string][]time.Duration
	failures map[string]int
	// writeTimes are the floor's write requests during its latency samples.
	writeTimes []time.Duration
	burst      time.Duration
	synced     *cost
	unselected *cost
	errors     int64
}

// floorAlone measures, before any controller runs, the floor in its own namespace
// (latency samples of phases, a burst of burst objects with its cost) and the cost of
// churn changes of ConfigMaps no rule selects in the registry's namespace. The copier and
// trackers stop when it returns.
func (g *group) floorAlone(ctx context.Context, samples int, phases []string, burst, churn int) (*aloneResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := g.newSide(ctx, "floor", nsAlone)
	if err != nil {
		return nil, err
	}
	var peers []kubernetes.Interface
	for _, n := range g.peers() {
		peers = append(peers, g.cs[n])
	}
	cp, err := startCopier(ctx, g.origin(), peers, nsAlone, g.b.o.floorWorkers)
	if err != nil {
		return nil, err
	}
	step("[%s] floor alone (no registry controller running): warm-up", g.label)
	if err := g.warmUp(ctx, s); err != nil {
		return nil, err
	}
	res := &aloneResult{}
	step("[%s] floor alone: %d ConfigMaps no rule selects created, updated and deleted in %s", g.label, churn, nsRegistry)
	if res.unselected, err = g.measureCost(ctx, 3*churn, func(ctx context.Context) error {
		return g.churnUnselected(ctx, nsRegistry, "unselected-alone", churn)
	}); err != nil {
		return nil, err
	}
	step("[%s] floor alone: %d samples of %s", g.label, samples, strings.Join(phases, ", "))
	cp.takeWriteTimes()
	lat, failures, err := g.latency(ctx, samples, phases, s)
	if err != nil {
		return nil, err
	}
	res.latency, res.failures, res.writeTimes = lat["floor"], failures, cp.takeWriteTimes()
	step("[%s] floor alone: burst of %d ConfigMaps", g.label, burst)
	if res.synced, err = g.measureCost(ctx, burst, func(ctx context.Context) error {
		d, err := g.createAll(ctx, s, names("burst", 0, burst))
		res.burst = d
		return err
	}); err != nil {
		return nil, err
	}
	step("[%s]   floor alone: %.2fs", g.label, res.burst.Seconds())
	res.errors = cp.errors.Load()
	return res, nil
}

// whileStopped runs measure on the floor alone in its own namespace with no controller
// running (stopControllers: no process of the registry holds a watch, so the API servers
// pay nothing for it), after the registry's measurements, and starts the controllers
// again, warmed up through reg. With the floor alone measured before any controller ran,
// it brackets the registry's figures in time, so that the ratios do not follow the host's
// drift, nor the clusters' growth, between the start of the run and its middle.
func (g *group) whileStopped(ctx context.Context, reg *side, what string, measure func(context.Context, *side) error) (err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := g.newSide(ctx, "floor", nsAlone)
	if err != nil {
		return err
	}
	var peers []kubernetes.Interface
	for _, n := range g.peers() {
		peers = append(peers, g.cs[n])
	}
	if _, err := startCopier(ctx, g.origin(), peers, nsAlone, g.b.o.floorWorkers); err != nil {
		return err
	}
	restart, err := g.stopControllers(ctx, reg)
	if err != nil {
		return err
	}
	defer func() {
		if rerr := restart(); rerr != nil {
			err = errors.Join(err, fmt.Errorf("starting the controllers again: %w", rerr))
		}
	}()
	step("[%s] floor alone again (no controller running): warm-up", g.label)
	if err := g.warmUp(ctx, s); err != nil {
		return err
	}
	step("[%s] floor alone again: %s", g.label, what)
	return measure(ctx, s)
}

// newSides starts the trackers of the registry and the floor, and the floor copier.
func (g *group) newSides(ctx context.Context) (reg, floor *side, cp *copier, err error) {
	if reg, err = g.newSide(ctx, "registry", nsRegistry); err != nil {
		return nil, nil, nil, err
	}
	if floor, err = g.newSide(ctx, "floor", nsFloor); err != nil {
		return nil, nil, nil, err
	}
	var peers []kubernetes.Interface
	for _, n := range g.peers() {
		peers = append(peers, g.cs[n])
	}
	if cp, err = startCopier(ctx, g.origin(), peers, nsFloor, g.b.o.floorWorkers); err != nil {
		return nil, nil, nil, err
	}
	return reg, floor, cp, nil
}

// warmUp sends one ConfigMap through each side (RBAC aggregation, peer watches) and
// deletes it again, so that the namespaces hold only what is measured.
func (g *group) warmUp(ctx context.Context, sides ...*side) error {
	for _, s := range sides {
		cms := g.origin().CoreV1().ConfigMaps(s.namespace)
		if _, err := cms.Create(ctx, cm(s.namespace, "warmup", "w"), metav1.CreateOptions{}); err != nil {
			return err
		}
		if _, err := s.waitPeers(ctx, g.b.o.timeout, "warmup", "w"); err != nil {
			return fmt.Errorf("%s: %w (controller logs in %s)", s.name, err, g.logs)
		}
		if err := cms.Delete(ctx, "warmup", metav1.DeleteOptions{}); err != nil {
			return err
		}
		if _, err := s.waitPeers(ctx, g.b.o.timeout, "warmup", deletedMark); err != nil {
			return fmt.Errorf("%s: %w (controller logs in %s)", s.name, err, g.logs)
		}
	}
	return nil
}

// waitPeers returns the time the last peer first showed name with value.
func (s *side) waitPeers(ctx context.Context, timeout time.Duration, name, value string) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last time.Time
	for _, t := range s.peers {
		at, err := t.wait(ctx, name, value)
		if err != nil {
			return time.Time{}, err
		}
		if at.After(last) {
			last = at
		}
	}
	return last, nil
}

func cm(ns, name, v string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{syncLabel: "true"}}, Data: map[string]string{"v": v, "payload": "bench"}}
}

// sample runs op on the origin and returns the time until every peer shows value.
func sample(ctx context.Context, s *side, name, value string, op func(context.Context) error) (time.Duration, error) {
	t0 := time.Now()
	if err := op(ctx); err != nil {
		return 0, err
	}
	at, err := s.waitPeers(ctx, 30*time.Second, name, value)
	if err != nil {
		return 0, err
	}
	return at.Sub(t0), nil
}

// latency takes n samples of each phase, alternating the sides, and returns
// side -> phase -> durations and the failed samples by "side phase".
func (g *group) latency(ctx context.Context, n int, phases []string, sides ...*side) (map[string]map[string][]time.Duration, map[string]int, error) {
	origin := g.origin()
	lat := map[string]map[string][]time.Duration{}
	for _, s := range sides {
		lat[s.name] = map[string][]time.Duration{}
	}
	failures := map[string]int{}
	for i := range n {
		name := fmt.Sprintf("lat-%d", i)
		for _, phase := range phases {
			for _, s := range sides {
				cms := origin.CoreV1().ConfigMaps(s.namespace)
				var value string
				var op func(context.Context) error
				switch phase {
				case "create":
					value = fmt.Sprintf("c%d", i)
					op = func(ctx context.Context) error {
						_, err := cms.Create(ctx, cm(s.namespace, name, value), metav1.CreateOptions{})
						return err
					}
				case "update":
					value = fmt.Sprintf("u%d", i)
					op = func(ctx context.Context) error {
						_, err := cms.Update(ctx, cm(s.namespace, name, value), metav1.UpdateOptions{})
						return err
					}
				case "delete":
					value = deletedMark
					op = func(ctx context.Context) error { return cms.Delete(ctx, name, metav1.DeleteOptions{}) }
				}
				d, err := sample(ctx, s, name, value, op)
				if ctx.Err() != nil {
					return nil, nil, ctx.Err()
				}
				if err != nil {
					failures[s.name+" "+phase]++
					fmt.Fprintf(os.Stderr, "  %s %s: %v\n", s.name, phase, err)
					if failures[s.name+" "+phase] > 5 {
						return nil, nil, fmt.Errorf("too many failed samples: %w (controller logs in %s)", err, g.logs)
					}
					continue
				}
				lat[s.name][phase] = append(lat[s.name][phase], d)
			}
		}
		if (i+1)%50 == 0 {
			step("[%s]   %d/%d", g.label, i+1, n)
		}
	}
	return lat, failures, nil
}

// runMain measures the main group of three clusters (with kube-controller-manager): the
// floor alone first, then, with the controllers running, the cost of unselected objects,
// latency, a burst, the CLI, memory and the idle group.
func (b *bench) runMain(ctx context.Context, res *results) (err error) {
	g, err := b.startGroup(ctx, "main", mainNames, true)
	if err != nil {
		return err
	}
	defer func() { g.stopKeepingLogs(err) }()
	g.profile = b.o.profile != ""
	if err := g.prepare(ctx); err != nil {
		return err
	}
	phases := []string{"create", "update", "delete"}
	alone, err := g.floorAlone(ctx, b.o.samples, phases, b.o.burst, b.o.churn)
	if err != nil {
		return fmt.Errorf("floor alone: %w", err)
	}
	if err := g.start(ctx); err != nil {
		return err
	}
	res.SetupSeconds = g.setupTime.Seconds()
	res.FloorCopierErrors += alone.errors
	res.Cost = &costs{SyncedFloorAlone: alone.synced, UnselectedAlone: alone.unselected}
	// Trackers and the floor copier stop before the clusters do.
	mctx, mcancel := context.WithCancel(ctx)
	defer mcancel()
	reg, floor, cp, err := g.newSides(mctx)
	if err != nil {
		return err
	}
	step("[main] warm-up: one ConfigMap through each side and back")
	if err := g.warmUp(mctx, reg, floor); err != nil {
		return err
	}
	m := &mainRun{o: &b.o, g: g, res: res, alone: alone, phases: phases, reg: reg, floor: floor, cp: cp}
	for _, phase := range []func(context.Context) error{m.unselectedCost, m.latency, m.burst, m.cli, m.memory, m.idle} {
		if err := phase(mctx); err != nil {
			return err
		}
	}
	return nil
}

// mainRun is the main group's measurement under way: the group, the registry's and the
// floor's sides, the floor copier, what the floor measured alone before the controllers
// started, and the results so far.
type mainRun struct {
	o          *options
	g          *group
	res        *results
	alone      *aloneResult
	phases     []string
	reg, floor *side
	cp         *copier
}

// settle lets the controllers finish what they are doing before a reading.
func settle() { time.Sleep(2 * time.Second) }

// unselectedCost measures what ConfigMaps no rule selects cost the running controllers.
func (m *mainRun) unselectedCost(ctx context.Context) error {
	g, res := m.g, m.res
	var err error
	step("[main] %d ConfigMaps no rule selects created, updated and deleted in %s, controllers running", m.o.churn, nsRegistry)
	if res.Cost.UnselectedRegistry, err = g.measureCost(ctx, 3*m.o.churn, func(ctx context.Context) error {
		return g.churnUnselected(ctx, nsRegistry, "unselected", m.o.churn)
	}); err != nil {
		return err
	}
	return nil
}

// latency measures create, update and delete on the first cluster, alternating the
// registry and the floor, with the stages of the registry's samples, then the floor
// alone again with the registry stopped.
func (m *mainRun) latency(ctx context.Context) error {
	g, res, alone, phases, reg, floor, cp := m.g, m.res, m.alone, m.phases, m.reg, m.floor, m.cp
	step("[main] latency: %d samples of create, update, delete on %s, alternating registry and floor", m.o.samples, g.names[0])
	stagesBefore, err := g.allMetrics(ctx)
	if err != nil {
		return err
	}
	cp.takeWriteTimes()
	lat, failures, err := g.latency(ctx, m.o.samples, phases, reg, floor)
	if err != nil {
		return err
	}
	stagesAfter, err := g.allMetrics(ctx)
	if err != nil {
		return err
	}
	res.addStages(stageQuantile(stagesBefore, stagesAfter, 0.5), alone.writeTimes, cp.takeWriteTimes())
	var aloneAfter map[string][]time.Duration
	var afterFailures map[string]int
	if err := g.whileStopped(ctx, reg, fmt.Sprintf("%d samples of %s", m.o.samples, strings.Join(phases, ", ")), func(ctx context.Context, s *side) error {
		lat, failures, err := g.latency(ctx, m.o.samples, phases, s)
		aloneAfter, afterFailures = lat["floor"], failures
		return err
	}); err != nil {
		return fmt.Errorf("floor alone after the registry's samples: %w", err)
	}
	for _, phase := range phases {
		res.addLatency(phase, lat["registry"][phase], alone.latency[phase], aloneAfter[phase], lat["floor"][phase])
	}
	for k, v := range alone.failures {
		failures["floor alone "+strings.TrimPrefix(k, "floor ")] += v
	}
	if c, ok := res.Latency["create"].(map[string]stats); ok {
		step("[main] create p50: registry %.2f ms; floor alone %.2f ms before the controllers started, %.2f ms after the registry's samples; floor beside %.2f ms",
			c["registry"].P50ms, c["floor_before"].P50ms, c["floor_after"].P50ms, c["floor_beside"].P50ms)
	}
	for k, v := range afterFailures {
		failures["floor alone after "+strings.TrimPrefix(k, "floor ")] += v
	}
	res.Failures = failures
	return nil
}

// burst measures a burst of created objects: the registry's first (with metrics, cost
// and, with --profile, profiles around it), then the floor's, then the floor alone
// again with the registry stopped.
func (m *mainRun) burst(ctx context.Context) error {
	g, res, alone, reg, floor := m.g, m.res, m.alone, m.reg, m.floor
	settle()
	beforeM, err := g.allMetrics(ctx)
	if err != nil {
		return err
	}
	idleC, beforeC, cerr := g.idleReadings(ctx)
	if cerr != nil {
		step("[main] cost not measured: %v", cerr)
	}
	burstObjs := names("burst", 0, m.o.burst)
	burstDur := map[string]time.Duration{}
	for _, s := range []*side{reg, floor} {
		step("[main] burst: %d ConfigMaps created at once on %s (%s, %d workers)", m.o.burst, g.names[0], s.name, m.o.workers)
		if s == reg {
			g.startProfiles()
		}
		d, err := g.createAll(ctx, s, burstObjs)
		if err != nil {
			return fmt.Errorf("%s burst: %w (controller logs in %s)", s.name, err, g.logs)
		}
		burstDur[s.name] = d
		step("[main]   %s: %.2fs", s.name, d.Seconds())
		if s == reg {
			res.Profiles = append(res.Profiles, g.stopProfiles("burst")...)
			settle()
			if afterC, err := g.read(ctx); err != nil || cerr != nil {
				step("[main] cost not measured: %v", errors.Join(cerr, err))
			} else {
				res.Cost.SyncedRegistry = newCost(idleC, beforeC, afterC, m.o.burst)
			}
			afterM, err := g.allMetrics(ctx)
			if err != nil {
				return err
			}
			res.BurstWrites = diffWrites(perController(afterM, syncWrites), perController(beforeM, syncWrites))
			res.BurstQueue = newQueueStats(diffWrites(perController(afterM, queueCounters), perController(beforeM, queueCounters)), m.o.burst)
		}
	}
	var aloneBurstAfter time.Duration
	if err := g.whileStopped(ctx, reg, fmt.Sprintf("burst of %d ConfigMaps", m.o.burst), func(ctx context.Context, s *side) error {
		d, err := g.createAll(ctx, s, names("burst-after", 0, m.o.burst))
		aloneBurstAfter = d
		return err
	}); err != nil {
		return fmt.Errorf("floor alone after the registry's burst: %w", err)
	}
	step("[main]   floor alone: %.2fs before the controllers started, %.2fs after the registry's burst", alone.burst.Seconds(), aloneBurstAfter.Seconds())
	res.addBurst(m.o.burst, burstDur["registry"], alone.burst, aloneBurstAfter, burstDur["floor"])
	return nil
}

// cli records the controllers' peak RSS after the burst and times sync-diff over the
// burst's objects, synced in the three clusters.
func (m *mainRun) cli(ctx context.Context) error {
	g, res := m.g, m.res
	peak, _, err := g.controllersRSS()
	if err != nil {
		return err
	}
	res.PeakRSSMiB = peak
	res.SyncedObjects = m.o.burst
	contexts := g.names[0] + "," + g.names[1] + "," + g.names[2]
	step("[main] CLI: sync-diff --contexts %s over %d synced ConfigMaps, %d runs", contexts, m.o.burst, m.o.cliRuns)
	sd := g.timeCLI(ctx, m.o.cliRuns, "sync-diff", "--contexts", contexts)
	sd.Clusters, sd.Objects = len(g.names), m.o.burst
	res.CLI.SyncDiff = &sd
	return nil
}

// memory fills the registry up to --memory-objects synced objects and measures the
// controllers' memory (with --profile, profiles of the fill).
func (m *mainRun) memory(ctx context.Context) error {
	g, res, reg, peak := m.g, m.res, m.reg, m.res.PeakRSSMiB
	if n := m.o.memoryObjects - m.o.burst; m.o.memoryObjects > 0 && n <= 0 {
		res.Memory = &memoryResult{Objects: m.o.burst, PeakRSSMiB: peak, RSSMiB: map[string]float64{}, FloorObjects: m.o.burst}
	} else if n > 0 {
		objs := names("mem", 0, n)
		step("[main] memory: %d more ConfigMaps on %s, %d synced in all", n, g.names[0], m.o.memoryObjects)
		d, err := g.createAll(ctx, reg, objs)
		if err != nil {
			return fmt.Errorf("memory fill: %w (controller logs in %s)", err, g.logs)
		}
		step("[main]   on every peer after %.1fs", d.Seconds())
		settle()
		res.Profiles = append(res.Profiles, g.stopProfiles("memory")...)
		peak, cur, err := g.controllersRSS()
		if err != nil {
			return err
		}
		file, err := g.controllersFileRSS()
		if err != nil {
			return err
		}
		res.Memory = &memoryResult{
			Objects: m.o.memoryObjects, FillObjects: n, FillSeconds: d.Seconds(),
			FillObjectsPerSecond: ratio(float64(n), d.Seconds()), PeakRSSMiB: peak, RSSMiB: cur,
			FileRSSMiB: file, FloorObjects: m.o.burst,
		}
	}
	return nil
}

// idle samples the sync writes of the group with nothing changing for --idle, and adds
// up the floor copier's errors.
func (m *mainRun) idle(ctx context.Context) error {
	g, res, cp := m.g, m.res, m.cp
	step("[main] idle: sampling sync writes for %s with nothing changing", m.o.idle)
	settle()
	before, err := g.allWrites(ctx)
	if err != nil {
		return err
	}
	select {
	case <-time.After(m.o.idle):
	case <-ctx.Done():
		return ctx.Err()
	}
	after, err := g.allWrites(ctx)
	if err != nil {
		return err
	}
	res.IdleWrites = diffWrites(after, before)
	res.IdleWritesPerMin = (total(after) - total(before)) / m.o.idle.Minutes()
	res.FloorCopierErrors += cp.errors.Load()
	return nil
}

func names(prefix string, from, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, from+i)
	}
	return out
}

// createAll creates the named ConfigMaps on the origin with o.workers goroutines and
// returns the time from the first create until the last one is on every peer.
func (g *group) createAll(ctx context.Context, s *side, objs []string) (time.Duration, error) {
	cms := g.origin().CoreV1().ConfigMaps(s.namespace)
	work := make(chan string)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	t0 := time.Now()
	for range g.b.o.workers {
		wg.Go(func() {
			for n := range work {
				if _, err := cms.Create(ctx, cm(s.namespace, n, "b"), metav1.CreateOptions{}); err != nil {
					mu.Lock()
					firstErr = firstNonNil(firstErr, err)
					mu.Unlock()
				}
			}
		})
	}
	for _, n := range objs {
		work <- n
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	// The wait grows with the objects: 10,000 on a loaded machine take minutes.
	wctx, cancel := context.WithTimeout(ctx, g.b.o.timeout+time.Duration(len(objs))*10*time.Millisecond)
	defer cancel()
	var last time.Time
	for _, t := range s.peers {
		at, err := t.waitAll(wctx, objs)
		if err != nil {
			return 0, err
		}
		if at.After(last) {
			last = at
		}
	}
	return last.Sub(t0), nil
}

func firstNonNil(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
