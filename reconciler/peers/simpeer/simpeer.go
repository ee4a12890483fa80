// Package simpeer is a simulated member cluster's API server, for measuring one real
// member's controller among many peers (cmd/registry-bench --peers): a hundred real
// kube-apiservers do not fit on one small machine, a hundred of these do, in one process.
//
// It keeps the API's semantics for what a member reads of a peer, and nothing else:
//
//   - TLS (HTTP/2 and HTTP/1.1) on its own loopback listener, with a certificate for
//     127.0.0.1 (one CA per Group); every request must carry the peer's bearer token
//     (401 otherwise). There is no RBAC: the token reads everything the server holds.
//   - GET of one object (the kube-system Namespace, whose UID is the cluster's ID),
//     discovery as captured from a real API server (CaptureDiscovery; the aggregated
//     form too, when the client asks for it), or a small built-in one.
//   - LIST and WATCH of every resource of Options.Resources, namespaced or cluster-wide,
//     with label selectors and the field selectors metadata.name, metadata.namespace
//     (and a Secret's type). One resourceVersion counter per server, as one etcd; lists
//     carry it, and ignore limit (which the API allows: the watch cache does at
//     resourceVersion 0). Watches from "" or "0" send the current objects as ADDED
//     first; from a version, the changes after it, or an ERROR event 410 Expired when
//     it is older than the server's history (Options.History events, or Compact); a
//     change that makes an object match or stop matching a selector is sent as ADDED
//     or DELETED. Bookmarks every Options.BookmarkInterval when asked for. A watch ends
//     after its timeoutSeconds; one that falls more than 1,024 events behind is ended.
//   - Watch-lists (sendInitialEvents=true, resourceVersionMatch=NotOlderThan,
//     allowWatchBookmarks): the initial ADDED events, then a bookmark annotated
//     k8s.io/initial-events-end. With Options.NoWatchList they are refused (422
//     Invalid, as a server without the WatchList feature answers) and clients list.
//
// No writes over HTTP: the bench changes objects through Server.Create, Update and
// Delete, which the watches see. Server.Stats counts connections, open watches and
// requests.
package simpeer

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Resource is one kind the server serves.
type Resource struct {
	Group, Version, Resource, Kind string
	Namespaced                     bool
}

// GroupVersion is the resource's apiVersion.
func (r Resource) GroupVersion() string {
	if r.Group == "" {
		return r.Version
	}
	return r.Group + "/" + r.Version
}

// Key names the resource in Stats: group/version/resource (version/resource in the core group).
func (r Resource) Key() string { return r.GroupVersion() + "/" + r.Resource }

// The kinds a member reads of a peer.
var (
	Namespaces        = Resource{Version: "v1", Resource: "namespaces", Kind: "Namespace"}
	ConfigMaps        = Resource{Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespaced: true}
	Secrets           = Resource{Version: "v1", Resource: "secrets", Kind: "Secret", Namespaced: true}
	Clusters          = registry("clusters", "Cluster")
	ClusterFeatures   = registry("clusterfeatures", "ClusterFeature")
	ResourceSyncRules = registry("resourcesyncrules", "ResourceSyncRule")
	SyncPolicies      = registry("syncpolicies", "SyncPolicy")
)

func registry(resource, kind string) Resource {
	return Resource{Group: "clusterregistry.k8s.cisco.com", Version: "v1alpha1", Resource: resource, Kind: kind}
}

// DefaultResources are the resources a server serves when Options.Resources is empty.
func DefaultResources() []Resource {
	return []Resource{Namespaces, ConfigMaps, Secrets, Clusters, ClusterFeatures, ResourceSyncRules, SyncPolicies}
}

// Defaults of Options.
const (
	DefaultHistory          = 10000
	DefaultBookmarkInterval = time.Minute
)

// Options configure one simulated API server.
type Options struct {
	// UID is the UID of its kube-system Namespace: the cluster's ID. Required.
	UID types.UID
	// Token is the bearer token every request must carry. Required.
	Token string
	// Resources it serves (DefaultResources when empty).
	Resources []Resource
	// Discovery it answers (BuiltinDiscovery of Resources when nil).
	Discovery *Discovery
	// History is how many changes it keeps for watches that resume from a version
	// (DefaultHistory when 0); older versions are answered 410 Gone.
	History int
	// BookmarkInterval is the period of the bookmarks of watches that ask for them
	// (DefaultBookmarkInterval, an API server's, when 0).
	BookmarkInterval time.Duration
	// NoWatchList refuses watch-lists, as a server without the WatchList feature.
	NoWatchList bool
	// IgnoreSelectors answers every list and watch with every object of the resource
	// and namespace, whatever its label and field selectors ask: a hostile peer's.
	IgnoreSelectors bool
}

