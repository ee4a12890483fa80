package main

import (
	"context"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
)

func TestParseSizes(t *testing.T) {
	tests := []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{in: "2,3,5,8", want: []int{2, 3, 5, 8}},
		{in: " 2, 3 ,", want: []int{2, 3}},
		{in: "", want: nil},
		{in: "1", wantErr: true},
		{in: "2,x", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseSizes(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseSizes(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parseSizes(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestPercentile(t *testing.T) {
	ms := func(xs ...int) []time.Duration {
		var out []time.Duration
		for _, x := range xs {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		q      float64
		want   time.Duration
	}{
		{"empty", nil, .5, 0},
		{"one", ms(7), .99, 7 * time.Millisecond},
		{"p50 of 4 is the 2nd", ms(1, 2, 3, 4), .5, 2 * time.Millisecond},
		{"p90 of 10 is the 9th", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), .9, 9 * time.Millisecond},
		{"p100 is the max", ms(1, 2, 3), 1, 3 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentile(tt.sorted, tt.q); got != tt.want {
				t.Errorf("percentile(%v, %v) = %v, want %v", tt.sorted, tt.q, got, tt.want)
			}
		})
	}
}

func TestAggregateClusterRoles(t *testing.T) {
	const label = "cluster-registry.k8s.cisco.com/reader-aggregated"
	read := func(res string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{res}, Verbs: []string{"get", "list", "watch"}}
	}
	role := func(name string, labels map[string]string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
		return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Rules: rules}
	}
	agg := role("reader", nil)
	agg.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{label: "true"}}}}
	cs := fake.NewClientset(agg,
		role("a", map[string]string{label: "true"}, read("configmaps"), read("secrets")),
		role("b", map[string]string{label: "true"}, read("configmaps")), // a duplicate rule is kept once
		role("c", map[string]string{label: "false"}, read("pods")),
	)
	ctx := context.Background()
	if err := aggregateClusterRoles(ctx, cs); err != nil {
		t.Fatal(err)
	}
	got, err := cs.RbacV1().ClusterRoles().Get(ctx, "reader", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]rbacv1.PolicyRule{read("configmaps"), read("secrets")}, got.Rules); diff != "" {
		t.Errorf("aggregated rules (-want +got):\n%s", diff)
	}
	// Roles without an aggregation rule are left alone.
	c, err := cs.RbacV1().ClusterRoles().Get(ctx, "c", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]rbacv1.PolicyRule{read("pods")}, c.Rules); diff != "" {
		t.Errorf("role c changed (-want +got):\n%s", diff)
	}
}

func TestTrackerWaitAll(t *testing.T) {
	tr := &tracker{cluster: "beta", namespace: "bench", seen: map[string]time.Time{}, added: map[string]time.Time{}, notify: make(chan struct{})}
	t0 := time.Unix(1000, 0)
	obj := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"v": "b"}}
	}
	tr.record(obj("x-0"), watch.Added, t0) // present before the wait
	objs := names("x", 0, 3)
	done := make(chan time.Time, 1)
	errc := make(chan error, 1)
	go func() {
		at, err := tr.waitAll(context.Background(), objs)
		errc <- err
		done <- at
	}()
	tr.record(obj("other"), watch.Added, t0.Add(5*time.Second))
	tr.record(obj("x-2"), watch.Added, t0.Add(2*time.Second))
	tr.record(obj("x-2"), watch.Modified, t0.Add(9*time.Second)) // not a new appearance
	tr.record(obj("x-1"), watch.Added, t0.Add(3*time.Second))
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
		if at := <-done; !at.Equal(t0.Add(3 * time.Second)) {
			t.Errorf("waitAll = %v, want the latest first appearance %v", at, t0.Add(3*time.Second))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waitAll did not return once every object was present")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := tr.waitAll(ctx, []string{"x-0", "missing"}); err == nil || !strings.Contains(err.Error(), "1 of 2 objects") {
		t.Errorf("waitAll with a missing object: error %v, want one counting 1 of 2 objects", err)
	}
}

