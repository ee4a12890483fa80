package kubeconfig

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/rest"
)

func TestAddressPolicy(t *testing.T) {
	for _, tc := range []struct {
		server               string
		refused, refusedLoop bool // by the default policy, and with AllowLoopback
	}{
		{server: "https://203.0.113.7:6443"},
		{server: "https://10.1.2.3:6443"}, // private ranges stay allowed
		{server: "https://192.168.1.10"},
		{server: "https://api.east.example.com"},
		{server: "https://127.0.0.1:22", refused: true},
		{server: "https://127.9.9.9", refused: true},
		{server: "https://[::1]:6443", refused: true},
		{server: "https://[::ffff:127.0.0.1]:6443", refused: true},
		{server: "https://0.0.0.0:6443", refused: true},
		{server: "https://localhost:6443", refused: true},
		{server: "https://api.localhost", refused: true},
		{server: "https://169.254.169.254", refused: true, refusedLoop: true},
		{server: "https://[fe80::1]:6443", refused: true, refusedLoop: true},
		{server: "https://224.0.0.1", refused: true, refusedLoop: true},
		{server: "https://kubernetes", refused: true, refusedLoop: true},
		{server: "https://kubernetes.default.svc", refused: true, refusedLoop: true},
		{server: "https://api.team.svc.cluster.local:443", refused: true, refusedLoop: true},
		{server: "https://db.cluster.local", refused: true, refusedLoop: true},
	} {
		t.Run(tc.server, func(t *testing.T) {
			got := []bool{
				errors.Is(AddressPolicy{}.CheckServer(tc.server), ErrAddressRefused),
				errors.Is(AddressPolicy{AllowLoopback: true}.CheckServer(tc.server), ErrAddressRefused),
			}
			if diff := cmp.Diff([]bool{tc.refused, tc.refusedLoop}, got); diff != "" {
				t.Errorf("refused by the default policy, with loopback allowed (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGuardDialsOnlyAllowedAddresses: a name is checked once resolved (a name of a
// loopback address is refused by the dialer, not only by CheckHost).
func TestGuardDialsOnlyAllowedAddresses(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = AddressPolicy{}.DialContext(ctx, "tcp", l.Addr().String())
	if !errors.Is(err, ErrAddressRefused) {
		t.Errorf("dial of %s with the default policy: %v, want ErrAddressRefused", l.Addr(), err)
	}
	c, err := AddressPolicy{AllowLoopback: true}.DialContext(ctx, "tcp", l.Addr().String())
	if err != nil {
		t.Errorf("dial of %s with loopback allowed: %v", l.Addr(), err)
	} else {
		c.Close()
	}
}

// TestHTTPClientsRefuseRedirects: a peer that redirects is not followed, to https or
// http.
func TestHTTPClientsRefuseRedirects(t *testing.T) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		t.Error("the redirect was followed")
	}))
	defer target.Close()
	srv := httptest.NewTLSServer(http.RedirectHandler(target.URL+"/api/v1/namespaces/kube-system", http.StatusFound))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	if err := (AddressPolicy{AllowLoopback: true}).Guard(cfg); err != nil {
		t.Fatal(err)
	}
	requests, watches, err := HTTPClients(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for name, hc := range map[string]*http.Client{"requests": requests, "watches": watches} {
		resp, err := hc.Get(srv.URL + "/api")
		if err == nil {
			resp.Body.Close()
		}
		if !errors.Is(err, ErrRedirectRefused) {
			t.Errorf("%s client: %v, want ErrRedirectRefused", name, err)
		}
	}
}

func TestTokenTimes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		token    string
		exp, iat int64
		ok       bool
	}{
		{name: "a ServiceAccount-shaped token", token: "eyJhbGciOiJSUzI1NiJ9.eyJleHAiOjE3OTk5OTk5OTksImlhdCI6MTc5OTkxMzU5OX0.c2ln", exp: 1799999999, iat: 1799913599, ok: true},
		{name: "no exp", token: "eyJhbGciOiJSUzI1NiJ9.eyJpYXQiOjE3OTk5MTM1OTl9.c2ln"},
		{name: "not a JWT", token: "opaque-token"},
		{name: "not base64", token: "a.!!!.c"},
		{name: "not JSON", token: "a.bm90IGpzb24.c"},
		{name: "exp is not a number", token: "a.eyJleHAiOiJzb29uIn0.c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exp, iat, ok := TokenTimes(tc.token)
			if ok != tc.ok || ok && (exp.Unix() != tc.exp || iat.Unix() != tc.iat) {
				t.Errorf("TokenTimes = %v, %v, %t; want %d, %d, %t", exp, iat, ok, tc.exp, tc.iat, tc.ok)
			}
		})
	}
}
