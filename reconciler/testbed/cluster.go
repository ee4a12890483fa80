package testbed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

const (
	// envStartTimeout is envtest's own knob for how long a control plane may take to start.
	envStartTimeout = "KUBEBUILDER_CONTROLPLANE_START_TIMEOUT"
	// controlPlaneStartTimeout replaces envtest's 20 s default: several API servers
	// starting at once on two cores need more.
	controlPlaneStartTimeout = 90 * time.Second
	controlPlaneStopTimeout  = 20 * time.Second
	// apiServerWatchGracePeriod is how long a stopping API server lets watches drain.
	apiServerWatchGracePeriod = 2 * time.Second
	// controllerManagerReadyTimeout bounds the wait for kube-controller-manager's first work.
	controllerManagerReadyTimeout = 90 * time.Second
	// logTailBytes is how much of a process log an error quotes.
	logTailBytes = 3000
)

// Cluster is one running cluster: etcd, kube-apiserver, kube-controller-manager (unless
// Options.NoControllerManager) and the proxy every client config points at.
type Cluster struct {
	// Name is the cluster's name and its kubeconfig context.
	Name string
	// Config is an admin (system:masters) config that goes through the proxy, so Cut
	// partitions it. Copy it (rest.CopyConfig) before changing it.
	Config *rest.Config

	dir     string
	network network // the service CIDR and NodePort range it allocates from
	env     *envtest.Environment
	direct  *rest.Config // admin config straight to the API server
	proxy   *proxy
	kcm     *process
	logs    []*os.File

	userMu sync.Mutex // envtest's client certificate CA is not safe for concurrent use

	apiMu      sync.Mutex // serializes StopAPIServer and StartAPIServer
	apiStopped bool       // StopAPIServer ran and StartAPIServer has not succeeded since
}

// start brings the cluster up: control plane, proxy, controller manager.
func (c *Cluster) start(ctx context.Context, assetsDir string, opts Options) error {
	if err := c.startControlPlane(ctx, assetsDir, opts); err != nil {
		return fmt.Errorf("cluster %s: %w", c.Name, err)
	}

	p, err := newProxy(c.env.ControlPlane.APIServer.SecureServing.HostPort())
	if err != nil {
		return fmt.Errorf("cluster %s: %w", c.Name, err)
	}
	c.proxy = p
	c.Config = rest.CopyConfig(c.direct)
	c.Config.Host = p.url()

	if opts.NoControllerManager {
		return nil
	}
	if err := c.startControllerManager(ctx, assetsDir, opts); err != nil {
		return fmt.Errorf("cluster %s: %w", c.Name, err)
	}
	return nil
}

