package serve_test

import (
	"context"
	"fmt"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/plugintest"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubectl-registry/kubectl-registry/plugin"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/manager"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

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

// TestServe runs "kubectl registry serve --leader-elect" against a real API server
// through a kubeconfig file, as a user out of the cluster does: it takes the Lease,
// serves the probes and metrics, and on cancel (SIGTERM) releases the Lease and returns
// nil.
func TestServe(t *testing.T) {
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
	user, err := env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfigPath := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}

	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := t.Context()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.DefaultNamespace},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	metricsAddr, probeAddr := freeAddr(t), freeAddr(t)
	var stdout, stderr plugintest.SyncBuffer
	cmd := plugin.NewCmdRegistry(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &stdout, ErrOut: &stderr})
	cmd.SetArgs([]string{
		"serve",
		"--kubeconfig", kubeconfigPath,
		"--leader-elect",
		"--metrics-bind-address", metricsAddr,
		"--health-probe-bind-address", probeAddr,
		"--cluster-name", "east",
		"--zap-log-level", "debug",
	})
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(runCtx) }()

	waitFor200(t, "http://"+probeAddr+"/healthz")
	waitFor200(t, "http://"+probeAddr+"/readyz")
	// /metrics is HTTPS for a token allowed to get it, as a scraper in the cluster has.
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.MetricsReaderRoleName},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	scraper, err := testbed.NewMetricsScraper(ctx, cs, v1alpha1.DefaultNamespace, v1alpha1.MetricsReaderRoleName)
	if err != nil {
		t.Fatal(err)
	}
	var metrics string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if metrics, err = scraper.Get(ctx, "https://"+metricsAddr+"/metrics"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics did not answer 200 within 30s: %v", err)
		}
	}
	if !strings.Contains(metrics, "rest_client_requests_total") && !strings.Contains(metrics, "controller_runtime") {
		t.Errorf("/metrics has neither rest_client nor controller_runtime metrics:\n%s", metrics)
	}

	// It becomes the leader.
	var holder string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		lease, err := cs.CoordinationV1().Leases(v1alpha1.DefaultNamespace).Get(ctx, manager.DefaultLeaderElectionID, metav1.GetOptions{})
		if err == nil {
			if holder = ptr.Deref(lease.Spec.HolderIdentity, ""); holder != "" {
				break
			}
		}
	}
	if holder == "" {
		t.Fatalf("serve did not take the Lease %s/%s within 30s; log:\n%s", v1alpha1.DefaultNamespace, manager.DefaultLeaderElectionID, stderr.String())
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve returned %v after cancel, want nil; log:\n%s", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("serve did not return within 10s of cancel; log:\n%s", stderr.String())
	}

	// The Lease is handed over at once.
	lease, err := cs.CoordinationV1().Leases(v1alpha1.DefaultNamespace).Get(ctx, manager.DefaultLeaderElectionID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ptr.Deref(lease.Spec.HolderIdentity, ""); got != "" {
		t.Errorf("Lease still held by %q after shutdown, want released", got)
	}
	if stdout.String() != "" {
		t.Errorf("serve wrote to stdout: %q", stdout.String())
	}
	log := stderr.String()
	for _, s := range []string{`"msg":"starting"`, `"apiServer":`, `"clusterName":"east"`} {
		if !strings.Contains(log, s) {
			t.Errorf("log does not contain %s:\n%s", s, log)
		}
	}
}
