// Package serve implements "kubectl registry serve": the registry controller. In a pod it
// uses the in-cluster config; out of a cluster it reads the kubeconfig like kubectl
// (--kubeconfig, --context, ...).
package serve

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"

	"k8s.io/kubectl/pkg/util/templates"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"go.uber.org/zap/zapcore"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/cmdutil"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube"
	"github.com/kubectl-registry/kubectl-registry/reconciler/buildinfo"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
	"github.com/kubectl-registry/kubectl-registry/reconciler/manager"
	"github.com/kubectl-registry/kubectl-registry/reconciler/sizing"
)

const (
	serveLong = `
		Run the registry controller.

		The controller runs in every member cluster, as the Deployment that installs it does
		with "kubectl registry serve --leader-elect". It also runs out of a cluster against
		the cluster of a kubeconfig context (--kubeconfig, --context), which is how tests and
		demos run it; in a pod, with no kubeconfig, it uses the pod's service account.

		It serves /metrics (--metrics-bind-address) and /healthz and /readyz
		(--health-probe-bind-address) whether or not it holds the leader election Lease, and
		stops gracefully on SIGINT or SIGTERM.

		/metrics is served over HTTPS (HTTP/1.1) to clients that present a bearer token the
		API server authenticates (TokenReview) and authorizes for get on the non-resource
		URL /metrics (SubjectAccessReview): bind the ClusterRole
		cluster-registry-metrics-reader to the scraper's ServiceAccount. The certificate is
		self-signed unless --metrics-cert-dir holds tls.crt and tls.key.
		--metrics-secure=false serves plain HTTP without authentication, and only on a
		loopback address.

		With --leader-elect, a standby replica takes over from a crashed leader within about
		13 seconds by default. A leader that cannot reach its API server stops reconciling
		after the renew deadline and campaigns again; it does not exit.`

	serveExample = `
		# Run the controller against the cluster of a kubeconfig context
		kubectl registry serve --context kind-east --cluster-name east

		# Run it as the Deployment does, with leader election
		kubectl registry serve --leader-elect --cluster-name east`
)

// Options holds the flags and the state of "kubectl registry serve".
type Options struct {
	// Manager holds the manager's options, filled from the flags.
	Manager manager.Options
	// Zap holds the logging flags.
	Zap zap.Options
	// Verbosity, when positive, logs debug messages up to that level (like -v of kubectl).
	Verbosity int
	// APIServerEndpoint is --api-server-endpoint as given (normalised in Complete).
	APIServerEndpoint string
	// APIServerCAFile is --api-server-ca-file, read in Run.
	APIServerCAFile string

	// Memory tunes the Go runtime's garbage collector and soft memory limit.
	Memory manager.MemoryOptions

	// MetricsSecure is --metrics-secure: /metrics over HTTPS with authentication and
	// authorization (the default). Complete sets Manager.MetricsPlainHTTP from it.
	MetricsSecure bool

	// KubeAPIQPS and KubeAPIBurst limit the requests to the API server on the client side;
	// a negative QPS leaves flow control to the API server's priority and fairness.
	KubeAPIQPS   float32
	KubeAPIBurst int

	// Factory resolves the kubeconfig flags (or, in a pod, the in-cluster config).
	Factory kube.Factory
	cmd     *cobra.Command
	genericiooptions.IOStreams
}

// NewOptions returns Options with the defaults of the flags.
func NewOptions(f kube.Factory, streams genericiooptions.IOStreams) *Options {
	return &Options{
		Manager:       manager.DefaultOptions(),
		Memory:        manager.MemoryOptions{GCPercent: manager.DefaultGCPercent, LimitRatio: manager.DefaultMemoryLimitRatio},
		MetricsSecure: true,
		KubeAPIQPS:    -1,
		KubeAPIBurst:  0,
		Factory:       f,
		IOStreams:     streams,
	}
}

// NewCmdServe returns the "serve" command. f is the Factory of the root command's
// kubeconfig flags.
func NewCmdServe(f kube.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewOptions(f, streams)
	cmd := &cobra.Command{
		Use:     "serve [flags]",
		Short:   "Run the registry controller (in a cluster, or against a kubeconfig context)",
		Long:    templates.LongDesc(serveLong),
		Example: templates.Examples(serveExample),
		Args:    cmdutil.NoArgs,
		RunE:    cmdutil.RunE(o),
	}
	o.AddFlags(cmd)
	return cmd
}

