package create_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-registry/kubectl-registry/plugin/create"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/plugintest"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// bed has one cluster, cluster-a, with the registry's CRDs.
var bed *testbed.Bed

func TestMain(m *testing.M) {
	os.Exit(testbed.Main(m, testbed.Options{Clusters: 1, CRDDirectoryPaths: []string{"../../manifests/crds"}}, &bed))
}

// run runs "kubectl registry create <args>" through a root command built like
// plugin/root.go: kubectl's kubeconfig flags are persistent flags of the root.
func run(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := plugintest.Command{New: []plugintest.NewCmd{create.NewCmdCreate}, Timeout: time.Minute}
	return cmd.Run(t, append([]string{"create"}, args...)...)
}

// offline makes sure that --dry-run=client does not read any kubeconfig.
var offline = []string{"--kubeconfig", "/nonexistent/kubeconfig", "--dry-run=client", "-o", "yaml"}

func golden(t *testing.T, name, got string) {
	t.Helper()
	plugintest.Golden(t, filepath.Join("testdata", name+".golden"), got, *update)
}

// decode parses one YAML document strictly into a T.
func decode[T any](t *testing.T, data []byte) *T {
	t.Helper()
	var v T
	if err := yaml.UnmarshalStrict(data, &v); err != nil {
		t.Fatalf("decoding %T: %v\n%s", v, err, data)
	}
	return &v
}

func readSeed(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "seed", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestDryRunMatchesSeed checks that the seed's rules can be written with the flags.
func TestDryRunMatchesSeed(t *testing.T) {
	seedArgs := []string{"rule", "test-secret-sink", "--kind", "Secret", "--name", "test-secret", "--namespace-match", "cluster-registry"}
	tests := []struct {
		name   string
		args   []string
		seed   string
		golden string
	}{
		{"test-secret-sink", seedArgs, "resourcesyncrule-test-secret-sink.yaml", "rule-test-secret-sink"},
		{"sync-disabled", append(seedArgs[:len(seedArgs):len(seedArgs)], "--sync-disabled"), "resourcesyncrule-test-secret-sink-sync-disabled.yaml", ""},
		{"feature and sync-disabled", append(seedArgs[:len(seedArgs):len(seedArgs)], "--sync-disabled", "--feature", "test-secret-feature"), "resourcesyncrule-test-secret-sink-feature.yaml", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := run(t, append(tt.args, offline...)...)
			if err != nil {
				t.Fatal(err)
			}
			want := decode[v1alpha1.ResourceSyncRule](t, readSeed(t, tt.seed))
			got := decode[v1alpha1.ResourceSyncRule](t, []byte(out))
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("rule differs from the seed's %s (-want +got):\n%s", tt.seed, diff)
			}
			if tt.golden != "" {
				golden(t, tt.golden, out)
			}
		})
	}

	t.Run("seed feature", func(t *testing.T) {
		out, _, err := run(t, append([]string{"feature", "test-secret-source", "--feature", "test-secret-feature"}, offline...)...)
		if err != nil {
			t.Fatal(err)
		}
		want := decode[v1alpha1.ClusterFeature](t, readSeed(t, "clusterfeature-test-secret-source.yaml"))
		got := decode[v1alpha1.ClusterFeature](t, []byte(out))
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("feature differs from the seed's (-want +got):\n%s", diff)
		}
	})
}

// TestDryRunGolden checks the YAML written for the other shapes of rules and features.
func TestDryRunGolden(t *testing.T) {
	tests := []struct {
		golden string
		args   []string
	}{
		{"rule-features-selectors", []string{"rule", "web", "--group", "apps", "--version", "v1", "--kind", "Deployment",
			"--namespace-match", "prod", "--namespace-match", "staging",
			"--label-selector", "app=web,tier notin (db)", "--label-selector", "env in (prod,staging),!legacy",
			"--feature", "web", "--feature", "example.com/region-eu",
			"--deletion-policy", "Delete", "--create-namespaces"}},
		{"rule-kind-only", []string{"rule", "all-configmaps", "--kind", "ConfigMap"}},
		{"rule-name-only", []string{"rule", "one-role", "--group", "rbac.authorization.k8s.io", "--kind", "ClusterRole", "--name", "view-things"}},
		{"feature-labels", []string{"feature", "web", "--feature", "example.com/web", "--label", "tier=frontend", "--label", "example.com/region=eu"}},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			out, _, err := run(t, append(tt.args, offline...)...)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, tt.golden, out)
		})
	}

	t.Run("name output", func(t *testing.T) {
		out, _, err := run(t, "rule", "x", "--kind", "Secret", "--kubeconfig", "/nonexistent/kubeconfig", "--dry-run=client")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff("resourcesyncrule.clusterregistry.k8s.cisco.com/x created (dry run)\n", out); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
}

// TestUsageErrors checks that bad flags exit with 2 before anything is sent.
func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"no type", []string{}, []string{"rule or feature"}},
		{"unknown type", []string{"secret", "x"}, []string{`unknown object type "secret"`}},
		{"no name", []string{"rule", "--kind", "Secret"}, []string{"NAME is required"}},
		{"two names", []string{"rule", "a", "b", "--kind", "Secret"}, []string{"exactly one NAME"}},
		{"bad name", []string{"rule", "Bad_Name", "--kind", "Secret"}, []string{`invalid NAME "Bad_Name"`}},
		{"no kind", []string{"rule", "x"}, []string{"--kind is required"}},
		{"resource not kind", []string{"rule", "x", "--kind", "secrets"}, []string{`--kind "secrets"`}},
		{"bad selector", []string{"rule", "x", "--kind", "Secret", "--label-selector", "app in (a"}, []string{`--label-selector "app in (a"`}},
		{"bad feature", []string{"rule", "x", "--kind", "Secret", "--feature", "bad name!"}, []string{`--feature "bad name!"`}},
		{"bad namespace", []string{"rule", "x", "--kind", "Secret", "--namespace-match", "Not_A_Namespace"}, []string{`--namespace-match "Not_A_Namespace"`}},
		{"bad deletion policy", []string{"rule", "x", "--kind", "Secret", "--deletion-policy", "Orphan"}, []string{"--deletion-policy must be Retain or Delete"}},
		{"bad group", []string{"rule", "x", "--kind", "Deployment", "--group", "Apps!"}, []string{`--group "Apps!"`}},
		{"feature missing", []string{"feature", "x"}, []string{"--feature is required"}},
		{"feature bad name", []string{"feature", "x", "--feature", "-dash"}, []string{`--feature "-dash"`}},
		{"feature bad label", []string{"feature", "x", "--feature", "f", "--label", "novalue"}, []string{`--label "novalue": want KEY=VALUE`}},
		{"feature bad label value", []string{"feature", "x", "--feature", "f", "--label", "k=bad value"}, []string{`--label "k=bad value": invalid value`}},
		{"bad dry-run", []string{"feature", "x", "--feature", "f", "--dry-run", "maybe"}, []string{`--dry-run must be "none", "client" or "server"`}},
		{"bad output", []string{"feature", "x", "--feature", "f", "--dry-run=client", "-o", "table"}, []string{"--output"}},
		{"unknown flag", []string{"rule", "x", "--kind", "Secret", "--bogus"}, []string{"unknown flag: --bogus"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// No usable kubeconfig: a usage error must come before any use of it.
			out, _, err := run(t, append(tt.args, "--kubeconfig", "/nonexistent/kubeconfig")...)
			plugintest.WantExitCode(t, err, 2, tt.want...)
			if out != "" {
				t.Errorf("stdout %q, want nothing", out)
			}
		})
	}
}

