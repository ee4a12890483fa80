// Package manager builds and runs the controller-runtime manager of the registry
// controller, the process that "kubectl registry serve" starts in every member cluster.
//
// It owns what every reconciler shares: the scheme (client-go's kinds and the registry's
// v1alpha1 kinds), the metrics server, the health probes (which never depend on
// leadership) and leader election. It never imports cobra, cli-runtime or the plugin.
package manager

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// Defaults of Options.
const (
	// DefaultMetricsBindAddress serves /metrics on every interface, port 8443, over HTTPS
	// to authenticated and authorized clients only (see Options.MetricsBindAddress).
	DefaultMetricsBindAddress = ":8443"
	// DefaultHealthProbeBindAddress serves /healthz and /readyz on every interface, port 8081.
	DefaultHealthProbeBindAddress = ":8081"
	// DefaultLeaderElectionID is the name of the Lease the controllers of one cluster
	// elect their leader with.
	DefaultLeaderElectionID = "cluster-registry-controller-leader"
	// DefaultGracefulShutdownTimeout bounds how long the runnables get to stop once the
	// context is cancelled.
	DefaultGracefulShutdownTimeout = 30 * time.Second
	// DefaultLeaseDuration, DefaultRenewDeadline and DefaultRetryPeriod time the leader
	// election of Run. A standby takes over the Lease of a crashed leader about lease
	// duration after the leader's last renewal, polling every retry period (with
	// client-go's jitter, at most 2.2 retry periods apart): at most 8 + 2 x 2.2 = 12.4 s,
	// then the reconcilers start. A leader that cannot renew the Lease for the renew
	// deadline (its API server is down) stops reconciling and campaigns again; it does not
	// exit, so an API server restart of any length needs no restart of the controller. A
	// graceful stop hands the Lease over at once.
	DefaultLeaseDuration = 8 * time.Second
	DefaultRenewDeadline = 6 * time.Second
	DefaultRetryPeriod   = 1 * time.Second
	// DisabledBindAddress disables a server when used as its bind address.
	DisabledBindAddress = "0"

	// startupCheckTimeout bounds the first request to the API server.
	startupCheckTimeout = 30 * time.Second
)

// Options configures the manager of the registry controller.
type Options struct {
	// Namespace is the registry namespace: where the controller, its Secrets and its
	// Lease live. Defaults to v1alpha1.DefaultNamespace.
	Namespace string
	// ClusterName is the name of the local cluster in the group, an RFC 1123 label.
	// Optional.
	ClusterName string

	// MetricsBindAddress is the address /metrics is served on; DisabledBindAddress ("0")
	// disables it. It is served over HTTPS, as controller-runtime's scaffolds do, to
	// clients the API server authenticates (TokenReview: a bearer token) and authorizes
	// (SubjectAccessReview: get on the non-resource URL /metrics, which the
	// cluster-registry-metrics-reader ClusterRole grants), unless MetricsPlainHTTP.
	MetricsBindAddress string
	// MetricsCertDir is a directory holding the serving certificate of /metrics, tls.crt
	// and tls.key (reloaded when they change, as cert-manager renews them). Empty serves a
	// self-signed certificate generated at start.
	MetricsCertDir string
	// MetricsPlainHTTP serves /metrics over plain HTTP, without authentication. Only a
	// loopback address may serve it so (out-of-cluster runs, where the scraper is on the
	// same machine); every other address is refused by Validate.
	MetricsPlainHTTP bool
	// HealthProbeBindAddress is the address /healthz and /readyz are served on;
	// DisabledBindAddress ("0") disables them.
	HealthProbeBindAddress string

	// LeaderElection makes only one replica per cluster run the reconcilers. The health
	// probes and metrics are served by every replica, leader or not. Run restarts the
	// reconcilers each time the replica becomes leader again after losing the Lease; a
	// manager built by New with LeaderElection exits when it loses the Lease, as
	// controller-runtime's managers do.
	LeaderElection bool
	// LeaderElectionNamespace is the namespace of the leader election Lease. Defaults to
	// Namespace.
	LeaderElectionNamespace string
	// LeaderElectionID is the name of the leader election Lease.
	LeaderElectionID string
	// LeaseDuration, RenewDeadline and RetryPeriod time the leader election; zero means
	// DefaultLeaseDuration, DefaultRenewDeadline and DefaultRetryPeriod. The leader stops
	// reconciling after failing to renew for RenewDeadline; a standby takes over a Lease
	// not renewed for LeaseDuration, trying every RetryPeriod.
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration

	// GracefulShutdownTimeout bounds how long the runnables get to stop once the context
	// is cancelled. Zero means DefaultGracefulShutdownTimeout.
	GracefulShutdownTimeout time.Duration

	// Registry configures the registry's reconcilers.
	Registry RegistryOptions

	// Logger is the logger of the manager and of its runnables (which also find it in
	// their context). The zero Logger means the logger of the context given to Run, or
	// controller-runtime's global logger for New.
	Logger logr.Logger
}

