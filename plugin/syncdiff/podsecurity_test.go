package syncdiff

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

var deploymentRule = &v1alpha1.ResourceSyncRule{
	ObjectMeta: metav1.ObjectMeta{Name: "deployments"},
	Spec: v1alpha1.ResourceSyncRuleSpec{
		GVK:   v1alpha1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
		Rules: []v1alpha1.SyncRule{{}},
	},
}

// TestPlanPodSecurity: sync-diff shows what the controller refuses by the Pod Security
// Standards (at the level of b's namespace label, which it reads from b) and in the
// registry's namespaces as failed, with the reason, and a clean Deployment as a create.
func TestPlanPodSecurity(t *testing.T) {
	deploy := func(ns, name, spec string) *unstructured.Unstructured {
		return obj(t, `{apiVersion: apps/v1, kind: Deployment, metadata: {name: `+name+`, namespace: `+ns+`},
			spec: {selector: {matchLabels: {app: a}}, template: {metadata: {labels: {app: a}}, spec: `+spec+`}}}`)
	}
	onA := []*unstructured.Unstructured{
		deploy("diff-test", "clean", `{containers: [{name: c, image: i}]}`),
		deploy("diff-test", "privileged", `{containers: [{name: c, image: i, securityContext: {privileged: true}}]}`),
		deploy("diff-test", "hostpath", `{volumes: [{name: root, hostPath: {path: /}}], containers: [{name: c, image: i}]}`),
		deploy("strict", "clean", `{containers: [{name: c, image: i}]}`),
		deploy(v1alpha1.DefaultNamespace, "controller", `{serviceAccountName: cluster-registry-controller, containers: [{name: c, image: i}]}`),
	}
	onB := []*unstructured.Unstructured{
		obj(t, `{apiVersion: v1, kind: Namespace, metadata: {name: strict, labels: {pod-security.kubernetes.io/enforce: restricted}}}`),
		obj(t, `{apiVersion: v1, kind: Namespace, metadata: {name: cluster-registry}}`),
	}
	// As planB, with the registry namespace known.
	a := fakeView("ctx-a", idA, onA...)
	a.Clusters = []v1alpha1.Cluster{cluster("a", idA)}
	b := fakeView("ctx-b", idB, append([]*unstructured.Unstructured{obj(t, nsYAML)}, onB...)...)
	b.Clusters = []v1alpha1.Cluster{cluster("a", idA), cluster("b", idB)}
	p := &differ{local: b, byID: map[types.UID]*view{idA: a, idB: b}, preview: []*v1alpha1.ResourceSyncRule{deploymentRule}, namespace: v1alpha1.DefaultNamespace}
	res := p.plan(context.Background())
	got := map[string]string{}
	for _, it := range res.Items {
		got[it.Action+" "+objectRef(it)] = it.Reason
	}
	want := map[string][]string{
		"create Deployment diff-test/clean":             nil,
		"failed Deployment diff-test/privileged":        {"refused here (PodSecurity)", `violates PodSecurity "baseline:latest": privileged (container "c" must not set securityContext.privileged=true)`, "spec.podSecurity: privileged"},
		"failed Deployment diff-test/hostpath":          {"refused here (PodSecurity)", `hostPath volumes (volume "root")`},
		"failed Deployment strict/clean":                {"refused here (PodSecurity)", `violates PodSecurity "restricted:latest"`, "namespace strict is labelled pod-security.kubernetes.io/enforce=restricted"},
		"failed Deployment cluster-registry/controller": {"refused here (CopyRefused)", "namespace cluster-registry is the registry's", "cluster-registry-controller"},
	}
	wantKeys, gotKeys := []string{}, []string{}
	for k := range want {
		wantKeys = append(wantKeys, k)
	}
	for k := range got {
		gotKeys = append(gotKeys, k)
	}
	if diff := cmp.Diff(wantKeys, gotKeys, cmpSorted); diff != "" {
		t.Fatalf("items (-want +got):\n%s\n%v", diff, got)
	}
	for k, parts := range want {
		for _, p := range parts {
			if !strings.Contains(got[k], p) {
				t.Errorf("%s: the reason does not say %q:\n%s", k, p, got[k])
			}
		}
	}
}

var cmpSorted = cmp.Transformer("sorted", func(in []string) []string {
	out := append([]string(nil), in...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
})
