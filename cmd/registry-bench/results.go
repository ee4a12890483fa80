package main

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

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

// row is one line of the table. Floor is the floor alone (the registry's controllers
// stopped) and Ratio is against it; FloorBeside is the floor measured beside the running
// registry, RatioBeside the registry against that.
type row struct {
	Metric      string  `json:"metric"`
	Registry    float64 `json:"registry"`
	Floor       float64 `json:"floor,omitempty"`
	Ratio       float64 `json:"ratio,omitempty"`
	FloorBeside float64 `json:"floor_beside,omitempty"`
	RatioBeside float64 `json:"ratio_beside,omitempty"`
	Unit        string  `json:"unit"`
	Target      string  `json:"target,omitempty"`
	Met         *bool   `json:"met,omitempty"`
	// floorZero: Floor is a measured 0 (nothing to print a ratio against), not missing.
	floorZero bool
}

type results struct {
	Date    string `json:"date"`
	Machine struct {
		NProc    int    `json:"nproc"`
		GOOS     string `json:"goos"`
		GOARCH   string `json:"goarch"`
		Hostname string `json:"hostname"`
		// LoadAvg is /proc/loadavg at the start and at the end: other work on the machine.
		LoadAvg []string `json:"loadavg"`
	} `json:"machine"`
	Command string `json:"command"`
	// Binary is what `kubectl-registry version` of the measured binary prints.
	Binary string `json:"binary"`
	// ControllerEnv is --controller-env: what the controllers ran with beyond the defaults.
	ControllerEnv []string       `json:"controller_env,omitempty"`
	Args          []string       `json:"args"`
	Clusters      []string       `json:"clusters"`
	Samples       int            `json:"samples"`
	Burst         int            `json:"burst"`
	BurstWorkers  int            `json:"burst_workers"`
	FloorWorkers  int            `json:"floor_workers"`
	IdleSeconds   float64        `json:"idle_seconds"`
	Latency       map[string]any `json:"latency"`
	// StagesP50ms is the p50 of each stage of the registry's writes during the latency
	// samples (queue, decide, write), in ms.
	StagesP50ms  map[string]float64 `json:"stages_p50_ms,omitempty"`
	BurstSeconds map[string]float64 `json:"burst_seconds"`
	// BurstWrites are the sync writes (by controller and op) during the registry burst.
	BurstWrites map[string]map[string]float64 `json:"burst_writes"`
	// BurstQueue is what the sync engine's work queue did during the registry burst.
	BurstQueue             map[string]queueStats         `json:"burst_queue"`
	WritesPerObjectPerPeer float64                       `json:"writes_per_object_per_peer"`
	IdleWrites             map[string]map[string]float64 `json:"idle_writes"`
	IdleWritesPerMin       float64                       `json:"idle_writes_per_min"`
	PeakRSSMiB             map[string]float64            `json:"peak_rss_mib"`
	SyncedObjects          int                           `json:"synced_objects_at_rss"`
	Failures               map[string]int                `json:"failed_samples"`
	FloorCopierErrors      int64                         `json:"floor_copier_errors"`
	SetupSeconds           float64                       `json:"setup_seconds"`
	TotalSeconds           float64                       `json:"total_seconds"`
	// Cost is what the main group's API servers and controllers spent per 1,000 synced
	// objects and per 1,000 changes of objects no rule selects.
	Cost *costs `json:"cost,omitempty"`
	// Memory is each controller's RSS once Memory.Objects ConfigMaps are synced.
	Memory *memoryResult `json:"memory,omitempty"`
	// CLI holds the timed plugin commands.
	CLI struct {
		SyncDiff *cliTiming `json:"sync_diff,omitempty"`
		Get      *cliTiming `json:"get,omitempty"`
	} `json:"cli"`
	// Scale are the runs of --scale, one fresh group each.
	Scale []*scaleResult `json:"scale,omitempty"`
	// Profiles are the CPU and heap profiles of the registry burst (--profile).
	Profiles []string `json:"profiles,omitempty"`
	Rows     []row    `json:"rows"`
}

