package peers

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the per-peer gauges: whether the peer is up and when it last answered.
type metrics struct {
	up          *prometheus.GaugeVec
	lastSuccess *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "kubectl_registry", Subsystem: "peer", Name: "up",
			Help: "1 while the peer cluster is Ready (answers the health check), else 0.",
		}, []string{"cluster"}),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "kubectl_registry", Subsystem: "peer", Name: "last_success_timestamp_seconds",
			Help: "Unix time of the last successful health check of the peer cluster.",
		}, []string{"cluster"}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	m.up, err = register(reg, m.up)
	if err != nil {
		return nil, err
	}
	m.lastSuccess, err = register(reg, m.lastSuccess)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// register registers c, or returns the collector already registered under its name (a
// second manager in the same process, as in tests).
func register(reg prometheus.Registerer, c *prometheus.GaugeVec) (*prometheus.GaugeVec, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(*prometheus.GaugeVec); ok {
				return existing, nil
			}
		}
		return nil, err
	}
	return c, nil
}

func (m *metrics) observe(p Peer) {
	up := 0.0
	if p.Ready {
		up = 1
	}
	m.up.WithLabelValues(p.Name).Set(up)
}

// succeeded records a successful health check of the peer name at t.
func (m *metrics) succeeded(name string, t time.Time) {
	m.lastSuccess.WithLabelValues(name).Set(float64(t.Unix()))
}

func (m *metrics) forget(name string) {
	m.up.DeleteLabelValues(name)
	m.lastSuccess.DeleteLabelValues(name)
}
