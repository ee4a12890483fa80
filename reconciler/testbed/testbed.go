// Package testbed starts real Kubernetes clusters for tests: N independent control planes
// (controller-runtime envtest: etcd + kube-apiserver), each with its own
// kube-controller-manager, each reached through a small TCP proxy that can cut the cluster
// off the network and heal it again, and one kubeconfig with a context per cluster.
//
// A test package shares one Bed through TestMain:
//
//	var bed *testbed.Bed
//
//	func TestMain(m *testing.M) {
//		os.Exit(testbed.Main(m, testbed.Options{Clusters: 3}, &bed))
//	}
//
//	func TestSomething(t *testing.T) {
//		testbed.SkipIfNoAssets(t)
//		a := bed.Cluster("cluster-a")
//		...
//	}
//
// The binaries (kube-apiserver, etcd, kubectl and kube-controller-manager) are found in the
// directory named by KUBEBUILDER_ASSETS. `make testbin` builds them and `make test` sets the
// variable; without them Main runs the tests with a nil Bed and SkipIfNoAssets skips them.
//
// Everything listens on 127.0.0.1 only. All files (certificates, etcd data, kubeconfigs and
// the logs of every process) live under Bed.Dir, which Stop removes.
package testbed

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	registryv1alpha1 "github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// EnvAssets names the environment variable holding the directory of the test binaries.
// It is the variable envtest itself reads.
const EnvAssets = "KUBEBUILDER_ASSETS"

// The binaries that must be present in the assets directory.
const (
	binAPIServer         = "kube-apiserver"
	binEtcd              = "etcd"
	binKubectl           = "kubectl"
	binControllerManager = "kube-controller-manager"
)

// mainStartTimeout bounds how long Main waits for the clusters to start.
const mainStartTimeout = 3 * time.Minute

var (
	// ErrNoAssets is returned by Start when the test binaries are not available.
	ErrNoAssets = errors.New("test binaries not found")
	// ErrInvalidOptions is returned by Start when Options are inconsistent.
	ErrInvalidOptions = errors.New("invalid testbed options")
)

// Options configures Start.
type Options struct {
	// Clusters is how many clusters to start. Zero means len(Names), or 1 when Names is
	// empty too.
	Clusters int
	// Names are the cluster (and kubeconfig context) names, each a DNS-1123 label. By
	// default "cluster-a", "cluster-b", ...
	Names []string
	// CRDDirectoryPaths are installed into every cluster by envtest. A missing path is an
	// error.
	CRDDirectoryPaths []string
	// NoControllerManager skips kube-controller-manager. Without it namespaces never finish
	// terminating, there is no garbage collection, token Secrets stay empty and aggregated
	// ClusterRoles stay empty.
	NoControllerManager bool
	// Realistic makes the clusters differ the way real clusters do, for tests of what a
	// sync must not copy (the fields each cluster assigns itself). The i-th cluster (from 0)
	// gets:
	//   - its own service CIDR, 10.(i+1).0.0/16 (kube-apiserver's and
	//     kube-controller-manager's --service-cluster-ip-range), instead of envtest's
	//     10.0.0.0/24 on every cluster, so a Service's clusterIP names the cluster that
	//     allocated it and is invalid on every other;
	//   - its own NodePort range, 30000+1000i to 30999+1000i (--service-node-port-range),
	//     instead of kube-apiserver's 30000-32767 everywhere, so a nodePort too names the
	//     cluster that allocated it;
	//   - the workload controllers in its kube-controller-manager besides the default ones:
	//     deployment, replicaset, statefulset, daemonset, job, cronjob and endpointslice.
	//     Deployments get ReplicaSets, ReplicaSets, StatefulSets and Jobs get Pods, CronJobs
	//     get Jobs and Services with a selector get EndpointSlices. Pods stay Pending: there
	//     are no nodes, scheduler or kubelet, so DaemonSets get no Pods.
	// Cluster.ServiceCIDR and Cluster.NodePortRange say what each cluster got. At most
	// MaxRealisticClusters clusters; it needs the controller manager, so it cannot be
	// combined with NoControllerManager. The default (false) is the bed as it always was.
	Realistic bool
	// APIServerFlags are kube-apiserver flags (name without dashes, value) set after the
	// bed's own, for tests of how the API server itself behaves (e.g.
	// "min-request-timeout", which bounds how long a watch lasts). Empty: the bed as it
	// always was.
	APIServerFlags map[string]string
}