func TestResultsRows(t *testing.T) {
	r := newResults(options{samples: 10, burst: 100, workers: 4, floorWorkers: 1, idle: time.Minute})
	r.addBurst(100, 3*time.Second, 2*time.Second, 0, 2500*time.Millisecond)
	r.Cost = &costs{
		SyncedRegistry: &cost{Objects: 100, APIServerCPUSeconds: 4, ControllersCPUSeconds: 3, WatchEvents: 6000}, SyncedFloorAlone: &cost{Objects: 100, APIServerCPUSeconds: 2, WatchEvents: 3000},
		UnselectedRegistry: &cost{Objects: 300, APIServerCPUSeconds: 1, WatchEvents: 1000}, UnselectedAlone: &cost{Objects: 300, APIServerCPUSeconds: 1, WatchEvents: 0},
	}
	r.BurstWrites = map[string]map[string]float64{"beta": {"create": 100}, "gamma": {"create": 100}}
	r.PeakRSSMiB, r.SyncedObjects = map[string]float64{"alpha": 50, "beta": 60, "gamma": 70}, 100
	r.Memory = &memoryResult{Objects: 10000, FillObjects: 9000, FillObjectsPerSecond: 50, PeakRSSMiB: map[string]float64{"alpha": 90, "beta": 101, "gamma": 99}}
	r.CLI.SyncDiff = &cliTiming{Command: "kubectl registry sync-diff", Clusters: 3, Objects: 100, MedianSeconds: 1.5, ExitCode: 0}
	r.addScale(&scaleResult{Clusters: 8, Registry: stats{P50ms: 20, P99ms: 60}, Floor: stats{P50ms: 10, P99ms: 30}, RatioP50: 2, RatioP99: 2,
		PeakRSSMiB: map[string]float64{"s1": 40, "s2": 60}, Get: &cliTiming{Clusters: 8, Objects: 42, MedianSeconds: .4, ExitCode: 2, Error: "boom"}})
	r.finish()

	type verdict struct {
		Metric string
		Met    string
	}
	var got []verdict
	for _, rw := range r.Rows {
		v := verdict{Metric: rw.Metric}
		if rw.Met != nil {
			v.Met = map[bool]string{true: "ok", false: "MISS"}[*rw.Met]
		}
		got = append(got, v)
	}
	want := []verdict{
		{"burst 100 to 2 peers", "MISS"},
		{"burst throughput", ""},
		{"floor beside the registry: burst", "MISS"},
		{"writes/object/peer (burst: create 200)", "ok"},
		{"idle writes", "ok"},
		{"peak RSS alpha (100 synced objects)", ""},
		{"peak RSS beta (100 synced objects)", ""},
		{"peak RSS gamma (100 synced objects)", ""},
		{"peak RSS alpha (10000 synced objects)", "ok"},
		{"peak RSS beta (10000 synced objects)", "MISS"},
		{"peak RSS gamma (10000 synced objects)", "ok"},
		{"sync of 9000 more objects to 2 peers", ""},
		{"CLI sync-diff, 100 objects, 3 clusters (exit 0)", ""},
		{"CLI get configmaps -A, 8 clusters (42 rows)", ""},
		{"API-server CPU /1000 synced", ""},
		{"controllers CPU /1000 synced", ""},
		{"watch events /1000 synced", ""},
		{"API-server CPU /1000 unselected changes", ""},
		{"controllers CPU /1000 unselected changes", ""},
		{"watch events /1000 unselected changes", ""},
		{"API-server CPU idle (all API servers)", ""},
		{"controllers CPU idle (all controllers)", ""},
		{"scale 8 clusters: create p50", ""},
		{"scale 8 clusters: create p99", ""},
		{"scale 8 clusters: peak RSS max / mean", ""},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
	table := r.table()
	for _, s := range []string{"FAILED (exit 2)", "mean 50 MiB", "2.00x", "failed: boom", "1.20x", "6000 events", "0.00 events"} {
		if !strings.Contains(table, s) {
			t.Errorf("table lacks %q:\n%s", s, table)
		}
	}
}

func TestMetricsCounters(t *testing.T) {
	text := `# HELP kubectl_registry_sync_writes_total Writes.
# TYPE kubectl_registry_sync_writes_total counter
kubectl_registry_sync_writes_total{op="create",rule="bench-configmaps"} 1000
kubectl_registry_sync_writes_total{op="create",rule="core-resourcesyncrules"} 1
kubectl_registry_sync_writes_total{op="update",rule="bench-configmaps"} 2
kubectl_registry_sync_errors_total{kind="ConfigMap"} 3
rest_client_requests_total{code="201",host="127.0.0.1:1",method="POST"} 1001
rest_client_requests_total{code="409",host="127.0.0.1:1",method="POST"} 3
rest_client_requests_total{code="200",host="127.0.0.1:1",method="PATCH"} 5
rest_client_requests_total{code="200",host="127.0.0.1:2",method="GET"} 99
workqueue_adds_total{controller="resourcesyncrules",name="resourcesyncrules"} 2100
workqueue_adds_total{controller="membership",name="membership"} 7
workqueue_work_duration_seconds_sum{controller="resourcesyncrules",name="resourcesyncrules"} 20
workqueue_work_duration_seconds_count{controller="resourcesyncrules",name="resourcesyncrules"} 2000
workqueue_queue_duration_seconds_sum{controller="resourcesyncrules",name="resourcesyncrules"} 4
workqueue_queue_duration_seconds_count{controller="resourcesyncrules",name="resourcesyncrules"} 2000
workqueue_retries_total{controller="resourcesyncrules",name="resourcesyncrules"} 3
process_resident_memory_bytes 1.2e+08
garbage line
`
	ss := parseMetrics(text)
	if diff := cmp.Diff(map[string]float64{"create": 1001, "update": 2}, syncWrites(ss)); diff != "" {
		t.Errorf("syncWrites (-want +got):\n%s", diff)
	}
	want := map[string]float64{
		"sync_errors": 3, "write_requests": 1009, "failed_write_requests": 3, "adds_total": 2100,
		"work_duration_seconds_sum": 20, "work_duration_seconds_count": 2000,
		"queue_duration_seconds_sum": 4, "queue_duration_seconds_count": 2000, "retries_total": 3,
	}
	counters := queueCounters(ss)
	if diff := cmp.Diff(want, counters); diff != "" {
		t.Errorf("queueCounters (-want +got):\n%s", diff)
	}
	got := newQueueStats(map[string]map[string]float64{"beta": counters}, 1000)["beta"]
	wantStats := queueStats{AddsPerObject: 2.1, ReconcilesPerObject: 2, MeanReconcileMs: 10, MeanQueueWaitMs: 2, Retries: 3, SyncErrors: 3, WriteRequests: 1009, FailedWriteRequests: 3}
	if diff := cmp.Diff(wantStats, got); diff != "" {
		t.Errorf("newQueueStats (-want +got):\n%s", diff)
	}
}

// TestProcMiB reads this test's own /proc status: the peak RSS is at least the current
// one, which is at least its file-backed part, and a missing field is an error.
func TestProcMiB(t *testing.T) {
	v, err := procMiB(os.Getpid(), "VmHWM", "VmRSS", "RssFile")
	if err != nil {
		t.Fatal(err)
	}
	if !(v[0] >= v[1] && v[1] >= v[2] && v[2] > 0) {
		t.Errorf("VmHWM %v, VmRSS %v, RssFile %v MiB: want VmHWM >= VmRSS >= RssFile > 0", v[0], v[1], v[2])
	}
	if _, err := procMiB(os.Getpid(), "VmHWM", "NoSuchField"); err == nil || !strings.Contains(err.Error(), "NoSuchField") {
		t.Errorf("error %v, want one naming the missing field", err)
	}
}

func TestParseStatCPU(t *testing.T) {
	// A command with spaces and parentheses; utime 250 and stime 50 ticks.
	stat := "1234 (kube (api) server) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 12 0 100 1000 200\n"
	got, err := parseStatCPU(stat)
	if err != nil || got != 3 {
		t.Errorf("parseStatCPU = %v, %v; want 3 s", got, err)
	}
	if _, err := parseStatCPU("1234 (x) S 1"); err == nil {
		t.Error("parseStatCPU of a short line: no error")
	}
	if self, err := procCPU(os.Getpid()); err != nil || self < 0 {
		t.Errorf("procCPU(self) = %v, %v", self, err)
	}
}

func TestWatchEvents(t *testing.T) {
	ss := parseMetrics(`apiserver_watch_events_total{group="",resource="configmaps",version="v1"} 12
apiserver_watch_events_total{group="",resource="secrets",version="v1"} 5
apiserver_watch_events_total{group="apps",resource="configmaps",version="v1"} 3
`)
	if got := watchEvents(ss, "configmaps"); got != 15 {
		t.Errorf("watchEvents = %v, want 15", got)
	}
}

func TestNewCost(t *testing.T) {
	t0 := time.Unix(100, 0)
	// Idle for 2 s: 0.1 core of API servers, 0.05 of controllers, 10 events a second; then
	// 5 s of work on 200 objects, of which 0.5 s, 0.25 s and 50 events are the idle rate's.
	got := newCost(reading{at: t0.Add(-2 * time.Second), apiServerCPU: 9.8, controllersCPU: 0.9, watchEvents: 80},
		reading{at: t0, apiServerCPU: 10, controllersCPU: 1, watchEvents: 100},
		reading{at: t0.Add(5 * time.Second), apiServerCPU: 12.5, controllersCPU: 1.25, watchEvents: 750}, 200)
	want := &cost{Objects: 200, Seconds: 5, IdleAPIServerCores: .1, IdleControllersCores: .05, IdleWatchEventsPerSecond: 10,
		APIServerCPUSeconds: 10, ControllersCPUSeconds: 0, WatchEvents: 3000}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("newCost (-want +got):\n%s", diff)
	}
}

