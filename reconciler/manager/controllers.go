package manager

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/bootstrap"
	"github.com/kubectl-registry/kubectl-registry/reconciler/buildinfo"
	"github.com/kubectl-registry/kubectl-registry/reconciler/clusters"
	"github.com/kubectl-registry/kubectl-registry/reconciler/credentials"
	"github.com/kubectl-registry/kubectl-registry/reconciler/engine"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
	"github.com/kubectl-registry/kubectl-registry/reconciler/membership"
	"github.com/kubectl-registry/kubectl-registry/reconciler/peers"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner/members"
	"github.com/kubectl-registry/kubectl-registry/reconciler/sizing"
)

// RegistryOptions configure the registry's reconcilers.
type RegistryOptions struct {
	// APIServerEndpoint is the address peers reach this cluster's API server at
	// (--api-server-endpoint), normalised to an https URL; empty keeps the local Cluster
	// CR's kubernetesApiEndpoints.
	APIServerEndpoint string
	// APIServerCA is the CA bundle of APIServerEndpoint; nil means the CA the controller
	// itself trusts for the local API server.
	APIServerCA []byte
	// NetworkName is the client network of this cluster (--network-name): it selects
	// which of a Cluster's kubernetesApiEndpoints to use.
	NetworkName string
	// LocalServer is the local API server address as the controller reaches it; it is
	// advertised when nothing else is known, except in a pod (set it empty there: the
	// in-cluster service address is never advertised).
	LocalServer string
	// LocalCA is the CA of the local API server.
	LocalCA []byte
	// TokenLifetime is the lifetime of reader tokens (renewed at about half of it).
	TokenLifetime time.Duration
	// LegacyTokenLifetime is the lifetime of the reader tokens issued in the clear to
	// legacy peers (copied by hand; renewed at about half of it).
	LegacyTokenLifetime time.Duration
	// AllowLoopbackPeers also dials peers at loopback addresses (see
	// kubeconfig.AddressPolicy).
	AllowLoopbackPeers bool
	// PeerHealthInterval is the period of peer health checks.
	PeerHealthInterval time.Duration
	// PeerFailureThreshold is how many consecutive failed checks make a peer not Ready.
	PeerFailureThreshold int
	// HeartbeatPeriod is how often unchanged conditions get a new heartbeat.
	HeartbeatPeriod time.Duration
	// MetadataPeriod is how often the local cluster's metadata is recomputed.
	MetadataPeriod time.Duration
	// SyncWorkers is how many synced objects are reconciled at once.
	SyncWorkers int
	// MaxPeerObjects caps the objects one watch of a peer holds (engine.Options).
	MaxPeerObjects int
	// OverCapRetry is the first wait before a watch over the cap is tried again.
	OverCapRetry time.Duration
	// MaxPeerResponseBytes and MaxPeerObjectBytes bound one response and one object (a
	// watch event, an element of a list) of a peer (peers.Limits).
	MaxPeerResponseBytes int64
	MaxPeerObjectBytes   int64
	// MaxPeerMembershipObjects caps the Clusters, Secrets and ClusterFeatures one peer's
	// membership cache holds (peers.Options).
	MaxPeerMembershipObjects int
	// MaxRules caps the ResourceSyncRules the engine runs (engine.Options).
	MaxRules int
	// MemoryLimit and CPULimitMillis are the container's limits (0: none or unknown),
	// which the local Cluster's WithinSizing condition compares with the sizing.
	MemoryLimit    int64
	CPULimitMillis int64
}

