// Command registry-probe is an outside check of `make bench`'s floor (#33 item 3): written
// apart from cmd/registry-bench (it shares none of its measurement code), it measures the
// registry's create latency and a burst against a trivial copier on the same real API
// servers (three, or --clusters), where "alone" means no controller process exists.
//
// It starts the API servers of the test bed (reconciler/testbed, with
// kube-controller-manager), installs the registry with `kubectl registry install`, runs
// `kubectl-registry serve` for each with the install's defaults (no bench flag such as a 1 s
// peer health interval), joins the group with `kubectl registry join` (the first cluster,
// the origin, with each other one) and applies one rule (ConfigMaps of namespace
// probe-registry with a label). Then it alternates phases, the
// floor first and last so that it brackets the others in time and in the clusters' size:
//
//   - floor: the controllers are ended (SIGTERM, waited for), and a copier (one watch on the
//     origin, one queue and writer per peer, a create per object) copies namespace
//     probe-floor;
//   - split: the floor split as the registry is, one copier process per peer, each reading
//     the origin and writing its own peer (namespace probe-split; the controllers still
//     ended): what a process per member costs, the registry's own work apart;
//   - split-member: the same, each copier writing as the registry does, impersonating the
//     origin member's identity (namespace probe-split-member);
//   - registry: the controllers are started again, each reports its Cluster Ready, one
//     object goes through and their CPU settles; nothing else runs.
//
// The first floor phase is preceded by 100 unrecorded creates through the floor. Each
// phase takes --samples sequential creates on the origin (the time from the create
// request to the object's first ADDED event on the last peer, read by a watch per peer that
// the probe opened before the phase) and a burst of --burst creates from 16 workers (the
// time until every object is on every peer). It prints each phase and the ratios of the
// pooled samples (p50, p99, the mean burst) between the sides (report.go).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

const (
	nsRegistry = "probe-registry"
	nsFloor    = "probe-floor"
	nsSplit    = "probe-split"
	nsMember   = "probe-split-member"
	nsWrite    = "probe-write"
	label      = "probe.kubectl-registry.io/sync"
	bursters   = 16
	// warmUp is how many creates go through the floor, unrecorded, before its first phase.
	warmUp = 100
)

// clusterNames are the clusters' names, the origin first.
var clusterNames = []string{"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"}

type options struct {
	bin      string
	clusters int
	samples  int
	burst    int
	rounds   int
	out      string
	timeout  time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "bin/kubectl-registry", "the kubectl-registry binary (make build)")
	flag.IntVar(&o.clusters, "clusters", 3, "clusters in the group: the first is the origin, every other a peer (at most 8)")
	flag.IntVar(&o.samples, "samples", 200, "sequential creates per phase")
	flag.IntVar(&o.burst, "burst", 1000, "ConfigMaps created at once per phase")
	flag.IntVar(&o.rounds, "rounds", 3, "registry phases; the floor runs rounds+1 times, around them")
	flag.StringVar(&o.out, "out", "", "write the phases and ratios as JSON to this file")
	flag.DurationVar(&o.timeout, "timeout", 3*time.Minute, "how long a step may take")
	var child copierFlags
	flag.StringVar(&child.to, "copy-to", "", "run as one copier of the split floor: the context it writes (the probe starts these itself)")
	flag.StringVar(&child.from, "copy-from", "", "the split copier's origin context")
	flag.StringVar(&child.kubeconfig, "copy-kubeconfig", "", "the split copier's kubeconfig")
	flag.StringVar(&child.namespace, "copy-namespace", nsSplit, "the namespace the split copier copies")
	flag.BoolVar(&child.asMember, "copy-as-member", false, "the split copier writes impersonating the origin member's identity, as the registry does")
	flag.Parse()
	if child.to != "" {
		if err := child.run(); err != nil {
			fmt.Fprintln(os.Stderr, "registry-probe copier:", err)
			os.Exit(1)
		}
		return
	}
	if o.samples < 1 || o.burst < 1 || o.rounds < 1 || o.clusters < 2 || o.clusters > len(clusterNames) {
		fmt.Fprintf(os.Stderr, "registry-probe: --samples, --burst and --rounds must be positive, --clusters 2 to %d\n", len(clusterNames))
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "registry-probe:", err)
		os.Exit(1)
	}
}

