package syncdiff

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// The same snapshot (testdata/sameplan/fixture.yaml at the module root) is planned by the
// engine (reconciler/engine TestSamePlan, from its caches and peers) and by sync-diff
// (here, from its views): both must say what testdata/sameplan/plan.golden says, line for
// line. The golden file is shared and written by hand: neither test rewrites it.

// samePlanFixture is the snapshot of fixture.yaml.
type samePlanFixture struct {
	Self     string                      `json:"self"`
	Clusters []v1alpha1.Cluster          `json:"clusters"`
	Rules    []v1alpha1.ResourceSyncRule `json:"rules"`
	Peers    map[string][]map[string]any `json:"peers"`
	Objects  []map[string]any            `json:"objects"`
}

func readSamePlan(t *testing.T) (samePlanFixture, []string) {
	t.Helper()
	dir := filepath.Join("..", "..", "testdata", "sameplan")
	data, err := os.ReadFile(filepath.Join(dir, "fixture.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var f samePlanFixture
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		t.Fatal(err)
	}
	golden, err := os.ReadFile(filepath.Join(dir, "plan.golden"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, l := range strings.Split(string(golden), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			want = append(want, l)
		}
	}
	return f, want
}

func unstructuredList(objs []map[string]any) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		out = append(out, &unstructured.Unstructured{Object: o})
	}
	return out
}

// samePlanLines writes the plan items as the shared golden file has them.
func samePlanLines(items []Item) []string {
	var out []string
	for _, it := range items {
		ref := it.Kind + " " + it.Namespace + "/" + it.Name
		switch {
		case it.Action == ActionFailed && strings.HasPrefix(it.Reason, "refused here ("):
			reason, _, _ := strings.Cut(strings.TrimPrefix(it.Reason, "refused here ("), ")")
			out = append(out, fmt.Sprintf("refused %s rule=%s: %s", ref, it.Rule, reason))
		case it.Action == ActionFailed:
			out = append(out, fmt.Sprintf("failed %s rule=%s", ref, it.Rule))
		default:
			out = append(out, fmt.Sprintf("%s %s rule=%s from=%s origin=%s", it.Action, ref, it.Rule, it.From, it.Origin))
		}
	}
	sort.Strings(out)
	return out
}

// TestSamePlan: sync-diff plans the shared snapshot as the engine does.
func TestSamePlan(t *testing.T) {
	f, want := readSamePlan(t)
	byID := map[types.UID]*view{}
	var local *view
	for _, c := range f.Clusters {
		var v *view
		if c.Name == f.Self {
			v = fakeView("ctx-"+c.Name, c.Spec.ClusterID, unstructuredList(f.Objects)...)
			v.Clusters, v.Rules = f.Clusters, f.Rules
			local = v
		} else if objs, ok := f.Peers[c.Name]; ok {
			v = fakeView("ctx-"+c.Name, c.Spec.ClusterID, unstructuredList(objs)...)
		} else {
			continue // a member none of the contexts reaches
		}
		byID[c.Spec.ClusterID] = v
	}
	res := (&differ{local: local, byID: byID, namespace: v1alpha1.DefaultNamespace}).plan(context.Background())
	if diff := cmp.Diff(want, samePlanLines(res.Items)); diff != "" {
		t.Errorf("sync-diff's plan of the shared snapshot (-golden +sync-diff):\n%s", diff)
	}
}