// DefaultRegistryOptions returns the defaults of the registry's reconcilers.
func DefaultRegistryOptions() RegistryOptions {
	return RegistryOptions{
		TokenLifetime:        bootstrap.DefaultTokenLifetime,
		LegacyTokenLifetime:  credentials.DefaultLegacyTokenLifetime,
		PeerHealthInterval:   peers.DefaultHealthInterval,
		PeerFailureThreshold: peers.DefaultFailureThreshold,
		HeartbeatPeriod:      clusters.DefaultHeartbeatPeriod,
		MetadataPeriod:       clusters.DefaultMetadataPeriod,
		SyncWorkers:          engine.DefaultWorkers,
		MaxPeerObjects:       engine.DefaultMaxPeerObjects,
		OverCapRetry:         engine.DefaultOverCapRetry,

		MaxPeerResponseBytes:     peers.DefaultMaxResponseBytes,
		MaxPeerObjectBytes:       peers.DefaultMaxObjectBytes,
		MaxPeerMembershipObjects: peers.DefaultMaxMembershipObjects,
		MaxRules:                 engine.DefaultMaxRules,
	}
}

func (o RegistryOptions) validate() error {
	var errs []error
	if o.TokenLifetime < bootstrap.MinTokenLifetime {
		errs = append(errs, fmt.Errorf("the reader token lifetime must be at least %s, got %s", bootstrap.MinTokenLifetime, o.TokenLifetime))
	}
	if o.LegacyTokenLifetime < bootstrap.MinTokenLifetime {
		errs = append(errs, fmt.Errorf("the legacy reader token lifetime must be at least %s, got %s", bootstrap.MinTokenLifetime, o.LegacyTokenLifetime))
	}
	if o.PeerHealthInterval < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("the peer health interval must be at least 100ms, got %s", o.PeerHealthInterval))
	}
	if o.PeerFailureThreshold < 1 {
		errs = append(errs, fmt.Errorf("the peer failure threshold must be at least 1, got %d", o.PeerFailureThreshold))
	}
	if o.SyncWorkers < 1 {
		errs = append(errs, fmt.Errorf("the sync workers must be at least 1, got %d", o.SyncWorkers))
	}
	if o.MaxPeerObjects < 1 {
		errs = append(errs, fmt.Errorf("the cap on a peer's objects per watch (--max-peer-objects) must be at least 1, got %d", o.MaxPeerObjects))
	}
	if o.OverCapRetry < time.Second {
		errs = append(errs, fmt.Errorf("the retry period of a watch over the cap (--max-peer-objects-retry) must be at least 1s, got %s", o.OverCapRetry))
	}
	if o.MaxPeerObjectBytes < 64<<10 || o.MaxPeerResponseBytes < o.MaxPeerObjectBytes {
		errs = append(errs, fmt.Errorf("the limit on one object of a peer (--max-peer-object-bytes) must be at least 64 KiB and at most the limit on one response (--max-peer-response-bytes), got %d and %d", o.MaxPeerObjectBytes, o.MaxPeerResponseBytes))
	}
	if o.MaxPeerMembershipObjects < 1 {
		errs = append(errs, fmt.Errorf("the cap on a peer's membership objects (--max-peer-membership-objects) must be at least 1, got %d", o.MaxPeerMembershipObjects))
	}
	if o.MaxRules < 1 {
		errs = append(errs, fmt.Errorf("the cap on the rules this cluster runs (--max-rules) must be at least 1, got %d", o.MaxRules))
	}
	if o.HeartbeatPeriod < time.Second || o.MetadataPeriod < time.Second {
		errs = append(errs, errors.New("the heartbeat and metadata periods must be at least 1s"))
	}
	return errors.Join(errs...)
}

// SetupRegistry resolves the local cluster's identity and adds the registry's
// reconcilers to mgr: bootstrap (local Cluster CR, reader ServiceAccount, token and
// Secret), the peer connections, Cluster status and membership sync.
func SetupRegistry(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	ro := opts.Registry
	if err := ro.validate(); err != nil {
		return err
	}
	identity, err := bootstrap.Resolve(ctx, mgr.GetAPIReader(), opts.ClusterName)
	if err != nil {
		return err
	}
	mgr.GetLogger().Info("local cluster", "name", identity.Name, "clusterID", identity.ID)

	cs, err := kubernetes.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return fmt.Errorf("building a clientset: %w", err)
	}
	r := &registry{
		mgr: mgr, opts: opts, ro: ro, identity: identity,
		tokens: func(ns string) bootstrap.TokenMinter { return cs.CoreV1().ServiceAccounts(ns) },
		//lint:ignore SA1019 core events (the events.k8s.io recorder has another interface); the RBAC grants both APIs
		recorder: mgr.GetEventRecorderFor("kubectl-registry"),
		keys:     &bootstrap.Keys{},
	}
	if err := r.setupBootstrap(); err != nil {
		return err
	}
	r.peerKeys = credentials.NewPeerKeys()
	if err := r.setupCredentials(); err != nil {
		return err
	}
	pm, err := r.addPeerManager()
	if err != nil {
		return err
	}
	if err := r.setupClusterSync(pm); err != nil {
		return err
	}
	return r.addEngine(pm)
}

