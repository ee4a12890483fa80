package bootstrap

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestRenewAfterMetric: the gauge follows the renewal time of the reader token, at issue
// and at every renewal, and a second registration reuses the first's gauge.
func TestRenewAfterMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnv(t, func(e *env, o *Options) { o.Endpoint = endpoint1 })
	e.r.Metrics = NewMetrics(reg)
	var got []time.Time
	observe := func() {
		got = append(got, time.Unix(int64(testutil.ToFloat64(e.r.Metrics.renewAfter)), 0).UTC())
	}
	e.mustReconcile()
	observe()
	e.clock.Set(start.Add(testLifetime / 4)) // not due: unchanged
	e.mustReconcile()
	observe()
	e.clock.Set(start.Add(testLifetime)) // due: renewed
	e.mustReconcile()
	observe()
	want := []time.Time{start.Add(testLifetime / 2), start.Add(testLifetime / 2), start.Add(testLifetime + testLifetime/2)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("renew-after gauge (-want +got):\n%s", diff)
	}
	if again := NewMetrics(reg); again.renewAfter != e.r.Metrics.renewAfter {
		t.Error("a second NewMetrics on the same registry did not reuse the registered gauge")
	}
}
