package kube

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
)

const kubeconfig = `apiVersion: v1
kind: Config
current-context: a
clusters:
- name: a
  cluster: {server: "https://a.example:6443"}
- name: b
  cluster: {server: "https://b.example:6443"}
users:
- name: u
  user: {token: t}
contexts:
- name: a
  context: {cluster: a, user: u}
- name: b
  context: {cluster: b, user: u}
`

// newRoot returns a root command with kubectl's kubeconfig flags and a verb under it,
// parsed with args, and the Factory of those flags.
func newRoot(t *testing.T, args ...string) (*cobra.Command, Factory) {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(true)
	root := &cobra.Command{Use: "root"}
	flags.AddFlags(root.PersistentFlags())
	verb := &cobra.Command{Use: "verb", RunE: func(*cobra.Command, []string) error { return nil }}
	root.AddCommand(verb)
	root.SetArgs(append([]string{"verb"}, args...))
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	return verb, NewFactory(flags)
}

// TestTargets resolves --context and --contexts from a kubeconfig, contacting nothing.
func TestTargets(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	type target struct{ Name, Context, Host, Timeout string }
	tests := []struct {
		name     string
		args     []string
		contexts []string
		want     []target
		wantErr  string
	}{
		{name: "current context", want: []target{{"a", "", "https://a.example:6443", "0s"}}},
		{name: "--context", args: []string{"--context", "b"}, want: []target{{"b", "b", "https://b.example:6443", "0s"}}},
		{name: "--contexts with the root's request timeout", args: []string{"--request-timeout=5s"}, contexts: []string{"b", "a"},
			want: []target{{"b", "b", "https://b.example:6443", "5s"}, {"a", "a", "https://a.example:6443", "5s"}}},
		{name: "--context and --contexts", args: []string{"--context", "a"}, contexts: []string{"b"}, wantErr: "--context and --contexts cannot be used together"},
		{name: "unknown --context", args: []string{"--context", "x"}, wantErr: `--context "x": no such context in the kubeconfig (` + path + ")"},
		{name: "unknown in --contexts", contexts: []string{"a", "x"}, wantErr: `--contexts: no context "x" in the kubeconfig (` + path + ")"},
		{name: "bad request timeout", args: []string{"--request-timeout=abc"}, wantErr: "Invalid timeout value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd, f := newRoot(t, append([]string{"--kubeconfig", path}, tt.args...)...)
			got, err := f.Targets(cmd, tt.contexts)
			if !wantErr(t, err, tt.wantErr) {
				return
			}
			var gotT []target
			for _, g := range got {
				gotT = append(gotT, target{g.Name, g.Context, g.Config.Host, g.Config.Timeout.String()})
			}
			if diff := cmp.Diff(tt.want, gotT); diff != "" {
				t.Errorf("targets (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNoKubeconfig: without a kubeconfig the error says so, instead of client-go's
// fallback to http://localhost:8080.
func TestNoKubeconfig(t *testing.T) {
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "missing"))
	t.Setenv("HOME", t.TempDir())
	cmd, f := newRoot(t)
	if _, err := f.Targets(cmd, nil); !errors.Is(err, ErrNoKubeconfig) {
		t.Errorf("err = %v, want ErrNoKubeconfig", err)
	}
}

// TestConfigure checks the client settings every verb gets.
func TestConfigure(t *testing.T) {
	base := &rest.Config{Host: "https://a", Timeout: 10 * time.Second}
	got := Configure(base, ClientOptions{Verb: "apply", Timeout: 30 * time.Second})
	if got.Timeout != 10*time.Second {
		t.Errorf("a shorter --request-timeout lost: %s", got.Timeout)
	}
	if got.QPS != QPS || got.Burst != Burst {
		t.Errorf("QPS %v burst %d", got.QPS, got.Burst)
	}
	if !strings.HasPrefix(got.UserAgent, "kubectl-registry/") || !strings.HasSuffix(got.UserAgent, " apply") {
		t.Errorf("user agent %q", got.UserAgent)
	}
	if base.UserAgent != "" || base.QPS != 0 {
		t.Errorf("Configure changed its argument")
	}
	if got := Configure(&rest.Config{}, ClientOptions{Timeout: time.Second}); got.Timeout != time.Second {
		t.Errorf("timeout %s, want 1s", got.Timeout)
	}
	if got := Configure(base, ClientOptions{Watch: true, Timeout: time.Second, Warnings: io.Discard}); got.Timeout != 0 || got.WarningHandler != (rest.NoWarnings{}) {
		t.Errorf("watch client: timeout %s, warnings %T", got.Timeout, got.WarningHandler)
	}
}

// wantErr is plugintest.WantErr, which imports this package: it checks that err holds
// want (no error when want is empty) and reports whether the test goes on.
func wantErr(t testing.TB, err error, want string) bool {
	t.Helper()
	if want != "" {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("err = %v, want %q", err, want)
		}
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}