func step(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// probe is the group under measurement.
type probe struct {
	o          options
	kubectl    string
	kubeconfig string
	dir        string
	names      []string
	cs         map[string]kubernetes.Interface
	cfgs       map[string]*rest.Config
	ctrls      []*ctrl
	// seen[namespace] holds when each ConfigMap of the namespace first appeared on each peer.
	seen map[string]*arrivals
}

type ctrl struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func run(ctx context.Context, o options) error {
	assets, ok := testbed.Assets()
	if !ok {
		return errors.New("the test API server binaries are missing: run make testbin and set KUBEBUILDER_ASSETS")
	}
	bin, err := filepath.Abs(o.bin)
	if err != nil {
		return err
	}
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%w (make build)", err)
	}
	o.bin = bin
	step("starting %d API servers", o.clusters)
	bed, err := testbed.Start(ctx, testbed.Options{Names: clusterNames[:o.clusters]})
	if err != nil {
		return err
	}
	defer func() { _ = bed.Stop() }()
	p := &probe{o: o, kubectl: filepath.Join(assets, "kubectl"), kubeconfig: bed.KubeconfigPath, dir: bed.Dir,
		names: clusterNames[:o.clusters], cs: map[string]kubernetes.Interface{}, cfgs: map[string]*rest.Config{}, seen: map[string]*arrivals{}}
	for _, n := range p.names {
		cfg := rest.CopyConfig(bed.Cluster(n).Config)
		cfg.QPS, cfg.Burst = 5000, 10000
		p.cfgs[n] = cfg
		if p.cs[n], err = kubernetes.NewForConfig(cfg); err != nil {
			return err
		}
	}
	defer p.stopControllers()
	if err := p.form(ctx); err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, ns := range []string{nsRegistry, nsFloor, nsSplit, nsMember} {
		a := newArrivals()
		for _, peer := range p.names[1:] {
			if err := a.watch(wctx, p.cs[peer], ns); err != nil {
				return err
			}
		}
		p.seen[ns] = a
	}
	if err := p.through(ctx, nsRegistry, "warm-0"); err != nil {
		return fmt.Errorf("the registry's first object: %w", err)
	}
	phases, err := p.phases(ctx)
	if err != nil {
		return err
	}
	rep := newReport(phases)
	if rep.Writes, err = p.writeCost(ctx); err != nil {
		return fmt.Errorf("the write request: %w", err)
	}
	rep.print(os.Stdout)
	if o.out != "" {
		data, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(o.out, data, 0o644)
	}
	return nil
}

// phases runs the rounds: the floor, the split floors and the registry in turn, and the
// floor once more at the end.
func (p *probe) phases(ctx context.Context) ([]phase, error) {
	var phases []phase
	for r := 0; r <= p.o.rounds; r++ {
		ph, err := p.floorPhase(ctx, r)
		if err != nil {
			return nil, err
		}
		phases = append(phases, ph)
		if r == p.o.rounds {
			break
		}
		for _, asMember := range []bool{false, true} {
			if ph, err = p.splitPhase(ctx, r, asMember); err != nil {
				return nil, err
			}
			phases = append(phases, ph)
		}
		if ph, err = p.registryPhase(ctx, r); err != nil {
			return nil, err
		}
		phases = append(phases, ph)
	}
	return phases, nil
}

