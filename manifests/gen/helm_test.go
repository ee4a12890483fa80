package main

import (
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/lint/support"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-registry/kubectl-registry/manifests"
)

// chartPath is the committed chart, seen from this package.
var chartPath = filepath.Join(manifestsDir, filepath.FromSlash(chartDir))

// loadChart loads the committed chart with Helm's loader.
func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	ch, err := loader.Load(chartPath)
	if err != nil {
		t.Fatalf("loading the chart: %v", err)
	}
	return ch
}

// helmTemplate renders ch as `helm template kubectl-registry --include-crds --namespace
// namespace` does, with vals (--set), and returns the objects.
func helmTemplate(t *testing.T, ch *chart.Chart, namespace string, vals map[string]any) ([]*unstructured.Unstructured, error) {
	t.Helper()
	return helmTemplateAs(t, ch, "kubectl-registry", namespace, vals)
}

// helmTemplateAs renders ch as `helm template release --include-crds --namespace
// namespace` does, with vals, and returns the objects.
func helmTemplateAs(t *testing.T, ch *chart.Chart, release, namespace string, vals map[string]any) ([]*unstructured.Unstructured, error) {
	t.Helper()
	install := action.NewInstall(&action.Configuration{})
	install.DryRun = true
	install.DryRunOption = "client"
	install.ClientOnly = true
	install.Replace = true
	install.IncludeCRDs = true
	install.ReleaseName = release
	install.Namespace = namespace
	rel, err := install.Run(ch, vals)
	if err != nil {
		return nil, err
	}
	objs, err := manifests.Decode([]byte(rel.Manifest))
	if err != nil {
		t.Fatalf("decoding the rendered chart: %v\n%s", err, rel.Manifest)
	}
	return objs, nil
}

// settings are the same settings given to install (flags) and to the chart (values).
type settings struct {
	name      string
	namespace string
	flags     []string
	values    map[string]any
	// dropRegistryNamespace removes the registry Namespace from what install renders
	// (createNamespace: false).
	dropRegistryNamespace bool
}

// sameSettings are the settings under which the chart, the kustomize overlays of the
// docs and install must render the same objects.
var sameSettings = []settings{
	{name: "defaults", namespace: "cluster-registry"},
	{
		name:      "every knob",
		namespace: "registry-east",
		flags: []string{"--namespace", "registry-east", "--cluster-name", "east", "--api-server-endpoint", "https://east.example.com:6443",
			"--image", "registry.example.com/team/kubectl-registry:v9.8.7", "--replicas", "3", "--monitoring"},
		values: map[string]any{
			"clusterName":       "east",
			"apiServerEndpoint": "https://east.example.com:6443",
			"image":             map[string]any{"repository": "registry.example.com/team/kubectl-registry", "tag": "v9.8.7"},
			"replicas":          3,
			"monitoring":        map[string]any{"enabled": true},
		},
	},
	{
		name:      "an endpoint without a scheme",
		namespace: "cluster-registry",
		flags:     []string{"--api-server-endpoint", "east.example.com:6443"},
		values:    map[string]any{"apiServerEndpoint": "east.example.com:6443"},
	},
	{
		name:      "a bare IPv6 endpoint",
		namespace: "cluster-registry",
		flags:     []string{"--api-server-endpoint", "fd00:10::1"},
		values:    map[string]any{"apiServerEndpoint": "fd00:10::1"},
	},
	{
		name:      "an IPv6 endpoint with a port",
		namespace: "cluster-registry",
		flags:     []string{"--api-server-endpoint", "[fd00:10::1]:6443"},
		values:    map[string]any{"apiServerEndpoint": "[fd00:10::1]:6443"},
	},
	{
		name:      "only a cluster name, on a registry with a port",
		namespace: "cluster-registry",
		flags:     []string{"--cluster-name", "west", "--image", "localhost:5000/kubectl-registry:dev"},
		values:    map[string]any{"clusterName": "west", "image": map[string]any{"repository": "localhost:5000/kubectl-registry", "tag": "dev"}},
	},
	{
		name:      "members granted nothing",
		namespace: "cluster-registry",
		flags:     []string{"--member-grants", "none"},
		values:    map[string]any{"memberGrants": "none"},
	},
	{
		name:                  "the namespace made by someone else",
		namespace:             "cluster-registry",
		values:                map[string]any{"createNamespace": false},
		dropRegistryNamespace: true,
	},
}