// DefaultOptions returns the Options of an installed controller, leader election aside.
func DefaultOptions() Options {
	return Options{
		Namespace:               v1alpha1.DefaultNamespace,
		MetricsBindAddress:      DefaultMetricsBindAddress,
		HealthProbeBindAddress:  DefaultHealthProbeBindAddress,
		LeaderElectionNamespace: v1alpha1.DefaultNamespace,
		LeaderElectionID:        DefaultLeaderElectionID,
		Registry:                DefaultRegistryOptions(),
	}
}

// Validate reports every invalid option. It does no I/O.
func (o Options) Validate() error {
	var errs []error
	if o.Namespace == "" {
		errs = append(errs, errors.New("the registry namespace must not be empty"))
	} else if msgs := validation.IsDNS1123Label(o.Namespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("invalid registry namespace %q: %s", o.Namespace, strings.Join(msgs, "; ")))
	}
	if err := ValidateClusterName(o.ClusterName); err != nil {
		errs = append(errs, err)
	}
	if err := validateBindAddress("metrics bind address", o.MetricsBindAddress); err != nil {
		errs = append(errs, err)
	} else if err := o.validateMetricsServing(); err != nil {
		errs = append(errs, err)
	}
	if err := validateBindAddress("health probe bind address", o.HealthProbeBindAddress); err != nil {
		errs = append(errs, err)
	}
	if o.LeaderElection {
		if o.LeaderElectionNamespace != "" {
			if msgs := validation.IsDNS1123Label(o.LeaderElectionNamespace); len(msgs) > 0 {
				errs = append(errs, fmt.Errorf("invalid leader election namespace %q: %s", o.LeaderElectionNamespace, strings.Join(msgs, "; ")))
			}
		}
		if o.LeaderElectionID == "" {
			errs = append(errs, errors.New("the leader election ID must not be empty when leader election is enabled"))
		} else if msgs := validation.IsDNS1123Subdomain(o.LeaderElectionID); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("invalid leader election ID %q: %s", o.LeaderElectionID, strings.Join(msgs, "; ")))
		}
		if err := o.validateLeaseTimes(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := o.Registry.validate(); err != nil {
		errs = append(errs, err)
	}
	if o.GracefulShutdownTimeout < 0 {
		errs = append(errs, fmt.Errorf("the graceful shutdown timeout must not be negative, got %s", o.GracefulShutdownTimeout))
	}
	return errors.Join(errs...)
}

// leaseTimes returns the leader election's timing with the defaults applied.
func (o Options) leaseTimes() (lease, renew, retry time.Duration) {
	lease, renew, retry = o.LeaseDuration, o.RenewDeadline, o.RetryPeriod
	if lease == 0 {
		lease = DefaultLeaseDuration
	}
	if renew == 0 {
		renew = DefaultRenewDeadline
	}
	if retry == 0 {
		retry = DefaultRetryPeriod
	}
	return lease, renew, retry
}

// validateLeaseTimes checks what client-go's leader election requires: lease duration >
// renew deadline > 1.2 x retry period, all positive.
func (o Options) validateLeaseTimes() error {
	if o.LeaseDuration < 0 || o.RenewDeadline < 0 || o.RetryPeriod < 0 {
		return fmt.Errorf("the leader election lease duration, renew deadline and retry period must not be negative, got %s, %s, %s", o.LeaseDuration, o.RenewDeadline, o.RetryPeriod)
	}
	lease, renew, retry := o.leaseTimes()
	if lease <= renew || float64(renew) <= 1.2*float64(retry) {
		return fmt.Errorf("the leader election needs lease duration > renew deadline > 1.2 x retry period, got %s, %s, %s", lease, renew, retry)
	}
	return nil
}

// validateMetricsServing checks that plain HTTP, which has no authentication, is served
// on a loopback address only, and that a certificate directory comes with HTTPS.
func (o Options) validateMetricsServing() error {
	if !o.MetricsPlainHTTP || o.MetricsBindAddress == DisabledBindAddress {
		return nil
	}
	if o.MetricsCertDir != "" {
		return fmt.Errorf("a metrics certificate directory (%s) needs /metrics served over HTTPS, not plain HTTP", o.MetricsCertDir)
	}
	host, _, _ := net.SplitHostPort(o.MetricsBindAddress) // validated by validateBindAddress
	if !isLoopback(host) {
		return fmt.Errorf("plain HTTP /metrics has no authentication and may only be served on a loopback address (127.0.0.1:PORT, [::1]:PORT or localhost:PORT), got %q", o.MetricsBindAddress)
	}
	return nil
}

