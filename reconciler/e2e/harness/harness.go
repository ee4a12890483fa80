// Package harness runs the registry controller for end-to-end tests: it builds the
// kubectl-registry binary once, installs the manifests on test-bed clusters, runs `serve`
// as a process per cluster, and does what a user does (the seed's Cluster and Secret swap).
package harness

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/conditions"
	"github.com/kubectl-registry/kubectl-registry/reconciler/credentials/seal"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

var build struct {
	sync.Once
	path string
	err  error
}

// binary builds kubectl-registry once per test run.
func Binary(t *testing.T) string {
	t.Helper()
	build.Do(func() {
		dir, err := os.MkdirTemp("", "kubectl-registry-e2e-")
		if err != nil {
			build.err = err
			return
		}
		build.path = filepath.Join(dir, "kubectl-registry")
		root, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			build.err = fmt.Errorf("go env GOMOD: %w", err)
			return
		}
		cmd := exec.Command("go", "build", "-o", build.path, filepath.Join(filepath.Dir(strings.TrimSpace(string(root))), "cmd", "kubectl-registry"))
		if out, err := cmd.CombinedOutput(); err != nil {
			build.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if build.err != nil {
		t.Fatal(build.err)
	}
	return build.path
}

var installs sync.Map

// Install applies what `kubectl-registry install` applies, but the CRDs (the bed installs
// them, see BedOptions) and the Deployment (the controllers run as processes here), to the
// cluster once. The objects come from the binary itself (`install --dry-run=client -o
// json`), so the harness installs what users get without importing the manifests package:
// test infrastructure under reconciler/ imports nothing above reconciler (see
// cmd/kubectl-registry/layering_test.go).
func Install(t *testing.T, c *testbed.Cluster) client.Client {
	t.Helper()
	cl, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	if _, done := installs.LoadOrStore(c.Name, true); done {
		return cl
	}
	objs, err := installObjects(Binary(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == "Deployment" || o.GetKind() == "CustomResourceDefinition" {
			continue
		}
		err := cl.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(o), client.FieldOwner(v1alpha1.FieldManager), client.ForceOwnership)
		if err != nil {
			t.Fatalf("installing on %s: applying %s %s/%s: %v", c.Name, o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
	return cl
}

// installObjects returns what `install` would apply, in its order, as the binary prints
// it with --dry-run=client (which contacts no cluster).
func installObjects(binary string) ([]*unstructured.Unstructured, error) {
	return InstallObjects(binary)
}

// InstallObjects returns what binary's `install` with the flags args would apply, in its
// order, as it prints it with --dry-run=client (which contacts no cluster).
func InstallObjects(binary string, args ...string) ([]*unstructured.Unstructured, error) {
	cmd := exec.Command(binary, append([]string{"install", "--dry-run=client", "-o", "json"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("kubectl-registry install --dry-run=client: %w\n%s", err, stderr.Bytes())
	}
	var list unstructured.UnstructuredList
	if err := list.UnmarshalJSON(out); err != nil {
		return nil, fmt.Errorf("decoding the objects of install --dry-run=client: %w", err)
	}
	if len(list.Items) == 0 {
		return nil, fmt.Errorf("install --dry-run=client printed no objects")
	}
	objs := make([]*unstructured.Unstructured, len(list.Items))
	for i := range list.Items {
		objs[i] = &list.Items[i]
	}
	return objs, nil
}

// controller is a running `kubectl-registry serve`.
type Controller struct {
	mu      sync.Mutex
	stopped bool
	name    string
	cmd     *exec.Cmd
	log     *os.File
	done    chan error
}

// serve starts the controller of cluster c as a process, out of cluster: it talks to its
// API server directly (so cutting the proxy only cuts the peers off) and advertises the
// proxy address to its peers.
func Serve(t *testing.T, c *testbed.Cluster, extra ...string) *Controller {
	t.Helper()
	return ServeBinary(t, Binary(t), c, extra...)
}

// ServeBinary is Serve with the given kubectl-registry binary (an older release's, say:
// BuildRef), which must know the flags Serve passes.
func ServeBinary(t *testing.T, binary string, c *testbed.Cluster, extra ...string) *Controller {
	t.Helper()
	dir := t.TempDir()
	kc := clientcmdapi.NewConfig()
	cfg := c.DirectConfig()
	kc.Clusters[c.Name] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos[c.Name] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts[c.Name] = &clientcmdapi.Context{Cluster: c.Name, AuthInfo: c.Name}
	kc.CurrentContext = c.Name
	kubeconfigPath := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kubeconfigPath); err != nil {
		t.Fatal(err)
	}
	caPath := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caPath, c.CAData(), 0o600); err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(dir, "serve.log"))
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"serve",
		"--kubeconfig", kubeconfigPath, "--context", c.Name,
		"--cluster-name", c.Name,
		"--api-server-endpoint", c.Host(), "--api-server-ca-file", caPath,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0",
		"--peer-health-interval", "300ms", "--peer-failure-threshold", "3", "--allow-loopback-peers",
		"--heartbeat-period", "1m",
		"--leader-elect", "--leader-election-id", "registry-e2e",
	}, extra...)
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ctl := &Controller{name: c.Name, cmd: cmd, log: logFile, done: make(chan error, 1)}
	go func() { ctl.done <- cmd.Wait() }()
	t.Cleanup(func() {
		ctl.Stop(t)
		if t.Failed() || os.Getenv("E2E_LOG_ALWAYS") != "" {
			t.Logf("log of the controller of %s:\n%s", c.Name, tail(logFile.Name(), logTailLines()))
		}
	})
	return ctl
}

// stop sends SIGTERM and waits for a clean exit.
func (c *Controller) Stop(t *testing.T) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return
	}
	c.stopped = true
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-c.done:
		if err != nil {
			t.Errorf("controller of %s exited with %v after SIGTERM", c.name, err)
		}
	case <-time.After(20 * time.Second):
		_ = c.cmd.Process.Kill()
		t.Errorf("controller of %s did not stop within 20s of SIGTERM", c.name)
	}
}