// AddFlags adds the flags of serve to cmd.
func (o *Options) AddFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	m := &o.Manager
	// Shadows the root's --namespace: for serve it is the registry namespace.
	fs.StringVarP(&m.Namespace, "namespace", "n", m.Namespace,
		"Registry namespace: where the controller, its Secrets and its Lease live.")
	fs.StringVar(&m.ClusterName, "cluster-name", m.ClusterName,
		"Name of this cluster in the group, an RFC 1123 label (lower case alphanumerics and '-').")
	fs.StringVar(&m.MetricsBindAddress, "metrics-bind-address", m.MetricsBindAddress,
		`Address /metrics is served on (HTTPS with authentication and authorization unless --metrics-secure=false); "0" disables it.`)
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", o.MetricsSecure,
		"Serve /metrics over HTTPS to clients the API server authenticates and authorizes (get on the non-resource URL /metrics). false serves plain HTTP without authentication, allowed only on a loopback --metrics-bind-address.")
	fs.StringVar(&m.MetricsCertDir, "metrics-cert-dir", m.MetricsCertDir,
		"Directory with the serving certificate of /metrics, tls.crt and tls.key (reloaded when they change); without it the certificate is self-signed.")
	fs.StringVar(&m.HealthProbeBindAddress, "health-probe-bind-address", m.HealthProbeBindAddress,
		`Address /healthz and /readyz are served on; "0" disables them.`)
	fs.BoolVar(&m.LeaderElection, "leader-elect", m.LeaderElection,
		"Elect a leader among the replicas in this cluster, so that only one reconciles. The Deployment enables it.")
	fs.StringVar(&m.LeaderElectionNamespace, "leader-election-namespace", m.LeaderElectionNamespace,
		"Namespace of the leader election Lease; follows --namespace unless set.")
	fs.StringVar(&m.LeaderElectionID, "leader-election-id", m.LeaderElectionID,
		"Name of the leader election Lease.")
	fs.DurationVar(&m.LeaseDuration, "leader-elect-lease-duration", manager.DefaultLeaseDuration,
		"How long a standby waits, after the leader stopped renewing the Lease (a crash), before it takes over and starts reconciling. A graceful stop hands the Lease over at once.")
	fs.DurationVar(&m.RenewDeadline, "leader-elect-renew-deadline", manager.DefaultRenewDeadline,
		"How long the leader keeps reconciling while it cannot renew the Lease (its API server is down); then it stops reconciling and campaigns again, without exiting. Less than the lease duration.")
	fs.DurationVar(&m.RetryPeriod, "leader-elect-retry-period", manager.DefaultRetryPeriod,
		"How often the replicas try to acquire or renew the Lease.")
	r := &m.Registry
	fs.StringVar(&o.APIServerEndpoint, "api-server-endpoint", o.APIServerEndpoint,
		"Address peers reach this cluster's API server at (host, host:port or https URL), written into the local Cluster's kubernetesApiEndpoints for --network-name and into the reader kubeconfig. Needed in a pod unless the Cluster already lists one: the in-cluster service address is never advertised.")
	fs.StringVar(&o.APIServerCAFile, "api-server-ca-file", o.APIServerCAFile,
		"PEM CA bundle peers verify --api-server-endpoint with (default: the CA this controller trusts for its API server).")
	fs.StringVar(&r.NetworkName, "network-name", r.NetworkName,
		"Client network of this cluster: selects which of a Cluster's kubernetesApiEndpoints (by clientNetwork) peers are reached at.")
	fs.DurationVar(&r.TokenLifetime, "reader-token-lifetime", r.TokenLifetime,
		"Lifetime of the reader tokens peers hold (TokenRequest API); renewed at about half of it.")
	fs.DurationVar(&r.LegacyTokenLifetime, "legacy-reader-token-lifetime", r.LegacyTokenLifetime,
		"Lifetime of the reader tokens issued in the clear to legacy peers (annotation cluster-registry.k8s.cisco.com/legacy-peer on their Cluster), which their admin copies to them (kubectl registry join --legacy, run again to renew the copy); renewed here at about half of it, the copy stays valid until its own expiry.")
	fs.BoolVar(&r.AllowLoopbackPeers, "allow-loopback-peers", r.AllowLoopbackPeers,
		"Also dial peers at loopback addresses (refused by default, as link-local addresses and in-cluster service names always are: a member could otherwise point this controller into its own network). For groups whose API servers share one machine, as make demo and the test bed.")
	fs.DurationVar(&r.PeerHealthInterval, "peer-health-interval", r.PeerHealthInterval,
		"Period of the health check of each peer.")
	fs.IntVar(&r.PeerFailureThreshold, "peer-failure-threshold", r.PeerFailureThreshold,
		"Consecutive failed health checks before a peer is reported not Ready.")
	fs.DurationVar(&r.HeartbeatPeriod, "heartbeat-period", r.HeartbeatPeriod,
		"How often unchanged Cluster conditions get a new heartbeat time.")
	fs.DurationVar(&r.MetadataPeriod, "metadata-refresh-period", r.MetadataPeriod,
		"How often the local cluster's metadata (versions, provider, locality) is recomputed.")
	fs.IntVar(&r.SyncWorkers, "sync-workers", r.SyncWorkers,
		"How many synced objects are reconciled at once.")
	fs.IntVar(&r.MaxPeerObjects, "max-peer-objects", r.MaxPeerObjects,
		"Most objects one peer may offer to one watch of the rules (a kind, in one namespace a rule reads or in all of them, under the rules' label selector). A peer offering more is not watched there, nothing of it is kept in memory, the rules reading it report TooManyObjects, and the copies already made from it are kept; it is tried again after --max-peer-objects-retry.")
	fs.DurationVar(&r.OverCapRetry, "max-peer-objects-retry", r.OverCapRetry,
		"How long a watch refused by --max-peer-objects, --max-peer-response-bytes or --max-peer-object-bytes, or a peer refused by --max-peer-membership-objects, waits before it is tried again; doubles while the peer stays over, up to 8 times this.")
	fs.Int64Var(&r.MaxPeerResponseBytes, "max-peer-response-bytes", r.MaxPeerResponseBytes,
		"Most bytes of one response of a peer's API server (a page of a list, discovery; not a watch stream). Reading stops there: the rules' watch that asked reports ResponseTooLarge and keeps its copies; any other request refuses the peer (its Cluster is MembershipRefused).")
	fs.Int64Var(&r.MaxPeerObjectBytes, "max-peer-object-bytes", r.MaxPeerObjectBytes,
		"Most bytes of one object from a peer: one event of a watch stream, one element of a list. An API server stores objects of about 1.5 MiB at most. Reading stops there, reported as --max-peer-response-bytes is.")
	fs.IntVar(&r.MaxPeerMembershipObjects, "max-peer-membership-objects", r.MaxPeerMembershipObjects,
		"Most Clusters (and Secrets of the registry namespace, and ClusterFeatures) one peer may offer. A peer offering more is refused: its membership and relays are ignored, it counts as not Ready (its copies are kept) and its Cluster says MembershipRefused; it is tried again after --max-peer-objects-retry.")
	fs.IntVar(&r.MaxRules, "max-rules", r.MaxRules,
		"Most ResourceSyncRules this cluster runs, the first by name; the others do not run and say so (Ready False, TooManyRules). The built-in rule always runs.")
	fs.DurationVar(&m.GracefulShutdownTimeout, "graceful-shutdown-timeout", manager.DefaultGracefulShutdownTimeout,
		"How long the controller gets to stop after SIGTERM.")
	fs.IntVar(&o.Memory.GCPercent, "gc-percent", o.Memory.GCPercent,
		"Garbage collector target, as GOGC: how much the heap may grow over the live heap before a collection, in percent. Without the flag, GOGC in the environment wins.")
	fs.Float64Var(&o.Memory.LimitRatio, "memory-limit-ratio", o.Memory.LimitRatio,
		"With a cgroup memory limit (a container's limits.memory), the fraction of it set as the Go soft memory limit; 0 sets none. GOMEMLIMIT in the environment wins.")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS,
		"Requests per second to the API server allowed on the client side; negative leaves flow control to the API server (priority and fairness).")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst,
		"Burst of requests to the API server allowed on the client side, with a positive --kube-api-qps.")
	fs.IntVarP(&o.Verbosity, "v", "v", o.Verbosity,
		"Log verbosity: 0 logs info and errors, higher numbers add debug messages (overrides --zap-log-level).")

	gofs := flag.NewFlagSet("zap", flag.ContinueOnError)
	o.Zap.BindFlags(gofs)
	fs.AddGoFlagSet(gofs)
}

