// Package peers holds the controller's connections to the other members of the group.
//
// A connection is built from a peer's reader kubeconfig (a Secret in the local registry
// namespace, untrusted input sanitised by package kubeconfig) and is read only: the
// package hands out a client.Reader backed by a shared informer cache, never a writer.
// Before anything is read the peer's kube-system namespace UID must equal the clusterID
// of its Cluster CR. A health check runs on a period; the peer turns not-Ready only after
// several consecutive failures (hysteresis) and reconnecting backs off up to a cap, so a
// flapping or dead peer never causes a tight loop. Editing or rotating the Secret
// replaces the connection without a restart.
package peers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
)

// Defaults of Options.
const (
	DefaultHealthInterval   = 5 * time.Second
	DefaultFailureThreshold = 3
	DefaultMaxBackoff       = 2 * time.Minute
	// cacheSyncTimeout bounds the first sync of a peer's cache before the connection is
	// retried.
	cacheSyncTimeout = 2 * time.Minute
)

// Options configure the Manager.
type Options struct {
	// Scheme knows the kinds read from peers.
	Scheme *runtime.Scheme
	// Namespace is the registry namespace; Secrets are read from peers only there.
	Namespace string
	// LocalID is the local cluster's ID: a connection with a peer's bootstrap
	// credential reads, of the peer's Secrets, only the credential issued to it
	// (v1alpha1.IssuedReaderSecretName(LocalID)).
	LocalID types.UID
	// HealthInterval is the period of the health check.
	HealthInterval time.Duration
	// FailureThreshold is how many consecutive failed checks make a peer not Ready.
	FailureThreshold int
	// MaxBackoff caps the wait between connection attempts.
	MaxBackoff time.Duration
	// Registerer registers the per-peer metrics; nil skips them.
	Registerer prometheus.Registerer
	// Addresses decides which API server addresses of peers are dialled.
	Addresses kubeconfig.AddressPolicy
	// Limits bound the bytes of every answer of a peer (limits.go).
	Limits Limits
	// MaxMembershipObjects caps the Clusters, Secrets and ClusterFeatures one peer's
	// cache holds; 0 means DefaultMaxMembershipObjects.
	MaxMembershipObjects int
	// RefusalRetry is the first wait before a peer refused (MembershipRefused) is read
	// again, doubling up to 8 times it while it stays refused; 0 means
	// DefaultRefusalRetry.
	RefusalRetry time.Duration
}

