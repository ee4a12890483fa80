package harness

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

// CRDsDir is the registry's CRDs relative to the directory of a test package directly
// under reconciler/e2e, where `go test` runs its tests.
const CRDsDir = "../../../manifests/crds"

// BedOptions returns the options of an e2e package's shared bed: the named clusters
// (kubeconfig contexts) with the registry's CRDs installed. Pass them to testbed.Main
// from TestMain; append to CRDDirectoryPaths for more CRDs.
func BedOptions(names ...string) testbed.Options {
	return testbed.Options{Names: names, CRDDirectoryPaths: []string{CRDsDir}}
}

// RealisticBedOptions is BedOptions for clusters that differ the way real clusters do
// (testbed.Options.Realistic): each has its own service CIDR and NodePort range and runs
// the workload controllers. An e2e package starts a realistic group with
//
//	func TestMain(m *testing.M) {
//		os.Exit(testbed.Main(m, harness.RealisticBedOptions("c1", "c2", "c3"), &bed))
//	}
//
// and then, in a test, harness.FormGroup or FormGroupWithMetrics as usual.
func RealisticBedOptions(names ...string) testbed.Options {
	o := BedOptions(names...)
	o.Realistic = true
	return o
}

// Metrics is a controller's /metrics, served over HTTPS to authenticated and
// authorized clients, with a scraper allowed to read it.
type Metrics struct {
	// URL is https://127.0.0.1:PORT/metrics.
	URL string
	// Scraper presents the token of a ServiceAccount bound to the installation's
	// cluster-registry-metrics-reader ClusterRole.
	Scraper *testbed.MetricsScraper
}

// Get reads the metrics; a status other than 200 is an error.
func (m Metrics) Get() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return m.Scraper.Get(ctx, m.URL)
}

// MetricsAt returns the Metrics a controller of cluster c serving /metrics on addr
// (`serve --metrics-bind-address addr`) answers, read the way an in-cluster Prometheus
// does: a ServiceAccount bound to cluster-registry-metrics-reader (Install applies it),
// its token from the TokenRequest API.
func MetricsAt(t *testing.T, c *testbed.Cluster, addr string) Metrics {
	t.Helper()
	cs, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := testbed.NewMetricsScraper(ctx, cs, v1alpha1.DefaultNamespace, v1alpha1.MetricsReaderRoleName)
	if err != nil {
		t.Fatalf("a metrics scraper on %s: %v", c.Name, err)
	}
	return Metrics{URL: "https://" + addr + "/metrics", Scraper: s}
}

// FormGroupWithMetrics is FormGroup with /metrics served by every controller on a
// loopback port of its own; it returns an admin client and the Metrics per cluster.
func FormGroupWithMetrics(t *testing.T, bed *testbed.Bed, names ...string) (map[string]client.Client, map[string]Metrics) {
	t.Helper()
	metrics := map[string]Metrics{}
	clients := FormGroupServing(t, bed, func(n string) []string {
		addr := FreeAddr(t)
		metrics[n] = MetricsAt(t, bed.Cluster(n), addr)
		return []string{"--metrics-bind-address", addr}
	}, names...)
	return clients, metrics
}

// MetricSum sums the samples of a metric whose labels contain every one of want
// (`name="value"` strings) in the Prometheus text exposition m serves. A metric with no
// sample yet sums to 0.
func MetricSum(m Metrics, metric string, want ...string) (float64, error) {
	body, err := m.Get()
	if err != nil {
		return 0, err
	}
	var sum float64
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, metric+"{") && !strings.HasPrefix(line, metric+" ") {
			continue
		}
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(line, w)
		}
		if !ok {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("metric line %q: %w", line, err)
		}
		sum += v
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("reading %s: %w", m.URL, err)
	}
	return sum, nil
}