// memoryResult is the main group's controllers' RSS with Objects synced ConfigMaps.
type memoryResult struct {
	// Objects are the ConfigMaps the rule syncs from the origin to both peers (so each
	// peer holds Objects copies); FillObjects of them were created for this step.
	Objects              int                `json:"objects"`
	FillObjects          int                `json:"fill_objects"`
	FillSeconds          float64            `json:"fill_seconds"`
	FillObjectsPerSecond float64            `json:"fill_objects_per_second"`
	PeakRSSMiB           map[string]float64 `json:"peak_rss_mib"`
	RSSMiB               map[string]float64 `json:"rss_mib"`
	// FileRSSMiB is the file-backed part of the RSS when it is read: the pages of the
	// binary the controller has touched (shared and reclaimable; the rest is the heap).
	FileRSSMiB map[string]float64 `json:"file_rss_mib,omitempty"`
	// FloorObjects are the floor's ConfigMaps (namespace bench-floor) present meanwhile.
	FloorObjects int `json:"floor_objects"`
}

func newResults(o options) *results {
	r := &results{
		Date: time.Now().UTC().Format(time.RFC3339), Clusters: mainNames,
		Samples: o.samples, Burst: o.burst, BurstWorkers: o.workers, FloorWorkers: o.floorWorkers, IdleSeconds: o.idle.Seconds(),
		Latency: map[string]any{}, BurstSeconds: map[string]float64{}, PeakRSSMiB: map[string]float64{},
	}
	r.ControllerEnv = o.controllerEnv
	r.Machine.NProc = runtime.NumCPU()
	r.Machine.GOOS, r.Machine.GOARCH = runtime.GOOS, runtime.GOARCH
	r.Machine.Hostname, _ = os.Hostname()
	r.Machine.LoadAvg = append(r.Machine.LoadAvg, loadAvg())
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

// addLatency records the latency of a phase: the registry's, the floor's alone (the
// controllers stopped; the ratios are against it) and the floor's beside the registry.
//
// The floor alone is measured twice, before the controllers start and after the
// registry's samples with the controllers stopped; its figures are those of both sets
// of samples together, and each set is kept too ("floor_before", "floor_after").
func (r *results) addLatency(phase string, reg, aloneBefore, aloneAfter, beside []time.Duration) {
	alone := append(slices.Clone(aloneBefore), aloneAfter...)
	rs, fs, bs := newStats(reg), newStats(alone), newStats(beside)
	r.Latency[phase] = map[string]stats{"registry": rs, "floor": fs, "floor_beside": bs,
		"floor_before": newStats(aloneBefore), "floor_after": newStats(aloneAfter)}
	targets := map[string][2]string{"create": {"<= 1.25x floor", "<= 1.5x floor"}}
	add := func(q string, a, b, c float64, target string, limit float64) {
		rw := row{Metric: fmt.Sprintf("%s latency %s", phase, q), Registry: a, Floor: b, Ratio: ratio(a, b), FloorBeside: c, RatioBeside: ratio(a, c), Unit: "ms", Target: target}
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
	add("p50", rs.P50ms, fs.P50ms, bs.P50ms, t[0], lim(t[0]))
	add("p90", rs.P90ms, fs.P90ms, bs.P90ms, "", 0)
	add("p99", rs.P99ms, fs.P99ms, bs.P99ms, t[1], lim(t[1]))
	add("max", rs.MaxMs, fs.MaxMs, bs.MaxMs, "", 0)
}

// addStages records the p50 of each stage of the registry's writes during the latency
// samples (stageQuantile): where the time between a change seen and its copy written
// goes, beyond the watch that both the registry and the floor wait for; and, beside the
// write stage, the p50 of the floor's write requests during its samples, alone and
// beside the registry.
func (r *results) addStages(p50 map[string]float64, floorAlone, floorBeside []time.Duration) {
	r.StagesP50ms = p50
	for _, stage := range []string{"queue", "decide", "write"} {
		v, ok := p50[stage]
		if !ok {
			continue
		}
		rw := row{Metric: "registry write stage p50: " + stage, Registry: v, Unit: "ms"}
		if stage == "write" && len(floorAlone) > 0 && len(floorBeside) > 0 {
			a, b := newStats(floorAlone).P50ms, newStats(floorBeside).P50ms
			rw.Floor, rw.Ratio, rw.FloorBeside, rw.RatioBeside = a, ratio(v, a), b, ratio(v, b)
			r.StagesP50ms["floor_write_alone"], r.StagesP50ms["floor_write_beside"] = a, b
		}
		r.Rows = append(r.Rows, rw)
	}
}

// addBurst records the burst: the registry's, the floor's alone and the floor's beside
// the registry. The floor alone is the mean of its burst before the controllers started
// and after the registry's burst with the controllers stopped (each is kept:
// "floor_before", "floor_after"); the targets are against it.
func (r *results) addBurst(n int, reg, aloneBefore, aloneAfter, beside time.Duration) {
	alone := aloneBefore
	if aloneAfter > 0 {
		alone = (aloneBefore + aloneAfter) / 2
	}
	r.BurstSeconds["floor_before"], r.BurstSeconds["floor_after"] = aloneBefore.Seconds(), aloneAfter.Seconds()
	r.BurstSeconds["registry"], r.BurstSeconds["floor"], r.BurstSeconds["floor_beside"] = reg.Seconds(), alone.Seconds(), beside.Seconds()
	rw := row{Metric: fmt.Sprintf("burst %d to 2 peers", n), Registry: reg.Seconds(), Floor: alone.Seconds(), Ratio: ratio(reg.Seconds(), alone.Seconds()),
		FloorBeside: beside.Seconds(), RatioBeside: ratio(reg.Seconds(), beside.Seconds()), Unit: "s", Target: "<= 1.3x floor"}
	met := rw.Ratio <= 1.3
	rw.Met = &met
	r.Rows = append(r.Rows, rw)
	ops := func(d time.Duration) float64 { return ratio(float64(n), d.Seconds()) }
	r.Rows = append(r.Rows, row{Metric: "burst throughput", Registry: ops(reg), Floor: ops(alone), Ratio: ratio(ops(reg), ops(alone)), FloorBeside: ops(beside), RatioBeside: ratio(ops(reg), ops(beside)), Unit: "obj/s"})
	// The floor beside the registry against the floor alone: what the registry's
	// controllers cost objects they do not sync.
	fb := row{Metric: "floor beside the registry: burst", Registry: beside.Seconds(), Floor: alone.Seconds(), Ratio: ratio(beside.Seconds(), alone.Seconds()), Unit: "s", Target: "<= 1.1x floor"}
	besideMet := fb.Ratio <= 1.1 // a variable of its own: the burst row points at met
	fb.Met = &besideMet
	r.Rows = append(r.Rows, fb)
}

// costRows are the cost figures of a group (prefix names it in the metric).
func costRows(prefix string, c *costs) []row {
	if c == nil {
		return nil
	}
	var out []row
	per := func(what string, reg, alone *cost, unit string, get func(*cost) float64) {
		if reg == nil {
			return
		}
		rw := row{Metric: prefix + what, Registry: get(reg), Unit: unit}
		if alone != nil {
			rw.Floor, rw.Ratio, rw.floorZero = get(alone), ratio(get(reg), get(alone)), get(alone) == 0
		}
		out = append(out, rw)
	}
	cpu := func(c *cost) float64 { return c.APIServerCPUSeconds }
	ctl := func(c *cost) float64 { return c.ControllersCPUSeconds }
	ev := func(c *cost) float64 { return c.WatchEvents }
	per("API-server CPU /1000 synced", c.SyncedRegistry, c.SyncedFloorAlone, "s", cpu)
	per("controllers CPU /1000 synced", c.SyncedRegistry, nil, "s", ctl)
	per("watch events /1000 synced", c.SyncedRegistry, c.SyncedFloorAlone, "events", ev)
	per("API-server CPU /1000 unselected changes", c.UnselectedRegistry, c.UnselectedAlone, "s", cpu)
	per("controllers CPU /1000 unselected changes", c.UnselectedRegistry, nil, "s", ctl)
	per("watch events /1000 unselected changes", c.UnselectedRegistry, c.UnselectedAlone, "events", ev)
	// The idle rates subtracted from the figures above: what the API servers and the
	// controllers spend with nothing changing.
	per("API-server CPU idle (all API servers)", c.UnselectedRegistry, c.UnselectedAlone, "cores", func(c *cost) float64 { return c.IdleAPIServerCores })
	per("controllers CPU idle (all controllers)", c.UnselectedRegistry, nil, "cores", func(c *cost) float64 { return c.IdleControllersCores })
	return out
}

// loadAvg returns the 1, 5 and 15 minute load averages, or "".
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(data))
	return strings.Join(f[:min(3, len(f))], " ")
}