// TestHelmTemplateEqualsInstall renders the chart with Helm's library, as helm template
// does, and compares the objects with what install prints for the same settings.
func TestHelmTemplateEqualsInstall(t *testing.T) {
	ch := loadChart(t)
	for _, s := range sameSettings {
		t.Run(s.name, func(t *testing.T) {
			want := installDryRun(t, s.flags...)
			if s.dropRegistryNamespace {
				want = dropNamespace(want, s.namespace)
			}
			got, err := helmTemplate(t, ch, s.namespace, s.values)
			if err != nil {
				t.Fatalf("helm template: %v", err)
			}
			compareObjects(t, "helm template", want, got)
		})
	}
}

// dropNamespace returns objs without the Namespace named name.
func dropNamespace(objs []*unstructured.Unstructured, name string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, obj := range objs {
		if obj.GetKind() == "Namespace" && obj.GetName() == name {
			continue
		}
		out = append(out, obj)
	}
	return out
}

// TestHelmRefusesWhatInstallRefuses checks that the values schema rejects the values
// install's flags reject.
func TestHelmRefusesWhatInstallRefuses(t *testing.T) {
	ch := loadChart(t)
	tests := []struct {
		name    string
		values  map[string]any
		wantErr string
	}{
		{name: "no replicas", values: map[string]any{"replicas": 0}, wantErr: "replicas"},
		{name: "a cluster name that is not a label", values: map[string]any{"clusterName": "East_1"}, wantErr: "clusterName"},
		{name: "an image with white space", values: map[string]any{"image": map[string]any{"repository": "a b", "tag": "v1"}}, wantErr: "repository"},
		{name: "an unknown value", values: map[string]any{"clustername": "east"}, wantErr: "clustername"},
		{name: "member grants that are neither all nor none", values: map[string]any{"memberGrants": "some"}, wantErr: "memberGrants"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := helmTemplate(t, ch, "cluster-registry", tt.values)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("helm template with %v: error = %v, want one about %q", tt.values, err, tt.wantErr)
			}
		})
	}
}

// TestHelmLint lints the chart as helm lint --strict does, with the defaults and with
// every knob set.
func TestHelmLint(t *testing.T) {
	for _, s := range sameSettings {
		t.Run(s.name, func(t *testing.T) {
			lint := action.NewLint()
			lint.Strict = true
			lint.Namespace = s.namespace
			result := lint.Run([]string{chartPath}, s.values)
			if result.TotalChartsLinted != 1 {
				t.Errorf("linted %d charts, want 1", result.TotalChartsLinted)
			}
			for _, err := range result.Errors {
				t.Errorf("helm lint: %v", err)
			}
			for _, msg := range result.Messages {
				if msg.Severity > support.InfoSev {
					t.Errorf("helm lint: %s", msg)
				}
			}
		})
	}
}

// installOnlyFlags are the flags of install that say how install runs, not what it
// installs: no chart value matches them.
var installOnlyFlags = []string{"dry-run", "wait", "timeout", "output", "template", "show-managed-fields", "allow-missing-template-keys"}

// flagValues maps each flag of install that changes what is installed to the chart's
// value for it ("" for the release namespace, which is helm's --namespace).
var flagValues = map[string]string{
	"namespace":           "",
	"cluster-name":        "clusterName",
	"api-server-endpoint": "apiServerEndpoint",
	"image":               "image",
	"replicas":            "replicas",
	"monitoring":          "monitoring",
	"member-grants":       "memberGrants",
}

// TestEveryInstallFlagIsAValue fails when install has a flag that changes what it
// installs and the chart has no value for it (or the value is missing from values.yaml):
// a new flag of install needs a value, handled by the generator, and a case in
// sameSettings.
func TestEveryInstallFlagIsAValue(t *testing.T) {
	cmd, _, err := newRegistryCmd(io.Discard, io.Discard).Find([]string{"install"})
	if err != nil {
		t.Fatal(err)
	}
	values := loadChart(t).Values
	cmd.LocalFlags().VisitAll(func(f *pflag.Flag) {
		if slices.Contains(installOnlyFlags, f.Name) {
			return
		}
		value, ok := flagValues[f.Name]
		if !ok {
			t.Errorf("install --%s has no value in the chart: add one (manifests/gen: values.yaml, values.schema.json and the template of what the flag changes), a case to sameSettings and an entry to flagValues", f.Name)
			return
		}
		if _, ok := values[value]; value != "" && !ok {
			t.Errorf("install --%s maps to the chart value %q, which values.yaml does not have", f.Name, value)
		}
	})
}