// form installs the registry on every cluster, starts the controllers, joins the group and
// applies the rule.
func (p *probe) form(ctx context.Context) error {
	for _, n := range p.names {
		step("kubectl registry install --context %s", n)
		if err := p.plugin(ctx, "install", "--context", n, "--cluster-name", n); err != nil {
			return err
		}
		cs := p.cs[n]
		for _, cr := range []*rbacv1.ClusterRole{
			{ObjectMeta: metav1.ObjectMeta{Name: "probe-reader-configmaps", Labels: map[string]string{v1alpha1.ReaderAggregatedLabel: "true"}},
				Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "probe-members-configmaps", Labels: map[string]string{v1alpha1.ControllerAggregatedLabel: "true"}},
				Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}}},
		} {
			if _, err := cs.RbacV1().ClusterRoles().Create(ctx, cr, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
		}
		for _, ns := range []string{nsRegistry, nsFloor, nsSplit, nsMember, nsWrite} {
			if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
		}
		for _, role := range []string{v1alpha1.ControllerAggregatedRoleName, v1alpha1.ReaderAggregatedRoleName} {
			if err := p.poll(ctx, func(ctx context.Context) (bool, error) {
				cr, err := cs.RbacV1().ClusterRoles().Get(ctx, role, metav1.GetOptions{})
				if err != nil {
					return false, nil
				}
				return slices.ContainsFunc(cr.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "configmaps") }), nil
			}); err != nil {
				return fmt.Errorf("%s: ClusterRole %s does not aggregate configmaps: %w", n, role, err)
			}
		}
	}
	if err := p.startControllers(ctx); err != nil {
		return err
	}
	for _, peer := range p.names[1:] {
		step("kubectl registry join --context %s --peer-context %s", p.names[0], peer)
		if err := p.plugin(ctx, "join", "--context", p.names[0], "--peer-context", peer, "--allow-loopback", "--wait", "--timeout", p.o.timeout.String()); err != nil {
			return err
		}
	}
	rule := fmt.Sprintf(`apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata:
  name: probe
spec:
  groupVersionKind: {kind: ConfigMap, version: v1}
  rules:
  - match:
    - namespaces: [%s]
      labels:
      - matchLabels: {%s: "true"}
`, nsRegistry, label)
	cmd := exec.CommandContext(ctx, p.kubectl, "--kubeconfig", p.kubeconfig, "--context", p.names[0], "apply", "-f", "-")
	cmd.Stdin = strings.NewReader(rule)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("applying the rule: %w: %s", err, out)
	}
	return nil
}

func (p *probe) plugin(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, p.o.bin, append(args, "--kubeconfig", p.kubeconfig)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubectl registry %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// poll calls cond every 200 ms until it reports true, for at most the step timeout.
func (p *probe) poll(ctx context.Context, cond func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, p.o.timeout)
	defer cancel()
	for {
		ok, err := cond(ctx)
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// startControllers runs serve for each cluster with the install's defaults and waits until
// each reports its own Cluster Ready.
func (p *probe) startControllers(ctx context.Context) error {
	for _, n := range p.names {
		log, err := os.OpenFile(filepath.Join(p.dir, "serve-"+n+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		cmd := exec.Command(p.o.bin, "serve", "--kubeconfig", p.kubeconfig, "--context", n, "--cluster-name", n,
			"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--allow-loopback-peers")
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			_ = log.Close()
			return err
		}
		c := &ctrl{cmd: cmd, done: make(chan struct{})}
		go func() { _ = cmd.Wait(); _ = log.Close(); close(c.done) }()
		p.ctrls = append(p.ctrls, c)
	}
	for _, n := range p.names {
		err := p.poll(ctx, func(ctx context.Context) (bool, error) {
			out, err := exec.CommandContext(ctx, p.kubectl, "--kubeconfig", p.kubeconfig, "--context", n, "get", "cluster", n, "-o", "jsonpath={.status.state}").Output()
			return err == nil && string(out) == "Ready", nil
		})
		if err != nil {
			return fmt.Errorf("the controller of %s did not report its Cluster Ready (logs in %s): %w", n, p.dir, err)
		}
	}
	return nil
}

// stopControllers ends every controller process and waits for it.
func (p *probe) stopControllers() {
	for _, c := range p.ctrls {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, c := range p.ctrls {
		<-c.done
	}
	p.ctrls = nil
}

// settle waits until the controllers' CPU stays under 5 % of a core for a second (their
// resync after a start), at most a minute.
func (p *probe) settle() {
	deadline := time.Now().Add(time.Minute)
	last := p.cpuTicks()
	for time.Now().Before(deadline) {
		time.Sleep(time.Second)
		now := p.cpuTicks()
		if now-last <= 5 { // 10 ms ticks
			return
		}
		last = now
	}
}

func (p *probe) cpuTicks() int {
	total := 0
	for _, c := range p.ctrls {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.cmd.Process.Pid))
		if err != nil {
			continue
		}
		// The fields after the command's closing parenthesis; utime and stime are 14 and 15.
		f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
		if len(f) > 12 {
			u, _ := strconv.Atoi(f[11])
			s, _ := strconv.Atoi(f[12])
			total += u + s
		}
	}
	return total
}

func syncedCM(ns, name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{label: "true"}},
		Data: map[string]string{"payload": "probe"}}
}