// isLoopback reports whether host (of a bind address) listens on loopback only.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ValidateClusterName checks the name of a cluster in the group: empty (not set) or an
// RFC 1123 label.
func ValidateClusterName(name string) error {
	if name == "" {
		return nil
	}
	if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
		return fmt.Errorf("invalid cluster name %q: %s", name, strings.Join(msgs, "; "))
	}
	return nil
}

func validateBindAddress(what, addr string) error {
	if addr == DisabledBindAddress {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("invalid %s %q: want host:port, :port or %q to disable: %w", what, addr, DisabledBindAddress, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("invalid %s %q: the port must be a number from 0 to 65535 (or the address %q to disable)", what, addr, DisabledBindAddress)
	}
	return nil
}

// NewScheme returns a scheme holding client-go's built-in kinds and the registry's
// v1alpha1 kinds.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("adding the built-in kinds to the scheme: %w", err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("adding the %s kinds to the scheme: %w", v1alpha1.GroupVersion, err)
	}
	return s, nil
}

// New validates opts and builds the manager of the registry controller from cfg: the
// scheme, metrics, health probes and leader election. The listeners of the metrics and
// health probe servers are bound here, so a port in use is reported by New. Reconcilers
// are added to the returned manager before it is started.
func New(cfg *rest.Config, opts Options) (ctrl.Manager, error) {
	return newManager(cfg, opts, false)
}

// newManager is New; skipNameValidation lets the controllers of a manager have the names
// of a previous manager's in the same process (a new term of leadership).
func newManager(cfg *rest.Config, opts Options, skipNameValidation bool) (ctrl.Manager, error) {
	if cfg == nil {
		return nil, errors.New("no REST config for the API server")
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	logger := opts.Logger
	if logger.GetSink() == nil {
		logger = logf.Log
	}
	logger = logger.WithValues("controller", v1alpha1.ControllerName)
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	leNamespace := opts.LeaderElectionNamespace
	if leNamespace == "" {
		leNamespace = opts.Namespace
	}
	shutdown := opts.GracefulShutdownTimeout
	if shutdown == 0 {
		shutdown = DefaultGracefulShutdownTimeout
	}
	lease, renew, retry := opts.leaseTimes()
	metricsOpts, err := metricsServerOptions(opts)
	if err != nil {
		return nil, err
	}

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		Logger: logger,
		// The controller may read Secrets only in the registry namespace, and
		// ServiceAccounts there and in the readers namespace (the per-peer readers).
		Cache: cache.Options{
			ByObject: map[client.Object]cache.ByObject{
				&corev1.Secret{}:         {Namespaces: map[string]cache.Config{opts.Namespace: {}}},
				&corev1.ServiceAccount{}: {Namespaces: map[string]cache.Config{opts.Namespace: {}, v1alpha1.ReadersNamespace(opts.Namespace): {}}},
			},
			DefaultTransform: cache.TransformStripManagedFields(),
		},
		Metrics:                 metricsOpts,
		HealthProbeBindAddress:  opts.HealthProbeBindAddress,
		LeaderElection:          opts.LeaderElection,
		LeaderElectionNamespace: leNamespace,
		LeaderElectionID:        opts.LeaderElectionID,
		LeaseDuration:           &lease,
		RenewDeadline:           &renew,
		RetryPeriod:             &retry,
		// Hand the Lease over at once on a clean shutdown (rolling update, SIGTERM)
		// instead of letting the next leader wait for it to expire. Safe because Run
		// returns, and the process exits, right after the manager stops.
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       &shutdown,
		Controller:                    config.Controller{SkipNameValidation: &skipNameValidation},
		// Runnables find the logger in their context.
		BaseContext: func() context.Context {
			return logr.NewContext(context.Background(), logger)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("building the controller manager: %w", err)
	}

	// The probes answer for this process, leader or not: a replica waiting for the
	// Lease is healthy and ready to take over.
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, fmt.Errorf("adding the liveness check: %w", err)
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return nil, fmt.Errorf("adding the readiness check: %w", err)
	}
	return mgr, nil
}

// metricsServerOptions returns the options of the /metrics server of opts: HTTPS with
// authentication and authorization delegated to the API server (newMetricsAuthFilter,
// which does what controller-runtime's filters.WithAuthenticationAndAuthorization does;
// the controller creates TokenReviews and SubjectAccessReviews), unless
// opts.MetricsPlainHTTP. HTTP/2 is off, as in controller-runtime's scaffolds
// (CVE-2023-44487, CVE-2023-39325).
func metricsServerOptions(opts Options) (metricsserver.Options, error) {
	mo := metricsserver.Options{BindAddress: opts.MetricsBindAddress}
	if opts.MetricsPlainHTTP || opts.MetricsBindAddress == DisabledBindAddress {
		return mo, nil
	}
	mo.SecureServing = true
	mo.FilterProvider = newMetricsAuthFilter
	mo.TLSOpts = []func(*tls.Config){func(c *tls.Config) {
		c.NextProtos = []string{"http/1.1"}
		c.MinVersion = tls.VersionTLS12
	}}
	if opts.MetricsCertDir != "" {
		mo.CertDir = opts.MetricsCertDir
		return mo, nil
	}
	// A certificate of our own rather than controller-runtime's fallback, which would
	// first look for one in a fixed directory under the shared temporary directory.
	cert, err := selfSignedCertificate()
	if err != nil {
		return mo, err
	}
	mo.TLSOpts = append(mo.TLSOpts, func(c *tls.Config) {
		c.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return cert, nil }
	})
	return mo, nil
}