// finish adds the rows of the table that the results so far make: the writes of the
// burst, idle writes, memory, the CLI, the costs and the scale runs.
func (r *results) finish() {
	r.Machine.LoadAvg = append(r.Machine.LoadAvg, loadAvg())
	r.addWriteRows()
	idle := r.IdleWritesPerMin == 0
	r.Rows = append(r.Rows, row{Metric: "idle writes", Registry: r.IdleWritesPerMin, Unit: "/min", Target: "= 0", Met: &idle})
	for _, n := range r.Clusters {
		// The target is at 10,000 synced objects: see the memory rows.
		r.Rows = append(r.Rows, row{Metric: fmt.Sprintf("peak RSS %s (%d synced objects)", n, r.SyncedObjects), Registry: r.PeakRSSMiB[n], Unit: "MiB", Target: "<= 100 at 10,000"})
	}
	if r.Memory != nil {
		r.addMemoryRows(r.Memory)
	}
	r.addCLIRows()
	r.Rows = append(r.Rows, costRows("", r.Cost)...)
	r.addScaleRows()
}

// addWriteRows adds the rows of the burst's writes: per object and peer (by operation),
// and, with the work queues' counters, the API write requests and reconciles per object.
func (r *results) addWriteRows() {
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
	if len(r.BurstQueue) > 0 {
		var req, failed, reconciles float64
		for _, q := range r.BurstQueue {
			req += q.WriteRequests
			failed += q.FailedWriteRequests
			reconciles += q.ReconcilesPerObject
		}
		r.Rows = append(r.Rows,
			row{Metric: fmt.Sprintf("API write requests/object/peer (%.0f failed)", failed), Registry: ratio(req, float64(r.Burst)*peers), Unit: ""},
			row{Metric: "reconciles/object, all controllers (burst)", Registry: reconciles, Unit: ""})
	}
}

