package kubeconfig

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig/document"
)

// ErrAddressRefused is returned (wrapped) when a peer's API server address is one this
// cluster does not dial: see AddressPolicy.
var ErrAddressRefused = errors.New("address refused")

// ErrRedirectRefused is returned (wrapped) when a peer's API server answers with a
// redirect: a reader kubeconfig names the server it is for, and nothing else is followed.
var ErrRedirectRefused = errors.New("redirect refused")

// AddressPolicy decides which API server addresses of peers the controller dials. A
// peer's kubeconfig is written by a member, not by this cluster's admin: without it, a
// member could make the controller reach into its own network (its node's loopback,
// the cloud metadata endpoint, the cluster's services) and read the answers back. The
// zero value refuses loopback, link-local, unspecified and multicast addresses and
// in-cluster service names (single-label names, *.svc, *.cluster.local); private
// ranges stay allowed, since peers are often reached over private networks.
type AddressPolicy struct {
	// AllowLoopback also accepts loopback addresses and "localhost": for groups whose
	// API servers all run on one machine (the test bed, make demo). Link-local
	// addresses and in-cluster names stay refused.
	AllowLoopback bool
}

// CheckServer checks the host of an API server URL (or bare address, as NormalizeServer
// takes) against the policy. An IP address is checked here; a name is checked again,
// once resolved, by the dialer.
func (p AddressPolicy) CheckServer(server string) error {
	s, err := NormalizeServer(server)
	if err != nil {
		return err
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("API server address: %w", err)
	}
	return p.CheckHost(u.Hostname())
}

// CheckHost checks a host name or IP address against the policy.
func (p AddressPolicy) CheckHost(host string) error {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	if ip, err := netip.ParseAddr(h); err == nil {
		return p.CheckIP(ip)
	}
	switch {
	case h == "localhost" || strings.HasSuffix(h, ".localhost"):
		if p.AllowLoopback {
			return nil
		}
		return fmt.Errorf("%w: %s names this machine", ErrAddressRefused, document.Quote(host))
	case !strings.Contains(h, "."):
		return fmt.Errorf("%w: %s is a single-label name, which resolves to an in-cluster service or a search domain", ErrAddressRefused, document.Quote(host))
	case strings.HasSuffix(h, ".svc") || strings.Contains(h, ".svc.") || strings.HasSuffix(h, ".cluster.local"):
		return fmt.Errorf("%w: %s is an in-cluster service name", ErrAddressRefused, document.Quote(host))
	}
	return nil
}

// CheckIP checks an IP address against the policy.
func (p AddressPolicy) CheckIP(ip netip.Addr) error {
	ip = ip.Unmap()
	switch {
	case p.AllowLoopback && (ip.IsLoopback() || ip.IsUnspecified()):
		return nil
	case ip.IsLoopback():
		return fmt.Errorf("%w: %s is a loopback address", ErrAddressRefused, ip)
	case ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast():
		return fmt.Errorf("%w: %s is a link-local address (cloud metadata endpoints among them)", ErrAddressRefused, ip)
	case ip.IsUnspecified():
		return fmt.Errorf("%w: %s is the unspecified address, which connects to this machine", ErrAddressRefused, ip)
	case ip.IsMulticast() || ip.IsInterfaceLocalMulticast():
		return fmt.Errorf("%w: %s is a multicast address", ErrAddressRefused, ip)
	}
	return nil
}

// DialContext dials like net.Dialer but checks the address actually connected to, after
// name resolution: a name that resolves (or is rebound) to a refused address is refused.
func (p AddressPolicy) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	d.Control = func(_, addr string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(addr)
		if err != nil {
			return fmt.Errorf("%w: cannot read the dialled address: %v", ErrAddressRefused, err)
		}
		return p.CheckIP(ap.Addr())
	}
	return d.DialContext(ctx, network, address)
}

// Guard applies the policy to a peer's rest.Config: the host is checked now and every
// connection is checked once resolved. It returns an error when the host is refused.
// Use HTTPClients to build the clients, which also refuse redirects.
func (p AddressPolicy) Guard(cfg *rest.Config) error {
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return fmt.Errorf("API server address: %w", err)
	}
	if err := p.CheckHost(u.Hostname()); err != nil {
		return err
	}
	cfg.Dial = p.DialContext
	return nil
}

// HTTPClients returns the HTTP clients of a guarded peer config: one with the config's
// request timeout, for plain requests, and one without, for watches. Both share one
// transport and refuse redirects.
func HTTPClients(cfg *rest.Config) (requests, watches *http.Client, err error) {
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("building the transport: %w", err)
	}
	requests = &http.Client{Transport: rt, Timeout: cfg.Timeout, CheckRedirect: refuseRedirect}
	watches = &http.Client{Transport: rt, CheckRedirect: refuseRedirect}
	return requests, watches, nil
}

func refuseRedirect(req *http.Request, _ []*http.Request) error {
	return fmt.Errorf("%w (to another address)", ErrRedirectRefused)
}
