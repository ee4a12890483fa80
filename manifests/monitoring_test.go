package manifests_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-registry/kubectl-registry/manifests"
	"github.com/kubectl-registry/kubectl-registry/reconciler/bootstrap"
	"github.com/kubectl-registry/kubectl-registry/reconciler/clusters"
	"github.com/kubectl-registry/kubectl-registry/reconciler/engine"
	_ "github.com/kubectl-registry/kubectl-registry/reconciler/manager" // the controller's metric registrations (init)
	"github.com/kubectl-registry/kubectl-registry/reconciler/peers"
)

// monitoringPack returns the pack's objects by kind.
func monitoringPack(t *testing.T) map[string]*unstructured.Unstructured {
	t.Helper()
	objs, err := manifests.MonitoringObjects()
	if err != nil {
		t.Fatal(err)
	}
	byKind := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		byKind[o.GetKind()] = o
	}
	return byKind
}

// alertRule is a rule of the PrometheusRule.
type alertRule struct {
	Alert       string            `json:"alert"`
	Record      string            `json:"record"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

type ruleGroups struct {
	Groups []struct {
		Name  string      `json:"name"`
		Rules []alertRule `json:"rules"`
	} `json:"groups"`
}

// packRules returns the PrometheusRule's spec.
func packRules(t *testing.T) ruleGroups {
	t.Helper()
	spec, ok := monitoringPack(t)["PrometheusRule"].Object["spec"]
	if !ok {
		t.Fatal("the PrometheusRule has no spec")
	}
	data, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	var g ruleGroups
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	return g
}

// dashboard is the part of the Grafana dashboard the tests read.
type dashboard struct {
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID      int    `json:"id"`
		Type    string `json:"type"`
		Title   string `json:"title"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

func packDashboard(t *testing.T) dashboard {
	t.Helper()
	data, err := manifests.Dashboard()
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	return d
}

// TestRenderMonitoring: install --monitoring renders the pack after the other objects, in
// the registry namespace; the dashboard's ConfigMap is the one kustomization.yaml
// generates for GitOps; the ServiceMonitor selects the metrics Service and scrapes its
// HTTPS port with the scraper's ServiceAccount token.
func TestRenderMonitoring(t *testing.T) {
	objs, err := manifests.Render(manifests.RenderOptions{Namespace: "registry", Monitoring: true})
	if err != nil {
		t.Fatal(err)
	}
	var tail []string
	for _, o := range objs[len(objs)-3:] {
		tail = append(tail, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
	}
	wantTail := []string{
		"ServiceMonitor registry/cluster-registry-controller",
		"PrometheusRule registry/cluster-registry-controller",
		"ConfigMap registry/" + manifests.DashboardConfigMap,
	}
	if diff := cmp.Diff(wantTail, tail); diff != "" {
		t.Errorf("rendered pack (-want +got):\n%s", diff)
	}
	without, err := manifests.Render(manifests.RenderOptions{Namespace: "registry"})
	if err != nil {
		t.Fatal(err)
	}
	if len(without) != len(objs)-3 {
		t.Errorf("without --monitoring: %d objects, want %d", len(without), len(objs)-3)
	}

	pack := monitoringPack(t)
	// The ConfigMap kustomization.yaml generates.
	var k struct {
		Namespace          string   `json:"namespace"`
		Resources          []string `json:"resources"`
		ConfigMapGenerator []struct {
			Name    string   `json:"name"`
			Files   []string `json:"files"`
			Options struct {
				DisableNameSuffixHash bool              `json:"disableNameSuffixHash"`
				Labels                map[string]string `json:"labels"`
			} `json:"options"`
		} `json:"configMapGenerator"`
	}
	data, err := os.ReadFile("monitoring/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatal(err)
	}
	type generated struct {
		Namespace, Name string
		Resources       []string
		Files           []string
		NoSuffix        bool
		Labels          map[string]string
	}
	cm := pack["ConfigMap"]
	var keys []string
	for key := range cm.Object["data"].(map[string]any) {
		keys = append(keys, key+"=dashboard.json")
	}
	fromGo := generated{Namespace: cm.GetNamespace(), Name: cm.GetName(), Resources: []string{"servicemonitor.yaml", "prometheusrule.yaml"},
		Files: keys, NoSuffix: true, Labels: cm.GetLabels()}
	var fromKustomize generated
	if len(k.ConfigMapGenerator) == 1 {
		g := k.ConfigMapGenerator[0]
		fromKustomize = generated{Namespace: k.Namespace, Name: g.Name, Resources: k.Resources, Files: g.Files,
			NoSuffix: g.Options.DisableNameSuffixHash, Labels: g.Options.Labels}
	}
	if diff := cmp.Diff(fromGo, fromKustomize); diff != "" {
		t.Errorf("kustomization.yaml and MonitoringObjects differ (-Go +kustomize):\n%s", diff)
	}
	dash, err := manifests.Dashboard()
	if err != nil {
		t.Fatal(err)
	}
	if got := cm.Object["data"].(map[string]any)[manifests.DashboardKey]; got != string(dash) {
		t.Error("the dashboard ConfigMap does not hold dashboard.json")
	}

	// The ServiceMonitor scrapes the metrics Service's https port.
	var svc struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec struct {
			Ports []struct {
				Name string `json:"name"`
			} `json:"ports"`
		} `json:"spec"`
	}
	var sm struct {
		Spec struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			Endpoints []struct {
				Port            string `json:"port"`
				Scheme          string `json:"scheme"`
				Path            string `json:"path"`
				BearerTokenFile string `json:"bearerTokenFile"`
			} `json:"endpoints"`
		} `json:"spec"`
	}
	all, err := manifests.Objects()
	if err != nil {
		t.Fatal(err)
	}
	services := 0
	for _, o := range all {
		if o.GetKind() == "Service" {
			services++
			fromUnstructured(t, o, &svc)
		}
	}
	fromUnstructured(t, pack["ServiceMonitor"], &sm)
	type scrape struct {
		Services, SelectedServices int
		Ports                      []string
		Endpoints                  []string
	}
	got := scrape{Services: services}
	if labels.SelectorFromSet(sm.Spec.Selector.MatchLabels).Matches(labels.Set(svc.Metadata.Labels)) {
		got.SelectedServices = 1
	}
	for _, p := range svc.Spec.Ports {
		got.Ports = append(got.Ports, p.Name)
	}
	for _, e := range sm.Spec.Endpoints {
		got.Endpoints = append(got.Endpoints, strings.Join([]string{e.Port, e.Scheme, e.Path, e.BearerTokenFile}, " "))
	}
	want := scrape{Services: 1, SelectedServices: 1, Ports: []string{"https"},
		Endpoints: []string{"https https /metrics /var/run/secrets/kubernetes.io/serviceaccount/token"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ServiceMonitor and Service (-want +got):\n%s", diff)
	}
}

func fromUnstructured(t *testing.T, o *unstructured.Unstructured, into any) {
	t.Helper()
	data, err := json.Marshal(o.Object)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, into); err != nil {
		t.Fatal(err)
	}
}

