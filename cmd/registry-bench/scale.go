package main

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// scaleResult is one scale run: a fresh group of Clusters clusters, create latency from the
// first cluster to all the others against the floor, and each controller's RSS.
type scaleResult struct {
	Clusters int      `json:"clusters"`
	Names    []string `json:"names"`
	// ControllerManager is false: the scale groups run without kube-controller-manager
	// (the bench aggregates the reader ClusterRole itself), to spare the two cores N of them.
	ControllerManager bool  `json:"controller_manager"`
	Samples           int   `json:"samples"`
	Registry          stats `json:"registry_create"`
	// Floor is the floor with the registry's controllers stopped (the ratios are against
	// it); FloorBeside the floor while they run.
	Floor       stats   `json:"floor_create"`
	FloorBeside stats   `json:"floor_beside_create"`
	RatioP50    float64 `json:"ratio_p50"`
	RatioP99    float64 `json:"ratio_p99"`
	// Burst ConfigMaps created at once: the registry's time to every peer and the floor's
	// alone, and what they cost.
	Burst             int                `json:"burst"`
	BurstSeconds      float64            `json:"burst_seconds"`
	FloorBurstSeconds float64            `json:"floor_burst_seconds"`
	Cost              *costs             `json:"cost,omitempty"`
	PeakRSSMiB        map[string]float64 `json:"peak_rss_mib"`
	RSSMiB            map[string]float64 `json:"rss_mib"`
	Failures          map[string]int     `json:"failed_samples,omitempty"`
	StartSeconds      float64            `json:"start_seconds"`
	SetupSeconds      float64            `json:"setup_seconds"`
	// Get is `kubectl registry get configmaps -A` across every cluster of the largest group.
	Get *cliTiming `json:"get,omitempty"`
	// Error says why the run did not finish.
	Error string `json:"error,omitempty"`
}

// runScale starts a group of n clusters, forms it and measures create latency and RSS; in
// the largest group it also times `get configmaps -A` across all of them.
func (b *bench) runScale(ctx context.Context, n int, withGet bool) (_ *scaleResult, err error) {
	label := fmt.Sprintf("scale-%d", n)
	t0 := time.Now()
	g, err := b.startGroup(ctx, label, scaleNames(n), false)
	if err != nil {
		return nil, err
	}
	defer func() { g.stopKeepingLogs(err) }()
	sr := &scaleResult{Clusters: n, Names: g.names, Samples: b.o.scaleSamples, Burst: b.o.scaleBurst, StartSeconds: time.Since(t0).Seconds()}
	if err := g.prepare(ctx); err != nil {
		return nil, err
	}
	alone, err := g.floorAlone(ctx, b.o.scaleSamples, []string{"create"}, b.o.scaleBurst, b.o.scaleBurst)
	if err != nil {
		return nil, fmt.Errorf("floor alone: %w", err)
	}
	sr.Floor, sr.FloorBurstSeconds = newStats(alone.latency["create"]), alone.burst.Seconds()
	sr.Cost = &costs{SyncedFloorAlone: alone.synced, UnselectedAlone: alone.unselected}
	if err := g.start(ctx); err != nil {
		return nil, err
	}
	sr.SetupSeconds = g.setupTime.Seconds()
	mctx, mcancel := context.WithCancel(ctx)
	defer mcancel()
	reg, floor, cp, err := g.newSides(mctx)
	if err != nil {
		return nil, err
	}
	if err := g.warmUp(mctx, reg, floor); err != nil {
		return nil, err
	}
	step("[%s] %d ConfigMaps no rule selects created, updated and deleted, controllers running", label, b.o.scaleBurst)
	if sr.Cost.UnselectedRegistry, err = g.measureCost(mctx, 3*b.o.scaleBurst, func(ctx context.Context) error {
		return g.churnUnselected(ctx, nsRegistry, "unselected", b.o.scaleBurst)
	}); err != nil {
		return nil, err
	}
	step("[%s] latency: %d create samples on %s -> %d peers, alternating registry and floor", label, b.o.scaleSamples, g.names[0], n-1)
	lat, failures, err := g.latency(mctx, b.o.scaleSamples, []string{"create"}, reg, floor)
	if err != nil {
		return nil, err
	}

	if e := cp.errors.Load(); e > 0 {
		step("[%s] floor copier errors: %d", label, e)
	}
	for k, v := range alone.failures {
		failures["floor alone "+strings.TrimPrefix(k, "floor ")] += v
	}
	sr.Registry, sr.FloorBeside = newStats(lat["registry"]["create"]), newStats(lat["floor"]["create"])
	sr.RatioP50, sr.RatioP99 = ratio(sr.Registry.P50ms, sr.Floor.P50ms), ratio(sr.Registry.P99ms, sr.Floor.P99ms)
	step("[%s]   create p50 %.1f ms (floor alone %.1f, beside %.1f), p99 %.1f ms (floor alone %.1f, beside %.1f)", label, sr.Registry.P50ms, sr.Floor.P50ms, sr.FloorBeside.P50ms, sr.Registry.P99ms, sr.Floor.P99ms, sr.FloorBeside.P99ms)
	step("[%s] burst: %d ConfigMaps created at once on %s", label, b.o.scaleBurst, g.names[0])
	if sr.Cost.SyncedRegistry, err = g.measureCost(mctx, b.o.scaleBurst, func(ctx context.Context) error {
		d, err := g.createAll(ctx, reg, names("burst", 0, b.o.scaleBurst))
		sr.BurstSeconds = d.Seconds()
		return err
	}); err != nil {
		return nil, err
	}
	step("[%s]   %.2fs (floor alone %.2fs)", label, sr.BurstSeconds, sr.FloorBurstSeconds)
	if len(failures) > 0 {
		sr.Failures = failures
	}
	if sr.PeakRSSMiB, sr.RSSMiB, err = g.controllersRSS(); err != nil {
		return nil, err
	}
	if withGet {
		step("[%s] CLI: get configmaps -A across %d clusters, %d runs", label, n, b.o.cliRuns)
		t := g.timeCLI(mctx, b.o.cliRuns, "get", "configmaps", "-A")
		t.Clusters = n
		t.Objects = max(0, t.OutputLines-1) // minus the header
		sr.Get = &t
	}
	return sr, nil
}

// scaleNames are the clusters of a scale group: s1, s2, ...
func scaleNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("s%d", i+1)
	}
	return out
}