// Group makes simulated servers that share one CA, and counts what all of them serve.
type Group struct {
	cert   tls.Certificate
	caPEM  []byte
	counts *counts
}

// NewGroup makes the group's CA: one self-signed ECDSA certificate for 127.0.0.1, which
// every server of the group presents.
func NewGroup() (*Group, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "simpeer"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("creating the certificate: %w", err)
	}
	return &Group{
		cert:   tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		caPEM:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		counts: newCounts(),
	}, nil
}

// CAData is the PEM CA that verifies every server of the group.
func (g *Group) CAData() []byte { return append([]byte(nil), g.caPEM...) }

// Stats returns what every server of the group serves now.
func (g *Group) Stats() Stats { return g.counts.stats() }

// Server is one simulated API server.
type Server struct {
	group  *Group
	opts   Options
	store  *store
	res    map[string]Resource // by key
	disc   *Discovery
	ln     net.Listener
	srv    *http.Server
	counts []*counts // the server's and the group's
	own    *counts
	done   chan struct{}
	// closing is closed by Close: open watches end.
	closing   chan struct{}
	closeOnce sync.Once
	// tokens are the bearer tokens it accepts (SetTokens; Options.Token at first);
	// watching counts the watches open by the token they were opened with.
	tokens   atomic.Pointer[[]string]
	mu       sync.Mutex
	watching map[string]int64
}

