package apply_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/plugin/apply"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/plugintest"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

// bed has two clusters, a and b, with the registry's CRDs.
var bed *testbed.Bed

func TestMain(m *testing.M) {
	os.Exit(testbed.Main(m, testbed.Options{Names: []string{"a", "b"}, CRDDirectoryPaths: []string{"../../manifests/crds"}}, &bed))
}

// run runs "kubectl registry apply <args>" with stdin through a root command built like
// plugin/root.go: kubectl's kubeconfig flags are persistent flags of the root.
func run(t *testing.T, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := plugintest.Command{New: []plugintest.NewCmd{apply.NewCmdApply}, Stdin: stdin, Timeout: 2 * time.Minute}
	return cmd.Run(t, append([]string{"apply"}, args...)...)
}

func wantOut(t *testing.T, want, got string) {
	t.Helper()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const (
	seedFeature = "../../testdata/seed/clusterfeature-test-secret-source.yaml"
	seedRule    = "../../testdata/seed/resourcesyncrule-test-secret-sink.yaml"
)

// TestUsageErrors checks the errors found before any API server is contacted.
func TestUsageErrors(t *testing.T) {
	kc := "/nonexistent/kubeconfig"
	if bed != nil {
		kc = bed.KubeconfigPath
	}
	bad := writeFile(t, "bad.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n")
	empty := writeFile(t, "empty.yaml", "---\n")
	tests := []struct {
		name     string
		args     []string
		withBed  bool
		contains []string
	}{
		{"no file", []string{}, false, []string{"no files given"}},
		{"stdin twice", []string{"-f", "-", "-f", "-"}, false, []string{"standard input can be read only once"}},
		{"dry-run client", []string{"-f", seedRule, "--dry-run=client"}, false, []string{`--dry-run must be "none" or "server"`}},
		{"context twice", []string{"-f", seedRule, "--contexts", "a,a"}, false, []string{`context "a" named twice`}},
		{"argument", []string{"x", "-f", seedRule}, false, []string{`unexpected argument "x"`}},
		{"missing file", []string{"-f", "/nonexistent/rule.yaml"}, false, []string{"reading /nonexistent/rule.yaml"}},
		{"object without name", []string{"-f", bad}, false, []string{"document 1: apiVersion, kind and metadata.name are required"}},
		{"no objects", []string{"-f", empty}, false, []string{"no objects found"}},
		{"context and contexts", []string{"-f", seedRule, "--context", "a", "--contexts", "a,b"}, true, []string{"--context and --contexts cannot be used together"}},
		{"unknown context", []string{"-f", seedRule, "--contexts", "a,nope"}, true, []string{`no context "nope" in the kubeconfig`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.withBed {
				testbed.SkipIfNoAssets(t)
			}
			out, _, err := run(t, "", append(tt.args, "--kubeconfig", kc)...)
			plugintest.WantExitCode(t, err, 2, tt.contains...)
			if out != "" {
				t.Errorf("stdout %q, want nothing", out)
			}
		})
	}
}

// TestApply applies to both clusters of the bed. The subtests build on each other.
func TestApply(t *testing.T) {
	testbed.SkipIfNoAssets(t)
	if bed == nil {
		t.Fatal("test binaries are present but the test bed did not start")
	}
	clients := map[string]client.Client{}
	for _, name := range []string{"a", "b"} {
		c, err := bed.Cluster(name).Client()
		if err != nil {
			t.Fatal(err)
		}
		clients[name] = c
	}
	kc := []string{"--kubeconfig", bed.KubeconfigPath}
	both := append([]string{"--contexts", "a,b"}, kc...)
	ctx := context.Background()

	t.Run("created", func(t *testing.T) {
		out, _, err := run(t, "", append([]string{"-f", seedFeature, "-f", seedRule}, both...)...)
		if err != nil {
			t.Fatal(err)
		}
		wantOut(t, `a: clusterfeature.clusterregistry.k8s.cisco.com/test-secret-source created
a: resourcesyncrule.clusterregistry.k8s.cisco.com/test-secret-sink created
b: clusterfeature.clusterregistry.k8s.cisco.com/test-secret-source created
b: resourcesyncrule.clusterregistry.k8s.cisco.com/test-secret-sink created
`, out)
		for name, c := range clients {
			var rule v1alpha1.ResourceSyncRule
			if err := c.Get(ctx, client.ObjectKey{Name: "test-secret-sink"}, &rule); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if rule.Spec.Rules[0].Matches[0].ObjectKey != (v1alpha1.ObjectKey{Name: "test-secret", Namespace: "cluster-registry"}) {
				t.Errorf("%s: rule %+v", name, rule.Spec)
			}
			if len(rule.ManagedFields) != 1 || rule.ManagedFields[0].Manager != v1alpha1.FieldManager {
				t.Errorf("%s: managed fields %+v", name, rule.ManagedFields)
			}
		}
	})

	t.Run("unchanged", func(t *testing.T) {
		out, _, err := run(t, "", append([]string{"-f", seedFeature, "-f", seedRule}, both...)...)
		if err != nil {
			t.Fatal(err)
		}
		wantOut(t, `a: clusterfeature.clusterregistry.k8s.cisco.com/test-secret-source unchanged
a: resourcesyncrule.clusterregistry.k8s.cisco.com/test-secret-sink unchanged
b: clusterfeature.clusterregistry.k8s.cisco.com/test-secret-source unchanged
b: resourcesyncrule.clusterregistry.k8s.cisco.com/test-secret-sink unchanged
`, out)
	})

	changed := `apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ClusterFeature
metadata:
  name: test-secret-source
  labels:
    tier: gold
spec:
  featureName: test-secret-feature
`

	t.Run("server dry run", func(t *testing.T) {
		out, _, err := run(t, changed, append([]string{"-f", "-", "--dry-run=server"}, both...)...)
		if err != nil {
			t.Fatal(err)
		}
		wantOut(t, `a: clusterfeature.clusterregistry.k8s.cisco.com/test-secret-source configured (server dry run)
b: clusterfeature.clusterregistry.k8s.cisco.com/test-secret-source configured (server dry run)
`, out)
		for name, c := range clients {
			var f v1alpha1.ClusterFeature
			if err := c.Get(ctx, client.ObjectKey{Name: "test-secret-source"}, &f); err != nil {
				t.Fatal(err)
			}
			if len(f.Labels) != 0 {
				t.Errorf("%s: a server dry run changed the feature: %v", name, f.Labels)
			}
		}
	})

	t.Run("configured from stdin, current context", func(t *testing.T) {
		out, _, err := run(t, changed, append([]string{"-f", "-", "--context", "b"}, kc...)...)
		if err != nil {
			t.Fatal(err)
		}
		wantOut(t, "b: clusterfeature.clusterregistry.k8s.cisco.com/test-secret-source configured\n", out)
	})

	t.Run("invalid object", func(t *testing.T) {
		file := writeFile(t, "mixed.yaml", `apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ClusterFeature
metadata:
  name: broken
spec:
  featureName: bad name!
---
apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ClusterFeature
metadata:
  name: fine
spec:
  featureName: fine
`)
		out, errOut, err := run(t, "", append([]string{"-f", file, "-f", seedRule}, both...)...)
		plugintest.WantExitCode(t, err, 2, "applying failed on 2 of 2 contexts: a, b")
		wantOut(t, `a: clusterfeature.clusterregistry.k8s.cisco.com/fine created
a: resourcesyncrule.clusterregistry.k8s.cisco.com/test-secret-sink unchanged
b: clusterfeature.clusterregistry.k8s.cisco.com/fine created
b: resourcesyncrule.clusterregistry.k8s.cisco.com/test-secret-sink unchanged
`, out)
		// The error names each failed context with the server's reason; stderr does not
		// repeat it.
		for _, ctxName := range []string{"a", "b"} {
			prefix := ctxName + ": applying clusterfeature.clusterregistry.k8s.cisco.com/broken: "
			if !strings.Contains(err.Error(), prefix) || !strings.Contains(err.Error(), "spec.featureName in body should match") {
				t.Errorf("the error does not report the server's validation message for %s:\n%v", ctxName, err)
			}
		}
		if errOut != "" {
			t.Errorf("stderr repeats the error:\n%s", errOut)
		}
		for name, c := range clients {
			err := c.Get(ctx, client.ObjectKey{Name: "broken"}, &v1alpha1.ClusterFeature{})
			if !apierrors.IsNotFound(err) {
				t.Errorf("%s: broken feature: want not found, got %v", name, err)
			}
			if err := c.Get(ctx, client.ObjectKey{Name: "test-secret-sink"}, &v1alpha1.ResourceSyncRule{}); err != nil {
				t.Errorf("%s: rule: %v", name, err)
			}
		}
	})

	t.Run("cut context", func(t *testing.T) {
		b := bed.Cluster("b")
		if err := b.Cut(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := b.Heal(); err != nil {
				t.Error(err)
			}
		})
		file := writeFile(t, "f.yaml", `apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ClusterFeature
metadata:
  name: during-cut
spec:
  featureName: during-cut
`)
		out, errOut, err := run(t, "", append([]string{"-f", file, "-f", seedRule}, both...)...)
		plugintest.WantExitCode(t, err, 2, "applying failed on 1 of 2 contexts: b")
		wantOut(t, `a: clusterfeature.clusterregistry.k8s.cisco.com/during-cut created
a: resourcesyncrule.clusterregistry.k8s.cisco.com/test-secret-sink unchanged
`, out)
		if !strings.Contains(err.Error(), "(b: cannot reach the API server at "+b.Host()) {
			t.Errorf("the error does not report b unreachable:\n%v", err)
		}
		if strings.Count(err.Error(), "cannot reach") != 1 {
			t.Errorf("want one error for b (the other objects are not tried):\n%v", err)
		}
		if errOut != "" {
			t.Errorf("stderr repeats the error:\n%s", errOut)
		}
		if err := clients["a"].Get(ctx, client.ObjectKey{Name: "during-cut"}, &v1alpha1.ClusterFeature{}); err != nil {
			t.Errorf("a: %v", err)
		}
	})
}
