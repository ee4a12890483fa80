package peers

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/oauth2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/transport"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A member reads a new peer first with the peer's bootstrap credential (its shared
// reader Secret: only its Clusters and the credential it issues this member), then with
// the credential the peer issued it. Both name the same API server, so the switch keeps
// the connection and what it read: the token of its requests is replaced in place
// (credential), and the cache, which held the peer's Clusters, starts watching its
// Secrets. A new connection would list every Cluster of the peer again: a Cluster per
// member, from every peer, about a third of what a first sync decodes among 100 peers
// (docs/performance.md). The API server authorizes a watch once, when it opens it: so
// that nothing is read with the bootstrap credential after the switch, the switch ends
// the answers still being read that were asked with it, as a server ending a watch
// does (the body ends), and the watches resume from the last version they saw, with
// the new token, listing nothing again. A switch to another server, CA or client
// certificate, from a connection not Ready and synced, or back to the bootstrap
// credential, builds a new connection.

// credential is the bearer token of a connection's requests, which a switch from the
// bootstrap credential replaces (switchCredential), and, while it may be replaced, the
// answers being read (ended by the switch).
type credential struct {
	token atomic.Pointer[string]
	// replaceable is true until the token is final: the connection was built with the
	// bootstrap credential and has not switched. mu guards open, the answers being read
	// while it is.
	replaceable atomic.Bool
	mu          sync.Mutex
	open        map[*endable]struct{}
}

var _ oauth2.TokenSource = (*credential)(nil)

// Token returns the current token.
func (c *credential) Token() (*oauth2.Token, error) {
	return &oauth2.Token{AccessToken: *c.token.Load(), TokenType: "Bearer"}, nil
}

// replace makes token the connection's, for good, and ends every answer being read
// that was asked with the one before.
func (c *credential) replace(token string) {
	c.token.Store(&token)
	c.mu.Lock()
	c.replaceable.Store(false)
	open := c.open
	c.open = nil
	c.mu.Unlock()
	for b := range open {
		b.endOnceOld()
	}
}

// endAge is the age at which a switch of credential ends an answer.
const endAge = 1500 * time.Millisecond

// wrap is the connection's transport: rt with the credential's token on every
// request, and, while the token may be replaced, each answer kept so that replace can
// end it.
func (c *credential) wrap(rt http.RoundTripper) http.RoundTripper {
	return &tracked{cred: c, rt: transport.TokenSourceWrapTransport(c)(rt)}
}

type tracked struct {
	cred *credential
	rt   http.RoundTripper
}

// WrappedRoundTripper is client-go's way to reach the transport under a wrapper.
func (t *tracked) WrappedRoundTripper() http.RoundTripper { return t.rt }

func (t *tracked) RoundTrip(req *http.Request) (*http.Response, error) {
	c := t.cred
	if !c.replaceable.Load() {
		return t.rt.RoundTrip(req)
	}
	resp, err := t.rt.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	b := &endable{inner: resp.Body, cred: c, start: time.Now()}
	resp.Body = b
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.replaceable.Load() {
		c.open[b] = struct{}{}
	} else {
		b.endOnceOld() // asked, perhaps, with the token replaced meanwhile
	}
	return resp, nil
}

// endable is an answer's body that a switch of credential can end: reading it then
// ends as at the end of the answer (io.EOF), as when the server ends a watch.
type endable struct {
	inner  io.ReadCloser
	cred   *credential
	start  time.Time
	ended  atomic.Bool
	closed sync.Once
	err    error
}

func (b *endable) Read(p []byte) (int, error) {
	n, err := b.inner.Read(p)
	if err != nil && b.ended.Load() {
		err = io.EOF
	}
	return n, err
}

func (b *endable) Close() error {
	b.cred.mu.Lock()
	delete(b.cred.open, b)
	b.cred.mu.Unlock()
	return b.close()
}

// endOnceOld ends the body, not before it is endAge old: client-go's reflector lists
// again after a watch that ended within a second of its start without an event.
func (b *endable) endOnceOld() {
	if wait := endAge - time.Since(b.start); wait > 0 {
		time.AfterFunc(wait, b.end)
		return
	}
	b.end()
}

