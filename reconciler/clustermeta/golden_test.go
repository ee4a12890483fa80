package clustermeta

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite golden files")

const fixtureDir = "../../testdata/nodes"

// goldenCases lists every fixture in fixtureDir with the gitVersion its API server
// reports. TestFixturesHaveCases keeps the list and the directory in step.
var goldenCases = []struct {
	name          string
	serverVersion string
}{
	{"aks", "v1.33.2"},
	{"eks", "v1.30.4-eks-a737599"},
	{"empty", "v1.36.3"},
	{"gke", "v1.30.5-gke.1014001"},
	{"iks", "v1.19.5"},
	{"k3s", "v1.30.6+k3s1"},
	{"kind", "v1.34.0"},
	{"mixed-zones", "v1.31.3"},
	{"openshift", "v1.29.8+632b078"},
	{"pke", "v1.17.16"},
	{"rke", "v1.25.6"},
	{"rke2", "v1.29.10+rke2r1"},
	{"unknown", "v1.32.1"},
	{"vsphere-unknown-distribution", "v1.28.4"},
}

// loadNodes reads testdata/nodes/<name>.yaml, a List (or NodeList) of Nodes. Unknown
// fields are errors, so a misspelt key in a fixture cannot silently drop a signal.
func loadNodes(t *testing.T, name string) []corev1.Node {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fixtureDir, name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var list corev1.NodeList
	if err := yaml.UnmarshalStrict(data, &list); err != nil {
		t.Fatalf("%s.yaml: %v", name, err)
	}
	if list.Kind != "List" && list.Kind != "NodeList" {
		t.Fatalf("%s.yaml: kind %q, want List or NodeList", name, list.Kind)
	}
	for i, n := range list.Items {
		if n.Kind != "Node" || n.Name == "" {
			t.Fatalf("%s.yaml: item %d is not a named Node (kind %q, name %q)", name, i, n.Kind, n.Name)
		}
	}
	return list.Items
}

func TestGolden(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			got := Detect(loadNodes(t, tc.name), tc.serverVersion)
			path := filepath.Join(fixtureDir, tc.name+".golden.yaml")

			if *update {
				out, err := yaml.Marshal(got)
				if err != nil {
					t.Fatal(err)
				}
				header := fmt.Sprintf("# clustermeta.Detect(%s.yaml, %q)\n"+
					"# Rewritten by: go test ./reconciler/clustermeta -update (review every change by eye)\n",
					tc.name, tc.serverVersion)
				if err := os.WriteFile(path, append([]byte(header), out...), 0o644); err != nil {
					t.Fatal(err)
				}
			}

			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			var want v1alpha1.ClusterMetadata
			if err := yaml.UnmarshalStrict(data, &want); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Detect mismatch for %s (-golden +got):\n%s", tc.name, diff)
			}
		})
	}
}

// TestFixturesHaveCases fails when a fixture has no entry in goldenCases (it would
// never be checked) or an entry has no fixture.
func TestFixturesHaveCases(t *testing.T) {
	entries, err := os.ReadDir(fixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	var fixtures []string
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, ".yaml") && !strings.HasSuffix(name, ".golden.yaml") {
			fixtures = append(fixtures, strings.TrimSuffix(name, ".yaml"))
		}
	}
	var cases []string
	for _, tc := range goldenCases {
		cases = append(cases, tc.name)
	}
	slices.Sort(cases)
	if diff := cmp.Diff(fixtures, cases); diff != "" {
		t.Errorf("fixtures in %s and goldenCases differ (-fixtures +cases):\n%s", fixtureDir, diff)
	}
}

// TestNodesAloneAgree checks that the node rules alone, without the API server
// version, reach the distribution of every fixture: the version markers only
// confirm what the nodes say.
func TestNodesAloneAgree(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			nodes := loadNodes(t, tc.name)
			if len(nodes) == 0 {
				t.Skip("no nodes")
			}
			withServer := Detect(nodes, tc.serverVersion).Distribution
			if got := Detect(nodes, "").Distribution; got != withServer {
				t.Errorf("distribution from nodes alone = %q, with server version %q = %q", got, tc.serverVersion, withServer)
			}
		})
	}
}

// TestOrderIndependence checks that Detect gives identical output for every order of
// the same nodes, and never modifies its input.
func TestOrderIndependence(t *testing.T) {
	var all []corev1.Node
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			nodes := loadNodes(t, tc.name)
			all = append(all, nodes...)
			want := Detect(nodes, tc.serverVersion)
			for _, perm := range permutations(len(nodes)) {
				shuffled := make([]corev1.Node, len(nodes))
				for i, j := range perm {
					shuffled[i] = *nodes[j].DeepCopy()
				}
				if diff := cmp.Diff(want, Detect(shuffled, tc.serverVersion)); diff != "" {
					t.Errorf("order %v changes the output (-first +permuted):\n%s", perm, diff)
				}
			}
		})
	}

	// Every fixture's nodes in one list: many votes, several ties, all rules at once.
	t.Run("all fixtures shuffled", func(t *testing.T) {
		before := make([]corev1.Node, len(all))
		for i := range all {
			before[i] = *all[i].DeepCopy()
		}
		want := Detect(all, "")
		if diff := cmp.Diff(before, all); diff != "" {
			t.Fatalf("Detect modified its input:\n%s", diff)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range 200 {
			shuffled := slices.Clone(all)
			rng.Shuffle(len(shuffled), func(a, b int) { shuffled[a], shuffled[b] = shuffled[b], shuffled[a] })
			if i == 0 {
				slices.Reverse(shuffled)
			}
			if diff := cmp.Diff(want, Detect(shuffled, "")); diff != "" {
				t.Fatalf("shuffle %d changes the output (-first +shuffled):\n%s", i, diff)
			}
		}
	})
}

// permutations returns every ordering of 0..n-1.
func permutations(n int) [][]int {
	if n == 0 {
		return [][]int{{}}
	}
	var out [][]int
	for _, p := range permutations(n - 1) {
		for i := 0; i <= len(p); i++ {
			q := slices.Insert(slices.Clone(p), i, n-1)
			out = append(out, q)
		}
	}
	return out
}
