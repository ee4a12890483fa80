package clusters

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// Metrics exports the conditions of the Cluster CRs, so that alerts can watch the key
// and credential states (ReaderKeyReady, ReaderCredentialReady) and the relays
// (RelaysAgree): kubectl_registry_cluster_condition{cluster,type,reason} is 1 while the
// condition is True, 0 while it is False or Unknown, with the condition's reason.
type Metrics struct {
	condition *prometheus.GaugeVec
	// legacyExpiries is, per legacy peer, the expiry of the credential of this cluster it
	// holds, as read from it: kubectl_registry_legacy_credential_expiry_timestamp_seconds.
	legacyExpiries *prometheus.GaugeVec
}

// NewMetrics registers the metrics with reg (nil: not registered). A collector already
// registered under the same name (a second manager in one process) is shared.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		condition: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "kubectl_registry", Subsystem: "cluster", Name: "condition",
			Help: "1 while the condition of the Cluster is True, else 0, with its reason: ReaderKeyReady, ReaderCredentialReady, RelaysAgree, Ready, ClustersSynced, WithinSizing, ...",
		}, []string{"cluster", "type", "reason"}),
		legacyExpiries: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "kubectl_registry", Subsystem: "legacy_credential", Name: "expiry_timestamp_seconds",
			Help: "When the reader credential of this cluster that a legacy peer holds (copied to it by join --legacy) expires, as its token states, read from the peer; absent when unknown.",
		}, []string{"cluster"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, g := range []**prometheus.GaugeVec{&m.condition, &m.legacyExpiries} {
		if err := register(reg, g); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// register registers *g with reg; a collector already registered under the same name (a
// second manager in one process) replaces *g.
func register(reg prometheus.Registerer, g **prometheus.GaugeVec) error {
	err := reg.Register(*g)
	if err == nil {
		return nil
	}
	var are prometheus.AlreadyRegisteredError
	if !errors.As(err, &are) {
		return err
	}
	existing, ok := are.ExistingCollector.(*prometheus.GaugeVec)
	if !ok {
		return err
	}
	*g = existing
	return nil
}

// legacyExpiry sets the expiry of the credential legacy peer cluster holds; a zero
// expiry (unknown) drops the series.
func (m *Metrics) legacyExpiry(cluster string, expires time.Time) {
	if m == nil {
		return
	}
	if expires.IsZero() {
		m.legacyExpiries.DeleteLabelValues(cluster)
		return
	}
	m.legacyExpiries.WithLabelValues(cluster).Set(float64(expires.Unix()))
}

// observe sets the series of the Cluster named cluster to its conditions, dropping those
// of conditions it no longer has and of reasons it no longer states.
func (m *Metrics) observe(cluster string, conds []v1alpha1.ClusterCondition) {
	if m == nil {
		return
	}
	m.condition.DeletePartialMatch(prometheus.Labels{"cluster": cluster})
	for _, c := range conds {
		v := 0.0
		if c.Status == corev1.ConditionTrue {
			v = 1
		}
		m.condition.WithLabelValues(cluster, string(c.Type), c.Reason).Set(v)
	}
}

// forget drops the series of a Cluster that is gone.
func (m *Metrics) forget(cluster string) {
	if m == nil {
		return
	}
	m.condition.DeletePartialMatch(prometheus.Labels{"cluster": cluster})
	m.legacyExpiries.DeleteLabelValues(cluster)
}