// TestAlertConventions: every alert follows the kube-prometheus conventions (a
// KubectlRegistry name, a severity, a summary, a description and a runbook), and its
// runbook is a section of docs/monitoring.md.
func TestAlertConventions(t *testing.T) {
	doc, err := os.ReadFile("../docs/monitoring.md")
	if err != nil {
		t.Fatal(err)
	}
	headings := map[string]bool{}
	for line := range strings.SplitSeq(string(doc), "\n") {
		if h, ok := strings.CutPrefix(line, "### "); ok {
			headings[strings.ToLower(strings.TrimSpace(h))] = true
		}
	}
	const runbooks = "https://github.com/kubectl-registry/kubectl-registry/blob/main/docs/monitoring.md#"
	var problems []string
	alerts := 0
	for _, g := range packRules(t).Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts++
			if !regexp.MustCompile(`^KubectlRegistry[A-Z][A-Za-z]+$`).MatchString(r.Alert) {
				problems = append(problems, r.Alert+": name is not KubectlRegistry<CamelCase>")
			}
			if !slices.Contains([]string{"info", "warning", "critical"}, r.Labels["severity"]) {
				problems = append(problems, r.Alert+": severity "+r.Labels["severity"]+" is not info, warning or critical")
			}
			for _, a := range []string{"summary", "description"} {
				if r.Annotations[a] == "" {
					problems = append(problems, r.Alert+": no "+a)
				}
			}
			if s := r.Annotations["summary"]; s != "" && !strings.HasSuffix(s, ".") {
				problems = append(problems, r.Alert+": the summary is not a sentence")
			}
			anchor := strings.ToLower(r.Alert)
			if r.Annotations["runbook_url"] != runbooks+anchor {
				problems = append(problems, r.Alert+": runbook_url is not "+runbooks+anchor)
			}
			if !headings[anchor] {
				problems = append(problems, r.Alert+": docs/monitoring.md has no section ### "+r.Alert)
			}
			if r.For == "" {
				problems = append(problems, r.Alert+": no for: a single evaluation fires it")
			}
		}
	}
	if alerts == 0 {
		problems = append(problems, "no alerts")
	}
	if len(problems) > 0 {
		t.Errorf("alerts:\n%s", strings.Join(problems, "\n"))
	}
}