// through creates one ConfigMap in ns and waits until it is on every peer.
func (p *probe) through(ctx context.Context, ns, name string) error {
	if _, err := p.cs[p.names[0]].CoreV1().ConfigMaps(ns).Create(ctx, syncedCM(ns, name), metav1.CreateOptions{}); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, p.o.timeout)
	defer cancel()
	_, err := p.seen[ns].waitAll(wctx, []string{name}, len(p.names)-1)
	return err
}

// phase is what one phase measured.
type phase struct {
	Side    string          `json:"side"`
	Round   int             `json:"round"`
	Creates []time.Duration `json:"creates_ns"`
	Burst   time.Duration   `json:"burst_ns"`
}

func (p *probe) floorPhase(ctx context.Context, r int) (phase, error) {
	step("round %d: floor alone (controllers ended)", r)
	p.stopControllers()
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := startCopier(cctx, p.cs[p.names[0]], p.peerClients(), nsFloor); err != nil {
		return phase{}, err
	}
	// The first phase follows the group's forming: warm the floor up with unrecorded
	// creates, as each registry phase is warmed by its settling.
	warm := 1
	if r == 0 {
		warm = warmUp
	}
	for i := range warm {
		if err := p.through(ctx, nsFloor, fmt.Sprintf("warm-%d-%d", r, i)); err != nil {
			return phase{}, fmt.Errorf("the floor's first objects: %w", err)
		}
	}
	time.Sleep(2 * time.Second)
	return p.measure(ctx, "floor", nsFloor, r)
}

func (p *probe) registryPhase(ctx context.Context, r int) (phase, error) {
	step("round %d: registry (controllers started again)", r)
	if err := p.startControllers(ctx); err != nil {
		return phase{}, err
	}
	if err := p.through(ctx, nsRegistry, fmt.Sprintf("warm-%d", r+1)); err != nil {
		return phase{}, fmt.Errorf("the registry's first object after a start: %w", err)
	}
	p.settle()
	return p.measure(ctx, "registry", nsRegistry, r)
}

func (p *probe) peerClients() []kubernetes.Interface {
	var out []kubernetes.Interface
	for _, n := range p.names[1:] {
		out = append(out, p.cs[n])
	}
	return out
}

// measure takes the sequential creates and the burst of one phase.
func (p *probe) measure(ctx context.Context, side, ns string, r int) (phase, error) {
	ph := phase{Side: side, Round: r}
	cms := p.cs[p.names[0]].CoreV1().ConfigMaps(ns)
	peers := len(p.names) - 1
	for i := range p.o.samples {
		name := fmt.Sprintf("s%d-%d", r, i)
		t0 := time.Now()
		if _, err := cms.Create(ctx, syncedCM(ns, name), metav1.CreateOptions{}); err != nil {
			return ph, err
		}
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		at, err := p.seen[ns].waitAll(wctx, []string{name}, peers)
		cancel()
		if err != nil {
			return ph, fmt.Errorf("%s sample %s: %w", side, name, err)
		}
		ph.Creates = append(ph.Creates, at.Sub(t0))
	}
	time.Sleep(2 * time.Second)
	names := make([]string, p.o.burst)
	for i := range names {
		names[i] = fmt.Sprintf("b%d-%d", r, i)
	}
	work := make(chan string)
	errs := make(chan error, bursters)
	var wg sync.WaitGroup
	t0 := time.Now()
	for range bursters {
		wg.Go(func() {
			for n := range work {
				if _, err := cms.Create(ctx, syncedCM(ns, n), metav1.CreateOptions{}); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	for _, n := range names {
		work <- n
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return ph, fmt.Errorf("%s burst: %w", side, err)
	default:
	}
	wctx, cancel := context.WithTimeout(ctx, p.o.timeout)
	defer cancel()
	at, err := p.seen[ns].waitAll(wctx, names, peers)
	if err != nil {
		return ph, fmt.Errorf("%s burst: %w", side, err)
	}
	ph.Burst = at.Sub(t0)
	step("  %s: create p50 %.2f ms, burst %.2f s", side, ms(percentile(ph.Creates, 50)), ph.Burst.Seconds())
	return ph, nil
}

// startCopier is the floor: it watches ns on the origin and creates each new ConfigMap on
// every peer, one queue and one writer per peer, until ctx ends.
func startCopier(ctx context.Context, origin kubernetes.Interface, peers []kubernetes.Interface, ns string) error {
	w, err := watchNew(ctx, origin, ns)
	if err != nil {
		return err
	}
	queues := make([]chan *corev1.ConfigMap, len(peers))
	for i, peer := range peers {
		queues[i] = make(chan *corev1.ConfigMap, 8192)
		go func(q <-chan *corev1.ConfigMap) {
			for {
				select {
				case <-ctx.Done():
					return
				case src := <-q:
					cp := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: src.Name, Namespace: src.Namespace, Labels: src.Labels}, Data: src.Data}
					if _, err := peer.CoreV1().ConfigMaps(ns).Create(ctx, cp, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) && ctx.Err() == nil {
						fmt.Fprintln(os.Stderr, "copier:", err)
					}
				}
			}
		}(queues[i])
	}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok && ev.Type == watch.Added {
				for _, q := range queues {
					q <- cm
				}
			}
		}
	}()
	return nil
}