// TestBurstVerdicts: the burst's verdict and the floor-beside verdict are each their own
// (the burst's once showed the floor-beside one).
func TestBurstVerdicts(t *testing.T) {
	tests := []struct {
		name                       string
		reg, alone, beside         time.Duration
		wantBurst, wantFloorBeside bool
	}{
		{"burst within, floor beside over", 2400 * time.Millisecond, 2 * time.Second, 2500 * time.Millisecond, true, false},
		{"burst over, floor beside within", 3 * time.Second, 2 * time.Second, 2100 * time.Millisecond, false, true},
		{"both within", 2 * time.Second, 2 * time.Second, 2 * time.Second, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newResults(options{samples: 10, burst: 100, workers: 4, floorWorkers: 1, idle: time.Minute})
			r.addBurst(100, tt.reg, tt.alone, 0, tt.beside)
			got := map[string]bool{}
			for _, rw := range r.Rows {
				if rw.Met != nil {
					got[rw.Metric] = *rw.Met
				}
			}
			want := map[string]bool{"burst 100 to 2 peers": tt.wantBurst, "floor beside the registry: burst": tt.wantFloorBeside}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("verdicts (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAddLatencyBracketsTheFloor: the floor alone's figures are those of its samples
// before the controllers started and after the registry's, together; each set is kept.
func TestAddLatencyBracketsTheFloor(t *testing.T) {
	ms := func(xs ...int) []time.Duration {
		var ds []time.Duration
		for _, x := range xs {
			ds = append(ds, time.Duration(x)*time.Millisecond)
		}
		return ds
	}
	r := newResults(options{samples: 4})
	r.addLatency("create", ms(6, 6, 6, 6), ms(2, 2, 2), ms(4, 4, 4, 4, 4), ms(5, 5, 5, 5))
	got := r.Latency["create"].(map[string]stats)
	want := map[string]float64{"registry": 6, "floor": 4, "floor_before": 2, "floor_after": 4, "floor_beside": 5}
	for k, p50 := range want {
		if got[k].P50ms != p50 {
			t.Errorf("%s p50 = %v ms, want %v", k, got[k].P50ms, p50)
		}
	}
	if got["floor"].N != 8 {
		t.Errorf("the floor alone has %d samples, want 8 (both sets)", got["floor"].N)
	}
	var p50 *row
	for i := range r.Rows {
		if r.Rows[i].Metric == "create latency p50" {
			p50 = &r.Rows[i]
		}
	}
	if p50 == nil || p50.Ratio != 1.5 || p50.Met == nil || *p50.Met {
		t.Errorf("create p50 row %+v, want ratio 1.5 to the floor alone of both sets, not met", p50)
	}
}

// TestAddBurstBracketsTheFloor: the floor alone's burst is the mean of its bursts before
// the controllers started and after the registry's; both are kept.
func TestAddBurstBracketsTheFloor(t *testing.T) {
	r := newResults(options{burst: 100})
	r.addBurst(100, 3*time.Second, 2*time.Second, 4*time.Second, 3500*time.Millisecond)
	if got := []float64{r.BurstSeconds["floor"], r.BurstSeconds["floor_before"], r.BurstSeconds["floor_after"]}; !cmp.Equal(got, []float64{3, 2, 4}) {
		t.Errorf("floor, before, after = %v, want [3 2 4]", got)
	}
	var burst, beside *row
	for i := range r.Rows {
		switch r.Rows[i].Metric {
		case "burst 100 to 2 peers":
			burst = &r.Rows[i]
		case "floor beside the registry: burst":
			beside = &r.Rows[i]
		}
	}
	if burst == nil || burst.Ratio != 1 || beside == nil || math.Abs(beside.Ratio-3.5/3) > 1e-9 {
		t.Errorf("burst row %+v, floor beside row %+v: want ratios 1 and 3.5/3 to the floor alone's mean", burst, beside)
	}
}

// TestStageQuantile: the quantile of each stage between two scrapes, from the buckets of
// every controller together, interpolated within the bucket that holds it.
func TestStageQuantile(t *testing.T) {
	scrape := func(counts map[string][3]float64) []series {
		var out []series
		for stage, c := range counts {
			for i, le := range []string{"0.001", "0.002", "+Inf"} {
				out = append(out, series{name: "kubectl_registry_sync_stage_seconds_bucket", labels: map[string]string{"stage": stage, "le": le}, value: c[i]})
			}
		}
		return out
	}
	before := map[string][]series{"beta": scrape(map[string][3]float64{"write": {10, 10, 10}})}
	after := map[string][]series{
		// write: 10 new samples at most 1 ms and 10 within (1, 2] ms, over both peers.
		"beta":  scrape(map[string][3]float64{"write": {15, 20, 20}, "queue": {0, 4, 4}}),
		"gamma": scrape(map[string][3]float64{"write": {5, 10, 10}, "decide": {1, 1, 4}}),
	}
	got := stageQuantile(before, after, 0.5)
	// decide: the median is beyond the last bucket: its bound.
	want := map[string]float64{"write": 1, "queue": 1.5, "decide": 2}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("stageQuantile (-want +got):\n%s", diff)
	}
}