// TestDashboard: the dashboard has a uid, unique panel IDs, and a query in every target.
func TestDashboard(t *testing.T) {
	d := packDashboard(t)
	var problems []string
	if d.UID == "" || d.Title == "" {
		problems = append(problems, "no uid or title")
	}
	ids := map[int]bool{}
	queries := 0
	for _, p := range d.Panels {
		if ids[p.ID] {
			problems = append(problems, "panel id "+p.Title+" repeated")
		}
		ids[p.ID] = true
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if tg.Expr == "" || tg.RefID == "" || refs[tg.RefID] {
				problems = append(problems, "panel "+p.Title+": a target without a query or with a repeated refId")
			}
			refs[tg.RefID] = true
			queries++
		}
		if p.Type != "row" && len(p.Targets) == 0 {
			problems = append(problems, "panel "+p.Title+" has no query")
		}
	}
	if queries == 0 {
		problems = append(problems, "no queries")
	}
	if len(problems) > 0 {
		t.Errorf("dashboard:\n%s", strings.Join(problems, "\n"))
	}
}

// recordingRegisterer registers with a registry and remembers the collectors.
type recordingRegisterer struct {
	*prometheus.Registry
	collectors []prometheus.Collector
}

func (r *recordingRegisterer) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return r.Registry.Register(c)
}

func (r *recordingRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// describedNames returns the names of the metrics c describes.
func describedNames(c prometheus.Collector) []string {
	ch := make(chan *prometheus.Desc)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	var names []string
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			names = append(names, m[1])
		}
	}
	return names
}

// exportedSeries returns the names of the series the controller exports: the registry's
// own metrics, registered the way the controller registers them (engine, peers,
// bootstrap), and the ones of controller-runtime's registry that the controller serves
// (controller-runtime, client-go, leader election, Go and process collectors). A
// histogram's series are its _bucket, _sum and _count.
func exportedSeries(t *testing.T) map[string]bool {
	t.Helper()
	rec := &recordingRegisterer{Registry: prometheus.NewRegistry()}
	engine.NewMetrics(rec)
	if _, err := clusters.NewMetrics(rec); err != nil {
		t.Fatal(err)
	}
	bootstrap.NewMetrics(rec)
	scheme := runtime.NewScheme()
	if _, err := peers.NewManager(peers.Options{Scheme: scheme, Namespace: "cluster-registry", LocalID: "local", Registerer: rec}); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	add := func(name string, histogram bool) {
		names[name] = true
		if histogram {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[name+s] = true
			}
		}
	}
	for _, c := range rec.collectors {
		_, vec := c.(*prometheus.HistogramVec)
		_, one := c.(prometheus.Histogram)
		for _, n := range describedNames(c) {
			add(n, vec || one)
		}
	}
	// controller-runtime's registry: every collector its packages registered at init,
	// with or without samples yet (Describe), and the types of those with samples.
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	histograms := map[string]bool{}
	for _, f := range families {
		if f.GetType().String() == "HISTOGRAM" {
			histograms[f.GetName()] = true
		}
	}
	crRegistry, ok := ctrlmetrics.Registry.(prometheus.Collector)
	if !ok {
		t.Fatal("controller-runtime's metrics registry cannot be described")
	}
	for _, n := range describedNames(crRegistry) {
		add(n, histograms[n])
	}
	return names
}

