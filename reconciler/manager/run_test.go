package manager

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

// startAPIServer starts a real kube-apiserver and etcd with envtest, or skips the test
// when their binaries are missing.
func startAPIServer(t *testing.T) *rest.Config {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("KUBEBUILDER_ASSETS unset: run make testbin, or make test")
	}
	// envtest logs through controller-runtime's process-wide logger; unset, it prints a
	// warning with a stack trace 30 seconds in.
	ctrllog.SetLogger(logr.Discard())
	env := &envtest.Environment{ControlPlaneStartTimeout: 2 * time.Minute, CRDDirectoryPaths: []string{"../../manifests/crds"}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting envtest: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping envtest: %v", err)
		}
	})
	return cfg
}

// testLogger logs through t.Log until the test ends, and drops what the manager's
// goroutines still log after that (t.Log would panic).
func testLogger(t *testing.T) logr.Logger {
	var mu sync.Mutex
	done := false
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		done = true
	})
	return funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			t.Log(prefix, args)
		}
	}, funcr.Options{})
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// waitFor200 polls url until it answers 200 and returns the body.
func waitFor200(t *testing.T, url string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return string(body)
			}
			last = fmt.Sprintf("status %d: %s", resp.StatusCode, body)
		} else {
			last = err.Error()
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s did not answer 200 within 30s; last: %s", url, last)
	return ""
}

// TestRunNotLeader runs the manager while another replica holds the Lease: the probes
// and metrics are served anyway, and cancelling the context stops Run cleanly.
func TestRunNotLeader(t *testing.T) {
	cfg := startAPIServer(t)
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := t.Context()

	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.DefaultNamespace},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	now := metav1.NewMicroTime(time.Now())
	if _, err := cs.CoordinationV1().Leases(v1alpha1.DefaultNamespace).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: DefaultLeaderElectionID},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To("another-replica"),
			LeaseDurationSeconds: ptr.To[int32](3600),
			AcquireTime:          &now,
			RenewTime:            &now,
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	metricsAddr, probeAddr := freeAddr(t), freeAddr(t)
	opts := DefaultOptions()
	opts.MetricsBindAddress = metricsAddr
	opts.HealthProbeBindAddress = probeAddr
	opts.LeaderElection = true
	opts.ClusterName = "east"
	opts.Logger = testLogger(t)

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Run(runCtx, cfg, opts) }()

	waitFor200(t, "http://"+probeAddr+"/healthz")
	waitFor200(t, "http://"+probeAddr+"/readyz")
	// /metrics is HTTPS, for a token the API server authenticates and authorizes.
	scraper := newScraper(t, cs, "get /metrics", []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}})
	metrics := waitFor200With(t, scraper, "https://"+metricsAddr+"/metrics")
	if !strings.Contains(metrics, "rest_client_requests_total") && !strings.Contains(metrics, "controller_runtime") {
		t.Errorf("/metrics has neither rest_client nor controller_runtime metrics:\n%s", metrics)
	}
	checkMetricsRefused(t, cs, "https://"+metricsAddr+"/metrics")

	lease, err := cs.CoordinationV1().Leases(v1alpha1.DefaultNamespace).Get(ctx, DefaultLeaderElectionID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ptr.Deref(lease.Spec.HolderIdentity, ""); got != "another-replica" {
		t.Errorf("Lease holder = %q, want another-replica", got)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run returned %v after cancel, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of cancel")
	}
	if _, err := http.Get("http://" + probeAddr + "/healthz"); err == nil {
		t.Errorf("/healthz still served after Run returned")
	}
}

// TestNewPortInUse reports a taken port when the manager is built.
func TestNewPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	opts := DefaultOptions()
	opts.MetricsBindAddress = "0"
	opts.HealthProbeBindAddress = l.Addr().String()
	opts.Logger = testLogger(t)
	// No API server is contacted to build the manager.
	if _, err := New(&rest.Config{Host: "https://127.0.0.1:1"}, opts); err == nil {
		t.Fatal("New returned no error for a health probe port in use")
	}
}

// TestRunUnreachableAPIServer fails fast with a clear error when nothing answers.
func TestRunUnreachableAPIServer(t *testing.T) {
	opts := DefaultOptions()
	opts.MetricsBindAddress, opts.HealthProbeBindAddress = "0", "0"
	opts.Logger = testLogger(t)
	addr := freeAddr(t) // nothing listens there any more
	err := Run(t.Context(), &rest.Config{Host: "https://" + addr}, opts)
	if err == nil || !strings.Contains(err.Error(), "does not answer") {
		t.Fatalf("Run = %v, want an error saying the API server does not answer", err)
	}
}

