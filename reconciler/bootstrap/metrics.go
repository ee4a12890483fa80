package bootstrap

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the bootstrap's Prometheus metrics.
type Metrics struct {
	// renewAfter is when the reader token is due for renewal: an alert fires when it
	// lies well in the past (the token was not renewed).
	renewAfter prometheus.Gauge
}

// NewMetrics returns the bootstrap's metrics registered with reg (nil: not registered).
// A metric already registered (a second term of leadership in one process) is reused.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		renewAfter: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "kubectl_registry", Subsystem: "reader_token", Name: "renew_after_timestamp_seconds",
			Help: "Unix time at which the local reader token (the one peers hold) is due for renewal, about half of its lifetime after it was issued.",
		}),
	}
	if reg == nil {
		return m
	}
	if err := reg.Register(m.renewAfter); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(prometheus.Gauge); ok {
				m.renewAfter = existing
			}
		}
	}
	return m
}

// observeRenewAfter records when the reader token is due for renewal. m may be nil.
func (m *Metrics) observeRenewAfter(t time.Time) {
	if m == nil {
		return
	}
	m.renewAfter.Set(float64(t.Unix()))
}