func (o *Options) defaults() {
	if o.HealthInterval <= 0 {
		o.HealthInterval = DefaultHealthInterval
	}
	if o.FailureThreshold <= 0 {
		o.FailureThreshold = DefaultFailureThreshold
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	if o.MaxMembershipObjects <= 0 {
		o.MaxMembershipObjects = DefaultMaxMembershipObjects
	}
	if o.RefusalRetry <= 0 {
		o.RefusalRetry = DefaultRefusalRetry
	}
	o.Limits = o.Limits.withDefaults()
}

// MessageBootstrap is the message of a Ready peer read with its bootstrap credential.
const MessageBootstrap = "the peer answers; it is read with its shared reader Secret, a bootstrap credential, until it issues this cluster a reader credential of its own: only its membership is read, none of its objects"

// Peer is a snapshot of one peer connection.
type Peer struct {
	// Name of the peer's Cluster CR.
	Name string
	// ClusterID the peer must have.
	ClusterID types.UID
	// State is the seed state the connection puts the Cluster in; empty while the first
	// connection attempt is under way.
	State v1alpha1.ClusterState
	// Ready is true while the peer answers; it turns false only after FailureThreshold
	// consecutive failures.
	Ready bool
	// Reason and Message explain State.
	Reason, Message string
	// Synced is true once the peer's cache has synced.
	Synced bool
	// Bootstrap is set when the connection uses the peer's shared reader Secret, a
	// bootstrap credential (package credentials): the peer has not issued this cluster a
	// reader of its own yet, or it is not usable. Such a connection reads only the
	// peer's Cluster CRs and the credential issued to this cluster (Reader); Config and
	// HTTPClient are nil, so nothing else of the peer is read.
	Bootstrap bool

	reader client.Reader
	config *rest.Config
	http   *http.Client
	mapper meta.RESTMapper
	// credential numbers the connection and the credential it reads with (Credential).
	credential uint64
	// features reports whether reader holds the peer's ClusterFeatures, synced; nil: it
	// always does (Connected).
	features func() bool
}

// Readable reports whether the peer can be read: connected and synced, with a
// credential other than its bootstrap one. Config, HTTPClient and Mapper are nil
// otherwise. It is what a check per peer and object asks, without Config's copy.
func (p Peer) Readable() bool {
	return p.Synced && p.config != nil && !p.Bootstrap
}

// Config returns a copy of the REST config of the connection (the peer's reader
// identity, no client-side timeout so watches last), or nil when the peer is not
// Readable. Callers only read with it: the reader identity cannot write anyway.
func (p Peer) Config() *rest.Config {
	if !p.Readable() {
		return nil
	}
	return rest.CopyConfig(p.config)
}

// HTTPClient returns the HTTP client to use with Config (no timeout, for watches; it
// dials only addresses the policy allows and refuses redirects), or nil when Config is.
// Every client of the peer is built on it.
func (p Peer) HTTPClient() *http.Client {
	if !p.Readable() {
		return nil
	}
	return p.http
}

// Mapper returns the REST mapper of the connection (the kinds the peer serves, found
// group by group as they are asked for, through the connection's byte limits), or nil
// when Config is: the connection's health check, its membership cache and the engine's
// views of the peer share it, so that each peer's mappings are held once.
func (p Peer) Mapper() meta.RESTMapper {
	if !p.Readable() {
		return nil
	}
	return p.mapper
}

// Reader returns a read-only view of the peer (its informer caches, membershipCache:
// its Cluster CRs, the Secrets of its registry namespace but the sealed credentials it
// issued to and received from the other members, the credential it issued to this
// cluster and, while they are watched, its ClusterFeatures (Features); with the
// bootstrap credential only its Cluster CRs and the credential it issued to this
// cluster), or nil when the peer is not connected and synced.
func (p Peer) Reader() client.Reader {
	if !p.Synced {
		return nil
	}
	return p.reader
}

// Connected returns a Ready peer whose cache has synced, read through reader: what a
// connection reports once it is up. For tests and tools that stand in for the
// connection (Config and HTTPClient are nil: nothing dials it).
func Connected(name string, id types.UID, reader client.Reader) Peer {
	return Peer{Name: name, ClusterID: id, State: v1alpha1.ClusterStateReady, Ready: true, Synced: true,
		Reason: v1alpha1.ReasonClusterReachable, Message: "the peer answers", reader: reader}
}

// Credential is a number that changes when the connection is replaced or reads with
// another credential: what a client built on Config and HTTPClient depends on (a
// connection's token is not in its Config).
func (p Peer) Credential() uint64 { return p.credential }

// WithCredential returns the peer with the Credential n: for tests and tools that stand
// in for the connection.
func (p Peer) WithCredential(n uint64) Peer {
	p.credential = n
	return p
}

// WithConfig returns the peer read with cfg, hc and mapper: for tests and tools that
// stand in for the connection of a peer whose objects are read.
func (p Peer) WithConfig(cfg *rest.Config, hc *http.Client, mapper meta.RESTMapper) Peer {
	p.config, p.http, p.mapper = cfg, hc, mapper
	return p
}

// link is what a connection reads a peer with: the direct client of the health check,
// and the config, HTTP client and REST mapper of the watches (the membership cache's and
// the engine's).
type link struct {
	direct client.Reader
	cfg    *rest.Config
	http   *http.Client
	mapper meta.RESTMapper
}

// Manager owns the peer connections. It is a manager.Runnable: connections live while it
// runs (on the leader only).
type Manager struct {
	opts    Options
	metrics *metrics

	mu    sync.Mutex
	log   logr.Logger
	conns map[string]*conn
	subs  []chan<- event.GenericEvent
	// pool shares the bytes and maps the peers' membership caches hold alike (transform.go).
	pool    *pools
	started bool
	// features is set while the peers' ClusterFeatures are watched (WatchFeatures).
	features atomic.Bool
	// stopped is set when Start's context is done: no connection starts after it.
	stopped bool

	// gen counts the changes of the peers' snapshots (conn.set) and of conns: List
	// recomputes its sorted snapshots only when it moved. The engine lists the peers for
	// every object it reconciles.
	gen atomic.Uint64
	// credentials numbers the connections and their credentials (Peer.Credential).
	credentials atomic.Uint64
	listMu      sync.Mutex
	listed      []Peer
	// listedGen is the gen listed was computed at.
	listedGen uint64
}

// NewManager returns a Manager; it connects nothing until Start.
func NewManager(opts Options) (*Manager, error) {
	opts.defaults()
	if opts.Scheme == nil || opts.Namespace == "" || opts.LocalID == "" {
		return nil, errors.New("peers: a scheme, the registry namespace and the local cluster's ID are required")
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	return &Manager{opts: opts, metrics: m, conns: map[string]*conn{}, pool: newPools()}, nil
}

// Subscribe registers ch to receive an event, with the peer's Cluster name, whenever a
// peer's state changes or an object in its cache changes. Call before Start.
func (m *Manager) Subscribe(ch chan<- event.GenericEvent) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.subs = append(m.subs, ch)
}

// Start runs until ctx is done, then closes every connection.
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	m.log = logr.FromContextOrDiscard(ctx).WithName("peers")
	m.started = true
	m.mu.Unlock()
	<-ctx.Done()
	// The connections are stopped without the lock: a connection that reports a change as
	// it stops (notify) takes it, and stop waits for the connection (a deadlock that hung
	// the controller's shutdown, and a test, for good).
	m.mu.Lock()
	m.stopped = true
	conns := m.conns
	m.conns = map[string]*conn{}
	m.gen.Add(1)
	m.mu.Unlock()
	for _, c := range conns {
		c.stop()
	}
	return nil
}

