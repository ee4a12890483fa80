// Command registry-bench is `make bench`. It starts three real API servers on loopback
// (reconciler/testbed), runs `kubectl-registry serve` for each as a separate process, forms
// the group with the plugin (install, join), syncs the ConfigMaps of namespace "bench" from
// the first cluster (alpha) with a ResourceSyncRule, and measures:
//
//   - propagation latency (create, update, delete) to both peers, with one clock;
//   - a burst of creates, and write amplification during it (the controllers'
//     kubectl_registry_sync_writes_total);
//   - the CLI: `sync-diff` over the burst's objects in the three clusters;
//   - memory: each controller's peak RSS once --memory-objects ConfigMaps are synced;
//   - idle writes per minute with all of that in place;
//   - scale: for each size of --scale a fresh group (without kube-controller-manager) and
//     create latency and RSS per controller; `get configmaps -A` across the largest group.
//
// In the same clusters a trivial copier in this process (the floor) copies a namespace from
// the origin to the peers, measured the same way: first alone, before any registry
// controller starts (namespace "bench-alone"), then beside the running registry
// ("bench-floor"). Every latency and burst figure is printed as a ratio to the floor alone,
// and to the floor beside the registry. What the work costs the clusters (cost.go) — the
// API servers' and controllers' CPU, read from /proc, and the watch events the API servers
// sent — is reported per 1,000 synced objects and per 1,000 changes of ConfigMaps no rule
// selects, with the controllers stopped and running, in every group. The bench prints a
// table and writes bench-results.json. It never fails on timing.
//
// With --profile DIR the main group's controllers run with CPU and heap profiling of the
// registry burst (see profile.go).
//
// With --mode peers (make bench-scale) it measures instead one real member among
// 10, 25, 50 and 100 simulated peers (--peers; see peers.go): the member's memory,
// goroutines, sockets, connections and watches, its CPU idle per peer and per 1,000
// synced objects, and its convergence after a restart; it writes the --out file in the
// same style.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

const (
	nsRegistry = "bench"
	nsFloor    = "bench-floor"
	// nsAlone is the floor's namespace while the registry's controllers are stopped.
	nsAlone  = "bench-alone"
	ruleName = "bench-configmaps"
)

// mainNames are the clusters of the main group; the first is the origin.
var mainNames = []string{"alpha", "beta", "gamma"}

type options struct {
	bin           string
	samples       int
	burst         int
	workers       int
	floorWorkers  int
	memoryObjects int
	scale         []int
	scaleSamples  int
	scaleBurst    int
	churn         int
	cliRuns       int
	idle          time.Duration
	timeout       time.Duration
	out           string
	profile       string
	controllerEnv []string
	quick         bool
	// mode is "groups" (the bench of real groups) or "peers" (peers.go).
	mode  string
	peers peerOptions
}