// addMemoryRows adds the rows of the controllers' memory at m's synced objects, and the
// rate of the fill that got there.
func (r *results) addMemoryRows(m *memoryResult) {
	for _, n := range r.Clusters {
		rw := row{Metric: fmt.Sprintf("peak RSS %s (%d synced objects)", n, m.Objects), Registry: m.PeakRSSMiB[n], Unit: "MiB", Target: "<= 100 MiB"}
		if m.Objects >= 10000 {
			met := rw.Registry <= 100
			rw.Met = &met
		} else {
			rw.Target = "<= 100 at 10,000"
		}
		r.Rows = append(r.Rows, rw)
	}
	for _, n := range r.Clusters {
		if f, ok := m.FileRSSMiB[n]; ok {
			r.Rows = append(r.Rows, row{Metric: fmt.Sprintf("  of which file-backed (binary) %s", n), Registry: f, Unit: "MiB"})
		}
	}
	if m.FillObjects > 0 {
		r.Rows = append(r.Rows, row{Metric: fmt.Sprintf("sync of %d more objects to 2 peers", m.FillObjects), Registry: m.FillObjectsPerSecond, Unit: "obj/s"})
	}
}

// addCLIRows adds the rows of the CLI commands timed.
func (r *results) addCLIRows() {
	cli := func(t *cliTiming, metric string) {
		if t == nil {
			return
		}
		rw := row{Metric: metric, Registry: t.MedianSeconds, Unit: "s"}
		if t.ExitCode > 1 || t.ExitCode < 0 {
			rw.Target = fmt.Sprintf("FAILED (exit %d)", t.ExitCode)
		}
		r.Rows = append(r.Rows, rw)
	}
	if t := r.CLI.SyncDiff; t != nil {
		cli(t, fmt.Sprintf("CLI sync-diff, %d objects, %d clusters (exit %d)", t.Objects, t.Clusters, t.ExitCode))
	}
	if t := r.CLI.Get; t != nil {
		cli(t, fmt.Sprintf("CLI get configmaps -A, %d clusters (%d rows)", t.Clusters, t.Objects))
	}
}

