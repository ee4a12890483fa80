package install_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/manifests"
	"github.com/kubectl-registry/kubectl-registry/manifests/serverside"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/plugintest"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// packLines are the lines install prints for the monitoring pack.
func packLines(stdout string) []string {
	var out []string
	for line := range strings.SplitSeq(strings.TrimSpace(stdout), "\n") {
		if strings.Contains(line, "monitoring.coreos.com/") || strings.HasPrefix(line, "configmap/"+manifests.DashboardConfigMap) {
			out = append(out, line)
		}
	}
	return out
}

// TestMonitoring: install --monitoring stops before applying anything on a cluster
// without the Prometheus Operator's CRDs, and applies the pack, after the rest, once they
// are there; a second run leaves it unchanged. --dry-run=client prints the pack without
// looking at the cluster.
func TestMonitoring(t *testing.T) {
	_, c := needBed(t, "cluster-a")
	ctx := context.Background()
	args := append([]string{"install", "--cluster-name", "east", "--api-server-endpoint", "east.example.com:6443", "--monitoring"}, kubeArgs("cluster-a")...)

	t.Run("client dry run prints the pack", func(t *testing.T) {
		stdout, stderr, err := run(t, append(args, "--dry-run=client", "-o", "name")...)
		if err != nil {
			t.Fatalf("%v\nstderr: %s", err, stderr)
		}
		want := []string{
			"servicemonitor.monitoring.coreos.com/cluster-registry-controller",
			"prometheusrule.monitoring.coreos.com/cluster-registry-controller",
			"configmap/" + manifests.DashboardConfigMap,
		}
		if diff := cmp.Diff(want, packLines(stdout)); diff != "" {
			t.Errorf("pack in the dry run (-want +got):\n%s\nstdout:\n%s", diff, stdout)
		}
	})

	t.Run("without the Prometheus Operator's CRDs nothing is applied", func(t *testing.T) {
		stdout, stderr, err := run(t, args...)
		plugintest.WantExitCode(t, err, 2, `--monitoring: the API server at`, `(context "cluster-a") does not serve ServiceMonitor and PrometheusRule of monitoring.coreos.com/v1`,
			"install the Prometheus Operator", "or run install without --monitoring; nothing was applied")
		if stdout != "" {
			t.Errorf("stdout: %q (stderr %q)", stdout, stderr)
		}
	})

	crds, err := os.ReadFile("testdata/prometheus-operator-crds.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifests.Decode(crds)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := serverside.Apply(ctx, c, "install-test", objs); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, o := range objs {
			var crd apiextensionsv1.CustomResourceDefinition
			if err := c.Get(ctx, client.ObjectKeyFromObject(o), &crd); err != nil {
				return false, nil
			}
			established := false
			for _, cond := range crd.Status.Conditions {
				established = established || (cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue)
			}
			if !established {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		t.Fatalf("the Prometheus Operator's CRDs are not established: %v", err)
	}

	t.Run("with the CRDs the pack is applied last", func(t *testing.T) {
		stdout, stderr, err := run(t, args...)
		if err != nil {
			t.Fatalf("%v\nstderr: %s", err, stderr)
		}
		lines := strings.Split(strings.TrimSpace(stdout), "\n")
		want := []string{
			"servicemonitor.monitoring.coreos.com/cluster-registry-controller created",
			"prometheusrule.monitoring.coreos.com/cluster-registry-controller created",
			"configmap/" + manifests.DashboardConfigMap + " created",
		}
		if len(lines) < 3 {
			t.Fatalf("stdout:\n%s", stdout)
		}
		if diff := cmp.Diff(want, lines[len(lines)-3:]); diff != "" {
			t.Errorf("last lines (-want +got):\n%s", diff)
		}
		rule := &unstructured.Unstructured{}
		rule.SetAPIVersion("monitoring.coreos.com/v1")
		rule.SetKind("PrometheusRule")
		if err := c.Get(ctx, client.ObjectKey{Namespace: v1alpha1.DefaultNamespace, Name: "cluster-registry-controller"}, rule); err != nil {
			t.Fatal(err)
		}
		groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
		if len(groups) == 0 {
			t.Errorf("the PrometheusRule has no groups: %v", rule.Object["spec"])
		}
		var cm corev1.ConfigMap
		if err := c.Get(ctx, client.ObjectKey{Namespace: v1alpha1.DefaultNamespace, Name: manifests.DashboardConfigMap}, &cm); err != nil {
			t.Fatal(err)
		}
		dashboard, err := manifests.Dashboard()
		if err != nil {
			t.Fatal(err)
		}
		if cm.Data[manifests.DashboardKey] != string(dashboard) || cm.Labels[manifests.GrafanaDashboardLabel] != "1" {
			t.Errorf("dashboard ConfigMap: labels %v, %d bytes of dashboard, want %d", cm.Labels, len(cm.Data[manifests.DashboardKey]), len(dashboard))
		}
	})

	t.Run("again: unchanged", func(t *testing.T) {
		stdout, stderr, err := run(t, args...)
		if err != nil {
			t.Fatalf("%v\nstderr: %s", err, stderr)
		}
		for _, line := range packLines(stdout) {
			if !strings.HasSuffix(line, " unchanged") {
				t.Errorf("second install: %s", line)
			}
		}
		if len(packLines(stdout)) != 3 {
			t.Errorf("second install printed %d pack lines, want 3:\n%s", len(packLines(stdout)), stdout)
		}
	})
}
