package kubeconfig

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

func TestNormalizeServer(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		wantErr string
	}{
		{in: "api.example.com", want: "https://api.example.com"},
		{in: "api.example.com:6443", want: "https://api.example.com:6443"},
		{in: "10.0.0.1", want: "https://10.0.0.1"},
		{in: "10.0.0.1:6443", want: "https://10.0.0.1:6443"},
		{in: "fd00::1", want: "https://[fd00::1]"},
		{in: "[fd00::1]", want: "https://[fd00::1]"},
		{in: "[fd00::1]:6443", want: "https://[fd00::1]:6443"},
		{in: "  api.example.com:443 ", want: "https://api.example.com:443"},
		{in: "https://api.example.com:6443", want: "https://api.example.com:6443"},
		{in: "https://api.example.com/", want: "https://api.example.com/"},
		{in: "https://gw.example.com/k8s/clusters/c-1", want: "https://gw.example.com/k8s/clusters/c-1"},
		{in: "HTTPS://api.example.com", want: "https://api.example.com"},
		{in: "gw.example.com/k8s", want: "https://gw.example.com/k8s"},
		{in: "", wantErr: "API server address is empty"},
		{in: "   ", wantErr: "API server address is empty"},
		{in: "http://api.example.com", wantErr: `API server address "http://api.example.com": scheme must be https, not "http"`},
		{in: "tcp://api.example.com:6443", wantErr: `scheme must be https, not "tcp"`},
		{in: "https://", wantErr: "has no host"},
		{in: ":6443", wantErr: "has no host"},
		{in: "api.example.com:0", wantErr: `invalid port "0"`},
		{in: "api.example.com:http", wantErr: "not a valid URL"},
		{in: "admin:hunter2@api.example.com", wantErr: `API server address "admin:xxxxx@api.example.com": must not contain user info`},
		{in: "https://api.example.com/?watch=1", wantErr: "must not contain a query"},
		{in: "https://api.example.com/#x", wantErr: "must not contain a fragment"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := NormalizeServer(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("NormalizeServer(%q) = %q, %v; want error containing %q", tt.in, got, err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "hunter2") {
					t.Errorf("error quotes the password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("NormalizeServer(%q): %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("NormalizeServer(%q) mismatch (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestServerFor(t *testing.T) {
	ca := []byte("ca-of-")
	ep := func(network, addr string) v1alpha1.KubernetesAPIEndpoint {
		return v1alpha1.KubernetesAPIEndpoint{ClientNetwork: network, ServerAddress: addr, CABundle: append(ca, addr...)}
	}
	tests := []struct {
		name      string
		endpoints []v1alpha1.KubernetesAPIEndpoint
		network   string
		want      string
		wantErr   string
		wantNoEp  bool
	}{
		{
			name:      "exact match wins over the default",
			endpoints: []v1alpha1.KubernetesAPIEndpoint{ep("", "public.example.com"), ep("vpc-1", "10.0.0.1:6443")},
			network:   "vpc-1",
			want:      "https://10.0.0.1:6443",
		},
		{
			name:      "default when no network matches",
			endpoints: []v1alpha1.KubernetesAPIEndpoint{ep("vpc-2", "10.1.0.1"), ep("", "public.example.com")},
			network:   "vpc-1",
			want:      "https://public.example.com",
		},
		{
			name:      "default for the empty network",
			endpoints: []v1alpha1.KubernetesAPIEndpoint{ep("vpc-2", "10.1.0.1"), ep("", "https://public.example.com:443")},
			want:      "https://public.example.com:443",
		},
		{
			name:      "first of equal matches",
			endpoints: []v1alpha1.KubernetesAPIEndpoint{ep("vpc-1", "a.example.com"), ep("vpc-1", "b.example.com")},
			network:   "vpc-1",
			want:      "https://a.example.com",
		},
		{
			name:     "no endpoints",
			network:  "vpc-1",
			wantErr:  "the cluster lists no kubernetesApiEndpoints",
			wantNoEp: true,
		},
		{
			name:      "no match and no default",
			endpoints: []v1alpha1.KubernetesAPIEndpoint{ep("vpc-2", "10.1.0.1")},
			network:   "vpc-1",
			wantErr:   `no API server endpoint for client network "vpc-1" and none without a clientNetwork`,
			wantNoEp:  true,
		},
		{
			name:      "matching endpoint is http",
			endpoints: []v1alpha1.KubernetesAPIEndpoint{ep("vpc-1", "http://10.0.0.1"), ep("", "public.example.com")},
			network:   "vpc-1",
			wantErr:   `kubernetesApiEndpoints[0] (clientNetwork "vpc-1"): API server address "http://10.0.0.1": scheme must be https`,
		},
		{
			name:      "matching endpoint is empty",
			endpoints: []v1alpha1.KubernetesAPIEndpoint{ep("", "")},
			wantErr:   `kubernetesApiEndpoints[0] (clientNetwork ""): API server address is empty`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			server, caBundle, err := ServerFor(tt.endpoints, tt.network)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ServerFor = %q, %v; want error containing %q", server, err, tt.wantErr)
				}
				if got := errors.Is(err, ErrNoEndpoint); got != tt.wantNoEp {
					t.Errorf("errors.Is(err, ErrNoEndpoint) = %v, want %v", got, tt.wantNoEp)
				}
				return
			}
			if err != nil {
				t.Fatalf("ServerFor: %v", err)
			}
			if diff := cmp.Diff(tt.want, server); diff != "" {
				t.Errorf("server mismatch (-want +got):\n%s", diff)
			}
			// The CA bundle comes from the endpoint that was picked.
			var wantCA []byte
			for _, e := range tt.endpoints {
				if n, _ := NormalizeServer(e.ServerAddress); n == server {
					wantCA = e.CABundle
					break
				}
			}
			if diff := cmp.Diff(wantCA, caBundle); diff != "" {
				t.Errorf("CA bundle mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestIsLoopback(t *testing.T) {
	tests := []struct {
		server string
		want   bool
	}{
		{"https://127.0.0.1:6443", true},
		{"https://127.1.2.3", true},
		{"https://[::1]:6443", true},
		{"https://[::ffff:127.0.0.1]:6443", true},
		{"https://localhost:6443", true},
		{"https://LOCALHOST.", true},
		{"https://api.localhost", true},
		{"https://0.0.0.0:6443", true},
		{"https://[::]:6443", true},
		{"127.0.0.1:6443", true},
		{"::1", true},
		{"localhost", true},
		{"http://127.0.0.1", true},
		{"https://10.0.0.1:6443", false},
		{"https://[fd00::1]:6443", false},
		{"https://api.example.com", false},
		{"https://localhost.example.com", false},
		{"https://notlocalhost", false},
		{"api.example.com:6443", false},
		{"", false},
		{"https://", false},
		{"::not an address::", false},
	}
	for _, tt := range tests {
		if got := IsLoopback(tt.server); got != tt.want {
			t.Errorf("IsLoopback(%q) = %v, want %v", tt.server, got, tt.want)
		}
	}
}