func (c *Cluster) startControlPlane(ctx context.Context, assetsDir string, opts Options) error {
	certDir := filepath.Join(c.dir, "apiserver")
	etcdDir := filepath.Join(c.dir, "etcd")
	for _, d := range []string{certDir, etcdDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("creating %s: %w", d, err)
		}
	}
	apiLog, err := c.createLog(binAPIServer)
	if err != nil {
		return err
	}
	etcdLog, err := c.createLog(binEtcd)
	if err != nil {
		return err
	}

	c.env = &envtest.Environment{
		ControlPlane: envtest.ControlPlane{
			APIServer: &envtest.APIServer{
				Path:    filepath.Join(assetsDir, binAPIServer),
				CertDir: certDir,
				Out:     apiLog,
				Err:     apiLog,
			},
			Etcd: &envtest.Etcd{
				Path:    filepath.Join(assetsDir, binEtcd),
				DataDir: etcdDir,
				Out:     etcdLog,
				Err:     etcdLog,
			},
			KubectlPath: filepath.Join(assetsDir, binKubectl),
		},
		BinaryAssetsDirectory: assetsDir,
		CRDDirectoryPaths:     opts.CRDDirectoryPaths,
		ErrorIfCRDPathMissing: true,
		UseExistingCluster:    ptr.To(false),
	}
	if os.Getenv(envStartTimeout) == "" {
		c.env.ControlPlaneStartTimeout = controlPlaneStartTimeout
	}
	c.env.ControlPlaneStopTimeout = controlPlaneStopTimeout
	// envtest's defaults already ask for RBAC and loopback; pin them so a change of
	// defaults cannot silently take them away. TokenRequest works through envtest's
	// service-account-issuer and signing-key defaults (sa-signer.key in the cert dir, which
	// kube-controller-manager signs legacy tokens with too); the tests exercise both.
	api := c.env.ControlPlane.APIServer.Configure()
	api.Set("authorization-mode", "RBAC")
	api.Set("bind-address", "127.0.0.1")
	api.Set("advertise-address", "127.0.0.1")
	// On SIGTERM, end open watches within this grace period instead of waiting for the
	// HTTP server's 60 s shutdown timeout: StopAPIServer then takes a second or two.
	api.Set("shutdown-watch-termination-grace-period", apiServerWatchGracePeriod.String())
	if opts.Realistic {
		// Overrides envtest's default 10.0.0.0/24, the same on every cluster.
		api.Set("service-cluster-ip-range", c.network.serviceCIDR.String())
		api.Set("service-node-port-range", c.nodePortRangeFlag())
	}
	for _, k := range slices.Sorted(maps.Keys(opts.APIServerFlags)) {
		api.Set(k, opts.APIServerFlags[k])
	}

	if err := ctx.Err(); err != nil {
		return fmt.Errorf("starting control plane: %w", context.Cause(ctx))
	}
	cfg, err := c.env.Start()
	if err != nil {
		tail := ""
		if c.env.Config == nil { // the API server itself did not come up: its log says why
			tail = logTail(apiLog.Name())
		}
		return fmt.Errorf("starting control plane: %w%s", err, tail)
	}
	c.direct = cfg
	return nil
}

// startControllerManager starts kube-controller-manager with the controllers every bed
// runs, and for a Realistic bed the workload controllers and the cluster's service CIDR.
func (c *Cluster) startControllerManager(ctx context.Context, assetsDir string, opts Options) error {
	certDir := c.env.ControlPlane.APIServer.CertDir
	caFile := filepath.Join(c.dir, "ca.crt")
	if err := os.WriteFile(caFile, c.CAData(), 0o600); err != nil {
		return fmt.Errorf("writing API server CA: %w", err)
	}
	// The controller manager talks to the API server directly, not through the proxy, so
	// a Cut partitions clients without stopping the cluster's own controllers.
	kcmConfig, err := c.addUser(envtest.User{Name: "system:kube-controller-manager", Groups: []string{"system:masters"}})
	if err != nil {
		return err
	}
	kubeconfigFile := filepath.Join(c.dir, binControllerManager+".kubeconfig")
	if err := writeKubeconfig(kubeconfigFile, c.Name, kcmConfig); err != nil {
		return err
	}
	logFile, err := c.createLog(binControllerManager)
	if err != nil {
		return err
	}

	controllers := baseControllers
	args := []string{
		"--kubeconfig=" + kubeconfigFile,
		"--service-account-private-key-file=" + filepath.Join(certDir, "sa-signer.key"),
		"--root-ca-file=" + caFile,
		"--leader-elect=false",
		"--secure-port=0",
	}
	if opts.Realistic {
		controllers += "," + workloadControllers
		args = append(args, "--service-cluster-ip-range="+c.network.serviceCIDR.String())
	}
	c.kcm, err = startProcess(filepath.Join(assetsDir, binControllerManager), append([]string{"--controllers=" + controllers}, args...), logFile)
	if err != nil {
		return err
	}

	// The serviceaccount controller creating "default" in "default" shows the controller
	// manager is connected and its controllers run.
	ctx, cancel := context.WithTimeout(ctx, controllerManagerReadyTimeout)
	defer cancel()
	cs, err := kubernetes.NewForConfig(c.direct)
	if err != nil {
		return fmt.Errorf("creating clientset: %w", err)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		_, err := cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsNotFound(err) && ctx.Err() == nil {
			return fmt.Errorf("waiting for kube-controller-manager: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for kube-controller-manager to create the default ServiceAccount: %w%s",
				context.Cause(ctx), logTail(logFile.Name()))
		case <-c.kcm.done:
			return fmt.Errorf("kube-controller-manager exited: %w%s", c.kcm.exitErr(), logTail(logFile.Name()))
		case <-tick.C:
		}
	}
}