// newScraper creates a ClusterRole with rules (none: a role that grants nothing) and
// returns a scraper with the token of a ServiceAccount of the registry namespace bound to
// it. Each name gets a namespace of its own.
func newScraper(t *testing.T, cs kubernetes.Interface, name string, rules []rbacv1.PolicyRule) *testbed.MetricsScraper {
	t.Helper()
	ctx := t.Context()
	role := "test-" + strings.NewReplacer(" ", "-", "/", "").Replace(name)
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: role}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s, err := testbed.NewMetricsScraper(ctx, cs, role, role)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// waitFor200With polls url with scraper until it answers 200 and returns the body.
func waitFor200With(t *testing.T, scraper *testbed.MetricsScraper, url string) string {
	t.Helper()
	var body string
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		body, err = scraper.Get(ctx, url)
		return err == nil, nil
	})
	if err != nil {
		_, err := scraper.Get(t.Context(), url)
		t.Fatalf("%s did not answer 200 within 30s: %v", url, err)
	}
	return body
}

// checkMetricsRefused checks that the secure /metrics at url refuses a request without a
// token or with a token the API server does not know (401) and from a ServiceAccount that
// may not get /metrics (403), and is not served over plain HTTP.
func checkMetricsRefused(t *testing.T, cs kubernetes.Interface, url string) {
	t.Helper()
	cases := []struct {
		name    string
		scraper *testbed.MetricsScraper
		want    []int
	}{
		{"no token", testbed.NewMetricsScraperWithToken(""), []int{http.StatusUnauthorized}},
		{"unknown token", testbed.NewMetricsScraperWithToken("not-a-token"), []int{http.StatusUnauthorized}},
		{"not authorized", newScraper(t, cs, "nothing", nil), []int{http.StatusForbidden}},
	}
	for _, c := range cases {
		body, status, err := c.scraper.Do(t.Context(), url)
		if err != nil || !slices.Contains(c.want, status) {
			t.Errorf("%s: /metrics answered %d (error %v), want one of %v: %.200s", c.name, status, err, c.want, body)
		}
	}
	plain := strings.Replace(url, "https://", "http://", 1)
	if resp, err := http.Get(plain); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("%s answered 200 over plain HTTP", plain)
		}
	}
}

// TestMetricsServing serves /metrics from a manager built by New: with a certificate
// from --metrics-cert-dir that a client verifies, and over plain HTTP on loopback when
// secure serving is turned off.
func TestMetricsServing(t *testing.T) {
	cfg := startAPIServer(t)
	cs := kubernetes.NewForConfigOrDie(cfg)
	scraper := newScraper(t, cs, "serving", []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}})

	t.Run("certificate directory", func(t *testing.T) {
		dir := t.TempDir()
		certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.IPv4(127, 0, 0, 1)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "tls.crt"), certPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "tls.key"), keyPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		addr := freeAddr(t)
		opts := DefaultOptions()
		opts.MetricsBindAddress, opts.HealthProbeBindAddress, opts.MetricsCertDir = addr, "0", dir
		opts.Logger = testLogger(t)
		startManager(t, cfg, opts)
		waitFor200With(t, scraper, "https://"+addr+"/metrics")

		// The served certificate is the directory's: a client trusting it alone connects.
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(certPEM) {
			t.Fatal("no certificate in the generated PEM")
		}
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
		if err != nil {
			t.Fatalf("verifying the served certificate against the directory's: %v", err)
		}
		if got := conn.ConnectionState().NegotiatedProtocol; got == "h2" {
			t.Errorf("negotiated %q: HTTP/2 must be off", got)
		}
		conn.Close()
	})

	t.Run("plain HTTP on loopback", func(t *testing.T) {
		addr := freeAddr(t)
		opts := DefaultOptions()
		opts.MetricsBindAddress, opts.HealthProbeBindAddress, opts.MetricsPlainHTTP = addr, "0", true
		opts.Logger = testLogger(t)
		startManager(t, cfg, opts)
		body := waitFor200(t, "http://"+addr+"/metrics")
		if !strings.Contains(body, "go_goroutines") {
			t.Errorf("plain /metrics lacks go_goroutines:\n%.500s", body)
		}
	})
}

// startManager builds a manager with New and runs it until the test ends.
func startManager(t *testing.T, cfg *rest.Config, opts Options) {
	t.Helper()
	mgr, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}