// Complete derives the options that follow other flags.
func (o *Options) Complete(cmd *cobra.Command, _ []string) error {
	o.cmd = cmd
	if !cmd.Flags().Changed("leader-election-namespace") {
		o.Manager.LeaderElectionNamespace = o.Manager.Namespace
	}
	o.Manager.MetricsPlainHTTP = !o.MetricsSecure
	if _, set := os.LookupEnv("GOGC"); set && !cmd.Flags().Changed("gc-percent") {
		o.Memory.GCPercent = 0 // the runtime applied GOGC
	}
	if o.APIServerEndpoint != "" {
		server, err := kubeconfig.NormalizeServer(o.APIServerEndpoint)
		if err != nil {
			return cmdutil.UsageError(cmd, fmt.Errorf("--api-server-endpoint: %w", err))
		}
		o.Manager.Registry.APIServerEndpoint = server
	}
	return nil
}

// Validate checks the flags. It does no I/O.
func (o *Options) Validate() error {
	if err := o.Manager.Validate(); err != nil {
		return err
	}
	if err := o.Memory.Validate(); err != nil {
		return fmt.Errorf("--gc-percent, --memory-limit-ratio: %w", err)
	}
	if o.Verbosity < 0 {
		return fmt.Errorf("-v must not be negative, got %d", o.Verbosity)
	}
	if o.KubeAPIQPS > 0 && o.KubeAPIBurst < 1 {
		return fmt.Errorf("--kube-api-burst must be at least 1 with a positive --kube-api-qps, got %d", o.KubeAPIBurst)
	}
	return nil
}