// registry is what the registry's reconcilers share as SetupRegistry adds them: the
// manager and the options, the local cluster's identity, a minter of ServiceAccount
// tokens, the event recorder, this cluster's key pair and its peers' public keys.
type registry struct {
	mgr      ctrl.Manager
	opts     Options
	ro       RegistryOptions
	identity bootstrap.Identity
	tokens   func(ns string) bootstrap.TokenMinter
	recorder record.EventRecorder
	keys     *bootstrap.Keys
	peerKeys *credentials.PeerKeys
}

// setupBootstrap adds the bootstrap reconciler: the local Cluster CR, the reader
// ServiceAccount, its token and Secret.
func (r *registry) setupBootstrap() error {
	ro := r.ro
	boot := &bootstrap.Reconciler{
		Client:    r.mgr.GetClient(),
		APIReader: r.mgr.GetAPIReader(),
		Keys:      r.keys,
		Tokens:    r.tokens,
		Identity:  r.identity,
		Options: bootstrap.Options{
			Namespace:     r.opts.Namespace,
			Endpoint:      ro.APIServerEndpoint,
			EndpointCA:    ro.APIServerCA,
			NetworkName:   ro.NetworkName,
			LocalServer:   ro.LocalServer,
			LocalCA:       ro.LocalCA,
			TokenLifetime: ro.TokenLifetime,
		},
		Recorder: r.recorder,
		Metrics:  bootstrap.NewMetrics(metrics.Registry),
	}
	if err := boot.Options.Validate(); err != nil {
		return err
	}
	if err := boot.SetupWithManager(r.mgr); err != nil {
		return fmt.Errorf("setting up bootstrap: %w", err)
	}
	return nil
}

// setupCredentials adds the reconciler of the reader credentials this cluster issues
// its peers.
func (r *registry) setupCredentials() error {
	identity := r.identity
	creds := &credentials.Reconciler{
		PeerKeys:      r.peerKeys,
		Client:        r.mgr.GetClient(),
		APIReader:     r.mgr.GetAPIReader(),
		Tokens:        r.tokens,
		Identity:      identity,
		Namespace:     r.opts.Namespace,
		TokenLifetime: r.ro.TokenLifetime,
		// Copied by hand to a legacy peer: a longer lifetime.
		LegacyTokenLifetime: r.ro.LegacyTokenLifetime,
		// The departures in force as the membership decided them (see members.Decide).
		Departed: func(_ time.Time, clusters []v1alpha1.Cluster) map[types.UID]bool {
			gone := members.Decided(members.OwnCluster(clusters, identity.ID))
			out := make(map[types.UID]bool, len(gone))
			for id := range gone {
				out[id] = true
			}
			return out
		},
		Recorder: r.recorder,
	}
	if err := creds.SetupWithManager(r.mgr); err != nil {
		return fmt.Errorf("setting up reader credentials: %w", err)
	}
	return nil
}