// selfSignedCertificate returns a self-signed serving certificate for the metrics
// server (localhost, 127.0.0.1 and the host name). Scrapers skip its verification or, for
// a verified one, the controller gets a certificate through MetricsCertDir.
func selfSignedCertificate() (*tls.Certificate, error) {
	var alt []string
	if host, err := os.Hostname(); err == nil && host != "" && host != "localhost" {
		alt = append(alt, host)
	}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("localhost", []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, alt)
	if err != nil {
		return nil, fmt.Errorf("generating the self-signed certificate of the metrics server: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("loading the self-signed certificate of the metrics server: %w", err)
	}
	return &cert, nil
}

// Run checks that the API server answers, builds the manager with New and runs it until
// ctx is cancelled. With opts.LeaderElection, the reconcilers run only while this replica
// holds the Lease, and start again when it leads again after losing it (see runElected):
// losing the Lease never ends Run. It returns nil after a graceful shutdown. The logger is
// opts.Logger or, when that is the zero Logger, the logger of ctx.
func Run(ctx context.Context, cfg *rest.Config, opts Options) error {
	if opts.Logger.GetSink() == nil {
		opts.Logger = logf.FromContext(ctx)
	}
	if cfg == nil {
		return errors.New("no REST config for the API server")
	}
	// Fail fast, with a clear message, when the API server does not answer: building
	// the manager already needs it.
	version, err := serverVersion(ctx, cfg, nil)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if opts.LeaderElection {
		if err := opts.Validate(); err != nil {
			return err
		}
		return runElected(ctx, cfg, opts, version)
	}
	mgr, err := New(cfg, opts)
	if err != nil {
		return err
	}
	mgr.GetLogger().Info("configured",
		"namespace", opts.Namespace, "clusterName", opts.ClusterName,
		"leaderElection", opts.LeaderElection,
		"metricsBindAddress", opts.MetricsBindAddress, "metricsSecure", !opts.MetricsPlainHTTP,
		"healthProbeBindAddress", opts.HealthProbeBindAddress)
	return start(ctx, mgr, func(ctx context.Context, mgr ctrl.Manager) error {
		return SetupRegistry(ctx, mgr, opts)
	})
}

// serverVersion asks the API server of cfg for its version, within startupCheckTimeout.
func serverVersion(ctx context.Context, cfg *rest.Config, hc *http.Client) (string, error) {
	var dc *discovery.DiscoveryClient
	var err error
	if hc != nil {
		dc, err = discovery.NewDiscoveryClientForConfigAndClient(cfg, hc)
	} else {
		dc, err = discovery.NewDiscoveryClientForConfig(cfg)
	}
	if err != nil {
		return "", fmt.Errorf("building a discovery client: %w", err)
	}
	checkCtx, cancel := context.WithTimeout(ctx, startupCheckTimeout)
	defer cancel()
	info, err := dc.ServerVersionWithContext(checkCtx)
	if err != nil {
		return "", fmt.Errorf("the API server at %s does not answer: %w", cfg.Host, err)
	}
	return info.GitVersion, nil
}

// Start checks that the API server of mgr answers and runs mgr until ctx is cancelled.
// It returns nil after a graceful shutdown.
func Start(ctx context.Context, mgr ctrl.Manager) error {
	return start(ctx, mgr, nil)
}

// start is Start with a setup step run once the API server answers, before mgr starts.
func start(ctx context.Context, mgr ctrl.Manager, setup func(context.Context, ctrl.Manager) error) error {
	logger := mgr.GetLogger()
	cfg := mgr.GetConfig()
	version, err := serverVersion(ctx, cfg, mgr.GetHTTPClient())
	if err != nil {
		if ctx.Err() != nil {
			// Stopped before the API server answered: a clean shutdown.
			return nil
		}
		return err
	}
	logger.Info("starting", "apiServer", cfg.Host, "apiServerVersion", version)
	if setup != nil {
		if err := setup(ctx, mgr); err != nil {
			return err
		}
	}
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("running the controller manager: %w", err)
	}
	logger.Info("stopped")
	return nil
}