// Log returns what the controller has logged so far.
func (c *Controller) Log() (string, error) {
	b, err := os.ReadFile(c.log.Name())
	return string(b), err
}

func tail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	parts := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return string(bytes.Join(parts, []byte("\n")))
}

// eventually retries f until it returns nil or the timeout passes.
func Eventually(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for {
		if err = f(); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// clean strips what the API server set, as a user does before applying an object read
// from another cluster.
func Clean(o client.Object) {
	o.SetUID("")
	o.SetResourceVersion("")
	o.SetCreationTimestamp(metav1.Time{})
	o.SetManagedFields(nil)
	o.SetGeneration(0)
}

// swap copies the local Cluster CR and reader Secret of `from` to `to`: the seed's
// "copy/paste Cluster and secret resources" step.
func Swap(t *testing.T, from, to client.Client, name string) {
	t.Helper()
	ctx := context.Background()
	var c v1alpha1.Cluster
	if err := from.Get(ctx, client.ObjectKey{Name: name}, &c); err != nil {
		t.Fatal(err)
	}
	var s corev1.Secret
	ref := c.Spec.AuthInfo.SecretRef
	if err := from.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, &s); err != nil {
		t.Fatal(err)
	}
	Clean(&c)
	c.Status = v1alpha1.ClusterStatus{}
	Clean(&s)
	if err := to.Create(ctx, &s); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("copying Secret %s: %v", ref.Name, err)
	}
	if err := to.Create(ctx, &c); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("copying Cluster %s: %v", name, err)
	}
}

// readerClient builds a client from a reader kubeconfig, through the same sanitiser the
// controller uses.
func ReaderClient(t *testing.T, data []byte) client.Client {
	t.Helper()
	cfg, err := kubeconfig.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	scheme, err := testbed.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// freeAddr returns a loopback address whose port was free a moment ago.
func FreeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func Get(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", url, resp.Status)
	}
	return string(b), err
}

// members checks that cluster cl knows exactly the named clusters, itself as Local and
// the others as Peer, all Ready and ClustersSynced.
func Members(cl client.Client, self string, names ...string) error {
	var list v1alpha1.ClusterList
	if err := cl.List(context.Background(), &list); err != nil {
		return err
	}
	var got []string
	for _, c := range list.Items {
		got = append(got, c.Name)
	}
	sort.Strings(got)
	names = append([]string(nil), names...)
	sort.Strings(names)
	if strings.Join(got, ",") != strings.Join(names, ",") {
		return fmt.Errorf("%s knows clusters %v, want %v", self, got, names)
	}
	for _, c := range list.Items {
		wantType := v1alpha1.ClusterTypePeer
		if c.Name == self {
			wantType = v1alpha1.ClusterTypeLocal
		}
		switch {
		case c.Status.Type != wantType:
			return fmt.Errorf("on %s, Cluster %s has type %q, want %s", self, c.Name, c.Status.Type, wantType)
		case c.Status.State != v1alpha1.ClusterStateReady:
			return fmt.Errorf("on %s, Cluster %s is %q: %s", self, c.Name, c.Status.State, c.Status.Message)
		case !conditions.IsTrue(c.Status.Conditions, v1alpha1.ClusterConditionReady):
			return fmt.Errorf("on %s, Cluster %s is not Ready: %+v", self, c.Name, c.Status.Conditions)
		case !conditions.IsTrue(c.Status.Conditions, v1alpha1.ClusterConditionClustersSynced):
			return fmt.Errorf("on %s, Cluster %s is not ClustersSynced: %+v", self, c.Name, c.Status.Conditions)
		}
	}
	return nil
}