// Get returns the snapshot of the named peer.
func (m *Manager) Get(name string) (Peer, bool) {
	m.mu.Lock()
	c, ok := m.conns[name]
	m.mu.Unlock()
	if !ok {
		return Peer{}, false
	}
	return c.snapshot(), true
}

// List returns snapshots of every peer, by name. The slice is the caller's.
func (m *Manager) List() []Peer {
	return slices.Clone(m.Shared())
}

// Shared is List without the copy, for a caller that only reads the snapshots (the
// engine, once per object): every caller gets the same slice until a peer or the set of
// connections changes, and must not write it.
func (m *Manager) Shared() []Peer {
	gen := m.gen.Load() // before the snapshots: a change while they are taken moves it
	m.listMu.Lock()
	if m.listed != nil && m.listedGen == gen {
		out := m.listed
		m.listMu.Unlock()
		return out
	}
	m.listMu.Unlock()
	out := m.list()
	m.listMu.Lock()
	m.listed, m.listedGen = out, gen
	m.listMu.Unlock()
	return out
}

// list takes the snapshots of every peer, sorted by name.
func (m *Manager) list() []Peer {
	m.mu.Lock()
	conns := make([]*conn, 0, len(m.conns))
	for _, c := range m.conns {
		conns = append(conns, c)
	}
	m.mu.Unlock()
	out := make([]Peer, 0, len(conns))
	for _, c := range conns {
		out = append(out, c.snapshot())
	}
	slices.SortFunc(out, func(a, b Peer) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Remove closes the connection to the named peer, if any.
func (m *Manager) Remove(name string) {
	m.mu.Lock()
	c, ok := m.conns[name]
	delete(m.conns, name)
	m.gen.Add(1)
	m.mu.Unlock()
	if ok {
		c.stop()
		m.metrics.forget(name)
		m.notify(name)
	}
}

// Ensure makes sure a connection matching the Cluster and its reader Secret exists,
// replacing one built from an older Secret or for another cluster ID, and returns its
// snapshot. bootstrap says the Secret is the peer's bootstrap credential (its shared
// reader Secret): the connection then reads only what that credential may read. An
// invalid kubeconfig closes any connection and returns a peer in state
// InvalidAuthInfo.
func (m *Manager) Ensure(cluster *v1alpha1.Cluster, secret *corev1.Secret, bootstrap bool) Peer {
	fp := fingerprint(cluster.Spec.ClusterID, secret, bootstrap)
	m.mu.Lock()
	if c, ok := m.conns[cluster.Name]; ok && c.fingerprint == fp {
		m.mu.Unlock()
		return c.snapshot()
	}
	old := m.conns[cluster.Name]
	if !m.started || m.stopped {
		m.mu.Unlock()
		msg := "the controller is starting"
		if m.stopped {
			msg = "the controller is stopping"
		}
		return Peer{Name: cluster.Name, ClusterID: cluster.Spec.ClusterID, Reason: v1alpha1.ReasonClusterNotConnected, Message: msg}
	}
	cfg, err := kubeconfig.Parse(secret.Data[v1alpha1.KubeconfigKey])
	var guardErr error
	var cred *credential
	var link linkID
	if err == nil {
		guardErr = m.opts.Addresses.Guard(cfg)
		if guardErr == nil && old != nil && old.switchable(cluster.Spec.ClusterID, cfg, bootstrap) {
			// The credential the peer issued, on the connection of its bootstrap one.
			old.fingerprint = fp
			m.gen.Add(1)
			m.mu.Unlock()
			old.switchCredential(cfg.BearerToken)
			return old.snapshot()
		}
		cred, link = withCredential(cfg, bootstrap)
	}
	c := newConn(m, cluster.Name, cluster.Spec.ClusterID, fp, bootstrap, cred, link)
	m.conns[cluster.Name] = c
	m.gen.Add(1)
	log := m.log
	m.mu.Unlock()
	if old != nil {
		old.stop()
	}

	if err != nil {
		c.set(func(p *Peer) {
			p.State, p.Ready, p.Reason = v1alpha1.ClusterStateInvalidAuthInfo, false, v1alpha1.ReasonInvalidAuthInfo
			p.Message = fmt.Sprintf("Secret %s/%s: %v", secret.Namespace, secret.Name, err)
		})
		return c.snapshot()
	}
	if err := guardErr; err != nil {
		m.log.Info("peer address refused", "cluster", cluster.Name, "secret", secret.Name, "error", err.Error())
		c.set(func(p *Peer) {
			p.State, p.Ready, p.Reason = v1alpha1.ClusterStateInvalidAuthInfo, false, v1alpha1.ReasonInvalidAuthInfo
			p.Message = fmt.Sprintf("Secret %s/%s: %s", secret.Namespace, secret.Name, ClassAddressRefused)
		})
		return c.snapshot()
	}
	c.start(logr.NewContext(context.Background(), log), cfg)
	return c.snapshot()
}

func (m *Manager) notify(name string) {
	m.mu.Lock()
	subs := append([]chan<- event.GenericEvent(nil), m.subs...)
	m.mu.Unlock()
	for _, ch := range subs {
		ev := event.GenericEvent{Object: &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}}}
		select {
		case ch <- ev:
		default:
			// The subscriber is far behind; it will resync on its own period. Never block
			// an informer or a health check on a slow reconciler.
		}
	}
}