// watchNew watches the ConfigMaps of ns on cs from now on (from a list's
// resourceVersion), watching again where a watch ends.
func watchNew(ctx context.Context, cs kubernetes.Interface, ns string) (watch.Interface, error) {
	list, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return cs.CoreV1().ConfigMaps(ns).Watch(ctx, o)
		},
	})
}

// arrivals records when each ConfigMap of a namespace first appeared on each peer.
type arrivals struct {
	mu      sync.Mutex
	at      map[string][]time.Time
	changed chan struct{}
}

func newArrivals() *arrivals {
	return &arrivals{at: map[string][]time.Time{}, changed: make(chan struct{})}
}

func (a *arrivals) add(name string, t time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.at[name] = append(a.at[name], t)
	close(a.changed)
	a.changed = make(chan struct{})
}

// watch records the ConfigMaps of ns created on peer from now on.
func (a *arrivals) watch(ctx context.Context, peer kubernetes.Interface, ns string) error {
	w, err := watchNew(ctx, peer, ns)
	if err != nil {
		return err
	}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok && ev.Type == watch.Added {
				a.add(cm.Name, time.Now())
			}
		}
	}()
	return nil
}

// waitAll returns when the last of names appeared on its peers-th peer.
func (a *arrivals) waitAll(ctx context.Context, names []string, peers int) (time.Time, error) {
	for {
		a.mu.Lock()
		var last time.Time
		missing := 0
		for _, n := range names {
			ts := a.at[n]
			if len(ts) < peers {
				missing++
				continue
			}
			if t := slices.MaxFunc(ts, time.Time.Compare); t.After(last) {
				last = t
			}
		}
		changed := a.changed
		a.mu.Unlock()
		if missing == 0 {
			return last, nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("%d of %d ConfigMaps not on every peer: %w", missing, len(names), ctx.Err())
		case <-changed:
		}
	}
}

// splitPhase measures the floor split as the registry is: one copier process per peer,
// each reading the origin and writing its own peer, where the floor is one process
// writing both. What separates the registry from it is the registry's own work; what
// separates it from the floor is the design's (a process per member, each reading its
// peers). asMember: the copiers write as the registry does, impersonating the origin
// member's identity (side split-member), so that the peers' RBAC and priority and
// fairness treat their writes as the registry's.
func (p *probe) splitPhase(ctx context.Context, r int, asMember bool) (phase, error) {
	side, ns := "split", nsSplit
	if asMember {
		side, ns = "split-member", nsMember
	}
	step("round %d: %s floor (a copier process per peer; controllers ended)", r, side)
	self, err := os.Executable()
	if err != nil {
		return phase{}, err
	}
	var children []*exec.Cmd
	defer func() {
		for _, c := range children {
			_ = c.Process.Signal(syscall.SIGTERM)
			_ = c.Wait()
		}
	}()
	for _, peer := range p.names[1:] {
		args := []string{"--copy-to", peer, "--copy-from", p.names[0], "--copy-kubeconfig", p.kubeconfig, "--copy-namespace", ns}
		if asMember {
			args = append(args, "--copy-as-member")
		}
		c := exec.Command(self, args...)
		c.Stderr = os.Stderr
		out, err := c.StdoutPipe()
		if err != nil {
			return phase{}, err
		}
		if err := c.Start(); err != nil {
			return phase{}, err
		}
		children = append(children, c)
		// The copier copies what its watch adds after its list: wait until it is
		// watching.
		line, err := bufio.NewReader(out).ReadString('\n')
		if line != copierReady+"\n" {
			return phase{}, fmt.Errorf("the split copier to %s did not start (%q): %w", peer, line, err)
		}
	}
	if err := p.through(ctx, ns, fmt.Sprintf("warm-%d", r)); err != nil {
		return phase{}, fmt.Errorf("the %s floor's first object: %w", side, err)
	}
	time.Sleep(2 * time.Second)
	return p.measure(ctx, side, ns, r)
}