// end makes the body end: a read blocked on it returns.
func (b *endable) end() {
	b.ended.Store(true)
	_ = b.close()
}

func (b *endable) close() error {
	b.closed.Do(func() { b.err = b.inner.Close() })
	return b.err
}

// linkID is what a connection reaches and how it proves the server: everything of a
// parsed kubeconfig (kubeconfig.Parse) but the bearer token.
type linkID struct {
	host, serverName, ca, cert, key string
	disableCompression              bool
}

func linkOf(cfg *rest.Config) linkID {
	t := cfg.TLSClientConfig
	return linkID{host: cfg.Host, serverName: t.ServerName, ca: string(t.CAData), cert: string(t.CertData), key: string(t.KeyData),
		disableCompression: cfg.DisableCompression}
}

// withCredential moves the bearer token of a parsed kubeconfig's cfg to a credential
// its requests read, replaceable when it is the bootstrap credential, and returns it
// with what cfg reaches; nil when cfg has no token.
func withCredential(cfg *rest.Config, bootstrap bool) (*credential, linkID) {
	id := linkOf(cfg)
	if cfg.BearerToken == "" {
		return nil, id
	}
	cred := &credential{}
	tok := cfg.BearerToken
	cred.token.Store(&tok)
	if bootstrap {
		cred.replaceable.Store(true)
		cred.open = map[*endable]struct{}{}
	}
	cfg.BearerToken = ""
	cfg.WrapTransport = cred.wrap
	return cred, id
}

// switchable reports whether the connection, read with the peer's bootstrap
// credential, can go on with the reader credential cfg (parsed, with its token) of the
// cluster id: the same server, proved the same way, and a connection still running,
// Ready and synced (one that is not has nothing to keep: a new connection is tried at
// once, without the backoff of the failing one).
func (c *conn) switchable(id types.UID, cfg *rest.Config, bootstrap bool) bool {
	p := c.snapshot()
	if bootstrap || !p.Bootstrap || !p.Ready || !p.Synced || p.ClusterID != id || c.cred == nil || !c.cred.replaceable.Load() ||
		cfg.BearerToken == "" || c.link != linkOf(cfg) {
		return false
	}
	select {
	case <-c.done:
		return false // its run has ended (a wrong cluster): a new connection tries again
	default:
		return true
	}
}

// switchCredential replaces the connection's token with token, the reader credential
// the peer issued, and ends what is being read with the bootstrap one: the peer is not
// read with it any more, and not synced until its cache has synced the Secrets it now
// reads (healthLoop, watchSecrets).
func (c *conn) switchCredential(token string) {
	c.cred.replace(token)
	c.m.log.Info("reading a peer with the credential it issued: the connection and the Clusters read are kept", "cluster", c.snapshot().Name)
	n := c.m.credentials.Add(1)
	c.set(func(p *Peer) {
		p.Bootstrap, p.Synced, p.credential = false, false, n
		c.fails = 0 // the new credential's failures are counted from none
	})
	select {
	case c.switched <- struct{}{}:
	default: // one already waits
	}
}

// watchSecrets makes cch, built for the bootstrap credential, watch the peer's Secrets
// too (newCache), each change of which notifies the Manager's subscribers; it does
// nothing when cch watches them already. It does not wait for them to sync.
func (c *conn) watchSecrets(ctx context.Context, cch *membershipCache) error {
	if cch.secrets.Load() {
		return nil
	}
	name := c.snapshot().Name
	if _, err := watchKind(ctx, cch.Cache, &corev1.Secret{}, func() { c.m.notify(name) }); err != nil {
		return err
	}
	cch.secrets.Store(true)
	return nil
}

// watchKind starts cch's informer of obj's kind, without waiting for it to sync, with an
// event handler that calls notify on every change (notifyOnChange).
func watchKind(ctx context.Context, cch cache.Cache, obj client.Object, notify func()) (toolscache.ResourceEventHandlerRegistration, error) {
	inf, err := cch.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, err
	}
	return inf.AddEventHandler(notifyOnChange(notify))
}