// TestCreateInCluster creates the seed's rule and feature in a real API server.
func TestCreateInCluster(t *testing.T) {
	testbed.SkipIfNoAssets(t)
	if bed == nil {
		t.Fatal("test binaries are present but the test bed did not start")
	}
	c, err := bed.Cluster("cluster-a").Client()
	if err != nil {
		t.Fatal(err)
	}
	kube := []string{"--kubeconfig", bed.KubeconfigPath, "--context", "cluster-a"}
	ruleArgs := append([]string{"rule", "test-secret-sink", "--kind", "Secret", "--name", "test-secret", "--namespace-match", "cluster-registry"}, kube...)

	t.Run("server dry run persists nothing", func(t *testing.T) {
		out, _, err := run(t, append(ruleArgs, "--dry-run=server")...)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff("resourcesyncrule.clusterregistry.k8s.cisco.com/test-secret-sink created (server dry run)\n", out); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		err = c.Get(context.Background(), client.ObjectKey{Name: "test-secret-sink"}, &v1alpha1.ResourceSyncRule{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("rule after a server dry run: want not found, got %v", err)
		}
	})

	t.Run("rule", func(t *testing.T) {
		out, _, err := run(t, ruleArgs...)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff("resourcesyncrule.clusterregistry.k8s.cisco.com/test-secret-sink created\n", out); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		var got v1alpha1.ResourceSyncRule
		if err := c.Get(context.Background(), client.ObjectKey{Name: "test-secret-sink"}, &got); err != nil {
			t.Fatal(err)
		}
		want := decode[v1alpha1.ResourceSyncRule](t, readSeed(t, "resourcesyncrule-test-secret-sink.yaml"))
		if diff := cmp.Diff(want.Spec, got.Spec); diff != "" {
			t.Errorf("spec in the cluster (-seed +got):\n%s", diff)
		}
		var managers []string
		for _, m := range got.ManagedFields {
			managers = append(managers, m.Manager)
		}
		if diff := cmp.Diff([]string{v1alpha1.FieldManager}, managers); diff != "" {
			t.Errorf("field managers (-want +got):\n%s", diff)
		}

		out, _, err = run(t, ruleArgs...)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff("resourcesyncrule.clusterregistry.k8s.cisco.com/test-secret-sink unchanged\n", out); diff != "" {
			t.Errorf("second run (-want +got):\n%s", diff)
		}
	})

	t.Run("feature", func(t *testing.T) {
		out, _, err := run(t, append([]string{"feature", "test-secret-source", "--feature", "test-secret-feature", "--label", "tier=gold"}, kube...)...)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff("clusterfeature.clusterregistry.k8s.cisco.com/test-secret-source created\n", out); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		var got v1alpha1.ClusterFeature
		if err := c.Get(context.Background(), client.ObjectKey{Name: "test-secret-source"}, &got); err != nil {
			t.Fatal(err)
		}
		if got.Spec.FeatureName != "test-secret-feature" || got.Labels["tier"] != "gold" {
			t.Errorf("feature in the cluster: %+v", got)
		}
	})

	t.Run("unreachable", func(t *testing.T) {
		_, _, err := run(t, "feature", "x", "--feature", "f", "--server", "https://127.0.0.1:1", "--insecure-skip-tls-verify")
		plugintest.WantExitCode(t, err, 2, "cannot reach the API server at https://127.0.0.1:1")
	})
}