// Run runs the controller until ctx is cancelled.
func (o *Options) Run(ctx context.Context) error {
	logger := o.newLogger()
	// controller-runtime and client-go (klog) log through process-wide loggers; point
	// them at ours so every line has the same format and destination.
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)
	ctx = logr.NewContext(ctx, logger)

	cfg, err := o.restConfig()
	if err != nil {
		return err
	}
	if err := o.completeLocalServer(cfg); err != nil {
		return err
	}
	cfg.QPS = o.KubeAPIQPS
	cfg.Burst = o.KubeAPIBurst
	info := buildinfo.Get()
	cfg.UserAgent = fmt.Sprintf("kubectl-registry/%s (%s/%s) serve", info.Version, runtime.GOOS, runtime.GOARCH)

	logger.Info("kubectl-registry serve", "version", info.Version, "commit", info.Commit)
	mem, err := manager.ApplyMemory(o.Memory, "/")
	if err != nil {
		return err
	}
	memLimit := "none"
	if mem.Limit < math.MaxInt64 {
		memLimit = strconv.FormatInt(mem.Limit, 10)
	}
	logger.Info("memory", "gcPercent", mem.GCPercent, "memoryLimitBytes", memLimit, "cgroupLimitBytes", mem.CgroupLimit)
	cpu, err := sizing.CgroupCPULimit("/")
	if err != nil {
		return err
	}
	o.Manager.Registry.MemoryLimit, o.Manager.Registry.CPULimitMillis = mem.CgroupLimit, cpu
	o.Manager.Logger = logger
	return manager.Run(ctx, cfg, o.Manager)
}

// completeLocalServer fills what the registry advertises about the local API server: the
// CA peers verify it with, and the controller's own server address, except in a pod
// (the in-cluster service address is never advertised to peers).
func (o *Options) completeLocalServer(cfg *rest.Config) error {
	r := &o.Manager.Registry
	if o.APIServerCAFile != "" {
		ca, err := os.ReadFile(o.APIServerCAFile)
		if err != nil {
			return fmt.Errorf("--api-server-ca-file: %w", err)
		}
		r.APIServerCA = ca
	}
	r.LocalCA = cfg.CAData
	if len(r.LocalCA) == 0 && cfg.CAFile != "" {
		ca, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return fmt.Errorf("reading the CA of the API server: %w", err)
		}
		r.LocalCA = ca
	}
	r.LocalServer = cfg.Host
	if in, err := rest.InClusterConfig(); err == nil && in.Host == cfg.Host {
		r.LocalServer = ""
	}
	return nil
}

// errNoConfig is a missing kubeconfig out of a cluster: serve says so instead of letting
// client-go fall back to its legacy default server (http://localhost:8080).
var errNoConfig = errors.New("no kubeconfig found and not running in a cluster: pass --kubeconfig (and --context), or set KUBECONFIG")

// restConfig returns a copy of the REST config the kubeconfig flags select through the
// Factory: in a pod the in-cluster config, and with --server that server.
func (o *Options) restConfig() (*rest.Config, error) {
	targets, err := o.Factory.Targets(o.cmd, nil)
	if errors.Is(err, kube.ErrNoKubeconfig) {
		return nil, errNoConfig
	}
	if err != nil {
		return nil, err
	}
	return rest.CopyConfig(targets[0].Config), nil
}

// newLogger builds the logger from the logging flags; it writes to ErrOut.
func (o *Options) newLogger() logr.Logger {
	opts := []zap.Opts{zap.UseFlagOptions(&o.Zap), zap.WriteTo(o.ErrOut)}
	if o.Verbosity > 0 {
		opts = append(opts, zap.Level(zapcore.Level(-o.Verbosity)))
	}
	return zap.New(opts...)
}