// copierReady is what a split copier prints once it watches the origin.
const copierReady = "watching"

// copierFlags run the probe as one copier of the split floor.
type copierFlags struct {
	to, from, kubeconfig, namespace string
	asMember                        bool
}

// run copies its namespace from the origin to one peer until SIGTERM.
func (f copierFlags) run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	client := func(context string, impersonate rest.ImpersonationConfig) (kubernetes.Interface, error) {
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			&clientcmd.ClientConfigLoadingRules{ExplicitPath: f.kubeconfig},
			&clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
		if err != nil {
			return nil, err
		}
		cfg.QPS, cfg.Burst = 5000, 10000
		cfg.Impersonate = impersonate
		return kubernetes.NewForConfig(cfg)
	}
	origin, err := client(f.from, rest.ImpersonationConfig{})
	if err != nil {
		return err
	}
	var as rest.ImpersonationConfig
	if f.asMember {
		as = rest.ImpersonationConfig{UserName: v1alpha1.MemberUser(v1alpha1.DefaultNamespace, f.from), Groups: []string{v1alpha1.MembersGroup}}
	}
	peer, err := client(f.to, as)
	if err != nil {
		return err
	}
	if err := startCopier(ctx, origin, []kubernetes.Interface{peer}, f.namespace); err != nil {
		return err
	}
	fmt.Println(copierReady)
	<-ctx.Done()
	return nil
}

// writeCost times the write request alone, on the first peer with every controller
// ended: --samples creates of each kind, interleaved, and their p50 (ms). The kinds
// take the registry's write apart from the floor's: the floor's object as the admin
// (what the floor writes), a copy the registry wrote as the admin (its labels and
// annotations), and that copy as the registry writes it, impersonating the origin
// member's identity (v1alpha1.MemberUser, in v1alpha1.MembersGroup) so that the peer's
// RBAC authorizes it.
func (p *probe) writeCost(ctx context.Context) (map[string]float64, error) {
	peer := p.names[1]
	step("the write request on %s: %d creates of each kind, interleaved", peer, p.o.samples)
	copied, err := p.cs[peer].CoreV1().ConfigMaps(nsRegistry).Get(ctx, "warm-0", metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("the registry's copy to write again: %w", err)
	}
	shaped := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: nsWrite, Labels: copied.Labels, Annotations: copied.Annotations}, Data: copied.Data}
	}
	cfg := rest.CopyConfig(p.cfgs[peer])
	cfg.Impersonate = rest.ImpersonationConfig{UserName: v1alpha1.MemberUser(v1alpha1.DefaultNamespace, p.names[0]), Groups: []string{v1alpha1.MembersGroup}}
	member, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	kinds := []struct {
		name string
		cs   kubernetes.Interface
		obj  func(string) *corev1.ConfigMap
	}{
		{"floor's object, admin", p.cs[peer], func(n string) *corev1.ConfigMap { return syncedCM(nsWrite, n) }},
		{"registry's copy, admin", p.cs[peer], shaped},
		{"registry's copy, as the member", member, shaped},
	}
	times := make([][]time.Duration, len(kinds))
	for i := range p.o.samples {
		for k, kind := range kinds {
			t0 := time.Now()
			if _, err := kind.cs.CoreV1().ConfigMaps(nsWrite).Create(ctx, kind.obj(fmt.Sprintf("w%d-%d", k, i)), metav1.CreateOptions{FieldManager: "probe"}); err != nil {
				return nil, fmt.Errorf("%s: %w", kind.name, err)
			}
			times[k] = append(times[k], time.Since(t0))
		}
	}
	out := map[string]float64{}
	for k, kind := range kinds {
		out[kind.name] = ms(percentile(times[k], 50))
	}
	return out, nil
}
