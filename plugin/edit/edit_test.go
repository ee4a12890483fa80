package edit_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/manifests"
	"github.com/kubectl-registry/kubectl-registry/plugin/edit"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/plugintest"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

// bed has two clusters, a and b, with the registry's CRDs.
var bed *testbed.Bed

func TestMain(m *testing.M) {
	os.Exit(testbed.Main(m, testbed.Options{Names: []string{"a", "b"}, CRDDirectoryPaths: []string{"../../manifests/crds"}}, &bed))
}

// run runs "kubectl registry edit <args>" through a root command built like
// plugin/root.go: kubectl's kubeconfig flags are persistent flags of the root.
func run(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := plugintest.Command{New: []plugintest.NewCmd{edit.NewCmdEdit}, Timeout: 2 * time.Minute}
	return cmd.Run(t, append([]string{"edit"}, args...)...)
}

func wantOut(t *testing.T, want, got string) {
	t.Helper()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
}

// editor makes KUBE_EDITOR a shell script with body (the file to edit is "$1"). The
// script first copies the file it is given to <dir>/seen and records its path in
// <dir>/path. It returns dir.
func editor(t *testing.T, body string) string {
	t.Helper()
	dir := t.TempDir()
	script := filepath.Join(dir, "editor.sh")
	content := "#!/bin/sh\nset -e\ncp \"$1\" " + filepath.Join(dir, "seen") + "\nprintf '%s' \"$1\" > " + filepath.Join(dir, "path") + "\n" + body + "\n"
	if err := os.WriteFile(script, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBE_EDITOR", script)
	t.Setenv("EDITOR", "")
	return dir
}

// seed returns the object of a file of testdata/seed.
func seed(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	objs, err := manifests.Decode([]byte(readFile(t, filepath.Join("../../testdata/seed", name))))
	if err != nil || len(objs) != 1 {
		t.Fatalf("%s: %d objects, %v", name, len(objs), err)
	}
	return objs[0]
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// editedPath returns the path of the file the editor was given.
func editedPath(t *testing.T, dir string) string {
	t.Helper()
	return readFile(t, filepath.Join(dir, "path"))
}

func wantRemoved(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the edited file %s was not removed (stat: %v)", path, err)
	}
}

func wantKept(t *testing.T, path string, err error) {
	t.Helper()
	if _, serr := os.Stat(path); serr != nil {
		t.Errorf("the edited file was not kept: %v", serr)
	}
	if err != nil && !strings.Contains(err.Error(), path) {
		t.Errorf("error %q does not name the kept file %s", err, path)
	}
	_ = os.Remove(path)
}

// TestUsageErrors checks the errors found before any API server is contacted.
func TestUsageErrors(t *testing.T) {
	kc := "/nonexistent/kubeconfig"
	if bed != nil {
		kc = bed.KubeconfigPath
	}
	dir := editor(t, "exit 1")
	tests := []struct {
		name     string
		args     []string
		withBed  bool
		contains []string
	}{
		{"no arguments", []string{}, false, []string{"TYPE and NAME are required"}},
		{"no name", []string{"rsr"}, false, []string{"TYPE and NAME are required"}},
		{"too many", []string{"rsr", "a", "b"}, false, []string{"exactly one TYPE and one NAME"}},
		{"unknown type", []string{"pods", "x"}, false, []string{`unknown TYPE "pods": edit takes rsr (resourcesyncrule) or cf (clusterfeature)`, "See 'kubectl registry edit --help' for usage."}},
		{"cluster", []string{"cluster", "x"}, false, []string{"Clusters cannot be edited: they are owned by the controllers"}},
		{"clusters with slash", []string{"clusters.clusterregistry.k8s.cisco.com/x"}, false, []string{"Clusters cannot be edited"}},
		{"bad name", []string{"rsr", "Bad_Name"}, false, []string{`invalid NAME "Bad_Name"`}},
		{"context twice", []string{"rsr", "x", "--contexts", "a,a"}, false, []string{`context "a" named twice`}},
		{"context and contexts", []string{"rsr", "x", "--context", "a", "--contexts", "a,b"}, true, []string{"--context and --contexts cannot be used together"}},
		{"unknown context", []string{"rsr", "x", "--contexts", "a,nope"}, true, []string{`no context "nope" in the kubeconfig`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.withBed {
				testbed.SkipIfNoAssets(t)
			}
			out, _, err := run(t, append(tt.args, "--kubeconfig", kc)...)
			plugintest.WantExitCode(t, err, 2, tt.contains...)
			if out != "" {
				t.Errorf("stdout %q, want nothing", out)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "path")); err == nil {
		t.Errorf("the editor ran for a usage error")
	}
}

const header = `# Please edit the object below. Lines beginning with a '#' will be ignored,
# and an empty file will abort the edit.
#
# Read from context a. On save it is applied (server-side apply, field manager
# "kubectl-registry") to the contexts below, and created where it is missing:
#   a
#   b
#
`

// TestEdit edits on both clusters of the bed. The subtests build on each other.
func TestEdit(t *testing.T) {
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
	ctx := context.Background()
	kc := []string{"--kubeconfig", bed.KubeconfigPath}
	both := append([]string{"--contexts", "a,b"}, kc...)

	// The seed's rule on both clusters, its feature on a only; a's rule carries the
	// controller's finalizer, which edit does not show.
	for name, c := range clients {
		rule := seed(t, "resourcesyncrule-test-secret-sink.yaml")
		if name == "a" {
			rule.SetFinalizers([]string{v1alpha1.RuleFinalizer})
		}
		if err := c.Create(ctx, rule); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := c.Get(ctx, client.ObjectKeyFromObject(rule), rule); err == nil && len(rule.GetFinalizers()) > 0 {
				rule.SetFinalizers(nil)
				_ = c.Update(ctx, rule)
			}
		})
	}
	if err := clients["a"].Create(ctx, seed(t, "clusterfeature-test-secret-source.yaml")); err != nil {
		t.Fatal(err)
	}

	resourceVersions := func(t *testing.T, obj client.Object) map[string]string {
		t.Helper()
		rvs := map[string]string{}
		for name, c := range clients {
			o := obj.DeepCopyObject().(client.Object)
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), o); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				t.Fatal(err)
			}
			rvs[name] = o.GetResourceVersion()
		}
		return rvs
	}
	rule := &v1alpha1.ResourceSyncRule{ObjectMeta: metav1.ObjectMeta{Name: "test-secret-sink"}}
	feature := &v1alpha1.ClusterFeature{ObjectMeta: metav1.ObjectMeta{Name: "test-secret-source"}}

	t.Run("rule configured on both", func(t *testing.T) {
		dir := editor(t, `sed -i 's/name: test-secret$/name: edited-secret/' "$1"`)
		out, _, err := run(t, append([]string{"rsr", "test-secret-sink"}, both...)...)
		if err != nil {
			t.Fatal(err)
		}
		wantOut(t, `a: resourcesyncrule.clusterregistry.k8s.cisco.com/test-secret-sink configured
b: resourcesyncrule.clusterregistry.k8s.cisco.com/test-secret-sink configured
`, out)
		if diff := cmp.Diff(header+`apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata:
  name: test-secret-sink
spec:
  groupVersionKind:
    kind: Secret
    version: v1
  rules:
  - match:
    - objectKey:
        name: test-secret
        namespace: cluster-registry
`, readFile(t, filepath.Join(dir, "seen"))); diff != "" {
			t.Errorf("file given to the editor (-want +got):\n%s", diff)
		}
		wantRemoved(t, editedPath(t, dir))
		for name, c := range clients {
			var got v1alpha1.ResourceSyncRule
			if err := c.Get(ctx, client.ObjectKey{Name: "test-secret-sink"}, &got); err != nil {
				t.Fatal(err)
			}
			if key := got.Spec.Rules[0].Matches[0].ObjectKey; key != (v1alpha1.ObjectKey{Name: "edited-secret", Namespace: "cluster-registry"}) {
				t.Errorf("%s: object key %+v, want the edit", name, key)
			}
			if name == "a" && (len(got.Finalizers) != 1 || got.Finalizers[0] != v1alpha1.RuleFinalizer) {
				t.Errorf("a: finalizers %v, want the controller's kept", got.Finalizers)
			}
			if name == "b" && len(got.Finalizers) != 0 {
				t.Errorf("b: finalizers %v, want none (a's finalizer is not copied)", got.Finalizers)
			}
		}
	})

	t.Run("feature created where missing", func(t *testing.T) {
		editor(t, `sed -i 's/test-secret-feature/edited-feature/' "$1"`)
		out, _, err := run(t, append([]string{"cf/test-secret-source"}, both...)...)
		if err != nil {
			t.Fatal(err)
		}
		wantOut(t, `a: clusterfeature.clusterregistry.k8s.cisco.com/test-secret-source configured
b: clusterfeature.clusterregistry.k8s.cisco.com/test-secret-source created
`, out)
		for name, c := range clients {
			var got v1alpha1.ClusterFeature
			if err := c.Get(ctx, client.ObjectKey{Name: "test-secret-source"}, &got); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if got.Spec.FeatureName != "edited-feature" {
				t.Errorf("%s: featureName %q, want edited-feature", name, got.Spec.FeatureName)
			}
		}
	})

	t.Run("unchanged on both", func(t *testing.T) {
		// Whitespace only: the object is applied and nothing changes.
		editor(t, `printf '\n' >> "$1"`)
		out, _, err := run(t, append([]string{"clusterfeatures", "test-secret-source"}, both...)...)
		if err != nil {
			t.Fatal(err)
		}
		wantOut(t, `a: clusterfeature.clusterregistry.k8s.cisco.com/test-secret-source unchanged
b: clusterfeature.clusterregistry.k8s.cisco.com/test-secret-source unchanged
`, out)
	})

	t.Run("nothing changed: cancelled", func(t *testing.T) {
		before := resourceVersions(t, rule)
		dir := editor(t, `sed -i 's/^# Please/# I read this. Please/' "$1"`)
		out, errOut, err := run(t, append([]string{"resourcesyncrule", "test-secret-sink"}, both...)...)
		if err != nil {
			t.Fatalf("err %v, want exit 0", err)
		}
		wantOut(t, "", out)
		if errOut != edit.CancelledMessage+"\n" {
			t.Errorf("stderr %q, want %q", errOut, edit.CancelledMessage)
		}
		wantRemoved(t, editedPath(t, dir))
		if diff := cmp.Diff(before, resourceVersions(t, rule)); diff != "" {
			t.Errorf("a cancelled edit wrote (-before +after):\n%s", diff)
		}
	})

	t.Run("emptied: cancelled", func(t *testing.T) {
		editor(t, `: > "$1"`)
		out, errOut, err := run(t, append([]string{"rsr", "test-secret-sink"}, both...)...)
		if err != nil {
			t.Fatalf("err %v, want exit 0", err)
		}
		wantOut(t, "", out)
		if errOut != edit.CancelledMessage+"\n" {
			t.Errorf("stderr %q, want %q", errOut, edit.CancelledMessage)
		}
	})

	failures := []struct {
		name     string
		script   string
		contains []string
	}{
		{"garbage", `printf 'spec: [unclosed\n  - {{{\n' > "$1"`, []string{"the edited file is not a valid object"}},
		{"renamed", `sed -i 's/name: test-secret-sink/name: other/' "$1"`, []string{`the name cannot be changed: "test-secret-sink", edited to "other"`}},
		{"kind changed", `sed -i 's/kind: ResourceSyncRule/kind: ClusterFeature/' "$1"`, []string{"the apiVersion and kind cannot be changed"}},
		{"two objects", `printf -- '---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n' >> "$1"`, []string{"the edited file holds 2 objects, want one"}},
		{"editor fails", `exit 3`, []string{"running the editor", "there was a problem with the editor"}},
	}
	for _, tt := range failures {
		t.Run(tt.name+": exit 2, nothing changed", func(t *testing.T) {
			before := resourceVersions(t, rule)
			dir := editor(t, tt.script)
			out, _, err := run(t, append([]string{"rsr", "test-secret-sink"}, both...)...)
			plugintest.WantExitCode(t, err, 2, append(tt.contains, "the edited file is kept in")...)
			wantOut(t, "", out)
			wantKept(t, editedPath(t, dir), err)
			if diff := cmp.Diff(before, resourceVersions(t, rule)); diff != "" {
				t.Errorf("a failed edit wrote (-before +after):\n%s", diff)
			}
		})
	}

	t.Run("rejected by the API server", func(t *testing.T) {
		before := resourceVersions(t, feature)
		dir := editor(t, `sed -i 's/featureName: edited-feature/featureName: bad name!/' "$1"`)
		out, errOut, err := run(t, append([]string{"cf", "test-secret-source"}, both...)...)
		plugintest.WantExitCode(t, err, 2, "editing failed on 2 of 2 contexts: a, b", "kubectl registry apply -f "+editedPath(t, dir)+" --contexts a,b")
		wantOut(t, "", out)
		// The error names each failed context with the server's reason; stderr does not
		// repeat it.
		for _, name := range []string{"a", "b"} {
			if !strings.Contains(err.Error(), name+": applying clusterfeature.clusterregistry.k8s.cisco.com/test-secret-source: ") ||
				!strings.Contains(err.Error(), "spec.featureName in body should match") {
				t.Errorf("the error does not report the server's validation message for %s:\n%v", name, err)
			}
		}
		if errOut != "" {
			t.Errorf("stderr repeats the error:\n%s", errOut)
		}
		wantKept(t, editedPath(t, dir), err)
		if diff := cmp.Diff(before, resourceVersions(t, feature)); diff != "" {
			t.Errorf("a rejected edit wrote (-before +after):\n%s", diff)
		}
	})

	t.Run("EDITOR with arguments, --context b", func(t *testing.T) {
		dir := editor(t, "")
		script := filepath.Join(dir, "label.sh")
		if err := os.WriteFile(script, []byte(`sed -i 's/^  name: test-secret-source/  labels:\n    tier: gold\n  name: test-secret-source/' "$2"`+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Setenv("KUBE_EDITOR", "")
		t.Setenv("EDITOR", "sh "+script+" extra-arg")
		out, _, err := run(t, append([]string{"cf", "test-secret-source", "--context", "b"}, kc...)...)
		if err != nil {
			t.Fatal(err)
		}
		wantOut(t, "b: clusterfeature.clusterregistry.k8s.cisco.com/test-secret-source configured\n", out)
		for name, c := range clients {
			var got v1alpha1.ClusterFeature
			if err := c.Get(ctx, client.ObjectKey{Name: "test-secret-source"}, &got); err != nil {
				t.Fatal(err)
			}
			if want := map[string]string{"b": "gold"}[name]; got.Labels["tier"] != want {
				t.Errorf("%s: labels %v, want tier=%q", name, got.Labels, want)
			}
		}
	})

	t.Run("removed fields set by another manager", func(t *testing.T) {
		// Another manager sets owner=other on both and only-b=x on b. b also has
		// tier=gold, which a does not have, applied by kubectl-registry: the object
		// applied to b has no tier, so server-side apply removes it; only-b, set by
		// another manager and never seen in the editor, is kept.
		for name, c := range clients {
			labels := `{"owner":"other"}`
			if name == "b" {
				labels = `{"owner":"other","only-b":"x"}`
			}
			if err := c.Patch(ctx, feature.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":`+labels+`}}`))); err != nil {
				t.Fatal(err)
			}
		}
		dir := editor(t, `sed -i '/owner: other/d' "$1"`)
		out, _, err := run(t, append([]string{"cf", "test-secret-source"}, both...)...)
		if err != nil {
			t.Fatal(err)
		}
		if seen := readFile(t, filepath.Join(dir, "seen")); !strings.Contains(seen, "  labels:\n    owner: other\n") {
			t.Errorf("the editor did not see the label:\n%s", seen)
		}
		wantOut(t, `a: clusterfeature.clusterregistry.k8s.cisco.com/test-secret-source configured
b: clusterfeature.clusterregistry.k8s.cisco.com/test-secret-source configured
`, out)
		for name, c := range clients {
			var got v1alpha1.ClusterFeature
			if err := c.Get(ctx, client.ObjectKey{Name: "test-secret-source"}, &got); err != nil {
				t.Fatal(err)
			}
			want := map[string]map[string]string{"a": nil, "b": {"only-b": "x"}}[name]
			if diff := cmp.Diff(want, got.Labels, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s: labels (-want +got):\n%s", name, diff)
			}
		}
	})

	t.Run("not found on the first context", func(t *testing.T) {
		dir := editor(t, "")
		_, _, err := run(t, append([]string{"rsr", "nope"}, both...)...)
		plugintest.WantExitCode(t, err, 2, "a: resourcesyncrule.clusterregistry.k8s.cisco.com/nope not found")
		if _, err := os.Stat(filepath.Join(dir, "path")); err == nil {
			t.Errorf("the editor ran for a missing object")
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
		dir := editor(t, `sed -i 's/edited-feature/during-cut/' "$1"`)
		out, errOut, err := run(t, append([]string{"cf", "test-secret-source"}, both...)...)
		plugintest.WantExitCode(t, err, 2, "editing failed on 1 of 2 contexts: b", "--contexts b")
		wantOut(t, "a: clusterfeature.clusterregistry.k8s.cisco.com/test-secret-source configured\n", out)
		if !strings.Contains(err.Error(), "(b: cannot reach the API server at "+b.Host()) {
			t.Errorf("the error does not report b unreachable:\n%v", err)
		}
		if errOut != "" {
			t.Errorf("stderr repeats the error:\n%s", errOut)
		}
		wantKept(t, editedPath(t, dir), err)
		var got v1alpha1.ClusterFeature
		if err := clients["a"].Get(ctx, client.ObjectKey{Name: "test-secret-source"}, &got); err != nil {
			t.Fatal(err)
		}
		if got.Spec.FeatureName != "during-cut" {
			t.Errorf("a: featureName %q, want during-cut", got.Spec.FeatureName)
		}
	})
}
