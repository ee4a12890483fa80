package manifests

import (
	"embed"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

//go:embed monitoring/servicemonitor.yaml monitoring/prometheusrule.yaml monitoring/dashboard.json
var monitoringFiles embed.FS

// The monitoring pack (manifests/monitoring): a ServiceMonitor and a PrometheusRule of
// the Prometheus Operator, and the Grafana dashboard in a ConfigMap that Grafana's
// dashboard sidecar loads. monitoring/kustomization.yaml builds the same objects for
// GitOps.
const (
	// DashboardConfigMap is the name of the ConfigMap holding the dashboard.
	DashboardConfigMap = "cluster-registry-dashboard"
	// DashboardKey is the dashboard's key in it.
	DashboardKey = "kubectl-registry.json"
	// GrafanaDashboardLabel marks ConfigMaps the dashboard sidecar of Grafana
	// (kube-prometheus-stack) loads.
	GrafanaDashboardLabel = "grafana_dashboard"
)

// MonitoringGroupVersion is the API of the Prometheus Operator's kinds the pack uses.
var MonitoringGroupVersion = schema.GroupVersion{Group: "monitoring.coreos.com", Version: "v1"}

// MonitoringKinds are the Prometheus Operator kinds of the pack, whose CRDs a cluster
// must serve before the pack is applied.
var MonitoringKinds = []string{"ServiceMonitor", "PrometheusRule"}

// Dashboard returns the Grafana dashboard JSON of the pack.
func Dashboard() ([]byte, error) {
	return monitoringFiles.ReadFile("monitoring/dashboard.json")
}

// MonitoringObjects decodes the monitoring pack: the ServiceMonitor, the PrometheusRule
// and the dashboard's ConfigMap, in the embedded manifests' namespace.
func MonitoringObjects() ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	for _, name := range []string{"monitoring/servicemonitor.yaml", "monitoring/prometheusrule.yaml"} {
		data, err := monitoringFiles.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("reading manifest %s: %w", name, err)
		}
		decoded, err := Decode(data)
		if err != nil {
			return nil, fmt.Errorf("manifest %s: %w", name, err)
		}
		objs = append(objs, decoded...)
	}
	dashboard, err := Dashboard()
	if err != nil {
		return nil, fmt.Errorf("reading the dashboard: %w", err)
	}
	cm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata": map[string]any{
			"name":      DashboardConfigMap,
			"namespace": objs[0].GetNamespace(),
			"labels": map[string]any{
				GrafanaDashboardLabel:       "1",
				"app.kubernetes.io/name":    "kubectl-registry",
				"app.kubernetes.io/part-of": "kubectl-registry",
			},
		},
		"data": map[string]any{DashboardKey: string(dashboard)},
	}}
	return append(objs, cm), nil
}
