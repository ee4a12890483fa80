package serve

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/cmdutil"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube/kubefake"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/plugintest"
	"github.com/kubectl-registry/kubectl-registry/reconciler/manager"
)

// parse runs the flag parsing and Complete of serve, not Run.
func parse(t *testing.T, args ...string) (*Options, error) {
	t.Helper()
	streams, _, _, _ := genericiooptions.NewTestIOStreams()
	o := NewOptions(kubefake.New(nil), streams)
	cmd := &cobra.Command{Use: "serve"}
	o.AddFlags(cmd)
	if err := cmd.ParseFlags(args); err != nil {
		return nil, err
	}
	if err := o.Complete(cmd, cmd.Flags().Args()); err != nil {
		return nil, err
	}
	return o, o.Validate()
}

func TestFlags(t *testing.T) {
	defaults := manager.Options{
		Namespace:               "cluster-registry",
		MetricsBindAddress:      ":8443",
		HealthProbeBindAddress:  ":8081",
		LeaderElectionNamespace: "cluster-registry",
		LeaderElectionID:        "cluster-registry-controller-leader",
		LeaseDuration:           8 * time.Second,
		RenewDeadline:           6 * time.Second,
		RetryPeriod:             time.Second,
		GracefulShutdownTimeout: 30 * time.Second,
		Registry: manager.RegistryOptions{
			TokenLifetime: 24 * time.Hour, LegacyTokenLifetime: 30 * 24 * time.Hour, PeerHealthInterval: 5 * time.Second, PeerFailureThreshold: 3,
			HeartbeatPeriod: 5 * time.Minute, MetadataPeriod: 5 * time.Minute, SyncWorkers: 8,
			MaxPeerObjects: 20000, OverCapRetry: time.Minute,
			MaxPeerResponseBytes: 64 << 20, MaxPeerObjectBytes: 3 << 20, MaxPeerMembershipObjects: 1000, MaxRules: 500,
		},
	}
	tests := []struct {
		name string
		args []string
		want func(*manager.Options)
	}{
		{name: "defaults", want: func(*manager.Options) {}},
		{
			name: "every flag",
			args: []string{
				"--namespace=registry", "--cluster-name=east",
				"--metrics-bind-address=0", "--health-probe-bind-address=127.0.0.1:9000",
				"--leader-elect", "--leader-election-namespace=kube-system", "--leader-election-id=lock",
				"--leader-elect-lease-duration=30s", "--leader-elect-renew-deadline=20s", "--leader-elect-retry-period=2s",
				"--graceful-shutdown-timeout=5s",
				"--api-server-endpoint=203.0.113.7:6443", "--network-name=east-net",
				"--reader-token-lifetime=1h", "--legacy-reader-token-lifetime=48h", "--peer-health-interval=1s", "--peer-failure-threshold=5",
				"--heartbeat-period=1m", "--metadata-refresh-period=2m",
				"--max-peer-objects=50", "--max-peer-objects-retry=5s",
				"--max-peer-response-bytes=1048576", "--max-peer-object-bytes=65536", "--max-peer-membership-objects=10", "--max-rules=7",
			},
			want: func(o *manager.Options) {
				o.Namespace, o.ClusterName = "registry", "east"
				o.MetricsBindAddress, o.HealthProbeBindAddress = "0", "127.0.0.1:9000"
				o.LeaderElection, o.LeaderElectionNamespace, o.LeaderElectionID = true, "kube-system", "lock"
				o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 30*time.Second, 20*time.Second, 2*time.Second
				o.GracefulShutdownTimeout = 5 * time.Second
				o.Registry = manager.RegistryOptions{
					APIServerEndpoint: "https://203.0.113.7:6443", NetworkName: "east-net",
					TokenLifetime: time.Hour, LegacyTokenLifetime: 48 * time.Hour, PeerHealthInterval: time.Second, PeerFailureThreshold: 5,
					HeartbeatPeriod: time.Minute, MetadataPeriod: 2 * time.Minute, SyncWorkers: 8,
					MaxPeerObjects: 50, OverCapRetry: 5 * time.Second,
					MaxPeerResponseBytes: 1 << 20, MaxPeerObjectBytes: 64 << 10, MaxPeerMembershipObjects: 10, MaxRules: 7,
				}
			},
		},
		{
			name: "plain HTTP metrics on loopback",
			args: []string{"--metrics-secure=false", "--metrics-bind-address=127.0.0.1:8080"},
			want: func(o *manager.Options) { o.MetricsBindAddress, o.MetricsPlainHTTP = "127.0.0.1:8080", true },
		},
		{
			name: "metrics certificate directory",
			args: []string{"--metrics-cert-dir=/etc/metrics-certs"},
			want: func(o *manager.Options) { o.MetricsCertDir = "/etc/metrics-certs" },
		},
		{
			name: "leader election namespace follows the registry namespace",
			args: []string{"-n", "registry"},
			want: func(o *manager.Options) { o.Namespace, o.LeaderElectionNamespace = "registry", "registry" },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parse(t, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			want := defaults
			tt.want(&want)
			if diff := cmp.Diff(want, o.Manager, cmpopts.IgnoreFields(manager.Options{}, "Logger")); diff != "" {
				t.Errorf("options mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
	}{
		{[]string{"--cluster-name", "Foo_Bar"}, `invalid cluster name "Foo_Bar": a lowercase RFC 1123 label must consist of`},
		{[]string{"--namespace", "Registry"}, `invalid registry namespace "Registry"`},
		{[]string{"--metrics-bind-address", "8080"}, `invalid metrics bind address "8080"`},
		{[]string{"--metrics-secure=false"}, `plain HTTP /metrics has no authentication and may only be served on a loopback address (127.0.0.1:PORT, [::1]:PORT or localhost:PORT), got ":8443"`},
		{[]string{"--metrics-secure=false", "--metrics-bind-address=127.0.0.1:8080", "--metrics-cert-dir=/certs"}, "a metrics certificate directory (/certs) needs /metrics served over HTTPS"},
		{[]string{"-v", "-1"}, "-v must not be negative"},
		{[]string{"--kube-api-qps", "10"}, "--kube-api-burst must be at least 1"},
		{[]string{"--api-server-endpoint", "http://203.0.113.7"}, "--api-server-endpoint"},
		{[]string{"--reader-token-lifetime", "1m"}, "the reader token lifetime must be at least 10m0s"},
		{[]string{"--peer-failure-threshold", "0"}, "the peer failure threshold must be at least 1"},
		{[]string{"--max-peer-objects", "0"}, "--max-peer-objects) must be at least 1"},
		{[]string{"--max-peer-objects-retry", "100ms"}, "--max-peer-objects-retry) must be at least 1s"},
		{[]string{"--gc-percent", "-5"}, "--gc-percent, --memory-limit-ratio: the GC percent must be from 1 to 10000"},
		{[]string{"--memory-limit-ratio", "2"}, "the memory limit ratio must be from 0 (none) to 1, got 2"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, err := parse(t, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestInvalidClusterName runs the command: the error comes before any kubeconfig is
// read, names the flag value, points at the help and exits with 2.
func TestInvalidClusterName(t *testing.T) {
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	cmd := NewCmdServe(kubefake.New(nil), streams)
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	cmd.SetArgs([]string{"--cluster-name", "Foo_Bar"})
	err := cmd.ExecuteContext(t.Context())
	if code := cmdutil.ExitCode(err); code != 2 {
		t.Fatalf("exit code %d (error %v), want 2", code, err)
	}
	for _, s := range []string{`invalid cluster name "Foo_Bar"`, "RFC 1123 label", "See 'serve --help' for usage."} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not contain %q", err, s)
		}
	}
	if out.Len() != 0 || errOut.Len() != 0 {
		t.Errorf("unexpected output %q, %q", out, errOut)
	}
}

// TestMemoryFlags: the GC target defaults to manager.DefaultGCPercent unless GOGC is set
// (then the runtime's is kept), and the flag wins over GOGC.
func TestMemoryFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		gogc string // "" for unset
		args []string
		want manager.MemoryOptions
	}{
		{name: "defaults", want: manager.MemoryOptions{GCPercent: manager.DefaultGCPercent, LimitRatio: manager.DefaultMemoryLimitRatio}},
		{name: "GOGC set", gogc: "200", want: manager.MemoryOptions{GCPercent: 0, LimitRatio: manager.DefaultMemoryLimitRatio}},
		{name: "flag wins over GOGC", gogc: "200", args: []string{"--gc-percent=80", "--memory-limit-ratio=0"}, want: manager.MemoryOptions{GCPercent: 80}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.gogc != "" {
				t.Setenv("GOGC", tc.gogc)
			}
			o, err := parse(t, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, o.Memory); diff != "" {
				t.Errorf("memory options (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRunFakeNoKubeconfig: Run resolves its config through the Factory, and without a
// kubeconfig (nor a cluster to run in) it says so instead of falling back to
// client-go's default server; a --context the kubeconfig lacks is a usage error.
func TestRunFakeNoKubeconfig(t *testing.T) {
	for _, tt := range []struct {
		name    string
		f       *kubefake.Factory
		args    []string
		code    int
		wantErr string
	}{
		{name: "no kubeconfig", f: kubefake.New(nil), code: cmdutil.ExitCodeError, wantErr: errNoConfig.Error()},
		{name: "unknown --context", f: kubefake.New([]string{"a"}), args: []string{"--context", "x"}, code: cmdutil.ExitCodeError, wantErr: `--context "x": no such context in the kubeconfig`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, in := os.LookupEnv("KUBERNETES_SERVICE_HOST"); in {
				t.Skip("running in a pod: the in-cluster config is found")
			}
			_, _, err := plugintest.Command{New: []plugintest.NewCmd{NewCmdServe}, Factory: tt.f}.Run(t, append([]string{"serve"}, tt.args...)...)
			plugintest.WantExitCode(t, err, tt.code, tt.wantErr)
		})
	}
}