// addScaleRows adds the rows of every scale run: its latency, burst, costs and peak RSS,
// or that it failed.
func (r *results) addScaleRows() {
	for _, s := range r.Scale {
		if s.Error != "" {
			r.Rows = append(r.Rows, row{Metric: fmt.Sprintf("scale %d clusters", s.Clusters), Target: "FAILED (see below)"})
			continue
		}
		r.Rows = append(r.Rows,
			row{Metric: fmt.Sprintf("scale %d clusters: create p50", s.Clusters), Registry: s.Registry.P50ms, Floor: s.Floor.P50ms, Ratio: s.RatioP50, FloorBeside: s.FloorBeside.P50ms, RatioBeside: ratio(s.Registry.P50ms, s.FloorBeside.P50ms), Unit: "ms"},
			row{Metric: fmt.Sprintf("scale %d clusters: create p99", s.Clusters), Registry: s.Registry.P99ms, Floor: s.Floor.P99ms, Ratio: s.RatioP99, FloorBeside: s.FloorBeside.P99ms, RatioBeside: ratio(s.Registry.P99ms, s.FloorBeside.P99ms), Unit: "ms"})
		if s.Burst > 0 {
			r.Rows = append(r.Rows, row{Metric: fmt.Sprintf("scale %d clusters: burst %d", s.Clusters, s.Burst), Registry: s.BurstSeconds, Floor: s.FloorBurstSeconds, Ratio: ratio(s.BurstSeconds, s.FloorBurstSeconds), Unit: "s"})
		}
		r.Rows = append(r.Rows, costRows(fmt.Sprintf("scale %d clusters: ", s.Clusters), s.Cost)...)
		var peak, sum float64
		for _, v := range s.PeakRSSMiB {
			peak = max(peak, v)
			sum += v
		}
		r.Rows = append(r.Rows, row{Metric: fmt.Sprintf("scale %d clusters: peak RSS max / mean", s.Clusters), Registry: peak, Floor: 0, Unit: "MiB", Target: fmt.Sprintf("mean %.0f MiB", ratio(sum, float64(len(s.PeakRSSMiB))))})
	}
}

func (r *results) addScale(s *scaleResult) {
	r.Scale = append(r.Scale, s)
	if s.Get != nil {
		r.CLI.Get = s.Get
	}
}