// MaxRealisticClusters is how many clusters a Realistic bed can have: the NodePort ranges
// of the last one end at 64999.
const MaxRealisticClusters = 35

// The kube-controller-manager controllers every bed runs, and those a Realistic bed adds.
const (
	baseControllers     = "serviceaccount-token,namespace,garbagecollector,serviceaccount,clusterrole-aggregation"
	workloadControllers = "deployment,replicaset,statefulset,daemonset,job,cronjob,endpointslice"
)

// What a bed that is not Realistic gets on every cluster: envtest's service CIDR and
// kube-apiserver's NodePort range.
const (
	defaultServiceCIDR   = "10.0.0.0/24"
	defaultNodePortFirst = 30000
	defaultNodePortLast  = 32767
	// realisticNodePorts is the size of each cluster's NodePort range in a Realistic bed.
	realisticNodePorts = 1000
)

// network is the address space one cluster of a bed allocates from.
type network struct {
	serviceCIDR                 netip.Prefix
	nodePortFirst, nodePortLast int32
}

// network returns the address space of the i-th cluster (from 0).
func (o Options) network(i int) network {
	if !o.Realistic {
		return network{serviceCIDR: netip.MustParsePrefix(defaultServiceCIDR), nodePortFirst: defaultNodePortFirst, nodePortLast: defaultNodePortLast}
	}
	first := int32(defaultNodePortFirst + realisticNodePorts*i)
	return network{
		serviceCIDR:   netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i + 1), 0, 0}), 16),
		nodePortFirst: first,
		nodePortLast:  first + realisticNodePorts - 1,
	}
}

// names returns the validated cluster names the options ask for.
func (o Options) names() ([]string, error) {
	n := o.Clusters
	switch {
	case n < 0:
		return nil, fmt.Errorf("%w: Clusters is %d", ErrInvalidOptions, n)
	case n == 0 && len(o.Names) > 0:
		n = len(o.Names)
	case n == 0:
		n = 1
	}
	switch {
	case o.Realistic && o.NoControllerManager:
		return nil, fmt.Errorf("%w: Realistic needs the controller manager, NoControllerManager is set", ErrInvalidOptions)
	case o.Realistic && n > MaxRealisticClusters:
		return nil, fmt.Errorf("%w: Realistic allows at most %d clusters, not %d", ErrInvalidOptions, MaxRealisticClusters, n)
	}
	if len(o.Names) == 0 {
		return defaultNames(n), nil
	}
	if len(o.Names) != n {
		return nil, fmt.Errorf("%w: %d names for %d clusters", ErrInvalidOptions, len(o.Names), n)
	}
	seen := make(map[string]bool, n)
	for _, name := range o.Names {
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			return nil, fmt.Errorf("%w: cluster name %q: %s", ErrInvalidOptions, name, strings.Join(errs, "; "))
		}
		if seen[name] {
			return nil, fmt.Errorf("%w: duplicate cluster name %q", ErrInvalidOptions, name)
		}
		seen[name] = true
	}
	return append([]string(nil), o.Names...), nil
}

// defaultNames returns "cluster-a", "cluster-b", ... ("cluster-27" and on past "z").
func defaultNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		if i < 26 {
			names[i] = fmt.Sprintf("cluster-%c", 'a'+i)
		} else {
			names[i] = fmt.Sprintf("cluster-%d", i+1)
		}
	}
	return names
}

// Assets returns the directory of the test binaries (from KUBEBUILDER_ASSETS) and whether
// kube-apiserver, etcd, kubectl and kube-controller-manager are all present in it.
func Assets() (dir string, ok bool) {
	dir, missing := assets()
	return dir, dir != "" && len(missing) == 0
}

