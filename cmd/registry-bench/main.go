// Command registry-bench is `make bench`: it starts three real API servers on loopback
// (reconciler/testbed), runs `kubectl-registry serve` for each as a separate process, forms
// the group with the plugin (install, join), syncs the ConfigMaps of namespace "bench" from
// alpha with a ResourceSyncRule, and measures propagation latency (create, update, delete),
// a burst of creates, write amplification (the controllers' kubectl_registry_sync_writes_total),
// idle writes and the controllers' peak RSS. In the same run a trivial copier in this process
// (the floor) copies namespace "bench-floor" from alpha to beta and gamma, measured the same
// way, and every latency and burst figure is also printed as a ratio to it. It prints a table
// and writes bench-results.json. It never fails on timing.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
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
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

const (
	nsRegistry = "bench"
	nsFloor    = "bench-floor"
	ruleName   = "bench-configmaps"
)

var names = []string{"alpha", "beta", "gamma"}

type options struct {
	bin          string
	samples      int
	burst        int
	workers      int
	floorWorkers int
	idle         time.Duration
	timeout      time.Duration
	out          string
	quick        bool
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
}

func run() error {
	var o options
	flag.StringVar(&o.bin, "bin", "bin/kubectl-registry", "the kubectl-registry binary (make build)")
	flag.IntVar(&o.samples, "samples", 200, "latency samples per operation (create, update, delete)")
	flag.IntVar(&o.burst, "burst", 1000, "ConfigMaps created at once on the origin")
	flag.IntVar(&o.workers, "workers", 16, "parallel creates for the burst")
	flag.IntVar(&o.floorWorkers, "floor-workers", 1, "writers per peer in the floor copier")
	flag.DurationVar(&o.idle, "idle", time.Minute, "steady-state window for idle writes")
	flag.DurationVar(&o.timeout, "timeout", 3*time.Minute, "how long each setup step or wait may take")
	flag.StringVar(&o.out, "out", "bench-results.json", "where to write the results")
	flag.BoolVar(&o.quick, "quick", false, "small sizes (samples 50, burst 200, idle 15s) unless set explicitly")
	flag.Parse()
	if o.quick {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["samples"] {
			o.samples = 50
		}
		if !set["burst"] {
			o.burst = 200
		}
		if !set["idle"] {
			o.idle = 15 * time.Second
		}
	}

	assets, ok := testbed.Assets()
	if !ok {
		return errors.New("the test API server binaries are missing: run make testbin (make bench does)")
	}
	binPath, err := filepath.Abs(o.bin)
	if err != nil {
		return err
	}
	if _, err := os.Stat(binPath); err != nil {
		return fmt.Errorf("%s: %w (run make build)", o.bin, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	started := time.Now()
	step("starting three API servers on loopback (%s)", strings.Join(names, ", "))
	startCtx, cancel := context.WithTimeout(ctx, o.timeout)
	bed, err := testbed.Start(startCtx, testbed.Options{Names: names})
	cancel()
	if err != nil {
		return fmt.Errorf("starting the clusters: %w", err)
	}
	defer func() {
		step("stopping the clusters")
		_ = bed.Stop()
	}()
	b := &bench{o: o, bin: binPath, kubectl: filepath.Join(assets, "kubectl"), kubeconfig: bed.KubeconfigPath, logs: bed.Dir, cs: map[string]kubernetes.Interface{}}
	for _, n := range names {
		cfg := rest.CopyConfig(bed.Cluster(n).Config)
		cfg.QPS, cfg.Burst = 5000, 10000
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return err
		}
		b.cs[n] = cs
	}
	defer b.stopControllers()
	if err := b.setup(ctx); err != nil {
		return err
	}
	// Trackers and the floor copier stop before the clusters do.
	mctx, mcancel := context.WithCancel(ctx)
	defer mcancel()
	res, err := b.measure(mctx)
	if err != nil {
		return err
	}
	res.SetupSeconds = b.setupTime.Seconds()
	res.TotalSeconds = time.Since(started).Seconds()
	table := res.table()
	fmt.Println()
	fmt.Print(table)
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(o.out, append(data, '\n'), 0o644); err != nil {
		return err
	}
	step("wrote %s", o.out)
	return nil
}

type controller struct {
	name    string
	cmd     *exec.Cmd
	metrics string // http://127.0.0.1:PORT/metrics
}

type bench struct {
	o                              options
	bin, kubectl, kubeconfig, logs string
	cs                             map[string]kubernetes.Interface
	ctrls                          []*controller
	setupTime                      time.Duration
}

func step(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "==> %s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func (b *bench) setup(ctx context.Context) error {
	t0 := time.Now()
	for _, n := range names {
		step("kubectl registry install --context %s --cluster-name %s", n, n)
		if err := b.plugin(ctx, "install", "--context", n, "--cluster-name", n); err != nil {
			return err
		}
	}
	for _, n := range names {
		port, err := freePort()
		if err != nil {
			return err
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		log, err := os.Create(filepath.Join(b.logs, "serve-"+n+".log"))
		if err != nil {
			return err
		}
		step("kubectl registry serve --context %s --metrics-bind-address %s (log: %s)", n, addr, log.Name())
		cmd := exec.Command(b.bin, "serve", "--kubeconfig", b.kubeconfig, "--context", n, "--cluster-name", n,
			"--metrics-bind-address", addr, "--health-probe-bind-address", "0", "--peer-health-interval", "1s")
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("starting serve for %s: %w", n, err)
		}
		b.ctrls = append(b.ctrls, &controller{name: n, cmd: cmd, metrics: "http://" + addr + "/metrics"})
	}
	for _, n := range names {
		step("waiting for the controller of %s to report its Cluster Ready", n)
		if err := b.waitKubectl(ctx, "Ready", "--context", n, "get", "cluster", n, "-o", "jsonpath={.status.state}"); err != nil {
			return err
		}
	}
	for _, peer := range names[1:] {
		step("kubectl registry join --context %s --peer-context %s", names[0], peer)
		if err := b.plugin(ctx, "join", "--context", names[0], "--peer-context", peer, "--allow-loopback", "--wait", "--timeout", b.o.timeout.String()); err != nil {
			return err
		}
	}
	step("granting peers ConfigMap read and creating namespaces %s, %s on every cluster", nsRegistry, nsFloor)
	for _, n := range names {
		cr := &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "registry-reader-configmaps", Labels: map[string]string{"cluster-registry.k8s.cisco.com/reader-aggregated": "true"}},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}},
		}
		if _, err := b.cs[n].RbacV1().ClusterRoles().Create(ctx, cr, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%s: %w", n, err)
		}
		for _, ns := range []string{nsRegistry, nsFloor} {
			if _, err := b.cs[n].CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("%s: %w", n, err)
			}
		}
	}
	rule := fmt.Sprintf(`apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata:
  name: %s
spec:
  groupVersionKind:
    kind: ConfigMap
    version: v1
  rules:
  - match:
    - namespaces: [%s]
`, ruleName, nsRegistry)
	step("applying ResourceSyncRule %s (ConfigMaps in %s) on %s", ruleName, nsRegistry, names[0])
	cmd := exec.CommandContext(ctx, b.kubectl, "--kubeconfig", b.kubeconfig, "--context", names[0], "apply", "-f", "-")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(rule), os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("applying the rule: %w", err)
	}
	for _, n := range names[1:] {
		step("waiting for the rule to travel to %s", n)
		if err := b.waitKubectl(ctx, ruleName, "--context", n, "get", "rsr", ruleName, "-o", "jsonpath={.metadata.name}"); err != nil {
			return err
		}
	}
	b.setupTime = time.Since(t0)
	return nil
}