// Authenticate checks a reader kubeconfig offered for cluster want without connecting to
// it for good: its server must be one addresses allows, its token must authenticate
// there, and the server must be cluster want (the UID of its kube-system namespace).
// Errors are classified by Classify.
func Authenticate(ctx context.Context, data []byte, addresses kubeconfig.AddressPolicy, want types.UID) error {
	cfg, err := kubeconfig.Parse(data)
	if err != nil {
		return err
	}
	if err := addresses.Guard(cfg); err != nil {
		return err
	}
	requests, _, err := kubeconfig.HTTPClients(cfg)
	if err != nil {
		return err
	}
	// The answer is read through the default byte limits: the server is a member's.
	requests = Limited(requests, Limits{}, nil)
	// A typed client: one request, no discovery.
	c, err := corev1client.NewForConfigAndClient(cfg, requests)
	if err != nil {
		return err
	}
	ns, err := c.Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if ns.UID != want {
		return fmt.Errorf("%w: the server is not cluster %s", ErrWrongCluster, want)
	}
	return nil
}

// fingerprint identifies what a connection was built from.
func fingerprint(id types.UID, s *corev1.Secret, bootstrap bool) string {
	h := sha256.New()
	h.Write([]byte(id))
	if bootstrap {
		h.Write([]byte{1})
	} else {
		h.Write([]byte{0})
	}
	h.Write(s.Data[v1alpha1.KubeconfigKey])
	return hex.EncodeToString(h.Sum(nil))
}