// addPeerManager adds the manager of the connections to the peers, and returns it.
func (r *registry) addPeerManager() (*peers.Manager, error) {
	ro := r.ro
	pm, err := peers.NewManager(peers.Options{
		Scheme:           r.mgr.GetScheme(),
		Namespace:        r.opts.Namespace,
		LocalID:          r.identity.ID,
		HealthInterval:   ro.PeerHealthInterval,
		Addresses:        kubeconfig.AddressPolicy{AllowLoopback: ro.AllowLoopbackPeers},
		FailureThreshold: ro.PeerFailureThreshold,
		Registerer:       metrics.Registry,
		Limits:           peers.Limits{MaxResponseBytes: ro.MaxPeerResponseBytes, MaxObjectBytes: ro.MaxPeerObjectBytes},
		// A refused peer is read again as a watch over the cap is.
		MaxMembershipObjects: ro.MaxPeerMembershipObjects,
		RefusalRetry:         ro.OverCapRetry,
	})
	if err != nil {
		return nil, err
	}
	if err := r.mgr.Add(pm); err != nil {
		return nil, fmt.Errorf("adding the peer manager: %w", err)
	}
	return pm, nil
}

// setupClusterSync adds the Cluster status reconciler and membership sync, which read
// the peers through pm and share what they know of relays that disagree.
func (r *registry) setupClusterSync(pm *peers.Manager) error {
	mgr, ro := r.mgr, r.ro
	dc, err := discovery.NewDiscoveryClientForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return fmt.Errorf("building a discovery client: %w", err)
	}
	relayConflicts := membership.NewRelayConflicts()
	clusterMetrics, err := clusters.NewMetrics(metrics.Registry)
	if err != nil {
		return fmt.Errorf("registering the Cluster metrics: %w", err)
	}
	status := &clusters.Reconciler{
		Metrics:   clusterMetrics,
		Client:    mgr.GetClient(),
		Identity:  r.identity,
		Peers:     pm,
		Namespace: r.opts.Namespace,
		Keys:      r.keys,
		PeerKeys:  r.peerKeys,
		Relays:    relayConflicts,
		ServerVersion: func(ctx context.Context) (string, error) {
			v, err := dc.ServerVersionWithContext(ctx)
			if err != nil {
				return "", err
			}
			return v.GitVersion, nil
		},
		Recorder:          r.recorder,
		HeartbeatPeriod:   ro.HeartbeatPeriod,
		MetadataPeriod:    ro.MetadataPeriod,
		ControllerVersion: buildinfo.Get().Version,
		Sizing:            &sizing.Limits{MemoryLimit: ro.MemoryLimit, CPUMillis: ro.CPULimitMillis, MaxMembershipObjects: ro.MaxPeerMembershipObjects},
	}
	if err := status.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up cluster status: %w", err)
	}
	member := &membership.Reconciler{
		Client:    mgr.GetClient(),
		Identity:  r.identity,
		Peers:     pm,
		Namespace: r.opts.Namespace,
		Recorder:  r.recorder,
		Addresses: kubeconfig.AddressPolicy{AllowLoopback: ro.AllowLoopbackPeers},
		Conflicts: relayConflicts,
		// Opens the departure notice tokens the members issued this cluster.
		Keys: r.keys,
	}
	if err := member.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up membership sync: %w", err)
	}
	return nil
}

// addEngine adds the sync engine, which reads the peers through pm.
func (r *registry) addEngine(pm *peers.Manager) error {
	mgr, ro := r.mgr, r.ro
	dyn, err := dynamic.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return fmt.Errorf("building a dynamic client: %w", err)
	}
	eng, err := engine.New(engine.Options{
		LocalID:        r.identity.ID,
		LocalName:      r.identity.Name,
		Namespace:      r.opts.Namespace,
		Client:         mgr.GetClient(),
		Cache:          mgr.GetCache(),
		Dynamic:        dyn,
		Config:         mgr.GetConfig(),
		HTTPClient:     mgr.GetHTTPClient(),
		Mapper:         mgr.GetRESTMapper(),
		Peers:          pm,
		Workers:        ro.SyncWorkers,
		MaxPeerObjects: ro.MaxPeerObjects,
		OverCapRetry:   ro.OverCapRetry,
		MaxRules:       ro.MaxRules,
		Recorder:       r.recorder,
		Metrics:        engine.NewMetrics(metrics.Registry),
	})
	if err != nil {
		return err
	}
	if err := mgr.Add(eng); err != nil {
		return fmt.Errorf("adding the sync engine: %w", err)
	}
	return nil
}
