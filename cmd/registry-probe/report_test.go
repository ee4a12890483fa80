package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// millis returns v as durations in milliseconds.
func millis(v ...int) []time.Duration {
	var out []time.Duration
	for _, x := range v {
		out = append(out, time.Duration(x)*time.Millisecond)
	}
	return out
}

func TestPercentile(t *testing.T) {
	ms := millis
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // unsorted: 100..1
	}
	for _, tc := range []struct {
		name string
		in   []time.Duration
		p    int
		want time.Duration
	}{
		{"none", nil, 50, 0},
		{"one", ms(7), 99, 7 * time.Millisecond},
		{"p50 of 4 is the 2nd", ms(4, 1, 3, 2), 50, 2 * time.Millisecond},
		{"p50 of 100 is the 50th", ms(hundred...), 50, 50 * time.Millisecond},
		{"p99 of 100 is the 99th", ms(hundred...), 99, 99 * time.Millisecond},
		{"p100 is the largest", ms(3, 9, 1), 100, 9 * time.Millisecond},
	} {
		if got := percentile(tc.in, tc.p); got != tc.want {
			t.Errorf("%s: percentile(%d) = %v, want %v", tc.name, tc.p, got, tc.want)
		}
	}
}

// TestReportPoolsPhases: the floor's phases bracket the registry's, and every figure is
// pooled across the phases of its side before the ratio is taken.
func TestReportPoolsPhases(t *testing.T) {
	d := millis
	r := newReport([]phase{
		{Side: "floor", Round: 0, Creates: d(10, 10), Burst: 4 * time.Second},
		{Side: "registry", Round: 0, Creates: d(12, 12), Burst: 5 * time.Second},
		{Side: "floor", Round: 1, Creates: d(20, 20), Burst: 6 * time.Second},
		{Side: "split", Round: 0, Creates: d(15, 15), Burst: 10 * time.Second},
	})
	want := map[string]figure{
		"floor":    {P50: 10, P99: 20, Burst: 5},
		"registry": {P50: 12, P99: 12, Burst: 5},
		"split":    {P50: 15, P99: 15, Burst: 10},
	}
	if diff := cmp.Diff(want, r.Sides, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("sides (-want +got):\n%s", diff)
	}
	wantRatios := map[string]figure{
		"registry/floor": {P50: 1.2, P99: 0.6, Burst: 1},
		"split/floor":    {P50: 1.5, P99: 0.75, Burst: 2},
		"registry/split": {P50: 0.8, P99: 0.8, Burst: 0.5},
	}
	if diff := cmp.Diff(wantRatios, r.Ratios, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("ratios (-want +got):\n%s", diff)
	}
}
