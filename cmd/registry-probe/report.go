package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"time"
)

// report is the probe's result: every phase, and the pooled figures of each side.
type report struct {
	Phases []phase           `json:"phases"`
	Sides  map[string]figure `json:"sides"`
	// Ratios are the pooled figures of one side over another's, by "side/side":
	// registry/floor (the margin of #33), split/floor (what a process per peer costs),
	// split-member/split (what writing as the member costs), registry/split-member and
	// registry/split (what the registry's own work costs).
	Ratios map[string]figure `json:"ratios"`
	// Writes are the p50 (ms) of the write request alone, by kind (writeCost).
	Writes map[string]float64 `json:"write_request_p50_ms"`
}

// sides are the probe's sides in the order they are printed, and the ratios it reports.
var (
	sides  = []string{"floor", "split", "split-member", "registry"}
	ratios = [][2]string{{"registry", "floor"}, {"split", "floor"}, {"split-member", "split"}, {"registry", "split-member"}, {"registry", "split"}}
)

// figure is a side's create p50 and p99 (ms) and its mean burst (s), or their ratios.
type figure struct {
	P50   float64 `json:"create_p50"`
	P99   float64 `json:"create_p99"`
	Burst float64 `json:"burst"`
}

func newReport(phases []phase) report {
	r := report{Phases: phases, Sides: map[string]figure{}, Ratios: map[string]figure{}}
	for _, side := range sides {
		var creates []time.Duration
		var burst time.Duration
		n := 0
		for _, ph := range phases {
			if ph.Side == side {
				creates = append(creates, ph.Creates...)
				burst += ph.Burst
				n++
			}
		}
		if n == 0 {
			continue
		}
		r.Sides[side] = figure{P50: ms(percentile(creates, 50)), P99: ms(percentile(creates, 99)), Burst: (burst / time.Duration(n)).Seconds()}
	}
	for _, q := range ratios {
		a, okA := r.Sides[q[0]]
		b, okB := r.Sides[q[1]]
		if okA && okB {
			r.Ratios[q[0]+"/"+q[1]] = figure{P50: ratio(a.P50, b.P50), P99: ratio(a.P99, b.P99), Burst: ratio(a.Burst, b.Burst)}
		}
	}
	return r
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func (r report) print(w io.Writer) {
	fmt.Fprintf(w, "%-12s %5s %12s %12s %10s\n", "side", "round", "create p50", "create p99", "burst")
	for _, ph := range r.Phases {
		fmt.Fprintf(w, "%-12s %5d %9.2f ms %9.2f ms %8.2f s\n", ph.Side, ph.Round, ms(percentile(ph.Creates, 50)), ms(percentile(ph.Creates, 99)), ph.Burst.Seconds())
	}
	for _, side := range sides {
		if f, ok := r.Sides[side]; ok {
			fmt.Fprintf(w, "%-12s %5s %9.2f ms %9.2f ms %8.2f s\n", side, "all", f.P50, f.P99, f.Burst)
		}
	}
	for _, q := range ratios {
		if f, ok := r.Ratios[q[0]+"/"+q[1]]; ok {
			fmt.Fprintf(w, "%s / %s: create p50 %.2fx, p99 %.2fx, burst %.2fx\n", q[0], q[1], f.P50, f.P99, f.Burst)
		}
	}
	kinds := slices.Sorted(maps.Keys(r.Writes))
	for _, k := range kinds {
		fmt.Fprintf(w, "write request p50, %s: %.2f ms\n", k, r.Writes[k])
	}
}

// percentile is the nearest-rank percentile p of ds (0 for none).
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := (p*len(s) + 99) / 100 // ceil(p/100 * n)
	return s[max(rank, 1)-1]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