// stop stops what start started, in reverse order, even after a partial start.
func (c *Cluster) stop() error {
	var errs []error
	if err := c.kcm.stop(); err != nil {
		errs = append(errs, fmt.Errorf("stopping kube-controller-manager: %w", err))
	}
	if c.proxy != nil {
		c.proxy.close()
	}
	if c.env != nil {
		if err := c.env.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stopping control plane: %w", err))
		}
	}
	for _, f := range c.logs {
		_ = f.Close()
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cluster %s: %w", c.Name, err)
	}
	return nil
}

func (c *Cluster) createLog(name string) (*os.File, error) {
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", c.dir, err)
	}
	f, err := os.Create(filepath.Join(c.dir, name+".log"))
	if err != nil {
		return nil, fmt.Errorf("creating log file: %w", err)
	}
	c.logs = append(c.logs, f)
	return f, nil
}

// addUser returns a config for a client-certificate user that talks to the API server
// directly.
func (c *Cluster) addUser(user envtest.User) (*rest.Config, error) {
	c.userMu.Lock()
	defer c.userMu.Unlock()
	u, err := c.env.AddUser(user, &rest.Config{QPS: c.direct.QPS, Burst: c.direct.Burst})
	if err != nil {
		return nil, fmt.Errorf("adding user %q: %w", user.Name, err)
	}
	return rest.CopyConfig(u.Config()), nil
}

// Client returns a controller-runtime client (through the proxy) whose scheme is NewScheme.
func (c *Cluster) Client() (client.Client, error) {
	s, err := NewScheme()
	if err != nil {
		return nil, err
	}
	cl, err := client.New(rest.CopyConfig(c.Config), client.Options{Scheme: s})
	if err != nil {
		return nil, fmt.Errorf("cluster %s: creating client: %w", c.Name, err)
	}
	return cl, nil
}

// Clientset returns a client-go clientset (through the proxy).
func (c *Cluster) Clientset() (kubernetes.Interface, error) {
	cs, err := kubernetes.NewForConfig(rest.CopyConfig(c.Config))
	if err != nil {
		return nil, fmt.Errorf("cluster %s: creating clientset: %w", c.Name, err)
	}
	return cs, nil
}

// KubeSystemUID returns the UID of the kube-system namespace: the cluster's ID.
func (c *Cluster) KubeSystemUID(ctx context.Context) (types.UID, error) {
	cs, err := c.Clientset()
	if err != nil {
		return "", err
	}
	ns, err := cs.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("cluster %s: getting kube-system: %w", c.Name, err)
	}
	return ns.UID, nil
}

// ServiceCIDR returns the range the cluster allocates Service cluster IPs from: its own
// 10.(i+1).0.0/16 in a Realistic bed, envtest's 10.0.0.0/24 otherwise.
func (c *Cluster) ServiceCIDR() netip.Prefix { return c.network.serviceCIDR }

// NodePortRange returns the first and last port the cluster allocates NodePorts from: its
// own 1000 ports in a Realistic bed, kube-apiserver's 30000-32767 otherwise.
func (c *Cluster) NodePortRange() (first, last int32) {
	return c.network.nodePortFirst, c.network.nodePortLast
}

// nodePortRangeFlag returns NodePortRange as kube-apiserver's --service-node-port-range
// value, "first-last".
func (c *Cluster) nodePortRangeFlag() string {
	return fmt.Sprintf("%d-%d", c.network.nodePortFirst, c.network.nodePortLast)
}

// Host returns the proxy's https://127.0.0.1:PORT, the address peers should use. It stays
// the same across Cut and Heal.
func (c *Cluster) Host() string { return c.proxy.url() }