func (r *results) table() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "kubectl-registry bench — %s, %d CPUs (load average %s), %s\n", r.Date, r.Machine.NProc, strings.Join(r.Machine.LoadAvg, " -> "), r.Command)
	fmt.Fprintf(&sb, "samples %d, burst %d (%d workers), idle %.0fs, floor: trivial copier (%d writer/peer)\n", r.Samples, r.Burst, r.BurstWorkers, r.IdleSeconds, r.FloorWorkers)
	if m := r.Memory; m != nil {
		fmt.Fprintf(&sb, "memory at %d synced objects; ", m.Objects)
	}
	var sizes []string
	for _, s := range r.Scale {
		sizes = append(sizes, fmt.Sprintf("%d (%d samples)", s.Clusters, s.Samples))
	}
	if len(sizes) > 0 {
		fmt.Fprintf(&sb, "scale groups (no kube-controller-manager): %s", strings.Join(sizes, ", "))
	}
	fmt.Fprintf(&sb, "\n\n")
	fmt.Fprintf(&sb, "floor: the trivial copier with the registry's controllers stopped (ratios are against it); floor beside: the same copier while the controllers run\n")
	fmt.Fprintf(&sb, "cost: CPU of every API server (/proc) and controller, ConfigMap watch events the API servers sent (apiserver_watch_events_total), per 1,000 objects or changes\n\n")
	fmt.Fprintf(&sb, "| %-52s | %10s | %10s | %6s | %12s | %6s | %-22s |\n", "metric", "registry", "floor", "ratio", "floor beside", "ratio", "target")
	fmt.Fprintf(&sb, "|%s|%s|%s|%s|%s|%s|%s|\n", strings.Repeat("-", 54), strings.Repeat("-", 12), strings.Repeat("-", 12), strings.Repeat("-", 8), strings.Repeat("-", 14), strings.Repeat("-", 8), strings.Repeat("-", 24))
	num := func(v float64, unit string) string {
		switch {
		case unit == "":
			return strconv.FormatFloat(v, 'f', 2, 64)
		case v >= 100:
			return fmt.Sprintf("%.0f %s", v, unit)
		case v < 10:
			return fmt.Sprintf("%.2f %s", v, unit)
		default:
			return fmt.Sprintf("%.1f %s", v, unit)
		}
	}
	for _, rw := range r.Rows {
		floor, rat, beside, ratB := "", "", "", ""
		switch {
		case rw.Floor != 0:
			floor, rat = num(rw.Floor, rw.Unit), fmt.Sprintf("%.2fx", rw.Ratio)
		case rw.floorZero:
			floor = num(0, rw.Unit)
		}
		if rw.FloorBeside != 0 {
			beside, ratB = num(rw.FloorBeside, rw.Unit), fmt.Sprintf("%.2fx", rw.RatioBeside)
		}
		target := rw.Target
		if rw.Met != nil {
			if *rw.Met {
				target += " ok"
			} else {
				target += " MISS"
			}
		}
		fmt.Fprintf(&sb, "| %-52s | %10s | %10s | %6s | %12s | %6s | %-22s |\n", rw.Metric, num(rw.Registry, rw.Unit), floor, rat, beside, ratB, target)
	}
	if len(r.Failures) > 0 {
		fmt.Fprintf(&sb, "\nfailed samples (not propagated within 30s): %v\n", r.Failures)
	}
	for _, s := range r.Scale {
		if len(s.Failures) > 0 {
			fmt.Fprintf(&sb, "scale %d: failed samples: %v\n", s.Clusters, s.Failures)
		}
		if s.Error != "" {
			fmt.Fprintf(&sb, "scale %d failed: %s\n", s.Clusters, s.Error)
		}
	}
	for _, t := range []*cliTiming{r.CLI.SyncDiff, r.CLI.Get} {
		if t != nil && t.Error != "" {
			fmt.Fprintf(&sb, "%s failed: %s\n", t.Command, t.Error)
		}
	}
	if len(r.Profiles) > 0 {
		fmt.Fprintf(&sb, "\nprofiles of the registry burst (go tool pprof -top FILE):\n  %s\n", strings.Join(r.Profiles, "\n  "))
	}
	return sb.String()
}

// queueStats summarise a controller's sync work queue over a window with objects objects.
type queueStats struct {
	// AddsPerObject and ReconcilesPerObject count queue additions and reconciles per object
	// of the window (the copies' own events and the other peers' copies queue an object
	// again).
	AddsPerObject       float64 `json:"adds_per_object"`
	ReconcilesPerObject float64 `json:"reconciles_per_object"`
	// MeanReconcileMs is the mean time a worker spent on one item; MeanQueueWaitMs the mean
	// time an item waited in the queue.
	MeanReconcileMs float64 `json:"mean_reconcile_ms"`
	MeanQueueWaitMs float64 `json:"mean_queue_wait_ms"`
	Retries         float64 `json:"retries"`
	SyncErrors      float64 `json:"sync_errors"`
	// WriteRequests are all the API write requests of the controller (rest_client_requests_total
	// with POST, PUT, PATCH or DELETE), FailedWriteRequests those not answered 2xx (409 for a
	// create racing the cache, for one).
	WriteRequests       float64 `json:"write_requests"`
	FailedWriteRequests float64 `json:"failed_write_requests"`
}

func newQueueStats(d map[string]map[string]float64, objects int) map[string]queueStats {
	out := map[string]queueStats{}
	for n, c := range d {
		out[n] = queueStats{
			AddsPerObject:       ratio(c["adds_total"], float64(objects)),
			ReconcilesPerObject: ratio(c["work_duration_seconds_count"], float64(objects)),
			MeanReconcileMs:     1000 * ratio(c["work_duration_seconds_sum"], c["work_duration_seconds_count"]),
			MeanQueueWaitMs:     1000 * ratio(c["queue_duration_seconds_sum"], c["queue_duration_seconds_count"]),
			Retries:             c["retries_total"],
			SyncErrors:          c["sync_errors"],
			WriteRequests:       c["write_requests"],
			FailedWriteRequests: c["failed_write_requests"],
		}
	}
	return out
}