// assets returns the absolute assets directory and the binaries missing from it.
func assets() (dir string, missing []string) {
	dir = os.Getenv(EnvAssets)
	if dir == "" {
		return "", nil
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	for _, name := range []string{binAPIServer, binEtcd, binKubectl, binControllerManager} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			missing = append(missing, name)
		}
	}
	return dir, missing
}

// noAssetsMessage explains why the binaries are not usable and how to get them.
func noAssetsMessage() string {
	dir, missing := assets()
	if dir == "" {
		return EnvAssets + " is not set; run `make testbin` and point " + EnvAssets +
			" at its output, or run `make test`, which does both"
	}
	return fmt.Sprintf("%s=%s lacks %s; run `make testbin` (or `make test`) to build the test binaries",
		EnvAssets, dir, strings.Join(missing, ", "))
}

// Skipper is the part of testing.TB that SkipIfNoAssets uses; *testing.T and *testing.B
// satisfy it. The test bed does not import the testing package, so the tools that run a
// bed (cmd/registry-bench, cmd/registry-demo) do not link it.
type Skipper interface {
	Helper()
	Skip(args ...any)
}

// SkipIfNoAssets skips the test, saying how to get the binaries, when Assets is not ok.
func SkipIfNoAssets(t Skipper) {
	t.Helper()
	if _, ok := Assets(); !ok {
		t.Skip("testbed: real API servers unavailable: " + noAssetsMessage())
	}
}

// NewScheme returns a scheme with the client-go kinds, apiextensions/v1 and the
// kubectl-registry API: what Cluster.Client uses.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme,
		apiextensionsv1.AddToScheme,
		registryv1alpha1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("building scheme: %w", err)
		}
	}
	return s, nil
}

// Bed is a set of running clusters.
type Bed struct {
	// Clusters in the order of Options.Names.
	Clusters []*Cluster
	// KubeconfigPath is a kubeconfig with one context per cluster, named like the cluster,
	// whose admin (system:masters) user talks to the cluster's proxy. Its current context
	// is the first cluster.
	KubeconfigPath string
	// Dir holds the kubeconfig, certificates, etcd data and the logs of every process.
	Dir string

	stopOnce sync.Once
	stopErr  error
}

// Start starts the clusters in parallel and returns once every API server is serving
// through its proxy (and every kube-controller-manager has created the default
// ServiceAccount). On error everything already started is stopped and removed.
func Start(ctx context.Context, opts Options) (_ *Bed, retErr error) {
	names, err := opts.names()
	if err != nil {
		return nil, err
	}
	assetsDir, ok := Assets()
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNoAssets, noAssetsMessage())
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("starting testbed: %w", context.Cause(ctx))
	}

	dir, err := os.MkdirTemp("", "testbed-")
	if err != nil {
		return nil, fmt.Errorf("creating testbed directory: %w", err)
	}
	b := &Bed{Dir: dir, Clusters: make([]*Cluster, len(names))}
	defer func() {
		if retErr != nil {
			if err := b.Stop(); err != nil {
				retErr = errors.Join(retErr, fmt.Errorf("cleaning up after failed start: %w", err))
			}
		}
	}()

	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		c := &Cluster{Name: name, dir: filepath.Join(dir, name), network: opts.network(i)}
		b.Clusters[i] = c
		wg.Go(func() { errs[i] = c.start(ctx, assetsDir, opts) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	b.KubeconfigPath = filepath.Join(dir, "kubeconfig")
	entries := make([]kubeconfigEntry, len(b.Clusters))
	for i, c := range b.Clusters {
		entries[i] = c.kubeconfigEntry()
	}
	if err := clientcmd.WriteToFile(*kubeconfig(entries...), b.KubeconfigPath); err != nil {
		return nil, fmt.Errorf("writing kubeconfig: %w", err)
	}
	return b, nil
}

// kubeconfigEntry is one cluster, user and context of a kubeconfig, all named Name.
type kubeconfigEntry struct {
	name, server          string
	ca, certData, keyData []byte
}

// kubeconfig returns a kubeconfig with a context per entry; the first is current.
func kubeconfig(entries ...kubeconfigEntry) *clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	for _, e := range entries {
		cfg.Clusters[e.name] = &clientcmdapi.Cluster{Server: e.server, CertificateAuthorityData: e.ca}
		cfg.AuthInfos[e.name] = &clientcmdapi.AuthInfo{ClientCertificateData: e.certData, ClientKeyData: e.keyData}
		cfg.Contexts[e.name] = &clientcmdapi.Context{Cluster: e.name, AuthInfo: e.name}
	}
	if len(entries) > 0 {
		cfg.CurrentContext = entries[0].name
	}
	return cfg
}