// conn is one peer connection.
type conn struct {
	m           *Manager
	fingerprint string
	done        chan struct{}
	// cred is the token of its requests (nil for a kubeconfig without one), link what it
	// reaches; switched signals a switch from the bootstrap credential (switch.go).
	cred     *credential
	link     linkID
	switched chan struct{}

	// life guards cancel and stopped: a connection stopped before it started never
	// starts. Not mu, which run takes to report while stop waits for run.
	life    sync.Mutex
	cancel  context.CancelFunc
	stopped bool

	mu    sync.Mutex
	peer  Peer
	fails int
	// refusal is why the peer's answers were refused (membershipcap.go), until it is read
	// again; refused is signalled, and stopCache stops the cache, when it is set.
	refusal   string
	refused   chan struct{}
	stopCache context.CancelFunc
	// cache is the membership cache serve runs, under cacheCtx (nil between caches), and
	// featureWatched whether it watches the peer's ClusterFeatures (features.go).
	cache          cache.Cache
	cacheCtx       context.Context
	featureWatched bool
	// fmu serializes the starts and stops of the ClusterFeatures' watch.
	fmu sync.Mutex
}

func newConn(m *Manager, name string, id types.UID, fp string, bootstrap bool, cred *credential, link linkID) *conn {
	return &conn{m: m, fingerprint: fp, done: make(chan struct{}), refused: make(chan struct{}, 1), cred: cred, link: link, switched: make(chan struct{}, 1),
		peer: Peer{Name: name, ClusterID: id, Reason: v1alpha1.ReasonClusterNotConnected, Message: "connecting", Bootstrap: bootstrap, features: featuresUnwatched,
			credential: m.credentials.Add(1)}}
}

func (c *conn) snapshot() Peer {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.peer
}

// set changes the peer under the lock and notifies subscribers when anything visible
// changed.
func (c *conn) set(f func(*Peer)) {
	c.mu.Lock()
	before := c.peer
	f(&c.peer)
	after := c.peer
	c.mu.Unlock()
	c.m.gen.Add(1)
	c.m.metrics.observe(after)
	if before.State != after.State || before.Ready != after.Ready || before.Reason != after.Reason ||
		before.Message != after.Message || before.Synced != after.Synced {
		if before.Ready != after.Ready || before.State != after.State {
			c.m.log.Info("peer state changed", "cluster", after.Name, "state", after.State, "ready", after.Ready, "reason", after.Reason, "message", after.Message)
		}
		c.m.notify(after.Name)
	}
}

// start runs the connection until stop. Connections do not derive from a context the
// Manager keeps: Start stops every connection when its own context is done, and Remove
// and Ensure stop the ones they replace. base carries only the logger.
func (c *conn) start(base context.Context, cfg *rest.Config) {
	c.life.Lock()
	defer c.life.Unlock()
	if c.stopped {
		return // stopped before it started: the Manager is shutting down, or replaced it
	}
	ctx, cancel := context.WithCancel(base)
	c.cancel = cancel
	go func() {
		defer close(c.done)
		c.run(ctx, cfg)
	}()
}

func (c *conn) stop() {
	c.life.Lock()
	c.stopped = true
	cancel := c.cancel
	c.life.Unlock()
	if cancel != nil {
		cancel()
		<-c.done
	}
}

