package syncdiff

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// TestPlanShowsTheChosenOrigin: two peers offer the same ConfigMap; sync-diff says the
// copy follows the origin with the lowest cluster ID, not the peer whose name sorts
// first, why, and lists the other as a losing candidate, in the JSON plan and the text.
// A copy of the other origin keeps following it while it has the object.
func TestPlanShowsTheChosenOrigin(t *testing.T) {
	const idLow, idHigh = types.UID("id-0-low"), types.UID("id-9-high")
	cm := func(from string) *unstructured.Unstructured {
		return obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: shared, namespace: diff-test}, data: {from: `+from+`}}`)
	}
	// "alpha" sorts first by name but has the higher cluster ID.
	alpha := fakeView("ctx-alpha", idHigh, cm("alpha"))
	zulu := fakeView("ctx-zulu", idLow, cm("zulu"))
	plan := func(onB ...*unstructured.Unstructured) result {
		b := fakeView("ctx-b", idB, append([]*unstructured.Unstructured{obj(t, nsYAML)}, onB...)...)
		b.Clusters = []v1alpha1.Cluster{cluster("alpha", idHigh), cluster("zulu", idLow), cluster("b", idB)}
		return (&differ{local: b, byID: map[types.UID]*view{idHigh: alpha, idLow: zulu, idB: b}, preview: []*v1alpha1.ResourceSyncRule{cmRule}}).plan(context.Background())
	}

	res := plan()
	if diff := cmp.Diff([]string{"create ConfigMap diff-test/shared configmaps"}, actions(res.Items)); diff != "" {
		t.Fatalf("plan (-want +got):\n%s", diff)
	}
	it := res.Items[0]
	type choice struct {
		From   string
		Origin types.UID
		Why    string
		Losing []Losing
	}
	want := choice{From: "zulu", Origin: idLow,
		Why:    "origin id-0-low has the lowest cluster ID of the 2 origins that have it",
		Losing: []Losing{{From: "alpha", Origin: idHigh, Rule: "configmaps", Why: "origin id-9-high has a higher cluster ID than id-0-low"}}}
	if diff := cmp.Diff(want, choice{it.From, it.Origin, it.Why, it.Losing}); diff != "" {
		t.Errorf("the choice (-want +got):\n%s", diff)
	}
	if got, _, _ := unstructured.NestedString(it.Object.Object, "data", "from"); got != "zulu" {
		t.Errorf("the desired copy has the data of %q, want zulu", got)
	}
	var out bytes.Buffer
	printText(&out, fakeView("ctx-b", idB), res.Items, false, false, false)
	for _, line := range []string{
		"    origin id-0-low (from zulu): origin id-0-low has the lowest cluster ID of the 2 origins that have it\n",
		"    not from alpha (origin id-9-high, rule configmaps): origin id-9-high has a higher cluster ID than id-0-low\n",
	} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("the text output lacks %q:\n%s", line, out.String())
		}
	}

	// A copy of alpha (made while zulu could not be read) keeps following alpha.
	copyOfAlpha := written(Item{Object: obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: shared, namespace: diff-test, labels: {`+
		v1alpha1.RuleLabel+`: configmaps, `+v1alpha1.OwnershipLabel+`: `+string(idHigh)+`}, annotations: {`+
		v1alpha1.OwnershipAnnotation+`: `+string(idHigh)+`}}, data: {from: old}}`)})
	res = plan(copyOfAlpha)
	if diff := cmp.Diff([]string{"update ConfigMap diff-test/shared configmaps"}, actions(res.Items)); diff != "" {
		t.Fatalf("plan (-want +got):\n%s", diff)
	}
	it = res.Items[0]
	want = choice{From: "alpha", Origin: idHigh,
		Why:    "the copy keeps following its origin id-9-high, which still has it (a copy changes origin only when its origin no longer has the object)",
		Losing: []Losing{{From: "zulu", Origin: idLow, Rule: "configmaps", Why: "the copy keeps following its origin id-9-high, which still has it"}}}
	if diff := cmp.Diff(want, choice{it.From, it.Origin, it.Why, it.Losing}); diff != "" {
		t.Errorf("the choice for a copy of alpha (-want +got):\n%s", diff)
	}
}