func (b *bench) stopControllers() {
	for _, c := range b.ctrls {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, c := range b.ctrls {
		_, _ = c.cmd.Process.Wait()
	}
}

func (b *bench) plugin(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, b.bin, append(args, "--kubeconfig", b.kubeconfig)...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kubectl registry %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// waitKubectl polls kubectl until it prints want.
func (b *bench) waitKubectl(ctx context.Context, want string, args ...string) error {
	deadline := time.Now().Add(b.o.timeout)
	for {
		out, _ := exec.CommandContext(ctx, b.kubectl, append([]string{"--kubeconfig", b.kubeconfig}, args...)...).Output()
		if strings.TrimSpace(string(out)) == want {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("kubectl %s: not %q within %s (controller logs in %s)", strings.Join(args, " "), want, b.o.timeout, b.logs)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// syncWrites scrapes kubectl_registry_sync_writes_total from a controller, summed by op.
func syncWrites(ctx context.Context, url string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	out := map[string]float64{}
	for line := range strings.SplitSeq(string(body), "\n") {
		if !strings.HasPrefix(line, "kubectl_registry_sync_writes_total{") {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		labels, val := line[len("kubectl_registry_sync_writes_total{"):end], strings.TrimSpace(line[end+1:])
		v, err := strconv.ParseFloat(val, 64)
		if err != nil {
			continue
		}
		op := "?"
		for l := range strings.SplitSeq(labels, ",") {
			if k, q, ok := strings.Cut(l, "="); ok && k == "op" {
				op = strings.Trim(q, `"`)
			}
		}
		out[op] += v
	}
	return out, nil
}

// allWrites scrapes every controller: name -> op -> count.
func (b *bench) allWrites(ctx context.Context) (map[string]map[string]float64, error) {
	out := map[string]map[string]float64{}
	for _, c := range b.ctrls {
		w, err := syncWrites(ctx, c.metrics)
		if err != nil {
			return nil, fmt.Errorf("scraping %s: %w", c.name, err)
		}
		out[c.name] = w
	}
	return out, nil
}

func total(w map[string]map[string]float64) float64 {
	var t float64
	for _, ops := range w {
		for _, v := range ops {
			t += v
		}
	}
	return t
}

func diffWrites(after, before map[string]map[string]float64) map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	for n, ops := range after {
		out[n] = map[string]float64{}
		for op, v := range ops {
			if d := v - before[n][op]; d != 0 {
				out[n][op] = d
			}
		}
	}
	return out
}

// peakRSS reads VmHWM (kB) of a process from /proc.
func peakRSS(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				kb, err := strconv.ParseFloat(f[0], 64)
				return kb / 1024, err
			}
		}
	}
	return 0, errors.New("no VmHWM")
}

// side is one system under measurement: the registry (namespace bench) or the floor
// (namespace bench-floor), with trackers on both peers.
type side struct {
	name      string
	namespace string
	peers     []*tracker
}

func (b *bench) newSide(ctx context.Context, name, namespace string) (*side, error) {
	s := &side{name: name, namespace: namespace}
	for _, n := range names[1:] {
		t, err := startTracker(ctx, b.cs[n], n, namespace)
		if err != nil {
			return nil, err
		}
		s.peers = append(s.peers, t)
	}
	return s, nil
}

// waitPeers returns the time the last peer first showed name with value.
func (s *side) waitPeers(ctx context.Context, timeout time.Duration, name, value string) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last time.Time
	for _, t := range s.peers {
		at, err := t.wait(ctx, name, value)
		if err != nil {
			return time.Time{}, err
		}
		if at.After(last) {
			last = at
		}
	}
	return last, nil
}

func cm(ns, name, v string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{"v": v, "payload": "bench"}}
}