// run connects, verifies the peer's identity, starts its cache and checks its health
// until ctx is done.
func (c *conn) run(ctx context.Context, cfg *rest.Config) {
	opts := c.m.opts
	requests, watches, err := kubeconfig.HTTPClients(cfg)
	if err != nil {
		c.set(func(p *Peer) {
			p.State, p.Ready, p.Reason, p.Message = v1alpha1.ClusterStateInvalidAuthInfo, false, v1alpha1.ReasonInvalidAuthInfo, fmt.Sprintf("building a client: %v", err)
		})
		return
	}
	// Every answer of the peer is read through the byte limits. A refusal of a request
	// that says nothing of its own (the health check, the membership cache, discovery)
	// refuses the peer's membership; the engine's watches report their own.
	// The lists of the membership cache are cut at MaxMembershipObjects items.
	refuse := func(e *TooLargeError) { c.refuse(e.Error()) }
	limits := opts.Limits
	limits.MaxListItems = opts.MaxMembershipObjects
	requests = Limited(requests, limits, refuse)
	watches = Limited(watches, limits, refuse)
	// One REST mapper per connection, of the group versions asked for only
	// (NewVersionMapper), shared by every client of the peer; its mappings are shared
	// with the peers that serve the same resources.
	dc, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, requests)
	if err != nil {
		c.set(func(p *Peer) {
			p.State, p.Ready, p.Reason, p.Message = v1alpha1.ClusterStateInvalidAuthInfo, false, v1alpha1.ReasonInvalidAuthInfo, fmt.Sprintf("building a client: %v", err)
		})
		return
	}
	mapper := newVersionMapper(dc, time.Now, c.m.pool.mapperPool())
	direct, err := client.New(cfg, client.Options{Scheme: opts.Scheme, HTTPClient: requests, Mapper: mapper})
	if err != nil {
		c.set(func(p *Peer) {
			p.State, p.Ready, p.Reason, p.Message = v1alpha1.ClusterStateInvalidAuthInfo, false, v1alpha1.ReasonInvalidAuthInfo, fmt.Sprintf("building a client: %v", err)
		})
		return
	}
	// Connect, with capped exponential backoff.
	backoff := time.Second
	for {
		err := c.check(ctx, direct)
		if err == nil {
			break
		}
		if ctx.Err() != nil || c.terminal() {
			return
		}
		if !sleep(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, opts.MaxBackoff)
	}

	// Watches are long requests: no client-side timeout on the cache's connection.
	watchCfg := rest.CopyConfig(cfg)
	watchCfg.Timeout = 0
	var delay time.Duration
	l := link{direct: direct, cfg: watchCfg, http: watches, mapper: mapper}
	for c.serve(ctx, l) {
		// Refused (refuse): the cache is stopped and the peer is not Ready until it is
		// read again, backing off while it stays refused.
		delay = nextRefusalDelay(delay, opts.RefusalRetry)
		c.m.log.Info("a peer's answers were refused: its membership is not read", "cluster", c.snapshot().Name, "retryIn", delay.String())
		if !sleep(ctx, delay) {
			return
		}
		c.mu.Lock()
		c.refusal = ""
		c.mu.Unlock()
		select {
		case <-c.refused:
		default:
		}
	}
}

// serve starts the peer's cache (newCache, watch), waits for it to sync and checks the
// peer's health (healthLoop) until ctx is done or the peer's answers are refused
// (refuse): then the cache is stopped and serve returns true.
func (c *conn) serve(ctx context.Context, l link) bool {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	c.mu.Lock()
	if c.refusal != "" {
		c.mu.Unlock()
		return true
	}
	c.stopCache = stop
	c.mu.Unlock()
	cch, err := c.newCache(l)
	if err != nil {
		c.set(func(p *Peer) { p.Message = fmt.Sprintf("building the cache: %v", err) })
		return false
	}
	if err := c.watch(ctx, cch); err != nil {
		c.set(func(p *Peer) { p.Message = fmt.Sprintf("watching the peer: %v", err) })
		return false
	}
	c.setCache(ctx, cch)
	defer c.clearCache()
	go func() { _ = cch.Start(ctx) }()
	syncCtx, cancel := context.WithTimeout(ctx, cacheSyncTimeout)
	synced := cch.WaitForCacheSync(syncCtx)
	cancel()
	if c.isRefused() {
		return true
	}
	if ctx.Err() != nil {
		return false
	}
	if synced {
		c.markSynced(cch, l)
	}
	return c.healthLoop(ctx, cch, synced, l)
}

// isRefused reports whether the peer's answers were refused (refuse) since the last
// look.
func (c *conn) isRefused() bool {
	select {
	case <-c.refused:
		return true
	default:
		return false
	}
}

