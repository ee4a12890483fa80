package apply

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/cmdutil"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube/kubefake"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/plugintest"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// TestValidate checks the flags without I/O.
func TestValidate(t *testing.T) {
	tests := []plugintest.ValidateCase[*Options]{
		{Name: "one file", Modify: func(o *Options) { o.Filenames = []string{"a.yaml"} }},
		{Name: "stdin and a file, two contexts, server dry run", Modify: func(o *Options) {
			o.Filenames = []string{"-", "a.yaml"}
			o.Contexts = []string{"a", "b"}
			o.DryRun = cmdutil.DryRunServer
		}},
		{Name: "no file", Modify: func(*Options) {}, Want: []string{"no files given"}},
		{Name: "empty file name", Modify: func(o *Options) { o.Filenames = []string{""} }, Want: []string{"-f: empty file name"}},
		{Name: "stdin twice", Modify: func(o *Options) { o.Filenames = []string{"-", "-"} }, Want: []string{"standard input can be read only once"}},
		{Name: "empty context", Modify: func(o *Options) { o.Filenames = []string{"a"}; o.Contexts = []string{""} }, Want: []string{"--contexts: empty context name"}},
		{Name: "context twice", Modify: func(o *Options) { o.Filenames = []string{"a"}; o.Contexts = []string{"a", "a"} }, Want: []string{`context "a" named twice`}},
		{Name: "timeout", Modify: func(o *Options) { o.Filenames = []string{"a"}; o.Timeout = 0 }, Want: []string{"timeout must be positive"}},
		{Name: "kustomization", Modify: func(o *Options) { o.Kustomize = "dir" }},
		{Name: "-f and -k", Modify: func(o *Options) { o.Filenames = []string{"a"}; o.Kustomize = "dir" }, Want: []string{"only one of -f or -k can be given"}},
		{Name: "-k and -R", Modify: func(o *Options) { o.Kustomize = "dir"; o.Recursive = true }, Want: []string{"-R goes with -f, not with -k"}},
		{Name: "every error at once", Modify: func(o *Options) { o.Contexts = []string{""}; o.Timeout = -1 },
			Want: []string{"no files given", "empty context name", "timeout must be positive"}},
	}
	plugintest.RunValidate(t, func() *Options { return NewOptions(nil, genericiooptions.NewTestIOStreamsDiscard()) }, tests)
}

const feature = `apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ClusterFeature
metadata:
  name: gpu
spec:
  featureName: gpu
`

// newCmd returns a command with the root's --context flag and apply's --dry-run, as
// Complete sees them.
func newCmd(contextFlag string, args ...string) *cobra.Command {
	cmd := &cobra.Command{Use: "apply"}
	cmd.Flags().String("context", contextFlag, "")
	cmdutil.AddDryRunFlag(cmd, "")
	if err := cmd.ParseFlags(args); err != nil {
		panic(err)
	}
	return cmd
}

// TestCompleteDryRun checks --dry-run as Complete parses it: "client" is not a dry run
// apply does.
func TestCompleteDryRun(t *testing.T) {
	for _, tt := range []struct {
		arg     string
		want    cmdutil.DryRunStrategy
		wantErr string
	}{
		{arg: "--dry-run=none", want: cmdutil.DryRunNone},
		{arg: "--dry-run=server", want: cmdutil.DryRunServer},
		{arg: "--dry-run=client", wantErr: `--dry-run must be "none" or "server", got "client"`},
		{arg: "--dry-run=x", wantErr: `--dry-run must be "none" or "server", got "x"`},
	} {
		t.Run(tt.arg, func(t *testing.T) {
			o := NewOptions(nil, genericiooptions.NewTestIOStreamsDiscard())
			err := o.Complete(newCmd("", tt.arg), nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || o.DryRun != tt.want {
				t.Errorf("DryRun = %v, %v; want %v", o.DryRun, err, tt.want)
			}
		})
	}
}

// runFake runs "kubectl registry apply -f - <args>" through the real command, as the
// plugin does, with f as its Factory and stdin as its standard input.
func runFake(t *testing.T, f *kubefake.Factory, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := plugintest.Command{New: []plugintest.NewCmd{NewCmdApply}, Factory: f, Stdin: stdin}
	out, _, err := cmd.Run(t, append([]string{"apply", "-f", "-"}, args...)...)
	return out, err
}

// TestRunFake applies to in-memory clusters: the outcomes per context, the order of the
// report, and a failing context that does not stop the others.
func TestRunFake(t *testing.T) {
	f := kubefake.New([]string{"a", "b", "c"})
	two := []string{"--contexts", "a,b"}

	out, err := runFake(t, f, feature, two...)
	if err != nil {
		t.Fatal(err)
	}
	want := "a: clusterfeature.clusterregistry.k8s.cisco.com/gpu created\nb: clusterfeature.clusterregistry.k8s.cisco.com/gpu created\n"
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("first apply (-want +got):\n%s", diff)
	}
	for _, name := range []string{"a", "b"} {
		var cf v1alpha1.ClusterFeature
		if err := f.Cluster(name).Client.Get(context.Background(), client.ObjectKey{Name: "gpu"}, &cf); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if got := f.Cluster(name).Options.Verb; got != "apply" {
			t.Errorf("%s: client built for verb %q, want apply", name, got)
		}
	}
	if err := f.Cluster("c").Client.Get(context.Background(), client.ObjectKey{Name: "gpu"}, &v1alpha1.ClusterFeature{}); err == nil {
		t.Errorf("c: applied to a context that was not named")
	}

	// Without --contexts: the current context.
	out, err = runFake(t, f, feature)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("a: clusterfeature.clusterregistry.k8s.cisco.com/gpu unchanged\n", out); diff != "" {
		t.Errorf("second apply (-want +got):\n%s", diff)
	}

	// --context names the one context.
	out, err = runFake(t, f, feature, "--context", "c")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("c: clusterfeature.clusterregistry.k8s.cisco.com/gpu created\n", out); diff != "" {
		t.Errorf("--context (-want +got):\n%s", diff)
	}

	// A changed object is configured; an unreachable context is reported, the other
	// still applied.
	f.Cluster("b").Err = errors.New("connection refused")
	out, err = runFake(t, f, strings.Replace(feature, "featureName: gpu", "featureName: gpu-2", 1), two...)
	if diff := cmp.Diff("a: clusterfeature.clusterregistry.k8s.cisco.com/gpu configured\n", out); diff != "" {
		t.Errorf("with b unreachable (-want +got):\n%s", diff)
	}
	if err == nil || cmdutil.ExitCode(err) != cmdutil.ExitCodeError || !strings.Contains(err.Error(), "applying failed on 1 of 2 contexts: b (b: connection refused)") {
		t.Errorf("with b unreachable: err = %v (exit %d)", err, cmdutil.ExitCode(err))
	}
}

