package manager

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// runElected runs the registry controller with leader election, in a way that both hands
// a crashed leader's work to a standby within seconds and rides out an outage of the API
// server:
//
//   - The probes and metrics are served for the whole life of the process, by a manager
//     without reconcilers, leader or not.
//   - The replicas campaign for the Lease with a short lease duration: a standby takes
//     over about LeaseDuration after the leader stopped renewing it (a crash).
//   - Each time this replica acquires the Lease, a fresh manager (a term) runs the
//     reconcilers. When the leader fails to renew the Lease for RenewDeadline (its API
//     server is down, usually), its term stops, so it writes nothing more, and it
//     campaigns again instead of exiting: once the API server answers, it renews the Lease
//     it still holds (or a standby has taken it) and a new term starts.
//   - When ctx is cancelled the term stops first and the Lease is released after, so the
//     next leader starts at once but never while this one still writes.
//
// It returns nil once ctx is cancelled, or the error of a term that failed while it led.
func runElected(ctx context.Context, cfg *rest.Config, opts Options, apiServerVersion string) error {
	always := opts
	always.LeaderElection = false
	probes, err := New(cfg, always)
	if err != nil {
		return err
	}
	logger := probes.GetLogger()
	lock, err := newLeaseLock(cfg, opts)
	if err != nil {
		return err
	}
	lease, renew, retry := opts.leaseTimes()
	logger.Info("configured",
		"namespace", opts.Namespace, "clusterName", opts.ClusterName, "leaderElection", true,
		"leaseDuration", lease, "renewDeadline", renew, "retryPeriod", retry,
		"metricsBindAddress", opts.MetricsBindAddress, "metricsSecure", !opts.MetricsPlainHTTP,
		"healthProbeBindAddress", opts.HealthProbeBindAddress)
	logger.Info("starting", "apiServer", cfg.Host, "apiServerVersion", apiServerVersion)

	probesCtx, stopProbes := context.WithCancel(context.WithoutCancel(ctx))
	probesDone := make(chan error, 1)
	go func() { probesDone <- probes.Start(probesCtx) }()
	defer func() {
		stopProbes()
		if err := <-probesDone; err != nil {
			logger.Error(err, "stopping the probes and metrics")
		}
	}()

	for term := 1; ; term++ {
		err := campaign(ctx, lock, opts.LeaderElectionID, lease, renew, retry, func(ctx context.Context) error {
			return runTerm(ctx, cfg, opts, term)
		})
		if err != nil || ctx.Err() != nil {
			return err
		}
		select {
		case err := <-probesDone:
			probesDone <- err
			return fmt.Errorf("serving the probes and metrics: %w", err)
		default:
		}
		logger.Info("lost the leader election Lease: stopped reconciling; campaigning again", "lease", lock.Describe())
	}
}

// campaign acquires the Lease, runs lead while it holds it, and returns once lead has
// returned: nil when the Lease was lost or ctx cancelled, lead's error when lead failed
// while this replica led. When ctx is cancelled the Lease is released only once lead has
// returned.
func campaign(ctx context.Context, lock resourcelock.Interface, name string, lease, renew, retry time.Duration, lead func(context.Context) error) error {
	// The elector has its own context, cancelled once lead returned (or at once when ctx
	// is cancelled while this replica does not lead): the elector releases the Lease when
	// its context is cancelled.
	electorCtx, stopElector := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElector()
	var (
		mu      sync.Mutex
		leading bool // lead runs or ran
		closed  bool // campaign is returning: too late to lead
	)
	leadErr := make(chan error, 1)
	defer context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !leading {
			stopElector()
		}
	})()
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   lease,
		RenewDeadline:   renew,
		RetryPeriod:     retry,
		ReleaseOnCancel: true,
		Name:            name,
		Callbacks: leaderelection.LeaderCallbacks{
			// Called in a goroutine of its own; leadingCtx is cancelled when the Lease
			// is lost.
			OnStartedLeading: func(leadingCtx context.Context) {
				mu.Lock()
				if closed || ctx.Err() != nil || leadingCtx.Err() != nil {
					mu.Unlock()
					return
				}
				leading = true
				mu.Unlock()
				termCtx, cancel := context.WithCancel(leadingCtx)
				stop := context.AfterFunc(ctx, cancel)
				err := lead(termCtx)
				stop()
				cancel()
				if leadingCtx.Err() != nil || ctx.Err() != nil {
					// It failed because it was stopped: the Lease was lost, or the
					// process stops.
					err = nil
				}
				leadErr <- err
				stopElector()
			},
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return fmt.Errorf("configuring the leader election: %w", err)
	}
	elector.Run(electorCtx)
	mu.Lock()
	closed = true
	led := leading
	mu.Unlock()
	if !led {
		return nil
	}
	return <-leadErr
}

// runTerm runs the registry's reconcilers in a manager of their own until ctx is
// cancelled: one term of leadership. The probes and metrics are served by the manager
// of runElected, so this one serves neither.
func runTerm(ctx context.Context, cfg *rest.Config, opts Options, term int) error {
	termOpts := opts
	termOpts.LeaderElection = false
	termOpts.MetricsBindAddress, termOpts.HealthProbeBindAddress = DisabledBindAddress, DisabledBindAddress
	// Every term registers the same controllers again in this process.
	mgr, err := newManager(cfg, termOpts, true)
	if err != nil {
		return err
	}
	logger := mgr.GetLogger()
	logger.Info("leading: starting the reconcilers", "term", term)
	if err := SetupRegistry(ctx, mgr, opts); err != nil {
		return err
	}
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("running the controller manager: %w", err)
	}
	logger.Info("stopped the reconcilers", "term", term)
	return nil
}

// newLeaseLock returns the Lease lock of opts, held under an identity unique to this
// process.
func newLeaseLock(cfg *rest.Config, opts Options) (*resourcelock.LeaseLock, error) {
	cs, err := kubernetes.NewForConfig(rest.AddUserAgent(rest.CopyConfig(cfg), "leader-election"))
	if err != nil {
		return nil, fmt.Errorf("building the leader election client: %w", err)
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("naming this replica for the leader election: %w", err)
	}
	ns := opts.LeaderElectionNamespace
	if ns == "" {
		ns = opts.Namespace
	}
	return &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: ns, Name: opts.LeaderElectionID},
		Client:     cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: host + "_" + string(uuid.NewUUID())},
	}, nil
}
