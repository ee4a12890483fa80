package status

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/cmdutil"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube/kubefake"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/plugintest"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// TestValidate checks the flags without I/O.
func TestValidate(t *testing.T) {
	plugintest.RunValidate(t, func() *Options { return NewOptions(nil, genericiooptions.NewTestIOStreamsDiscard()) }, []plugintest.ValidateCase[*Options]{
		{Name: "defaults", Modify: func(*Options) {}},
		{Name: "yaml, two contexts, events", Modify: func(o *Options) { o.Output = "yaml"; o.Contexts = []string{"a", "b"}; o.Events = true }},
		{Name: "output", Modify: func(o *Options) { o.Output = "name" }, Want: []string{`--output must be one of (json, yaml, wide), got "name"`}},
		{Name: "empty context", Modify: func(o *Options) { o.Contexts = []string{"a", ""} }, Want: []string{"--contexts: empty context name"}},
		{Name: "context twice", Modify: func(o *Options) { o.Contexts = []string{"a", "a"} }, Want: []string{`--contexts: context "a" named twice`}},
		{Name: "timeout", Modify: func(o *Options) { o.Timeout = 0 }, Want: []string{"timeout must be positive"}},
		{Name: "max events", Modify: func(o *Options) { o.MaxEvents = 0 }, Want: []string{"--max-events must be positive, got 0"}},
	})
}

func statusCmd(contextFlag string) *cobra.Command {
	cmd := &cobra.Command{Use: "status"}
	cmd.Flags().String("context", contextFlag, "")
	return cmd
}

// TestCompleteFake resolves the contexts read, with the flags a hint names them by.
func TestCompleteFake(t *testing.T) {
	type tgt struct{ Name, Flags string }
	tests := []struct {
		name        string
		contextFlag string
		contexts    []string
		want        []tgt
		wantErr     string
	}{
		{name: "current", want: []tgt{{"a", "--context a --kubeconfig /k"}}},
		{name: "--context", contextFlag: "b", want: []tgt{{"b", "--context b --kubeconfig /k"}}},
		{name: "--contexts", contexts: []string{"b", "a"}, want: []tgt{{"b", "--context b --kubeconfig /k"}, {"a", "--context a --kubeconfig /k"}}},
		{name: "unknown", contexts: []string{"x"}, wantErr: `--contexts: no context "x" in the kubeconfig`},
		{name: "both", contextFlag: "a", contexts: []string{"b"}, wantErr: "--context and --contexts cannot be used together"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := kubefake.New([]string{"a", "b"})
			f.Explicit = "/k"
			o := NewOptions(nil, genericiooptions.NewTestIOStreamsDiscard())
			o.Factory = f
			o.Contexts = tt.contexts
			err := o.Complete(statusCmd(tt.contextFlag), nil)
			if !plugintest.WantErr(t, err, tt.wantErr) {
				return
			}
			var got []tgt
			for _, t := range o.targets {
				got = append(got, tgt{t.Name, t.flags})
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("targets (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRunFake reads two in-memory clusters side by side; one that cannot be read is
// reported and makes the command exit with 2.
func TestRunFake(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	east := &v1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "east"},
		Spec:       v1alpha1.ClusterSpec{ClusterID: "uid-east"},
		Status:     v1alpha1.ClusterStatus{State: v1alpha1.ClusterStateReady, Type: v1alpha1.ClusterTypeLocal},
	}
	f := kubefake.New([]string{"a", "b"}, east)
	f.Cluster("b").Err = errors.New("connection refused")

	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	run := func(args ...string) error {
		t.Helper()
		o := NewOptions(f, streams)
		o.Now = func() time.Time { return now }
		return plugintest.RunVerb(t, newCmdStatus(o), args...)
	}
	if err := run(); err != nil {
		t.Fatalf("one context: %v", err)
	}
	if !strings.Contains(out.String(), "east") {
		t.Errorf("the Cluster is not shown:\n%s", out)
	}
	if got := f.Cluster("a").Options.Verb; got != "status" {
		t.Errorf("client built for verb %q", got)
	}

	out.Reset()
	err := run("--contexts", "a,b")
	if cmdutil.ExitCode(err) != 2 || !strings.Contains(err.Error(), "could not read 1 of 2 contexts: b") {
		t.Errorf("err = %v (exit %d)", err, cmdutil.ExitCode(err))
	}
	if !strings.Contains(errOut.String(), "connection refused") {
		t.Errorf("stderr does not say why b failed: %q", errOut)
	}
	if !strings.Contains(out.String(), "east") {
		t.Errorf("a's view is not shown:\n%s", out)
	}
}

// TestSkewWarnings: a cluster whose controller is more than one minor version from the
// local one is named; development builds and clusters reporting no version are not.
func TestSkewWarnings(t *testing.T) {
	got := skewWarnings([]ClusterInfo{
		{Name: "a", Type: "Local", ControllerVersion: "v0.4.0"},
		{Name: "b", Type: "Peer", ControllerVersion: "v0.5.1"},
		{Name: "c", Type: "Peer", ControllerVersion: "v0.2.0"},
		{Name: "d", Type: "Peer", ControllerVersion: "v0.0.0-dev"},
		{Name: "e", Type: "Peer"},
	})
	if len(got) != 1 || !strings.Contains(got[0], "the controllers of a and c: v0.4.0 and v0.2.0 are 2 minor versions apart") {
		t.Errorf("skewWarnings = %q", got)
	}
}