// APIServerURL returns the API server's own https://127.0.0.1:PORT, bypassing the proxy.
func (c *Cluster) APIServerURL() string {
	return strings.TrimSuffix(c.direct.Host, "/")
}

// DirectConfig returns a copy of an admin config that talks to the API server directly,
// so it keeps working while the cluster is Cut.
func (c *Cluster) DirectConfig() *rest.Config { return rest.CopyConfig(c.direct) }

// CAData returns the API server's serving CA (PEM).
func (c *Cluster) CAData() []byte {
	return append([]byte(nil), c.env.ControlPlane.APIServer.SecureServing.CA...)
}

// Kubeconfig returns a kubeconfig for this cluster alone: one context named like the
// cluster, the admin user, the proxy address.
func (c *Cluster) Kubeconfig() ([]byte, error) {
	b, err := clientcmd.Write(*kubeconfig(c.kubeconfigEntry()))
	if err != nil {
		return nil, fmt.Errorf("cluster %s: serializing kubeconfig: %w", c.Name, err)
	}
	return b, nil
}

// Cut partitions the cluster: the proxy stops listening (new connections are refused) and
// closes every proxied connection. The cluster itself keeps running.
func (c *Cluster) Cut() error {
	if err := c.proxy.cut(); err != nil {
		return fmt.Errorf("cluster %s: cut: %w", c.Name, err)
	}
	return nil
}

// Heal ends a Cut: the proxy listens again on the same port.
func (c *Cluster) Heal() error {
	if err := c.proxy.heal(); err != nil {
		return fmt.Errorf("cluster %s: heal: %w", c.Name, err)
	}
	return nil
}

// IsCut reports whether the cluster is currently cut off.
func (c *Cluster) IsCut() bool { return c.proxy.isCut() }

// ConfigFor returns a config (through the proxy) for a client-certificate user with the
// given name and groups. What it may do is up to RBAC.
func (c *Cluster) ConfigFor(user string, groups []string) (*rest.Config, error) {
	cfg, err := c.addUser(envtest.User{Name: user, Groups: groups})
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", c.Name, err)
	}
	cfg.Host = c.Host()
	return cfg, nil
}

// Healthy reports whether the API server answers /readyz through the proxy.
func (c *Cluster) Healthy(ctx context.Context) error {
	hc, err := rest.HTTPClientFor(c.Config)
	if err != nil {
		return fmt.Errorf("cluster %s: %w", c.Name, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Host()+"/readyz", nil)
	if err != nil {
		return fmt.Errorf("cluster %s: %w", c.Name, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("cluster %s: %w", c.Name, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("cluster %s: /readyz: %s", c.Name, resp.Status)
	}
	return nil
}

// kubeconfigEntry describes the cluster's admin user through the proxy.
func (c *Cluster) kubeconfigEntry() kubeconfigEntry {
	return kubeconfigEntry{name: c.Name, server: c.Host(), ca: c.CAData(), certData: c.Config.CertData, keyData: c.Config.KeyData}
}

// writeKubeconfig writes a one-context kubeconfig for cfg.
func writeKubeconfig(path, name string, cfg *rest.Config) error {
	kc := kubeconfig(kubeconfigEntry{name: name, server: cfg.Host, ca: cfg.CAData, certData: cfg.CertData, keyData: cfg.KeyData})
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// logTail returns the end of a log file, formatted to append to an error.
func logTail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer func() { _ = f.Close() }() // read only: a failed close loses nothing
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return ""
	}
	off := max(fi.Size()-logTailBytes, 0)
	buf := make([]byte, fi.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return ""
	}
	return fmt.Sprintf("\n--- end of %s ---\n%s", filepath.Base(path), strings.TrimSpace(string(buf)))
}

// ServingCertFiles returns the files of the API server's serving certificate and key
// (signed by the CA of CAData): a test's fake server presents them to stand in for the
// API server, behind the proxy's address (Cut, then listen there).
func (c *Cluster) ServingCertFiles() (cert, key string) {
	dir := filepath.Join(c.dir, "apiserver")
	return filepath.Join(dir, "apiserver.crt"), filepath.Join(dir, "apiserver.key")
}