// TestRunFakeInputErrors checks the errors of the files and of the contexts, found before
// any cluster is contacted.
func TestRunFakeInputErrors(t *testing.T) {
	tests := []struct {
		Name  string
		stdin string
		args  []string
		want  string
	}{
		{Name: "no objects", stdin: "# nothing\n", want: "no objects found in -"},
		{Name: "not YAML", stdin: "kind: [", want: "standard input:"},
		{Name: "unknown context", stdin: feature, args: []string{"--contexts", "a,x"}, want: `--contexts: no context "x" in the kubeconfig`},
		{Name: "unknown --context", stdin: feature, args: []string{"--context", "x"}, want: `--context "x": no such context in the kubeconfig`},
		{Name: "--context and --contexts", stdin: feature, args: []string{"--context", "a", "--contexts", "b"}, want: "--context and --contexts cannot be used together"},
		{Name: "client dry run", stdin: feature, args: []string{"--dry-run=client"}, want: `--dry-run must be "none" or "server", got "client"`},
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			f := kubefake.New([]string{"a", "b"})
			out, err := runFake(t, f, tt.stdin, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
			if cmdutil.ExitCode(err) < 2 {
				t.Errorf("exit code %d, want > 1", cmdutil.ExitCode(err))
			}
			if out != "" {
				t.Errorf("printed %q", out)
			}
		})
	}
}

// TestReadFiles reads -f as kubectl does: files, directories (recursively with -R) and
// standard input, in order; a kustomization with -k.
func TestReadFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(path, name string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(strings.Replace(feature, "name: gpu", "name: "+name, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "a.yaml"), "a")
	write(filepath.Join(dir, "sub", "b.yaml"), "b")
	write(filepath.Join(dir, "sub", "deeper", "c.yaml"), "c")
	write(filepath.Join(dir, "k", "k.yaml"), "k")
	if err := os.WriteFile(filepath.Join(dir, "k", "kustomization.yaml"), []byte("resources: [k.yaml]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		modify  func(*Options)
		want    []string
		wantErr string
	}{
		{name: "file and stdin", modify: func(o *Options) { o.Filenames = []string{filepath.Join(dir, "a.yaml"), "-"} }, want: []string{"a", "gpu"}},
		{name: "directory", modify: func(o *Options) { o.Filenames = []string{filepath.Join(dir, "sub", "deeper")} }, want: []string{"c"}},
		{name: "directory, recursively", modify: func(o *Options) { o.Filenames = []string{filepath.Join(dir, "sub")}; o.Recursive = true }, want: []string{"b", "c"}},
		{name: "kustomization", modify: func(o *Options) { o.Kustomize = filepath.Join(dir, "k") }, want: []string{"k"}},
		{name: "missing file", modify: func(o *Options) { o.Filenames = []string{filepath.Join(dir, "none.yaml")} }, wantErr: "reading " + filepath.Join(dir, "none.yaml")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			streams, in, _, _ := genericiooptions.NewTestIOStreams()
			in.WriteString(feature)
			o := NewOptions(nil, streams)
			tt.modify(o)
			objs, err := o.readFiles()
			if !plugintest.WantErr(t, err, tt.wantErr) {
				return
			}
			var names []string
			for _, obj := range objs {
				names = append(names, obj.GetName())
			}
			if diff := cmp.Diff(tt.want, names); diff != "" {
				t.Errorf("objects (-want +got):\n%s", diff)
			}
		})
	}
}
