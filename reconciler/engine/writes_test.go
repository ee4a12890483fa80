package engine

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestObserveStages: a write's stages are the wait in the queue (from the change seen
// to the reconcile's start), the decision (to the request) and the request; a failed
// write records none.
func TestObserveStages(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	e := &Engine{opts: Options{Clock: clk, Metrics: NewMetrics(nil)}}
	it := item{name: "x"}
	e.seen.Store(it, t0)
	ctx := withReconcileStart(context.Background(), t0.Add(3*time.Millisecond))
	sent := t0.Add(5 * time.Millisecond)
	clk.SetTime(t0.Add(9 * time.Millisecond))
	e.observeStages(ctx, it, sent, errors.New("refused"))
	e.observeStages(ctx, it, sent, nil)
	got := map[string][2]float64{} // stage -> count, sum in ms
	for _, stage := range []string{"queue", "decide", "write"} {
		var m dto.Metric
		if err := e.opts.Metrics.stages.WithLabelValues(stage).(prometheus.Histogram).Write(&m); err != nil {
			t.Fatal(err)
		}
		got[stage] = [2]float64{float64(m.GetHistogram().GetSampleCount()), math.Round(m.GetHistogram().GetSampleSum() * 1e6 / 1e3)}
	}
	want := map[string][2]float64{"queue": {1, 3}, "decide": {1, 2}, "write": {1, 4}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stages (count, ms) (-want +got):\n%s", diff)
	}
}