// newCache builds the cache of the peer's membership (membershipCache): the Clusters and
// the Secrets of the registry namespace but the sealed credentials the peer issued and
// received (the ClusterFeatures are watched only while rules select by them:
// features.go), and, by name, the credential the peer issued to this cluster; with the
// bootstrap credential only what it may read: the Clusters and that credential.
func (c *conn) newCache(l link) (*membershipCache, error) {
	opts := c.m.opts
	// JSON, never protobuf: the limits count a JSON list's items as they are read.
	cacheCfg := rest.CopyConfig(l.cfg)
	cacheCfg.ContentType = runtime.ContentTypeJSON
	transform := peerSecrets(opts.LocalID, c.m.pool)
	rc, err := corev1client.NewForConfigAndClient(cacheCfg, l.http)
	if err != nil {
		return nil, err
	}
	// The sealed credentials the peer issued the other members (labelled ReaderForLabel)
	// and received from them (ReaderFromLabel) are not read: only their recipients can
	// open them, no decision here reads them, and there are two per member, 39 MB of a
	// first sync among 100 peers (docs/performance.md). The one issued to this cluster
	// is issuedWatch's.
	sel, err := labels.Parse("!" + v1alpha1.ReaderForLabel + ",!" + v1alpha1.ReaderFromLabel)
	if err != nil {
		return nil, err
	}
	byObject := map[client.Object]cache.ByObject{
		&v1alpha1.Cluster{}: {Transform: peerClusters(c.m.pool)},
		&corev1.Secret{}:    {Namespaces: map[string]cache.Config{opts.Namespace: {LabelSelector: sel}}, Transform: transform},
	}
	kinds := []client.Object{&v1alpha1.Cluster{}}
	// With the bootstrap credential the Secrets are not watched until the peer's own
	// credential replaces it (watchSecrets).
	bootstrap := c.snapshot().Bootstrap
	if !bootstrap {
		kinds = append(kinds, &corev1.Secret{})
	}
	cch, err := cache.New(cacheCfg, cache.Options{
		HTTPClient:       l.http,
		Scheme:           opts.Scheme,
		Mapper:           l.mapper,
		ByObject:         byObject,
		DefaultTransform: cache.TransformStripManagedFields(),
		// A kind not watched above is an error, not a new informer: one the credential
		// may not read would wait for a sync that never comes.
		ReaderFailOnMissingInformer: true,
		// Each informer holds at most MaxMembershipObjects objects (membershipCap).
		NewInformer: c.newInformer,
	})
	if err != nil {
		return nil, err
	}
	issued := newIssuedWatch(client.ObjectKey{Namespace: opts.Namespace, Name: v1alpha1.IssuedReaderSecretName(opts.LocalID)}, transform)
	mc := &membershipCache{Cache: cch, kinds: kinds, issued: issued, rc: rc.RESTClient()}
	mc.secrets.Store(!bootstrap)
	return mc, nil
}

// watch starts an informer of each kind in cch, each change of which notifies the
// Manager's subscribers, but an update of a Cluster's heartbeats only (Changed).
func (c *conn) watch(ctx context.Context, cch *membershipCache) error {
	name := c.snapshot().Name
	notify := func() { c.m.notify(name) }
	cch.issued.notify, cch.issued.peer = notify, name
	return cch.eachInformer(ctx, func(inf cache.Informer) error {
		_, err := inf.AddEventHandler(notifyOnChange(notify))
		return err
	})
}

// markSynced makes the synced cache the peer's reader, unless its answers were refused
// or the cache, built for the bootstrap credential, does not watch yet the Secrets the
// peer's own credential reads (watchSecrets).
func (c *conn) markSynced(cch *membershipCache, l link) {
	c.set(func(p *Peer) {
		if c.refusal == "" && (p.Bootstrap || cch.secrets.Load()) {
			p.Synced, p.reader, p.config, p.http, p.mapper = true, cch, l.cfg, l.http, l.mapper
		}
	})
}

// healthLoop checks the peer's health every HealthInterval, and waits for a cache not
// synced yet, until ctx is done or the peer's answers are refused (true: serve again
// once the refusal has passed) or retrying cannot help (terminal).
func (c *conn) healthLoop(ctx context.Context, cch *membershipCache, synced bool, l link) bool {
	opts := c.m.opts
	ticker := time.NewTicker(opts.HealthInterval)
	defer ticker.Stop()
	switching := false
	for {
		select {
		case <-ctx.Done():
			return c.isRefused()
		case <-c.refused:
			return true
		case <-c.switched:
			switching = true
		case <-ticker.C:
		}
		err := c.check(ctx, l.direct)
		if switching && err == nil {
			// The credential the peer issued answers as the same cluster: its Secrets
			// are read too, and the peer is synced once they are.
			if err := c.watchSecrets(ctx, cch); err != nil {
				c.m.log.Error(err, "watching a peer's Secrets", "cluster", c.snapshot().Name)
			} else {
				switching, synced = false, false
				c.syncFeatures()
			}
		}
		if !synced {
			sctx, cancel := context.WithTimeout(ctx, opts.HealthInterval)
			synced = cch.WaitForCacheSync(sctx)
			cancel()
			if synced {
				c.markSynced(cch, l)
			}
		}
		if c.terminal() {
			return false
		}
	}
}

