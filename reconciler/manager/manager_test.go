package manager

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*Options)
		wantErr []string // substrings; none means valid
	}{
		{name: "defaults", mutate: func(*Options) {}},
		{name: "leader election", mutate: func(o *Options) { o.LeaderElection = true }},
		{name: "cluster name", mutate: func(o *Options) { o.ClusterName = "east-1" }},
		{name: "disabled servers", mutate: func(o *Options) { o.MetricsBindAddress, o.HealthProbeBindAddress = "0", "0" }},
		{name: "loopback addresses", mutate: func(o *Options) {
			o.MetricsBindAddress, o.HealthProbeBindAddress = "127.0.0.1:0", "[::1]:9443"
		}},
		{
			name:    "cluster name with upper case and underscore",
			mutate:  func(o *Options) { o.ClusterName = "Foo_Bar" },
			wantErr: []string{`invalid cluster name "Foo_Bar"`, "RFC 1123 label"},
		},
		{
			name:    "cluster name too long",
			mutate:  func(o *Options) { o.ClusterName = strings.Repeat("a", 64) },
			wantErr: []string{"invalid cluster name", "no more than 63 characters"},
		},
		{
			name:    "empty namespace",
			mutate:  func(o *Options) { o.Namespace = "" },
			wantErr: []string{"registry namespace must not be empty"},
		},
		{
			name:    "invalid namespace",
			mutate:  func(o *Options) { o.Namespace = "Cluster.Registry" },
			wantErr: []string{`invalid registry namespace "Cluster.Registry"`},
		},
		{
			name:    "metrics address without port",
			mutate:  func(o *Options) { o.MetricsBindAddress = "8080" },
			wantErr: []string{`invalid metrics bind address "8080"`},
		},
		{
			name:   "metrics certificate directory",
			mutate: func(o *Options) { o.MetricsCertDir = "/etc/metrics-certs" },
		},
		{
			name:   "plain HTTP metrics on 127.0.0.1",
			mutate: func(o *Options) { o.MetricsBindAddress, o.MetricsPlainHTTP = "127.0.0.1:8080", true },
		},
		{
			name:   "plain HTTP metrics on [::1]",
			mutate: func(o *Options) { o.MetricsBindAddress, o.MetricsPlainHTTP = "[::1]:8080", true },
		},
		{
			name:   "plain HTTP metrics on localhost",
			mutate: func(o *Options) { o.MetricsBindAddress, o.MetricsPlainHTTP = "localhost:8080", true },
		},
		{
			name:   "plain HTTP with metrics disabled",
			mutate: func(o *Options) { o.MetricsBindAddress, o.MetricsPlainHTTP = "0", true },
		},
		{
			name:    "plain HTTP metrics on every interface",
			mutate:  func(o *Options) { o.MetricsBindAddress, o.MetricsPlainHTTP = ":8080", true },
			wantErr: []string{"plain HTTP /metrics has no authentication and may only be served on a loopback address", `got ":8080"`},
		},
		{
			name:    "plain HTTP metrics on a routable address",
			mutate:  func(o *Options) { o.MetricsBindAddress, o.MetricsPlainHTTP = "10.0.0.1:8080", true },
			wantErr: []string{"may only be served on a loopback address"},
		},
		{
			name: "plain HTTP metrics with a certificate directory",
			mutate: func(o *Options) {
				o.MetricsBindAddress, o.MetricsPlainHTTP, o.MetricsCertDir = "127.0.0.1:8080", true, "/etc/metrics-certs"
			},
			wantErr: []string{"a metrics certificate directory (/etc/metrics-certs) needs /metrics served over HTTPS"},
		},
		{
			name:    "health probe port out of range",
			mutate:  func(o *Options) { o.HealthProbeBindAddress = ":70000" },
			wantErr: []string{`invalid health probe bind address ":70000"`},
		},
		{
			name: "leader election ID",
			mutate: func(o *Options) {
				o.LeaderElection = true
				o.LeaderElectionID = "Not_A_Name"
			},
			wantErr: []string{`invalid leader election ID "Not_A_Name"`},
		},
		{
			name: "leader election ID ignored without leader election",
			mutate: func(o *Options) {
				o.LeaderElectionID = ""
			},
		},
		{
			name: "leader election timing",
			mutate: func(o *Options) {
				o.LeaderElection = true
				o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 15*time.Second, 10*time.Second, 2*time.Second
			},
		},
		{
			name: "renew deadline not below the default lease duration",
			mutate: func(o *Options) {
				o.LeaderElection = true
				o.RenewDeadline = DefaultLeaseDuration
			},
			wantErr: []string{"lease duration > renew deadline > 1.2 x retry period"},
		},
		{
			name: "retry period too close to the renew deadline",
			mutate: func(o *Options) {
				o.LeaderElection = true
				o.RenewDeadline, o.RetryPeriod = 10*time.Second, 9*time.Second
			},
			wantErr: []string{"lease duration > renew deadline > 1.2 x retry period"},
		},
		{
			name: "negative lease duration",
			mutate: func(o *Options) {
				o.LeaderElection = true
				o.LeaseDuration = -time.Second
			},
			wantErr: []string{"must not be negative"},
		},
		{
			name: "leader election timing ignored without leader election",
			mutate: func(o *Options) {
				o.RetryPeriod = time.Hour
			},
		},
		{
			name:    "negative shutdown timeout",
			mutate:  func(o *Options) { o.GracefulShutdownTimeout = -time.Second },
			wantErr: []string{"graceful shutdown timeout must not be negative"},
		},
		{
			name: "every error at once",
			mutate: func(o *Options) {
				o.ClusterName = "Foo_Bar"
				o.MetricsBindAddress = "nope"
			},
			wantErr: []string{"invalid cluster name", "invalid metrics bind address"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := DefaultOptions()
			tt.mutate(&o)
			err := o.Validate()
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want one containing %q", tt.wantErr)
			}
			for _, s := range tt.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

func TestNewScheme(t *testing.T) {
	s, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	for _, gvk := range []schema.GroupVersionKind{
		corev1.SchemeGroupVersion.WithKind("Secret"),
		{Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"},
		v1alpha1.GroupVersion.WithKind("Cluster"),
		v1alpha1.GroupVersion.WithKind("ClusterFeature"),
		v1alpha1.GroupVersion.WithKind("ResourceSyncRule"),
	} {
		if !s.Recognizes(gvk) {
			t.Errorf("the scheme does not recognize %s", gvk)
		}
	}
}

func TestNewWithoutConfig(t *testing.T) {
	if _, err := New(nil, DefaultOptions()); err == nil {
		t.Fatal("New(nil) returned no error")
	}
}
