package engine

import (
	"errors"
	"math"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the engine's Prometheus metrics.
type Metrics struct {
	writes    *prometheus.CounterVec
	conflicts *prometheus.CounterVec
	errors    *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	// stages splits the latency of each write into its stages (see observeStages).
	stages *prometheus.HistogramVec
	// held, changedOnWrite and heldObjects count the copies the local cluster changes
	// after each write (see Settle).
	held           *prometheus.CounterVec
	changedOnWrite *prometheus.CounterVec
	heldObjects    *prometheus.GaugeVec
	// refused counts the writes the local API server refused, by classified reason;
	// driftObjects are the writes ReportOnly rules withhold.
	refused      *prometheus.CounterVec
	driftObjects *prometheus.GaugeVec
	// overCap are the peers' watches over the cap on objects (MaxPeerObjects).
	overCap *prometheus.GaugeVec
}

// NewMetrics returns the engine's metrics registered with reg (nil: not registered). A
// metric already registered (a second engine in one process) is reused.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "kubectl_registry", Subsystem: "sync", Name: "writes_total",
			Help: "Writes of copies by rule and operation (create, update, delete).",
		}, []string{"rule", "op"}),
		conflicts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "kubectl_registry", Subsystem: "sync", Name: "conflicts_total",
			Help: "Copies not written because a local object without the ownership mark is in the way.",
		}, []string{"rule"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "kubectl_registry", Subsystem: "sync", Name: "errors_total",
			Help: "Failed reconciles of synced objects, by kind.",
		}, []string{"kind"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "kubectl_registry", Subsystem: "sync", Name: "latency_seconds",
			Help:    "Time from a change seen on a source (or locally) to the local write.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"rule"}),
		stages: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "kubectl_registry", Subsystem: "sync", Name: "stage_seconds",
			Help: "The stages of each write of a copy: queue (from the change seen to the start of its reconcile), decide (from there to the write request) and write (the request to the local API server).",
			// 0.1 ms to about 3 s: the stages of a write on a fast path are fractions of a
			// millisecond, which latency_seconds's buckets do not tell apart. Each bucket is
			// √2 times the last: a quantile read off them (interpolated within a bucket) is
			// within a fifth of the true one, close enough to compare a write with the
			// floor's (with doubling buckets, a 3.5 ms median could read 4.4 ms).
			Buckets: prometheus.ExponentialBuckets(0.0001, math.Sqrt2, 31),
		}, []string{"stage"}),
		held: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "kubectl_registry", Subsystem: "sync", Name: "held_total",
			Help: "Holds of copies that something in the local cluster changes after each write: they are not rewritten for a while (backing off).",
		}, []string{"rule"}),
		changedOnWrite: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "kubectl_registry", Subsystem: "sync", Name: "changed_on_write_total",
			Help: "Writes of copies that the local cluster stored differently from what was written (a mutating admission webhook or defaulting).",
		}, []string{"rule"}),
		heldObjects: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "kubectl_registry", Subsystem: "sync", Name: "held_objects",
			Help: "Copies currently held (not rewritten) because something changes them after each write.",
		}, []string{"rule"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "kubectl_registry", Subsystem: "sync", Name: "refused_writes_total",
			Help: "Writes of copies the local API server refused, by rule and reason (ImmutableField, InvalidCopy, WriteForbidden, CopyTooLarge, NamespaceMissing, WriteFailed).",
		}, []string{"rule", "reason"}),
		driftObjects: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "kubectl_registry", Subsystem: "sync", Name: "drift_objects",
			Help: "Copies that differ from their source and that a ReportOnly rule does not write (it would create, update or delete them).",
		}, []string{"rule"}),
		overCap: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "kubectl_registry", Subsystem: "sync", Name: "watches_over_cap",
			Help: "Watches of a peer's objects not running because the peer offers more objects than the cap (--max-peer-objects), by peer and kind; the copies already made from them are kept.",
		}, []string{"cluster", "kind"}),
	}
	if reg == nil {
		return m
	}
	m.writes = registerVec(reg, m.writes)
	m.conflicts = registerVec(reg, m.conflicts)
	m.errors = registerVec(reg, m.errors)
	m.latency = registerVec(reg, m.latency)
	m.stages = registerVec(reg, m.stages)
	m.held = registerVec(reg, m.held)
	m.changedOnWrite = registerVec(reg, m.changedOnWrite)
	m.heldObjects = registerVec(reg, m.heldObjects)
	m.refused = registerVec(reg, m.refused)
	m.driftObjects = registerVec(reg, m.driftObjects)
	m.overCap = registerVec(reg, m.overCap)
	return m
}

func registerVec[T prometheus.Collector](reg prometheus.Registerer, c T) T {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(T); ok {
				return existing
			}
		}
	}
	return c
}