func LocalReady(cl client.Client, name string) error {
	var c v1alpha1.Cluster
	if err := cl.Get(context.Background(), client.ObjectKey{Name: name}, &c); err != nil {
		return err
	}
	if c.Status.Type != v1alpha1.ClusterTypeLocal || c.Status.State != v1alpha1.ClusterStateReady {
		return fmt.Errorf("the Cluster %s: type %q state %q", name, c.Status.Type, c.Status.State)
	}
	var s corev1.Secret
	return cl.Get(context.Background(), client.ObjectKey{Namespace: v1alpha1.DefaultNamespace, Name: name}, &s)
}

func PeerState(cl client.Client, name string) (v1alpha1.ClusterState, string, error) {
	var c v1alpha1.Cluster
	if err := cl.Get(context.Background(), client.ObjectKey{Name: name}, &c); err != nil {
		return "", "", err
	}
	return c.Status.State, c.Status.Message, nil
}

// FormGroup runs a controller for every named cluster of the bed and forms the group the
// seed's way: the first cluster swaps its Cluster and Secret with each of the others, and
// membership spreads; it returns when every member holds the credential each other one
// issued it. It returns an admin client per cluster.
func FormGroup(t *testing.T, bed *testbed.Bed, names ...string) map[string]client.Client {
	t.Helper()
	return FormGroupServing(t, bed, nil, names...)
}

// FormGroupServing is FormGroup with extra arguments of each cluster's "serve" (nil
// for none).
func FormGroupServing(t *testing.T, bed *testbed.Bed, serveArgs func(name string) []string, names ...string) map[string]client.Client {
	t.Helper()
	clients, _ := FormGroupControllers(t, bed, serveArgs, names...)
	return clients
}

// FormGroupControllers is FormGroupServing that also returns each cluster's controller
// process.
func FormGroupControllers(t *testing.T, bed *testbed.Bed, serveArgs func(name string) []string, names ...string) (map[string]client.Client, map[string]*Controller) {
	t.Helper()
	clients := map[string]client.Client{}
	controllers := map[string]*Controller{}
	for _, n := range names {
		clients[n] = Install(t, bed.Cluster(n))
		var extra []string
		if serveArgs != nil {
			extra = serveArgs(n)
		}
		controllers[n] = Serve(t, bed.Cluster(n), extra...)
	}
	for _, n := range names {
		Eventually(t, 60*time.Second, n+" bootstraps", func() error { return LocalReady(clients[n], n) })
	}
	first := names[0]
	for _, n := range names[1:] {
		Swap(t, clients[first], clients[n], first)
		Swap(t, clients[n], clients[first], n)
	}
	Eventually(t, 60*time.Second, "the group forms", func() error {
		for _, n := range names {
			if err := Members(clients[n], n, names...); err != nil {
				return err
			}
		}
		return nil
	})
	// Members are Ready to each other while they still read each other with the
	// bootstrap credential; the exchange of issued credentials writes Secrets after
	// it, so a test that counts or compares objects would race it.
	Eventually(t, 60*time.Second, "the members exchange their credentials", func() error {
		return CredentialsExchanged(clients, names...)
	})
	return clients, controllers
}

// logTailLines is how many lines of a controller's log a failed test prints (every
// test, with E2E_LOG_ALWAYS set): E2E_LOG_LINES, or 60.
func logTailLines() int {
	if n, err := strconv.Atoi(os.Getenv("E2E_LOG_LINES")); err == nil && n > 0 {
		return n
	}
	return 60
}

// ReceivedKubeconfig returns the reader kubeconfig of the credential cluster issuer
// issued to the member cl is the API server of (its cluster ID holder), as the member
// keeps it (v1alpha1.ReceivedReaderSecretName): opened with the member's own key, read by
// its admin from the readers namespace, when it is sealed.
func ReceivedKubeconfig(cl client.Client, holder, issuer types.UID) ([]byte, error) {
	ctx := context.Background()
	var s corev1.Secret
	if err := cl.Get(ctx, client.ObjectKey{Namespace: v1alpha1.DefaultNamespace, Name: v1alpha1.ReceivedReaderSecretName(issuer)}, &s); err != nil {
		return nil, fmt.Errorf("the credential from %s: %w", issuer, err)
	}
	sealed := s.Data[v1alpha1.SealedKubeconfigKey]
	if len(sealed) == 0 {
		return s.Data[v1alpha1.KubeconfigKey], nil
	}
	var keySecret corev1.Secret
	if err := cl.Get(ctx, client.ObjectKey{Namespace: v1alpha1.ReadersNamespace(v1alpha1.DefaultNamespace), Name: v1alpha1.ReaderKeySecretName}, &keySecret); err != nil {
		return nil, fmt.Errorf("the key Secret: %w", err)
	}
	key, err := seal.ParsePrivateKey(keySecret.Data[v1alpha1.PrivateKeyKey])
	if err != nil {
		return nil, err
	}
	return key.Open(issuer, holder, sealed)
}
