package syncdiff

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube/kubefake"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/plugintest"
)

func syncDiffCmd(contextFlag string) *cobra.Command {
	cmd := &cobra.Command{Use: "sync-diff"}
	cmd.Flags().String("context", contextFlag, "")
	return cmd
}

// TestComplete resolves the diffed contexts and the others, read as peers, from an
// in-memory kubeconfig, and reads the rule files.
func TestComplete(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cm.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: ns}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rule := filepath.Join(t.TempDir(), "rule.yaml")
	if err := os.WriteFile(rule, []byte("apiVersion: clusterregistry.k8s.cisco.com/v1alpha1\nkind: ResourceSyncRule\nmetadata: {name: r}\nspec: {groupVersionKind: {version: v1, kind: ConfigMap}, rules: [{}]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name                   string
		contextFlag            string
		contexts, files        []string
		wantDiffed, wantOthers []string
		wantPreview            []string
		wantErr                string
	}{
		{name: "current context", wantDiffed: []string{"a"}, wantOthers: []string{"b", "c"}},
		{name: "--context and a rule file", contextFlag: "b", files: []string{rule}, wantDiffed: []string{"b"}, wantOthers: []string{"a", "c"}, wantPreview: []string{"r"}},
		{name: "--contexts", contexts: []string{"c", "a"}, wantDiffed: []string{"c", "a"}},
		{name: "unknown context", contexts: []string{"zz"}, wantErr: `context "zz": no such context in the kubeconfig`},
		{name: "missing file", files: []string{"/nonexistent.yaml"}, wantErr: "reading /nonexistent.yaml"},
		{name: "not a rule", files: []string{filepath.Join(dir, "cm.yaml")}, wantErr: `-f: ConfigMap "x" is not a ResourceSyncRule`},
		{name: "a directory", files: []string{dir}, wantErr: `-f: ConfigMap "x" is not a ResourceSyncRule`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := NewOptions(nil, genericiooptions.NewTestIOStreamsDiscard())
			o.Factory = kubefake.New([]string{"a", "b", "c"})
			o.Contexts, o.Filenames = tt.contexts, tt.files
			err := o.Complete(syncDiffCmd(tt.contextFlag), nil)
			if !plugintest.WantErr(t, err, tt.wantErr) {
				return
			}
			var preview []string
			for _, r := range o.preview {
				preview = append(preview, r.Name)
			}
			got := [][]string{o.diffed, o.others, preview}
			if diff := cmp.Diff([][]string{tt.wantDiffed, tt.wantOthers, tt.wantPreview}, got); diff != "" {
				t.Errorf("diffed, others, preview (-want +got):\n%s", diff)
			}
			for _, n := range slices.Concat(o.diffed, o.others) {
				if _, ok := o.targets[n]; !ok {
					t.Errorf("no target for %s", n)
				}
			}
		})
	}
}

func TestValidate(t *testing.T) {
	plugintest.RunValidate(t, func() *Options { return NewOptions(nil, genericiooptions.NewTestIOStreamsDiscard()) }, []plugintest.ValidateCase[*Options]{
		{Name: "defaults", Modify: func(*Options) {}},
		{Name: "yaml, deleting", Modify: func(o *Options) { o.Output = "yaml"; o.Deleting = []string{"r"} }},
		{Name: "-f and -k", Modify: func(o *Options) { o.Filenames = []string{"r.yaml"}; o.Kustomize = "dir" }, Want: []string{"only one of -f or -k can be given"}},
		{Name: "--context and --contexts", Modify: func(o *Options) { o.contextFlag = "a"; o.Contexts = []string{"b"} }, Want: []string{"--contexts and --context cannot be used together"}},
		{Name: "context twice", Modify: func(o *Options) { o.Contexts = []string{"a", "a"} }, Want: []string{`--contexts: context "a" named twice`}},
		{Name: "output", Modify: func(o *Options) { o.Output = "wide" }, Want: []string{`--output must be yaml or json, got "wide"`}},
		{Name: "deleting", Modify: func(o *Options) { o.Deleting = []string{"Not A Rule"} }, Want: []string{`--deleting "Not A Rule": not a rule name`}},
		{Name: "max-rules", Modify: func(o *Options) { o.MaxRules = 0 }, Want: []string{"--max-rules must be at least 1, got 0"}},
	})
}

// TestRunFakeUnreachable: a context that cannot be read is reported and the command
// exits with 2, kubectl diff's error code.
func TestRunFakeUnreachable(t *testing.T) {
	f := kubefake.New([]string{"a"})
	f.Cluster("a").Err = context.DeadlineExceeded
	out, errOut, code := plugintest.Command{New: []plugintest.NewCmd{newCmd}, Factory: f}.Exit(t, "sync-diff")
	if code != 2 {
		t.Errorf("exit code %d, want 2", code)
	}
	if !strings.Contains(errOut, "context a") {
		t.Errorf("stderr does not name the context: %q (stdout %q)", errOut, out)
	}
}
