package main

import (
	"context"
	"fmt"
	"time"
)

// scaleResult is one scale run: a fresh group of Clusters clusters, create latency from the
// first cluster to all the others against the floor, and each controller's RSS.
type scaleResult struct {
	Clusters int      `json:"clusters"`
	Names    []string `json:"names"`
	// ControllerManager is false: the scale groups run without kube-controller-manager
	// (the bench aggregates the reader ClusterRole itself), to spare the two cores N of them.
	ControllerManager bool               `json:"controller_manager"`
	Samples           int                `json:"samples"`
	Registry          stats              `json:"registry_create"`
	Floor             stats              `json:"floor_create"`
	RatioP50          float64            `json:"ratio_p50"`
	RatioP99          float64            `json:"ratio_p99"`
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
func (b *bench) runScale(ctx context.Context, n int, withGet bool) (*scaleResult, error) {
	label := fmt.Sprintf("scale-%d", n)
	t0 := time.Now()
	g, err := b.startGroup(ctx, label, scaleNames(n), false)
	if err != nil {
		return nil, err
	}
	defer g.stop()
	sr := &scaleResult{Clusters: n, Names: g.names, Samples: b.o.scaleSamples, StartSeconds: time.Since(t0).Seconds()}
	if err := g.setup(ctx); err != nil {
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
	step("[%s] latency: %d create samples on %s -> %d peers, alternating registry and floor", label, b.o.scaleSamples, g.names[0], n-1)
	lat, failures, err := g.latency(mctx, b.o.scaleSamples, []string{"create"}, reg, floor)
	if err != nil {
		return nil, err
	}
	if len(failures) > 0 {
		sr.Failures = failures
	}
	if e := cp.errors.Load(); e > 0 {
		step("[%s] floor copier errors: %d", label, e)
	}
	sr.Registry, sr.Floor = newStats(lat["registry"]["create"]), newStats(lat["floor"]["create"])
	sr.RatioP50, sr.RatioP99 = ratio(sr.Registry.P50ms, sr.Floor.P50ms), ratio(sr.Registry.P99ms, sr.Floor.P99ms)
	step("[%s]   create p50 %.1f ms (floor %.1f), p99 %.1f ms (floor %.1f)", label, sr.Registry.P50ms, sr.Floor.P50ms, sr.Registry.P99ms, sr.Floor.P99ms)
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