// sample runs op on the origin and returns the time until both peers show value.
func (b *bench) sample(ctx context.Context, s *side, name, value string, op func(context.Context) error) (time.Duration, error) {
	t0 := time.Now()
	if err := op(ctx); err != nil {
		return 0, err
	}
	at, err := s.waitPeers(ctx, 30*time.Second, name, value)
	if err != nil {
		return 0, err
	}
	return at.Sub(t0), nil
}

func (b *bench) measure(ctx context.Context) (*results, error) {
	origin := b.cs[names[0]]
	reg, err := b.newSide(ctx, "registry", nsRegistry)
	if err != nil {
		return nil, err
	}
	floor, err := b.newSide(ctx, "floor", nsFloor)
	if err != nil {
		return nil, err
	}
	cp, err := startCopier(ctx, origin, []kubernetes.Interface{b.cs[names[1]], b.cs[names[2]]}, nsFloor, b.o.floorWorkers)
	if err != nil {
		return nil, err
	}
	sides := []*side{reg, floor}

	step("warm-up: one ConfigMap through each side (RBAC aggregation, peer watches)")
	for _, s := range sides {
		if _, err := origin.CoreV1().ConfigMaps(s.namespace).Create(ctx, cm(s.namespace, "warmup", "w"), metav1.CreateOptions{}); err != nil {
			return nil, err
		}
		if _, err := s.waitPeers(ctx, b.o.timeout, "warmup", "w"); err != nil {
			return nil, fmt.Errorf("%s: %w (controller logs in %s)", s.name, err, b.logs)
		}
	}

	res := newResults(b.o)
	step("latency: %d samples of create, update, delete on %s, alternating registry and floor", b.o.samples, names[0])
	lat := map[string]map[string][]time.Duration{}
	for _, s := range sides {
		lat[s.name] = map[string][]time.Duration{}
	}
	failures := map[string]int{}
	for i := range b.o.samples {
		name := fmt.Sprintf("lat-%d", i)
		for _, phase := range []string{"create", "update", "delete"} {
			for _, s := range sides {
				cms := origin.CoreV1().ConfigMaps(s.namespace)
				var value string
				var op func(context.Context) error
				switch phase {
				case "create":
					value = fmt.Sprintf("c%d", i)
					op = func(ctx context.Context) error {
						_, err := cms.Create(ctx, cm(s.namespace, name, value), metav1.CreateOptions{})
						return err
					}
				case "update":
					value = fmt.Sprintf("u%d", i)
					op = func(ctx context.Context) error {
						_, err := cms.Update(ctx, cm(s.namespace, name, value), metav1.UpdateOptions{})
						return err
					}
				case "delete":
					value = deletedMark
					op = func(ctx context.Context) error { return cms.Delete(ctx, name, metav1.DeleteOptions{}) }
				}
				d, err := b.sample(ctx, s, name, value, op)
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				if err != nil {
					failures[s.name+" "+phase]++
					fmt.Fprintf(os.Stderr, "  %s %s: %v\n", s.name, phase, err)
					if failures[s.name+" "+phase] > 5 {
						return nil, fmt.Errorf("too many failed samples: %w", err)
					}
					continue
				}
				lat[s.name][phase] = append(lat[s.name][phase], d)
			}
		}
		if (i+1)%50 == 0 {
			step("  %d/%d", i+1, b.o.samples)
		}
	}
	for _, phase := range []string{"create", "update", "delete"} {
		res.addLatency(phase, lat["registry"][phase], lat["floor"][phase])
	}
	res.Failures = failures

	// Burst: registry first (with metrics around it), then the floor.
	settle := func() { time.Sleep(2 * time.Second) }
	settle()
	before, err := b.allWrites(ctx)
	if err != nil {
		return nil, err
	}
	burstDur := map[string]time.Duration{}
	for _, s := range sides {
		step("burst: %d ConfigMaps created at once on %s (%s, %d workers)", b.o.burst, names[0], s.name, b.o.workers)
		d, err := b.burst(ctx, s)
		if err != nil {
			return nil, fmt.Errorf("%s burst: %w (controller logs in %s)", s.name, err, b.logs)
		}
		burstDur[s.name] = d
		step("  %s: %.2fs", s.name, d.Seconds())
		if s == reg {
			settle()
			after, err := b.allWrites(ctx)
			if err != nil {
				return nil, err
			}
			res.BurstWrites = diffWrites(after, before)
		}
	}
	res.addBurst(b.o.burst, burstDur["registry"], burstDur["floor"])

	for _, c := range b.ctrls {
		mib, err := peakRSS(c.cmd.Process.Pid)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		res.PeakRSSMiB[c.name] = mib
	}
	res.SyncedObjects = b.o.burst + 1

	step("idle: sampling sync writes for %s with nothing changing", b.o.idle)
	settle()
	before, err = b.allWrites(ctx)
	if err != nil {
		return nil, err
	}
	select {
	case <-time.After(b.o.idle):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	after, err := b.allWrites(ctx)
	if err != nil {
		return nil, err
	}
	res.IdleWrites = diffWrites(after, before)
	res.IdleWritesPerMin = (total(after) - total(before)) / b.o.idle.Minutes()
	res.FloorCopierErrors = cp.errors.Load()
	res.finish()
	return res, nil
}

// burst creates o.burst ConfigMaps on the origin with o.workers goroutines and returns the
// time from the first create until the last one is on both peers.
func (b *bench) burst(ctx context.Context, s *side) (time.Duration, error) {
	cms := b.cs[names[0]].CoreV1().ConfigMaps(s.namespace)
	objs := make([]string, b.o.burst)
	for i := range objs {
		objs[i] = fmt.Sprintf("burst-%d", i)
	}
	work := make(chan string)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	t0 := time.Now()
	for range b.o.workers {
		wg.Go(func() {
			for n := range work {
				if _, err := cms.Create(ctx, cm(s.namespace, n, "b"), metav1.CreateOptions{}); err != nil {
					mu.Lock()
					firstErr = firstNonNil(firstErr, err)
					mu.Unlock()
				}
			}
		})
	}
	for _, n := range objs {
		work <- n
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	wctx, cancel := context.WithTimeout(ctx, b.o.timeout)
	defer cancel()
	var last time.Time
	for _, t := range s.peers {
		at, err := t.waitAll(wctx, objs)
		if err != nil {
			return 0, err
		}
		if at.After(last) {
			last = at
		}
	}
	return last.Sub(t0), nil
}

func firstNonNil(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// percentile returns the q-th percentile (nearest rank) of sorted durations.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

type stats struct {
	N     int     `json:"n"`
	P50ms float64 `json:"p50_ms"`
	P90ms float64 `json:"p90_ms"`
	P99ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
}

func newStats(ds []time.Duration) stats {
	s := slices.Clone(ds)
	slices.Sort(s)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	st := stats{N: len(s), P50ms: ms(percentile(s, .5)), P90ms: ms(percentile(s, .9)), P99ms: ms(percentile(s, .99))}
	if len(s) > 0 {
		st.MaxMs = ms(s[len(s)-1])
	}
	return st
}

type row struct {
	Metric   string  `json:"metric"`
	Registry float64 `json:"registry"`
	Floor    float64 `json:"floor,omitempty"`
	Ratio    float64 `json:"ratio,omitempty"`
	Unit     string  `json:"unit"`
	Target   string  `json:"target,omitempty"`
	Met      *bool   `json:"met,omitempty"`
}

type results struct {
	Date    string `json:"date"`
	Machine struct {
		NProc    int    `json:"nproc"`
		GOOS     string `json:"goos"`
		GOARCH   string `json:"goarch"`
		Hostname string `json:"hostname"`
	} `json:"machine"`
	Command      string             `json:"command"`
	Args         []string           `json:"args"`
	Clusters     []string           `json:"clusters"`
	Samples      int                `json:"samples"`
	Burst        int                `json:"burst"`
	BurstWorkers int                `json:"burst_workers"`
	FloorWorkers int                `json:"floor_workers"`
	IdleSeconds  float64            `json:"idle_seconds"`
	Latency      map[string]any     `json:"latency"`
	BurstSeconds map[string]float64 `json:"burst_seconds"`
	// BurstWrites are the sync writes (by controller and op) during the registry burst.
	BurstWrites            map[string]map[string]float64 `json:"burst_writes"`
	WritesPerObjectPerPeer float64                       `json:"writes_per_object_per_peer"`
	IdleWrites             map[string]map[string]float64 `json:"idle_writes"`
	IdleWritesPerMin       float64                       `json:"idle_writes_per_min"`
	PeakRSSMiB             map[string]float64            `json:"peak_rss_mib"`
	SyncedObjects          int                           `json:"synced_objects_at_rss"`
	Failures               map[string]int                `json:"failed_samples"`
	FloorCopierErrors      int64                         `json:"floor_copier_errors"`
	SetupSeconds           float64                       `json:"setup_seconds"`
	TotalSeconds           float64                       `json:"total_seconds"`
	NotMeasured            []string                      `json:"not_measured"`
	Rows                   []row                         `json:"rows"`
}

func newResults(o options) *results {
	r := &results{
		Date: time.Now().UTC().Format(time.RFC3339), Clusters: names,
		Samples: o.samples, Burst: o.burst, BurstWorkers: o.workers, FloorWorkers: o.floorWorkers, IdleSeconds: o.idle.Seconds(),
		Latency: map[string]any{}, BurstSeconds: map[string]float64{}, PeakRSSMiB: map[string]float64{},
		NotMeasured: []string{
			"memory at 10,000 synced objects (RSS is measured after the burst, see synced_objects_at_rss)",
			"scale: groups of 2, 5 and 8 clusters",
			"CLI: sync-diff over 1,000 objects, get across 8 clusters",
		},
	}
	r.Machine.NProc = runtime.NumCPU()
	r.Machine.GOOS, r.Machine.GOARCH = runtime.GOOS, runtime.GOARCH
	r.Machine.Hostname, _ = os.Hostname()
	r.Args = os.Args[1:]
	var flags []string
	for _, a := range os.Args[1:] {
		if strings.HasPrefix(a, "--bin") || strings.HasPrefix(a, "-bin") {
			continue
		}
		flags = append(flags, a)
	}
	// --bin's value is a separate argument when given as "--bin X".
	flags = slices.DeleteFunc(flags, func(a string) bool { return strings.HasSuffix(a, "/kubectl-registry") })
	r.Command = "make bench"
	if len(flags) > 0 {
		r.Command += fmt.Sprintf(" BENCH_FLAGS='%s'", strings.Join(flags, " "))
	}
	return r
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func (r *results) addLatency(phase string, reg, floor []time.Duration) {
	rs, fs := newStats(reg), newStats(floor)
	r.Latency[phase] = map[string]stats{"registry": rs, "floor": fs}
	targets := map[string][2]string{"create": {"<= 1.25x floor", "<= 1.5x floor"}}
	add := func(q string, a, b float64, target string, limit float64) {
		rw := row{Metric: fmt.Sprintf("%s latency %s", phase, q), Registry: a, Floor: b, Ratio: ratio(a, b), Unit: "ms", Target: target}
		if limit > 0 {
			met := rw.Ratio <= limit
			rw.Met = &met
		}
		r.Rows = append(r.Rows, rw)
	}
	t := targets[phase]
	lim := func(s string) float64 {
		if s == "" {
			return 0
		}
		f, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimPrefix(s, "<= "), "x floor"), 64)
		return f
	}
	add("p50", rs.P50ms, fs.P50ms, t[0], lim(t[0]))
	add("p90", rs.P90ms, fs.P90ms, "", 0)
	add("p99", rs.P99ms, fs.P99ms, t[1], lim(t[1]))
	add("max", rs.MaxMs, fs.MaxMs, "", 0)
}

func (r *results) addBurst(n int, reg, floor time.Duration) {
	r.BurstSeconds["registry"], r.BurstSeconds["floor"] = reg.Seconds(), floor.Seconds()
	rw := row{Metric: fmt.Sprintf("burst %d to 2 peers", n), Registry: reg.Seconds(), Floor: floor.Seconds(), Ratio: ratio(reg.Seconds(), floor.Seconds()), Unit: "s", Target: "<= 1.5x floor"}
	met := rw.Ratio <= 1.5
	rw.Met = &met
	r.Rows = append(r.Rows, rw)
	ops := func(d time.Duration) float64 { return ratio(float64(n), d.Seconds()) }
	r.Rows = append(r.Rows, row{Metric: "burst throughput", Registry: ops(reg), Floor: ops(floor), Ratio: ratio(ops(reg), ops(floor)), Unit: "obj/s"})
}

func (r *results) finish() {
	var w float64
	byOp := map[string]float64{}
	for _, ops := range r.BurstWrites {
		for op, v := range ops {
			w += v
			byOp[op] += v
		}
	}
	peers := float64(len(r.Clusters) - 1)
	r.WritesPerObjectPerPeer = ratio(w, float64(r.Burst)*peers)
	met := r.WritesPerObjectPerPeer == 1
	var parts []string
	for _, op := range slices.Sorted(func(yield func(string) bool) {
		for op := range byOp {
			if !yield(op) {
				return
			}
		}
	}) {
		parts = append(parts, fmt.Sprintf("%s %.0f", op, byOp[op]))
	}
	r.Rows = append(r.Rows, row{Metric: "writes/object/peer (burst: " + strings.Join(parts, ", ") + ")", Registry: r.WritesPerObjectPerPeer, Unit: "", Target: "= 1", Met: &met})
	idle := r.IdleWritesPerMin == 0
	r.Rows = append(r.Rows, row{Metric: "idle writes", Registry: r.IdleWritesPerMin, Unit: "/min", Target: "= 0", Met: &idle})
	for _, n := range r.Clusters {
		// The target is at 10,000 synced objects, which this version does not reach: no verdict.
		r.Rows = append(r.Rows, row{Metric: fmt.Sprintf("peak RSS %s (%d synced objects)", n, r.SyncedObjects), Registry: r.PeakRSSMiB[n], Unit: "MiB", Target: "<= 100 at 10,000"})
	}
}

func (r *results) table() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "kubectl-registry bench — %s, %d CPUs, %s\n", r.Date, r.Machine.NProc, r.Command)
	fmt.Fprintf(&sb, "samples %d, burst %d (%d workers), idle %.0fs, floor: trivial copier (%d writer/peer)\n\n", r.Samples, r.Burst, r.BurstWorkers, r.IdleSeconds, r.FloorWorkers)
	fmt.Fprintf(&sb, "| %-44s | %10s | %10s | %6s | %-22s |\n", "metric", "registry", "floor", "ratio", "target")
	fmt.Fprintf(&sb, "|%s|%s|%s|%s|%s|\n", strings.Repeat("-", 46), strings.Repeat("-", 12), strings.Repeat("-", 12), strings.Repeat("-", 8), strings.Repeat("-", 24))
	num := func(v float64, unit string) string {
		switch {
		case unit == "":
			return strconv.FormatFloat(v, 'f', 2, 64)
		case v >= 100:
			return fmt.Sprintf("%.0f %s", v, unit)
		default:
			return fmt.Sprintf("%.1f %s", v, unit)
		}
	}
	for _, rw := range r.Rows {
		floor, rat := "", ""
		if rw.Floor != 0 {
			floor, rat = num(rw.Floor, rw.Unit), fmt.Sprintf("%.2fx", rw.Ratio)
		}
		target := rw.Target
		if rw.Met != nil {
			if *rw.Met {
				target += " ok"
			} else {
				target += " MISS"
			}
		}
		fmt.Fprintf(&sb, "| %-44s | %10s | %10s | %6s | %-22s |\n", rw.Metric, num(rw.Registry, rw.Unit), floor, rat, target)
	}
	if len(r.Failures) > 0 {
		fmt.Fprintf(&sb, "\nfailed samples (not propagated within 30s): %v\n", r.Failures)
	}
	fmt.Fprintf(&sb, "\nnot measured yet: %s\n", strings.Join(r.NotMeasured, "; "))
	return sb.String()
}
