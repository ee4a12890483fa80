package document

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// ErrNoEndpoint is returned (wrapped) by ServerFor when no endpoint serves the network.
var ErrNoEndpoint = errors.New("no API server endpoint")

// checkServerURL checks that server is an https URL with a host, optionally a path
// prefix, and nothing else. It returns the parsed URL, or a reason that quotes neither
// user info nor the whole address.
func checkServerURL(server string) (*url.URL, string) {
	if server == "" {
		return nil, "missing"
	}
	if strings.TrimSpace(server) != server {
		return nil, "has leading or trailing white space"
	}
	if !strings.Contains(server, "://") {
		return nil, "must be an https:// URL"
	}
	u, err := url.Parse(server)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return nil, "not a valid URL: " + err.Error()
	}
	switch {
	case u.Scheme != "https":
		return nil, fmt.Sprintf("scheme must be https, not %s", quote(u.Scheme))
	case u.Opaque != "":
		return nil, "must be an https:// URL with a host"
	case u.User != nil:
		return nil, "must not contain user info"
	case u.RawQuery != "" || u.ForceQuery:
		return nil, "must not contain a query"
	case u.Fragment != "" || strings.Contains(server, "#"):
		return nil, "must not contain a fragment"
	case u.Hostname() == "":
		return nil, "has no host"
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Sprintf("invalid port %s", quote(p))
		}
	}
	return u, ""
}

// NormalizeServer turns an API server address into an https URL: a bare host,
// host:port, IP, IP:port, [IPv6] or [IPv6]:port gets an https:// prefix (no port is
// added); an https:// URL, optionally with a path prefix, is returned as is. Any other
// scheme, http:// included, is an error.
func NormalizeServer(addr string) (string, error) {
	addr = strings.TrimSpace(addr)
	if addr == "" {
		return "", errors.New("API server address is empty")
	}
	server := addr
	if !strings.Contains(addr, "://") {
		// A bare IPv6 address needs brackets to become a URL host.
		if ip, err := netip.ParseAddr(addr); err == nil && ip.Is6() {
			server = "https://[" + addr + "]"
		} else {
			server = "https://" + addr
		}
	}
	u, reason := checkServerURL(server)
	if reason != "" {
		shown := addr
		if pu, err := url.Parse(server); err == nil {
			shown = pu.Redacted()
			if !strings.Contains(addr, "://") {
				shown = strings.TrimPrefix(shown, "https://")
			}
		} else if strings.Contains(addr, "@") {
			shown = "(address with user info)"
		}
		return "", fmt.Errorf("API server address %s: %s", quote(shown), reason)
	}
	return u.String(), nil
}

// ServerFor picks the API server endpoint that clients on network should use: the
// endpoint whose clientNetwork equals network, else the first one with an empty
// clientNetwork. It returns the endpoint's address normalised by NormalizeServer and
// its CA bundle (empty when the system roots verify the server).
func ServerFor(endpoints []v1alpha1.KubernetesAPIEndpoint, network string) (server string, caBundle []byte, err error) {
	pick := -1
	for i, ep := range endpoints {
		if ep.ClientNetwork == network {
			pick = i
			break
		}
	}
	if pick < 0 {
		for i, ep := range endpoints {
			if ep.ClientNetwork == "" {
				pick = i
				break
			}
		}
	}
	if pick < 0 {
		if len(endpoints) == 0 {
			return "", nil, fmt.Errorf("%w: the cluster lists no kubernetesApiEndpoints", ErrNoEndpoint)
		}
		return "", nil, fmt.Errorf("%w for client network %s and none without a clientNetwork", ErrNoEndpoint, quote(network))
	}
	ep := endpoints[pick]
	server, err = NormalizeServer(ep.ServerAddress)
	if err != nil {
		return "", nil, fmt.Errorf("kubernetesApiEndpoints[%d] (clientNetwork %s): %w", pick, quote(ep.ClientNetwork), err)
	}
	return server, ep.CABundle, nil
}

// IsLoopback reports whether server (an URL or a bare address as NormalizeServer takes)
// names this machine: a loopback IP (127.0.0.0/8, ::1, also IPv4-mapped), an
// unspecified IP (0.0.0.0, ::, which connect locally), "localhost" or a name under
// ".localhost". Such an address means something else on every other cluster.
func IsLoopback(server string) bool {
	host := ""
	if s, err := NormalizeServer(server); err == nil {
		if u, err := url.Parse(s); err == nil {
			host = u.Hostname()
		}
	} else if u, err := url.Parse(strings.TrimSpace(server)); err == nil {
		host = u.Hostname()
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "" {
		return false
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	ip = ip.Unmap()
	return ip.IsLoopback() || ip.IsUnspecified()
}