// Start starts a server on a new listener on 127.0.0.1 (loopback only).
func (g *Group) Start(opts Options) (*Server, error) {
	if opts.UID == "" || opts.Token == "" {
		return nil, errors.New("simpeer: a UID and a token are required")
	}
	if len(opts.Resources) == 0 {
		opts.Resources = DefaultResources()
	}
	if opts.History <= 0 {
		opts.History = DefaultHistory
	}
	if opts.BookmarkInterval <= 0 {
		opts.BookmarkInterval = DefaultBookmarkInterval
	}
	disc := opts.Discovery
	if disc == nil {
		disc = BuiltinDiscovery(opts.Resources)
	}
	s := &Server{group: g, opts: opts, store: newStore(opts.Resources, opts.History), res: map[string]Resource{}, disc: disc,
		own: newCounts(), done: make(chan struct{}), closing: make(chan struct{}), watching: map[string]int64{}}
	s.counts = []*counts{s.own, g.counts}
	s.SetTokens(opts.Token)
	for _, r := range opts.Resources {
		s.res[r.Key()] = r
	}
	if opts.UID != "" {
		ns := map[string]any{"metadata": map[string]any{"name": "kube-system", "uid": string(opts.UID)}}
		if _, ok := s.res[Namespaces.Key()]; ok {
			if _, err := s.store.put(Namespaces, ns, true); err != nil {
				return nil, err
			}
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("simpeer: listening: %w", err)
	}
	s.ln = ln
	s.srv = &http.Server{
		Handler:           http.HandlerFunc(s.serve),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{g.cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
		ConnState:         s.connState,
		// A client that does not trust the CA, or goes away mid-handshake, is its own
		// business: not logged.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	go func() {
		defer close(s.done)
		_ = s.srv.ServeTLS(ln, "", "")
	}()
	return s, nil
}

// URL is the server's https URL.
func (s *Server) URL() string { return "https://" + s.ln.Addr().String() }

// UID is its cluster ID.
func (s *Server) UID() types.UID { return s.opts.UID }

// Token is the bearer token it accepts at first (Options.Token).
func (s *Server) Token() string { return s.opts.Token }

// SetTokens makes it accept the bearer tokens given, and only those, from now on: a
// credential issued or revoked. Open watches go on.
func (s *Server) SetTokens(tokens ...string) {
	t := slices.Clone(tokens)
	s.tokens.Store(&t)
}

// OpenWatches returns how many watches opened with token are open: the API server
// authorizes a watch when it opens it, and never again.
func (s *Server) OpenWatches(token string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.watching[token]
}

func (s *Server) watchOf(token string, d int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watching[token] += d
}

// accepts reports whether token is one it accepts.
func (s *Server) accepts(token string) bool {
	ok := false
	for _, t := range *s.tokens.Load() {
		ok = subtle.ConstantTimeCompare([]byte(token), []byte(t)) == 1 || ok
	}
	return ok
}

// Stats returns what this server serves now.
func (s *Server) Stats() Stats { return s.own.stats() }

// Close stops the server: open watches end, connections are closed.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { close(s.closing) })
	err := s.srv.Close()
	<-s.done
	return err
}

// Create adds obj (an object as JSON would decode it: metadata.name, and
// metadata.namespace for a namespaced resource) and returns its resourceVersion.
// Watches see it ADDED.
func (s *Server) Create(r Resource, obj map[string]any) (string, error) {
	rv, err := s.store.put(r, obj, true)
	return formatRV(rv), err
}

// Update replaces an existing object; watches see it MODIFIED (or ADDED / DELETED when
// it starts / stops matching their selectors).
func (s *Server) Update(r Resource, obj map[string]any) (string, error) {
	rv, err := s.store.put(r, obj, false)
	return formatRV(rv), err
}

// Delete deletes an object; watches see it DELETED.
func (s *Server) Delete(r Resource, namespace, name string) (string, error) {
	rv, err := s.store.remove(r, namespace, name)
	return formatRV(rv), err
}

// Compact forgets the history: every watch that resumes from a version before now is
// answered 410 Gone, and its client lists again.
func (s *Server) Compact() { s.store.compact() }

// ResourceVersion is the server's current resourceVersion.
func (s *Server) ResourceVersion() string { return formatRV(s.store.currentRV()) }

func (s *Server) connState(_ net.Conn, st http.ConnState) {
	switch st {
	case http.StateNew:
		s.add(func(c *counts) { c.conns.Add(1) })
	case http.StateClosed, http.StateHijacked:
		s.add(func(c *counts) { c.conns.Add(-1) })
	}
}

func (s *Server) add(f func(*counts)) {
	for _, c := range s.counts {
		f(c)
	}
}

// Stats are what servers serve at one time, and have served.
type Stats struct {
	// Connections open now.
	Connections int64 `json:"connections"`
	// Watches open now, by resource (group/version/resource).
	Watches map[string]int64 `json:"watches"`
	// Requests served, by verb (get, list, watch, discovery, unauthorized, other).
	Requests map[string]int64 `json:"requests"`
	// Initial counts, by resource, the initial states served whole: lists written to
	// their end, and watch-lists whose initial events and closing bookmark were written.
	Initial map[string]int64 `json:"initial"`
	// InitialBytes are the bytes of the objects in those initial states, by resource:
	// what the client decoded of them.
	InitialBytes map[string]int64 `json:"initial_bytes"`
	// Events sent on watches, bookmarks apart.
	Events    int64 `json:"events"`
	Bookmarks int64 `json:"bookmarks"`
}

// TotalWatches sums Watches.
func (s Stats) TotalWatches() int64 {
	var n int64
	for _, v := range s.Watches {
		n += v
	}
	return n
}

type counts struct {
	conns             atomic.Int64
	events, bookmarks atomic.Int64
	mu                sync.Mutex
	watches           map[string]int64
	requests          map[string]int64
	initial           map[string]int64
	initialBytes      map[string]int64
}

func newCounts() *counts {
	return &counts{watches: map[string]int64{}, requests: map[string]int64{}, initial: map[string]int64{}, initialBytes: map[string]int64{}}
}

// initialServed counts an initial state of resource served whole, of bytes bytes of
// objects.
func (c *counts) initialServed(resource string, bytes int64) {
	c.mu.Lock()
	c.initial[resource]++
	c.initialBytes[resource] += bytes
	c.mu.Unlock()
}

func (c *counts) request(verb string) {
	c.mu.Lock()
	c.requests[verb]++
	c.mu.Unlock()
}

func (c *counts) watch(resource string, d int64) {
	c.mu.Lock()
	c.watches[resource] += d
	if c.watches[resource] == 0 {
		delete(c.watches, resource)
	}
	c.mu.Unlock()
}

func (c *counts) stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := Stats{Connections: c.conns.Load(), Events: c.events.Load(), Bookmarks: c.bookmarks.Load(),
		Watches: map[string]int64{}, Requests: map[string]int64{}, Initial: map[string]int64{}, InitialBytes: map[string]int64{}}
	for k, v := range c.watches {
		st.Watches[k] = v
	}
	for k, v := range c.requests {
		st.Requests[k] = v
	}
	for k, v := range c.initial {
		st.Initial[k] = v
	}
	for k, v := range c.initialBytes {
		st.InitialBytes[k] = v
	}
	return st
}

func formatRV(rv uint64) string {
	if rv == 0 {
		return ""
	}
	return fmt.Sprint(rv)
}

// bearer returns the bearer token of the request's Authorization header.
func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if t, ok := strings.CutPrefix(h, "Bearer "); ok {
		return strings.TrimSpace(t)
	}
	return ""
}
