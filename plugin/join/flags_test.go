package join

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/cmdutil"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube"
)

// writeKubeconfig writes a kubeconfig with one context per name (servers that are never
// contacted) and returns its path.
func writeKubeconfig(t *testing.T, current string, names ...string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	for _, n := range names {
		cfg.Clusters[n] = &clientcmdapi.Cluster{Server: "https://" + n + ".invalid:6443"}
		cfg.AuthInfos[n] = &clientcmdapi.AuthInfo{Token: "t"}
		cfg.Contexts[n] = &clientcmdapi.Context{Cluster: n, AuthInfo: n}
	}
	cfg.CurrentContext = current
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// parseJoin parses the flags of join under a root with the kubeconfig flags and runs
// Complete and Validate, not Run.
func parseJoin(t *testing.T, args ...string) (*Options, error) {
	t.Helper()
	streams, _, _, _ := genericiooptions.NewTestIOStreams()
	configFlags := genericclioptions.NewConfigFlags(true)
	root := &cobra.Command{
		Use:           "kubectl-registry",
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl registry"},
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(cmdutil.FlagErrorFunc)
	configFlags.AddFlags(root.PersistentFlags())
	o := NewOptions(kube.NewFactory(configFlags), streams)
	cmd := &cobra.Command{
		Use:  "join",
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Complete(cmd, args); err != nil {
				return err
			}
			return cmdutil.UsageError(cmd, o.Validate())
		},
	}
	o.AddFlags(cmd)
	root.AddCommand(cmd)
	root.SetArgs(append([]string{"join"}, args...))
	return o, root.Execute()
}

func TestFlags(t *testing.T) {
	kc := writeKubeconfig(t, "a", "a", "b")
	other := writeKubeconfig(t, "west", "west", "x")

	t.Run("defaults", func(t *testing.T) {
		o, err := parseJoin(t, "--kubeconfig", kc, "--peer-context", "b")
		if err != nil {
			t.Fatal(err)
		}
		if o.Namespace != "cluster-registry" || o.DryRun != cmdutil.DryRunNone || o.Timeout != 2*time.Minute || o.Wait || o.OneWay || o.AllowLoopback {
			t.Errorf("defaults: %+v", o)
		}
		// Side A is the current context.
		if o.a.name != "a" || o.a.flags != "--context a --kubeconfig "+kc || o.a.host != "https://a.invalid:6443" {
			t.Errorf("side A: %+v", o.a)
		}
		if o.b.name != "b" || o.b.flags != "--context b --kubeconfig "+kc || o.b.host != "https://b.invalid:6443" {
			t.Errorf("side B: %+v", o.b)
		}
	})

	t.Run("every flag", func(t *testing.T) {
		o, err := parseJoin(t, "--kubeconfig", kc, "--context", "b", "--peer-kubeconfig", other, "--peer-context", "x",
			"-n", "registry", "--server", "10.0.0.1:6443", "--peer-server", "https://x.example.com",
			"--allow-loopback", "--wait", "--timeout", "30s", "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		if o.Namespace != "registry" || o.Server != "https://10.0.0.1:6443" || o.PeerServer != "https://x.example.com" ||
			!o.AllowLoopback || !o.Wait || o.Timeout != 30*time.Second || o.printer == nil || o.yamlOutput {
			t.Errorf("options: %+v", o)
		}
		if o.a.name != "b" || o.a.advertise != "https://10.0.0.1:6443" || o.a.serverFlag != "--server" {
			t.Errorf("side A: %+v", o.a)
		}
		if o.b.name != "x" || o.b.flags != "--context x --kubeconfig "+other || o.b.host != "https://x.invalid:6443" ||
			o.b.advertise != "https://x.example.com" || o.b.serverFlag != "--peer-server" {
			t.Errorf("side B: %+v", o.b)
		}
	})

	t.Run("the peer kubeconfig's current context", func(t *testing.T) {
		o, err := parseJoin(t, "--kubeconfig", kc, "--context", "a", "--peer-kubeconfig", other)
		if err != nil {
			t.Fatal(err)
		}
		if o.b.name != "west" {
			t.Errorf("side B: %+v", o.b)
		}
	})

	t.Run("dry run", func(t *testing.T) {
		o, err := parseJoin(t, "--kubeconfig", kc, "--peer-context", "b", "--dry-run=client", "-o", "yaml")
		if err != nil {
			t.Fatal(err)
		}
		if o.DryRun != cmdutil.DryRunClient || !o.yamlOutput {
			t.Errorf("options: %+v", o)
		}
	})

	errs := []struct {
		name string
		args []string
		want string
	}{
		{name: "no peer", args: []string{"--context", "a"}, want: "--peer-context is required"},
		{name: "unknown peer context", args: []string{"--peer-context", "nosuch"}, want: `--peer-context "nosuch": no such context in the kubeconfig (` + kc + `)`},
		{name: "unknown context", args: []string{"--context", "nosuch", "--peer-context", "b"}, want: `--context "nosuch": no such context in the kubeconfig`},
		{name: "http server", args: []string{"--peer-context", "b", "--server", "http://a.example.com"}, want: "--server: API server address"},
		{name: "bad peer server", args: []string{"--peer-context", "b", "--peer-server", "https://u:p@b.example.com"}, want: "--peer-server: API server address"},
		{name: "bare dry run", args: []string{"--peer-context", "b", "--dry-run"}, want: "flag needs an argument: --dry-run"},
		{name: "unknown dry run", args: []string{"--peer-context", "b", "--dry-run=all"}, want: `--dry-run must be "none", "client" or "server", got "all"`},
		{name: "wait in a dry run", args: []string{"--peer-context", "b", "--dry-run=client", "--wait"}, want: "--wait cannot be used with --dry-run"},
		{name: "no timeout", args: []string{"--peer-context", "b", "--wait", "--timeout", "0s"}, want: "--timeout must be positive"},
		{name: "unknown output", args: []string{"--peer-context", "b", "-o", "table"}, want: `unable to match a printer suitable for the output format "table"`},
		{name: "peer server one way", args: []string{"--peer-context", "b", "--one-way", "--peer-server", "b.example.com"}, want: "--peer-server has no effect with --one-way"},
		{name: "bad namespace", args: []string{"--peer-context", "b", "-n", "Not_A_Namespace"}, want: `--namespace "Not_A_Namespace"`},
		{name: "argument", args: []string{"--peer-context", "b", "c"}, want: `unexpected argument "c"`},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseJoin(t, append([]string{"--kubeconfig", kc}, tt.args...)...)
			if err == nil {
				t.Fatalf("no error, want %q", tt.want)
			}
			if code := cmdutil.ExitCode(err); code != 2 {
				t.Errorf("exit code %d, want 2", code)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "See 'kubectl registry join --help' for usage.") {
				t.Errorf("error %q, want %q and the usage hint", err, tt.want)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	streams, _, out, _ := genericiooptions.NewTestIOStreams()
	cmd := NewCmdJoin(kube.NewFactory(genericclioptions.NewConfigFlags(true)), streams)
	cmd.SetOut(out)
	cmd.SetArgs([]string{"--help"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Join two clusters: copy the local Cluster CR",
		"kubectl registry join --context east --peer-context west --wait",
		"--peer-context", "--peer-kubeconfig", "--server", "--peer-server", "--allow-loopback",
		"--one-way", "--dry-run", "--wait", "--timeout", "--output",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, out.String())
		}
	}
}