// Cluster returns the cluster with the given name, or nil.
func (b *Bed) Cluster(name string) *Cluster {
	for _, c := range b.Clusters {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// Contexts returns the kubeconfig context names, one per cluster, in cluster order.
func (b *Bed) Contexts() []string {
	names := make([]string, len(b.Clusters))
	for i, c := range b.Clusters {
		names[i] = c.Name
	}
	return names
}

// Stop stops every process, closes every proxy and removes Dir. Calling it again returns
// the first call's result.
func (b *Bed) Stop() error {
	b.stopOnce.Do(func() {
		errs := make([]error, len(b.Clusters))
		var wg sync.WaitGroup
		for i, c := range b.Clusters {
			if c != nil {
				wg.Go(func() { errs[i] = c.stop() })
			}
		}
		wg.Wait()
		if b.Dir != "" {
			if err := os.RemoveAll(b.Dir); err != nil {
				errs = append(errs, fmt.Errorf("removing %s: %w", b.Dir, err))
			}
		}
		b.stopErr = errors.Join(errs...)
	})
	return b.stopErr
}

// Runner runs the tests of a test binary and returns its exit code: *testing.M satisfies
// it (see Skipper for why the test bed does not name testing.M).
type Runner interface {
	Run() (code int)
}

// Main runs a test binary around a shared Bed; call it from TestMain as
// os.Exit(testbed.Main(m, opts, &bed)). With the binaries present it starts a Bed with
// opts, stores it in *bed, runs the tests, stops the Bed and returns the exit code (1 when
// the Bed fails to start or stop). Without them it runs the tests with *bed == nil; they
// skip through SkipIfNoAssets. From the start of Start to the end, SIGINT and SIGTERM stop
// the Bed before the process exits, so an interrupted run leaves no API servers behind.
func Main(m Runner, opts Options, bed **Bed) int {
	*bed = nil
	// envtest and the controller-runtime clients log through controller-runtime's
	// process-wide logger; unset, it prints a warning with a stack trace 30 seconds in.
	ctrllog.SetLogger(logr.Discard())
	if _, ok := Assets(); !ok {
		return m.Run()
	}

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(signals)

	b, err := startInterruptible(opts, signals)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testbed: %v\n", err)
		return 1
	}

	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case sig := <-signals:
			fmt.Fprintf(os.Stderr, "testbed: %v: stopping clusters\n", sig)
			_ = b.Stop()
			os.Exit(1)
		case <-done:
		}
	}()

	*bed = b
	code := m.Run()
	if err := b.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "testbed: stopping: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// startInterruptible runs Start for Main; a signal cancels it, which stops whatever was
// already started (envtest itself cannot be interrupted, so that takes a few seconds).
func startInterruptible(opts Options, signals <-chan os.Signal) (*Bed, error) {
	ctx, cancel := context.WithTimeout(context.Background(), mainStartTimeout)
	defer cancel()
	type result struct {
		bed *Bed
		err error
	}
	began := time.Now()
	results := make(chan result, 1)
	go func() {
		b, err := Start(ctx, opts)
		results <- result{b, err}
	}()

	var r result
	select {
	case r = <-results:
	case sig := <-signals:
		cancel()
		if r = <-results; r.err == nil {
			if err := r.bed.Stop(); err != nil {
				return nil, fmt.Errorf("interrupted by %v while starting; stopping: %w", sig, err)
			}
		}
		return nil, fmt.Errorf("interrupted by %v while starting", sig)
	}
	if r.err != nil {
		return nil, r.err
	}
	fmt.Fprintf(os.Stderr, "testbed: %d cluster(s) ready in %s\n", len(r.bed.Clusters), time.Since(began).Round(10*time.Millisecond))
	return r.bed, nil
}
