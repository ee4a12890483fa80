package peers

import (
	"context"
	"sync/atomic"

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
// member, from every peer, about a quarter of what a first sync decodes among 100 peers
// (docs/performance.md). Watches opened before the switch keep the authentication of
// their start until they end, as any watch does; every request after it carries the
// new token. A switch to another server, CA or client certificate, or back to the
// bootstrap credential, builds a new connection.

// credential is the bearer token of a connection's requests, which a switch from the
// bootstrap credential replaces (switchCredential).
type credential struct{ token atomic.Pointer[string] }

var _ oauth2.TokenSource = (*credential)(nil)

// Token returns the current token.
func (c *credential) Token() (*oauth2.Token, error) {
	return &oauth2.Token{AccessToken: *c.token.Load(), TokenType: "Bearer"}, nil
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
// its requests read, and returns it with what cfg reaches; nil when cfg has no token.
func withCredential(cfg *rest.Config) (*credential, linkID) {
	id := linkOf(cfg)
	if cfg.BearerToken == "" {
		return nil, id
	}
	cred := &credential{}
	tok := cfg.BearerToken
	cred.token.Store(&tok)
	cfg.BearerToken = ""
	cfg.WrapTransport = transport.TokenSourceWrapTransport(cred)
	return cred, id
}

// switchable reports whether the connection, read with the peer's bootstrap
// credential, can go on with the reader credential cfg (parsed, with its token) of the
// cluster id: the same server, proved the same way, and a connection still running.
func (c *conn) switchable(id types.UID, cfg *rest.Config, bootstrap bool) bool {
	p := c.snapshot()
	if bootstrap || !p.Bootstrap || p.ClusterID != id || c.cred == nil || cfg.BearerToken == "" || c.link != linkOf(cfg) {
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
// the peer issued: the peer is not read with its bootstrap credential any more, and not
// synced until its cache has synced the Secrets it now reads (healthLoop, watchSecrets).
func (c *conn) switchCredential(token string) {
	c.cred.token.Store(&token)
	c.m.log.Info("reading a peer with the credential it issued: the connection and the Clusters read are kept", "cluster", c.snapshot().Name)
	c.set(func(p *Peer) { p.Bootstrap, p.Synced = false, false })
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