// prometheusSeries are series Prometheus itself adds for every target it scrapes.
var prometheusSeries = map[string]bool{"up": true}

// TestMonitoringPackUsesExportedMetrics: every metric an alert or a dashboard panel names is
// one the controller exports, so renaming a metric fails here.
func TestMonitoringPackUsesExportedMetrics(t *testing.T) {
	exported := exportedSeries(t)
	for _, must := range []string{"kubectl_registry_peer_up", "kubectl_registry_sync_latency_seconds_bucket", "leader_election_master_status", "process_resident_memory_bytes"} {
		if !exported[must] {
			t.Fatalf("the exported series lack %s: the registrations were not read", must)
		}
	}
	used := map[string][]string{} // metric -> where
	for _, g := range packRules(t).Groups {
		for _, r := range g.Rules {
			for _, m := range metricNames(r.Expr) {
				used[m] = append(used[m], "alert "+r.Alert)
			}
		}
	}
	d := packDashboard(t)
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			for _, m := range metricNames(tg.Expr) {
				used[m] = append(used[m], "panel "+p.Title)
			}
		}
	}
	for _, v := range d.Templating.List {
		if m := regexp.MustCompile(`^label_values\(([a-zA-Z_:][a-zA-Z0-9_:]*)`).FindStringSubmatch(v.Definition); m != nil {
			used[m[1]] = append(used[m[1]], "variable "+v.Name)
		}
	}
	if len(used) == 0 {
		t.Fatal("the pack names no metrics")
	}
	var unknown []string
	for m, where := range used {
		if !exported[m] && !prometheusSeries[m] {
			unknown = append(unknown, m+" (in "+strings.Join(slices.Compact(where), ", ")+")")
		}
	}
	sort.Strings(unknown)
	if len(unknown) > 0 {
		t.Errorf("the monitoring pack names metrics the controller does not export:\n%s", strings.Join(unknown, "\n"))
	}
}

var (
	promqlStrings   = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	promqlMatchers  = regexp.MustCompile(`\{[^{}]*\}`)
	promqlRanges    = regexp.MustCompile(`\[[^\]]*\]`)
	promqlGrouping  = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promqlVariables = regexp.MustCompile(`\$\{?\w+\}?`)
	promqlKeywords  = map[string]bool{
		"and": true, "or": true, "unless": true, "bool": true, "offset": true, "by": true, "without": true,
		"on": true, "ignoring": true, "group_left": true, "group_right": true, "inf": true, "nan": true, "atan2": true,
	}
)

// metricNames returns the metric names a PromQL expression selects, sorted: the
// identifiers left once strings, label matchers, ranges, grouping clauses and Grafana
// variables are removed, that are neither called (functions, aggregations) nor
// keywords, nor part of a number or duration.
func metricNames(expr string) []string {
	s := promqlStrings.ReplaceAllString(expr, `""`)
	s = promqlMatchers.ReplaceAllString(s, " ")
	s = promqlRanges.ReplaceAllString(s, " ")
	s = promqlGrouping.ReplaceAllString(s, " ")
	s = promqlVariables.ReplaceAllString(s, " ")
	isStart := func(c byte) bool { return c == '_' || c == ':' || (c|0x20 >= 'a' && c|0x20 <= 'z') }
	isPart := func(c byte) bool { return isStart(c) || (c >= '0' && c <= '9') }
	seen := map[string]bool{}
	for i := 0; i < len(s); {
		c := s[i]
		if !isStart(c) || (i > 0 && (isPart(s[i-1]) || s[i-1] == '.')) {
			i++
			continue
		}
		j := i
		for j < len(s) && isPart(s[j]) {
			j++
		}
		word := s[i:j]
		k := j
		for k < len(s) && (s[k] == ' ' || s[k] == '\n' || s[k] == '\t') {
			k++
		}
		if !(k < len(s) && s[k] == '(') && !promqlKeywords[strings.ToLower(word)] {
			seen[word] = true
		}
		i = j
	}
	out := make([]string, 0, len(seen))
	for w := range seen {
		out = append(out, w)
	}
	sort.Strings(out)
	return out
}