// terminal reports whether retrying cannot help until the Secret changes.
func (c *conn) terminal() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.peer.Reason == v1alpha1.ReasonClusterIDMismatch
}

// check reads the peer's kube-system namespace: it proves the peer answers, that the
// token works, and that the peer is the cluster its Cluster CR names.
func (c *conn) check(ctx context.Context, r client.Reader) error {
	cctx, cancel := context.WithTimeout(ctx, c.m.opts.HealthInterval+5*time.Second)
	defer cancel()
	var ns corev1.Namespace
	err := r.Get(cctx, client.ObjectKey{Name: metav1.NamespaceSystem}, &ns)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	want := c.snapshot().ClusterID
	if err == nil && ns.UID != want {
		err = fmt.Errorf("%w: the cluster the kubeconfig reaches is not %s", ErrWrongCluster, want)
		c.m.log.Info("peer is another cluster", "cluster", c.snapshot().Name, "want", want, "got", truncate(string(ns.UID), 64))
		c.set(func(p *Peer) {
			p.State, p.Ready, p.Reason = v1alpha1.ClusterStateInvalidAuthInfo, false, v1alpha1.ReasonClusterIDMismatch
			p.Message = fmt.Sprintf("wrong cluster: the API server reached is not %s", want)
		})
		return err
	}
	if err == nil {
		c.mu.Lock()
		c.fails = 0
		name, refused := c.peer.Name, c.refusal != ""
		// A check that changes nothing leaves the snapshot as it is: a change moves the
		// peers' generation, and the engine lists the peers again after each.
		same := refused || c.peer.Ready && c.peer.State == v1alpha1.ClusterStateReady &&
			c.peer.Reason == v1alpha1.ReasonClusterReachable && c.peer.Message == readyMessage(c.peer)
		c.mu.Unlock()
		if !refused {
			c.m.metrics.succeeded(name, time.Now()) // a refused peer's is not (refuse)
		}
		if same {
			return nil
		}
		c.set(func(p *Peer) {
			if c.refusal != "" {
				return // refused until it is read again (refuse)
			}
			p.State, p.Ready, p.Reason, p.Message = v1alpha1.ClusterStateReady, true, v1alpha1.ReasonClusterReachable, readyMessage(*p)
		})
		return nil
	}
	c.mu.Lock()
	c.fails++
	fails := c.fails
	c.mu.Unlock()
	threshold := c.m.opts.FailureThreshold
	reason, class := Classify(err)
	state := v1alpha1.ClusterStateFailed
	if reason == v1alpha1.ReasonInvalidAuthInfo || reason == v1alpha1.ReasonClusterIDMismatch {
		state = v1alpha1.ClusterStateInvalidAuthInfo
	}
	if fails == 1 || fails == threshold {
		// The detail stays in this cluster's log; the status says only the class.
		c.m.log.Info("peer check failed", "cluster", c.snapshot().Name, "failures", fails, "class", class, "error", truncate(err.Error(), 512))
	}
	msg := fmt.Sprintf("%d consecutive failed checks: %s", fails, class)
	c.set(func(p *Peer) {
		if c.refusal != "" {
			return
		}
		if fails >= threshold || p.State == "" {
			// Before the first success there is no Ready state to protect.
			if fails >= threshold {
				p.State, p.Ready = state, false
			}
			p.Reason, p.Message = reason, msg
		}
	})
	return err
}

// readyMessage is the message of the peer p once a check succeeds.
func readyMessage(p Peer) string {
	if p.Bootstrap {
		return MessageBootstrap
	}
	return "the peer answers"
}

// truncate shortens s to at most n bytes for a log line.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
