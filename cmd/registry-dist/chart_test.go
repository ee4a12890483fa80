package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// The repository's chart, kustomize base and monitoring pack.
const (
	chartDir      = "../../manifests/helm/kubectl-registry"
	kustomizeDir  = "../../manifests/kustomize"
	monitoringDir = "../../manifests/monitoring"
)

// checkChartArchive loads a chart archive with Helm's loader, checks the version it was
// stamped with, lints it as helm lint --strict does and renders it.
func checkChartArchive(t *testing.T, archive, version string) {
	t.Helper()
	ch, err := loader.Load(archive)
	if err != nil {
		t.Fatalf("helm cannot load %s: %v", archive, err)
	}
	got := []string{ch.Metadata.Name, ch.Metadata.Version, ch.Metadata.AppVersion}
	if diff := cmp.Diff([]string{chartName, strings.TrimPrefix(version, "v"), version}, got); diff != "" {
		t.Errorf("%s: name, version, appVersion (-want +got):\n%s", archive, diff)
	}
	if n := len(ch.CRDObjects()); n == 0 {
		t.Errorf("%s holds no CRDs", archive)
	}
	lint := action.NewLint()
	lint.Strict = true
	lint.Namespace = "cluster-registry"
	result := lint.Run([]string{archive}, nil)
	for _, err := range result.Errors {
		t.Errorf("helm lint %s: %v", archive, err)
	}
	install := action.NewInstall(&action.Configuration{})
	install.DryRun, install.ClientOnly, install.Replace = true, true, true
	install.ReleaseName, install.Namespace = chartName, "cluster-registry"
	rel, err := install.Run(ch, map[string]any{"clusterName": "east"})
	if err != nil {
		t.Fatalf("helm template %s: %v", archive, err)
	}
	if !strings.Contains(rel.Manifest, "kind: Deployment") || !strings.Contains(rel.Manifest, "--cluster-name=east") {
		t.Errorf("helm template %s renders no Deployment with --cluster-name=east:\n%s", archive, rel.Manifest)
	}
}

// checkKustomizeArchive unpacks the kustomize archive and builds an overlay of its base
// and monitoring pack, as docs/install.md says.
func checkKustomizeArchive(t *testing.T, archive string) {
	t.Helper()
	entries, err := readArchive(archive)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, e := range entries {
		p := filepath.Join(dir, filepath.FromSlash(e.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, e.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	overlay := filepath.Join(dir, "overlay")
	if err := os.MkdirAll(overlay, 0o755); err != nil {
		t.Fatal(err)
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- ../kustomize\n- ../monitoring\n"
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), overlay)
	if err != nil {
		t.Fatalf("kustomize build of the base and monitoring pack of %s: %v", archive, err)
	}
	var kinds []string
	for _, r := range rm.Resources() {
		kinds = append(kinds, r.GetKind())
	}
	for _, want := range []string{"CustomResourceDefinition", "Deployment", "ServiceMonitor", "PrometheusRule"} {
		if !strings.Contains(strings.Join(kinds, " "), want) {
			t.Errorf("kustomize build of %s has no %s: %v", archive, want, kinds)
		}
	}
}

func TestPackageChartRefusesAChartWithoutVersion(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Chart.yaml"), []byte("apiVersion: v2\nname: kubectl-registry\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := packageChart(dir, "v1.0.0", t.TempDir()); err == nil || !strings.Contains(err.Error(), "version") {
		t.Errorf("packageChart of a Chart.yaml without version: error = %v, want one about the version", err)
	}
}