func TestMetricNames(t *testing.T) {
	tests := []struct {
		expr string
		want []string
	}{
		{`up`, []string{"up"}},
		{`kubectl_registry_peer_up{cluster="a", job=~"x|y"} == 0`, []string{"kubectl_registry_peer_up"}},
		{`sum by (namespace, rule) (rate(a_total[5m])) > 0.05`, []string{"a_total"}},
		{"histogram_quantile(0.99, sum by (le) (rate(lat_seconds_bucket{ns=\"$namespace\"}[$__rate_interval])))", []string{"lat_seconds_bucket"}},
		{`(a == 0) and on (namespace, pod) (b{name="x"} == 1)`, []string{"a", "b"}},
		{`time() - max by (namespace) (ts_seconds) > 15 * 60`, []string{"ts_seconds"}},
		{`max(x) < 1 or (max(up{job="j"}) == 1 unless on (namespace) y)`, []string{"up", "x", "y"}},
		{`rate(c_total[5m] offset 1h) > 1e3`, []string{"c_total"}},
		{`label_replace(m, "dst", "$1", "src", "(.*)")`, []string{"m"}},
		{`sum without (pod) (m1) / ignoring (x) group_left (y) m2`, []string{"m1", "m2"}},
		{`-inf < NaN`, []string{}},
		{`x:recorded:rate5m * 2`, []string{"x:recorded:rate5m"}},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, metricNames(tt.expr)); diff != "" {
				t.Errorf("metricNames(%q) (-want +got):\n%s", tt.expr, diff)
			}
		})
	}
}

// promtool returns the promtool binary: $PROMTOOL, else promtool in
// $KUBEBUILDER_ASSETS (make testbin builds it into bin/testbin); the test skips when
// neither is set and fails when the one named is missing.
func promtool(t *testing.T) string {
	t.Helper()
	path := os.Getenv("PROMTOOL")
	if path == "" {
		dir := os.Getenv("KUBEBUILDER_ASSETS")
		if dir == "" {
			t.Skip("PROMTOOL and KUBEBUILDER_ASSETS unset: run make testbin, or make test")
		}
		path = filepath.Join(dir, "promtool")
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			t.Skipf("no promtool in KUBEBUILDER_ASSETS (%s): run make testbin, or make test", dir)
		}
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("promtool: %v (make testbin builds it)", err)
	}
	return path
}

// TestPromtoolRules runs `promtool check rules` on the PrometheusRule's groups and
// `promtool test rules` with monitoring/testdata/alerts.test.yaml, which fires every
// alert on series shaped like the controller's.
func TestPromtoolRules(t *testing.T) {
	bin := promtool(t)
	dir := t.TempDir()
	spec, err := yaml.Marshal(monitoringPack(t)["PrometheusRule"].Object["spec"])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), spec, 0o600); err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile("monitoring/testdata/alerts.test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts.test.yaml"), tests, 0o600); err != nil {
		t.Fatal(err)
	}
	// Every alert is tested.
	var tf struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(tests, &tf); err != nil {
		t.Fatal(err)
	}
	fired := map[string]bool{}
	for _, tc := range tf.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fired[a.Alertname] = true
			}
		}
	}
	for _, g := range packRules(t).Groups {
		for _, r := range g.Rules {
			if r.Alert != "" && !fired[r.Alert] {
				t.Errorf("alerts.test.yaml never expects %s to fire", r.Alert)
			}
		}
	}
	for _, args := range [][]string{{"check", "rules", "rules.yaml"}, {"test", "rules", "alerts.test.yaml"}} {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