func main() {
	if os.Getenv(envRunPlugin) == "1" {
		os.Exit(runPlugin())
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
}

func parseSizes(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 2 {
			return nil, fmt.Errorf("--scale: %q is not a group size of at least 2", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// parsePeerSizes parses --peers: numbers of simulated peers, at least 1 each.
func parsePeerSizes(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--peers: %q is not a number of peers of at least 1", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("--peers: no size")
	}
	return out, nil
}

func run() error {
	o, err := parseOptions()
	if err != nil {
		return err
	}
	b, err := newBench(o)
	if err != nil {
		return err
	}
	// envtest logs through controller-runtime's logger; the bench prints its own steps.
	ctrllog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	started := time.Now()
	res := newResults(b.o)
	if out, err := exec.CommandContext(ctx, b.bin, "version").Output(); err == nil {
		res.Binary = strings.TrimSpace(string(out))
	}
	if o.mode == "peers" {
		return b.runPeersMode(ctx, res.Binary)
	}
	return b.runGroups(ctx, res, started)
}

// parseOptions parses the command line: the flags, --quick's smaller defaults for the
// flags not set, and the checks of the sizes.
func parseOptions() (options, error) {
	var o options
	var scale, peerSizes string
	flag.StringVar(&o.bin, "bin", "bin/kubectl-registry", "the kubectl-registry binary (make build)")
	flag.IntVar(&o.samples, "samples", 200, "latency samples per operation (create, update, delete)")
	flag.IntVar(&o.burst, "burst", 1000, "ConfigMaps created at once on the origin (also the objects sync-diff diffs)")
	flag.IntVar(&o.workers, "workers", 16, "parallel creates for the burst and the memory fill")
	flag.IntVar(&o.floorWorkers, "floor-workers", 1, "writers per peer in the floor copier")
	flag.IntVar(&o.memoryObjects, "memory-objects", 10000, "synced ConfigMaps in the group when the controllers' RSS is read, the burst's included (0: skip)")
	flag.StringVar(&scale, "scale", "2,3,5,8", "group sizes for the scale runs, comma separated (empty: skip)")
	flag.IntVar(&o.scaleSamples, "scale-samples", 100, "create latency samples per scale run")
	flag.IntVar(&o.scaleBurst, "scale-burst", 200, "ConfigMaps created at once in each scale run, for the cost per synced object")
	flag.IntVar(&o.churn, "churn", 1000, "ConfigMaps no rule selects, created, updated and deleted for the cost of unselected changes (the scale runs use --scale-burst)")
	flag.IntVar(&o.cliRuns, "cli-runs", 3, "timed runs of each CLI command (the median is reported)")
	flag.DurationVar(&o.idle, "idle", time.Minute, "steady-state window for idle writes")
	flag.DurationVar(&o.timeout, "timeout", 3*time.Minute, "how long each setup step or wait may take")
	flag.StringVar(&o.out, "out", "bench-results.json", "where to write the results")
	flag.StringVar(&o.profile, "profile", "", "directory for CPU and heap profiles of the main group's controllers during the registry burst (--mode peers: CPU, heap and goroutine profiles of the member over its first sync, the burst, the restart and the idle window)")
	flag.Func("controller-env", "KEY=VALUE added to the controllers' environment only, e.g. GOMEMLIMIT=90MiB (repeatable)", func(s string) error {
		if k, _, ok := strings.Cut(s, "="); !ok || k == "" {
			return fmt.Errorf("%q is not KEY=VALUE", s)
		}
		o.controllerEnv = append(o.controllerEnv, s)
		return nil
	})
	flag.StringVar(&o.mode, "mode", "groups", "groups: the bench of real groups (the main group, --scale); peers: one real member among --peers simulated peers (make bench-scale)")
	flag.StringVar(&peerSizes, "peers", "10,25,50,100", "--mode peers: the numbers of simulated peers, comma separated")
	flag.IntVar(&o.peers.objects, "peer-objects", 10000, "--mode peers: ConfigMaps the peers serve (spread over them) and the member copies")
	flag.IntVar(&o.peers.burst, "peer-burst", 1000, "--mode peers: ConfigMaps created at once on the peers, for the CPU per 1,000 synced")
	flag.DurationVar(&o.peers.idle, "peer-idle", time.Minute, "--mode peers: the idle window of the CPU per idle peer")
	flag.DurationVar(&o.peers.quiet, "peer-quiet", 5*time.Second, "--mode peers: how long the member must write nothing, its queue empty, before the next step")
	flag.DurationVar(&o.peers.heartbeat, "peer-heartbeat", 5*time.Minute, "--mode peers: every peer refreshes the heartbeat of each of its Clusters once per this period, as members' controllers do (0: never)")
	flag.BoolVar(&o.peers.legacy, "legacy-peers", false, "--mode peers: the member knows its peers as legacy peers (reads them with their shared reader Secret, takes no membership from them) instead of reading them with the credentials they sealed to it")
	flag.BoolVar(&o.peers.keepLogs, "keep-logs", false, "--mode peers: keep the member's logs of every size (they are kept anyway for a size that fails)")
	flag.BoolVar(&o.peers.noWatchList, "no-watch-list", false, "--mode peers: the simulated peers refuse watch-lists (the member lists, then watches)")
	flag.BoolVar(&o.quick, "quick", false, "small sizes (samples 50, burst 200, churn 200, memory-objects 2000, scale 2,3, scale-samples 30, scale-burst 50, idle 15s) unless set explicitly")
	flag.Parse()
	if o.quick {
		quickDefaults(&o, &scale, &peerSizes)
	}
	return o, o.check(scale, peerSizes)
}

// quickDefaults sets, for --quick, the small sizes of every flag not set explicitly
// (scale and peerSizes are the values of --scale and --peers).
func quickDefaults(o *options, scale, peerSizes *string) {
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	defaults := map[string]func(){
		"samples":        func() { o.samples = 50 },
		"burst":          func() { o.burst = 200 },
		"memory-objects": func() { o.memoryObjects = 2000 },
		"scale":          func() { *scale = "2,3" },
		"scale-samples":  func() { o.scaleSamples = 30 },
		"scale-burst":    func() { o.scaleBurst = 50 },
		"churn":          func() { o.churn = 200 },
		"idle":           func() { o.idle = 15 * time.Second },
		"peers":          func() { *peerSizes = "5,10" },
		"peer-objects":   func() { o.peers.objects = 1000 },
		"peer-burst":     func() { o.peers.burst = 200 },
		"peer-idle":      func() { o.peers.idle = 15 * time.Second },
	}
	for name, f := range defaults {
		if !set[name] {
			f()
		}
	}
}

// check parses the sizes of --scale and (--mode peers) --peers into o and checks the
// mode and that the sizes are positive.
func (o *options) check(scale, peerSizes string) error {
	var err error
	if o.scale, err = parseSizes(scale); err != nil {
		return err
	}
	switch o.mode {
	case "groups":
	case "peers":
		if o.peers.sizes, err = parsePeerSizes(peerSizes); err != nil {
			return err
		}
		if o.peers.objects < 1 || o.peers.burst < 1 || o.peers.idle <= 0 {
			return errors.New("--peer-objects, --peer-burst and --peer-idle must be positive")
		}
	default:
		return fmt.Errorf("--mode %q: groups or peers", o.mode)
	}
	if o.samples < 1 || o.burst < 1 || o.workers < 1 || o.floorWorkers < 1 || o.scaleSamples < 1 || o.scaleBurst < 1 || o.churn < 1 || o.cliRuns < 1 {
		return errors.New("--samples, --burst, --workers, --floor-workers, --scale-samples, --scale-burst, --churn and --cli-runs must be positive")
	}
	return nil
}

// newBench checks that the test API server binaries and the kubectl-registry binary are
// there and, with --profile, makes the profiles' directory.
func newBench(o options) (*bench, error) {
	assets, ok := testbed.Assets()
	if !ok {
		return nil, errors.New("the test API server binaries are missing: run make testbin (make bench does)")
	}
	b := &bench{o: o, kubectl: filepath.Join(assets, "kubectl")}
	var err error
	if b.bin, err = filepath.Abs(o.bin); err != nil {
		return nil, err
	}
	if _, err := os.Stat(b.bin); err != nil {
		return nil, fmt.Errorf("%s: %w (run make build)", o.bin, err)
	}
	if o.profile != "" {
		if b.o.profile, err = filepath.Abs(o.profile); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(b.o.profile, 0o755); err != nil {
			return nil, err
		}
		if b.self, err = os.Executable(); err != nil {
			return nil, err
		}
		// A profiled controller is this binary (runPlugin), built from the tree the
		// bench was built from: an A/B of two --bin with --profile measures one build.
		step("--profile: the controllers run as this bench binary (%s), built from its own tree, not --bin %s", b.self, o.bin)
	}
	return b, nil
}

// runPeersMode runs --mode peers: every size of --peers, the results written after each
// (binary is the version of the binary measured), then printed as a table.
func (b *bench) runPeersMode(ctx context.Context, binary string) error {
	o := b.o
	// The results so far are written after every size: a long run that is cut
	// keeps the sizes it finished.
	write := func(pr *peerResults) error {
		pr.Binary = binary
		data, err := json.MarshalIndent(pr, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(o.out, append(data, '\n'), 0o644)
	}
	pr, err := b.runPeers(ctx, o.peers, write)
	if err != nil {
		return err
	}
	fmt.Println()
	fmt.Print(pr.table())
	if err := write(pr); err != nil {
		return err
	}
	step("wrote %s", o.out)
	return nil
}

// runGroups runs --mode groups: the main group, then a group of every size of --scale
// (one that fails is recorded, not fatal), then prints the table and writes the results.
func (b *bench) runGroups(ctx context.Context, res *results, started time.Time) error {
	o := b.o
	if err := b.runMain(ctx, res); err != nil {
		return err
	}
	for _, n := range o.scale {
		sr, err := b.runScale(ctx, n, n == maxInt(o.scale))
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			// One group that cannot start on a loaded machine does not lose the rest.
			step("scale %d failed: %v", n, err)
			sr = &scaleResult{Clusters: n, Error: err.Error()}
		}
		res.addScale(sr)
	}
	res.TotalSeconds = time.Since(started).Seconds()
	res.finish()
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

func maxInt(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

type bench struct {
	o                  options
	bin, kubectl, self string
}

func step(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "==> %s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// series is one series of a Prometheus text exposition.
type series struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape reads a controller's /metrics (HTTPS, with the scraper's token).
func scrape(ctx context.Context, c *controller) ([]series, error) {
	body, err := c.scraper.Get(ctx, c.metrics)
	if err != nil {
		return nil, err
	}
	return parseMetrics(body), nil
}

// parseMetrics parses the series of a Prometheus text exposition (label values without
// commas or escaped quotes, which is all the bench reads).
func parseMetrics(text string) []series {
	var out []series
	for line := range strings.SplitSeq(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s := series{labels: map[string]string{}}
		var val string
		if open := strings.IndexByte(line, '{'); open >= 0 {
			end := strings.LastIndexByte(line, '}')
			if end < open {
				continue
			}
			s.name, val = line[:open], strings.TrimSpace(line[end+1:])
			for l := range strings.SplitSeq(line[open+1:end], ",") {
				if k, q, ok := strings.Cut(l, "="); ok {
					s.labels[k] = strings.Trim(q, `"`)
				}
			}
		} else {
			name, v, ok := strings.Cut(line, " ")
			if !ok {
				continue
			}
			s.name, val = name, strings.TrimSpace(v)
		}
		v, err := strconv.ParseFloat(val, 64)
		if err != nil {
			continue
		}
		s.value = v
		out = append(out, s)
	}
	return out
}

// syncWrites sums kubectl_registry_sync_writes_total by op.
func syncWrites(ss []series) map[string]float64 {
	out := map[string]float64{}
	for _, s := range ss {
		if s.name == "kubectl_registry_sync_writes_total" {
			out[s.labels["op"]] += s.value
		}
	}
	return out
}

// queueCounters are the sync engine's work queue counters: how often objects are queued
// and reconciled, and the time they wait and take.
func queueCounters(ss []series) map[string]float64 {
	out := map[string]float64{}
	for _, s := range ss {
		switch {
		case s.name == "kubectl_registry_sync_errors_total":
			out["sync_errors"] += s.value
		case s.name == "rest_client_requests_total":
			// A controller writes only its own cluster, so every write request is local.
			switch s.labels["method"] {
			case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
				out["write_requests"] += s.value
				if !strings.HasPrefix(s.labels["code"], "2") {
					out["failed_write_requests"] += s.value
				}
			}
		case strings.HasPrefix(s.name, "workqueue_") && s.labels["name"] == "resourcesyncrules":
			switch name := strings.TrimPrefix(s.name, "workqueue_"); name {
			case "adds_total", "retries_total", "work_duration_seconds_sum", "work_duration_seconds_count", "queue_duration_seconds_sum", "queue_duration_seconds_count":
				out[name] += s.value
			}
		}
	}
	return out
}

// stageQuantile returns the q-quantile, in ms, of each stage of the sync engine's writes
// (kubectl_registry_sync_stage_seconds) between two scrapes of every controller, from
// the buckets of all controllers together, interpolated linearly within a bucket as
// Prometheus's histogram_quantile does.
func stageQuantile(before, after map[string][]series, q float64) map[string]float64 {
	buckets := func(m map[string][]series) map[string]map[float64]float64 {
		out := map[string]map[float64]float64{}
		for _, ss := range m {
			for _, s := range ss {
				if s.name != "kubectl_registry_sync_stage_seconds_bucket" {
					continue
				}
				le, err := strconv.ParseFloat(s.labels["le"], 64) // "+Inf" parses: the count
				if err != nil {
					continue
				}
				if out[s.labels["stage"]] == nil {
					out[s.labels["stage"]] = map[float64]float64{}
				}
				out[s.labels["stage"]][le] += s.value
			}
		}
		return out
	}
	b, a := buckets(before), buckets(after)
	out := map[string]float64{}
	for stage, cum := range a {
		les := make([]float64, 0, len(cum))
		for le := range cum {
			les = append(les, le)
		}
		slices.Sort(les)
		counts := make([]float64, len(les))
		for i, le := range les {
			counts[i] = cum[le] - b[stage][le]
		}
		if len(counts) == 0 || counts[len(counts)-1] <= 0 {
			continue
		}
		rank := q * counts[len(counts)-1]
		lower, prev := 0.0, 0.0
		for i, le := range les {
			if counts[i] >= rank {
				if math.IsInf(le, 1) {
					out[stage] = 1000 * lower // beyond the last bucket: its bound, as Prometheus says
				} else {
					out[stage] = 1000 * (lower + (le-lower)*(rank-prev)/max(counts[i]-prev, 1e-9))
				}
				break
			}
			lower, prev = le, counts[i]
		}
	}
	return out
}

// allMetrics scrapes every controller: name -> series.
func (g *group) allMetrics(ctx context.Context) (map[string][]series, error) {
	out := map[string][]series{}
	for _, c := range g.ctrls {
		ss, err := scrape(ctx, c)
		if err != nil {
			return nil, fmt.Errorf("scraping %s: %w", c.name, err)
		}
		out[c.name] = ss
	}
	return out, nil
}

// allWrites scrapes every controller's sync writes: name -> op -> count.
func (g *group) allWrites(ctx context.Context) (map[string]map[string]float64, error) {
	m, err := g.allMetrics(ctx)
	if err != nil {
		return nil, err
	}
	return perController(m, syncWrites), nil
}

func perController(m map[string][]series, f func([]series) map[string]float64) map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	for n, ss := range m {
		out[n] = f(ss)
	}
	return out
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
