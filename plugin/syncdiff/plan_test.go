package syncdiff

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// These tests run the differ on clusters held in memory: the update diffs of a
// hand-edited copy, deletes, conflicts and Secret masking, which the envtest suite cannot
// show reliably (the running controllers restore a hand edit within a second).

const (
	idA = types.UID("id-a")
	idB = types.UID("id-b")
)

func obj(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(y), &m); err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

func fakeView(name string, id types.UID, objs ...*unstructured.Unstructured) *view {
	v := &view{Context: name, ID: id, Installed: true}
	v.list = func(_ context.Context, gvk schema.GroupVersionKind, ns string) ([]unstructured.Unstructured, error) {
		var out []unstructured.Unstructured
		for _, o := range objs {
			if o.GroupVersionKind() == gvk && (ns == "" || o.GetNamespace() == ns) {
				out = append(out, *o.DeepCopy())
			}
		}
		return out, nil
	}
	return v
}

func cluster(name string, id types.UID) v1alpha1.Cluster {
	return v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.ClusterSpec{ClusterID: id}}
}

var cmRule = &v1alpha1.ResourceSyncRule{
	ObjectMeta: metav1.ObjectMeta{Name: "configmaps"},
	Spec: v1alpha1.ResourceSyncRuleSpec{
		GVK:   v1alpha1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
		Rules: []v1alpha1.SyncRule{{Matches: []v1alpha1.SyncRuleMatch{{Namespaces: []string{"diff-test"}}}}},
	},
}

var secretRule = &v1alpha1.ResourceSyncRule{
	ObjectMeta: metav1.ObjectMeta{Name: "secrets"},
	Spec: v1alpha1.ResourceSyncRuleSpec{
		GVK:   v1alpha1.GroupVersionKind{Version: "v1", Kind: "Secret"},
		Rules: []v1alpha1.SyncRule{{Matches: []v1alpha1.SyncRuleMatch{{Namespaces: []string{"diff-test"}}}}},
	},
}

const nsYAML = `{apiVersion: v1, kind: Namespace, metadata: {name: diff-test}}`

// planB plans cluster b, whose peer is a, with the given objects on each.
func planB(t *testing.T, onA, onB []*unstructured.Unstructured, preview ...*v1alpha1.ResourceSyncRule) result {
	t.Helper()
	a := fakeView("ctx-a", idA, onA...)
	a.Clusters = []v1alpha1.Cluster{cluster("a", idA)}
	b := fakeView("ctx-b", idB, append([]*unstructured.Unstructured{obj(t, nsYAML)}, onB...)...)
	b.Clusters = []v1alpha1.Cluster{cluster("a", idA), cluster("b", idB)}
	p := &differ{local: b, byID: map[types.UID]*view{idA: a, idB: b}, preview: preview}
	return p.plan(context.Background())
}

func actions(items []Item) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.Action+" "+objectRef(it)+" "+it.Rule)
	}
	return out
}

// written is what the controller would have written for a create: the desired object,
// with the fields the API server sets.
func written(it Item) *unstructured.Unstructured {
	u := it.Object.DeepCopy()
	u.SetUID("uid-of-copy")
	u.SetResourceVersion("42")
	u.SetCreationTimestamp(metav1.Now())
	return u
}

func TestPlanCreateThenUnchangedThenUpdate(t *testing.T) {
	source := obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: one, namespace: diff-test, uid: src-uid, resourceVersion: "7"}, data: {k: v}}`)
	res := planB(t, []*unstructured.Unstructured{source}, nil, cmRule)
	if diff := cmp.Diff([]string{"create ConfigMap diff-test/one configmaps"}, actions(res.Items)); diff != "" {
		t.Fatalf("plan (-want +got):\n%s", diff)
	}
	if len(res.Warnings) != 0 {
		t.Errorf("warnings: %v", res.Warnings)
	}
	create := res.Items[0]
	if create.From != "a" || create.Origin != idA {
		t.Errorf("from %q origin %q", create.From, create.Origin)
	}
	if got := create.Object.GetAnnotations()[v1alpha1.OwnershipAnnotation]; got != string(idA) {
		t.Errorf("the desired copy has the ownership mark %q", got)
	}

	// The copy as the controller writes it: unchanged.
	copyOnB := written(create)
	res = planB(t, []*unstructured.Unstructured{source}, []*unstructured.Unstructured{copyOnB}, cmRule)
	if diff := cmp.Diff([]string{"none ConfigMap diff-test/one configmaps"}, actions(res.Items)); diff != "" {
		t.Fatalf("plan (-want +got):\n%s", diff)
	}

	// A hand edit of the copy: an update, with the exact field diff.
	edited := copyOnB.DeepCopy()
	_ = unstructured.SetNestedField(edited.Object, "by-hand", "data", "extra")
	res = planB(t, []*unstructured.Unstructured{source}, []*unstructured.Unstructured{edited}, cmRule)
	if diff := cmp.Diff([]string{"update ConfigMap diff-test/one configmaps"}, actions(res.Items)); diff != "" {
		t.Fatalf("plan (-want +got):\n%s", diff)
	}
	d := unifiedDiff(res.Items[0], false)
	var changed []string
	for _, l := range strings.Split(d, "\n") {
		if (strings.HasPrefix(l, "+") || strings.HasPrefix(l, "-")) && !strings.HasPrefix(l, "+++") && !strings.HasPrefix(l, "---") {
			changed = append(changed, l)
		}
	}
	if diff := cmp.Diff([]string{"-  extra: by-hand"}, changed); diff != "" {
		t.Errorf("changed lines (-want +got):\n%s\nwhole diff:\n%s", diff, d)
	}
	for _, f := range []string{"resourceVersion", "uid:", "creationTimestamp"} {
		if strings.Contains(d, f) {
			t.Errorf("the diff shows the server-set field %s:\n%s", f, d)
		}
	}
}

func TestPlanDeleteAndConflict(t *testing.T) {
	source := obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: one, namespace: diff-test}, data: {k: v}}`)
	create := planB(t, []*unstructured.Unstructured{source}, nil, cmRule).Items[0]

	// The origin no longer has it: the copy is deleted.
	res := planB(t, nil, []*unstructured.Unstructured{written(create)}, cmRule)
	if diff := cmp.Diff([]string{"delete ConfigMap diff-test/one configmaps"}, actions(res.Items)); diff != "" {
		t.Fatalf("plan (-want +got):\n%s", diff)
	}

	// An object made on b is in the way: a conflict, never touched.
	mine := obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: one, namespace: diff-test}, data: {k: mine}}`)
	res = planB(t, []*unstructured.Unstructured{source}, []*unstructured.Unstructured{mine}, cmRule)
	if diff := cmp.Diff([]string{"conflict ConfigMap diff-test/one configmaps"}, actions(res.Items)); diff != "" {
		t.Fatalf("plan (-want +got):\n%s", diff)
	}
	if !strings.Contains(res.Items[0].Reason, "ownership mark") {
		t.Errorf("reason %q", res.Items[0].Reason)
	}

	// The namespace is missing and the rule may not create it: the controller would fail.
	a := fakeView("ctx-a", idA, source)
	b := fakeView("ctx-b", idB)
	b.Clusters = []v1alpha1.Cluster{cluster("a", idA), cluster("b", idB)}
	res = (&differ{local: b, byID: map[types.UID]*view{idA: a, idB: b}, preview: []*v1alpha1.ResourceSyncRule{cmRule}}).plan(context.Background())
	if diff := cmp.Diff([]string{"failed ConfigMap diff-test/one configmaps"}, actions(res.Items)); diff != "" {
		t.Fatalf("plan (-want +got):\n%s", diff)
	}
}

func TestUnreachablePeerIsAWarningAndNeverADelete(t *testing.T) {
	source := obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: one, namespace: diff-test}, data: {k: v}}`)
	create := planB(t, []*unstructured.Unstructured{source}, nil, cmRule).Items[0]
	b := fakeView("ctx-b", idB, obj(t, nsYAML), written(create))
	b.Clusters = []v1alpha1.Cluster{cluster("a", idA), cluster("b", idB)}
	res := (&differ{local: b, byID: map[types.UID]*view{idB: b}, preview: []*v1alpha1.ResourceSyncRule{cmRule}}).plan(context.Background())
	if diff := cmp.Diff([]string{"none ConfigMap diff-test/one configmaps"}, actions(res.Items)); diff != "" {
		t.Fatalf("plan (-want +got):\n%s", diff)
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "peer a") {
		t.Errorf("warnings %v", res.Warnings)
	}
}

func TestSecretsAreMasked(t *testing.T) {
	source := obj(t, `{apiVersion: v1, kind: Secret, metadata: {name: s, namespace: diff-test}, type: Opaque, data: {password: c2VjcmV0, same: eA==}}`)
	res := planB(t, []*unstructured.Unstructured{source}, nil, secretRule)
	if diff := cmp.Diff([]string{"create Secret diff-test/s secrets"}, actions(res.Items)); diff != "" {
		t.Fatalf("plan (-want +got):\n%s", diff)
	}
	copyOnB := written(res.Items[0])
	_ = unstructured.SetNestedField(copyOnB.Object, "b3RoZXI=", "data", "password")
	res = planB(t, []*unstructured.Unstructured{source}, []*unstructured.Unstructured{copyOnB}, secretRule)
	if diff := cmp.Diff([]string{"update Secret diff-test/s secrets"}, actions(res.Items)); diff != "" {
		t.Fatalf("plan (-want +got):\n%s", diff)
	}
	d := unifiedDiff(res.Items[0], false)
	for _, secret := range []string{"c2VjcmV0", "b3RoZXI=", "eA=="} {
		if strings.Contains(d, secret) {
			t.Errorf("the diff shows Secret data %s:\n%s", secret, d)
		}
	}
	if !strings.Contains(d, "-  password: '*** (before)'") || !strings.Contains(d, "+  password: '*** (after)'") {
		t.Errorf("the diff does not show which key changed:\n%s", d)
	}
	if d := unifiedDiff(res.Items[0], true); !strings.Contains(d, "+  password: c2VjcmV0") {
		t.Errorf("--show-secrets hides the data:\n%s", d)
	}

	var out bytes.Buffer
	if err := printPlan(&out, "json", res.Items, nil, false); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "c2VjcmV0") {
		t.Errorf("the JSON plan shows Secret data:\n%s", out.String())
	}
	var p plan
	if err := json.Unmarshal(out.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Items) != 1 || p.Items[0].Action != "update" || p.Items[0].Object == nil {
		t.Errorf("plan %+v", p)
	}
}

func TestMembershipObjectsAndCoreRule(t *testing.T) {
	// The built-in rule syncs a's ResourceSyncRules to b; the reader Secrets of the
	// membership sync are never the engine's, even under a rule that matches Secrets.
	rsr := obj(t, `{apiVersion: clusterregistry.k8s.cisco.com/v1alpha1, kind: ResourceSyncRule, metadata: {name: from-a}, spec: {groupVersionKind: {version: v1, kind: ConfigMap}, rules: [{}]}}`)
	reader := obj(t, `{apiVersion: v1, kind: Secret, metadata: {name: a, namespace: diff-test}, type: `+string(v1alpha1.SecretTypeClusterRegistry)+`, data: {kubeconfig: eA==}}`)
	res := planB(t, []*unstructured.Unstructured{rsr, reader}, nil, secretRule)
	var all []string
	for _, it := range res.Items {
		all = append(all, it.Action+" "+objectRef(it)+" "+it.Rule)
	}
	want := []string{"create ResourceSyncRule from-a " + v1alpha1.CoreRuleName}
	if diff := cmp.Diff(want, all); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}

func TestExternalDiff(t *testing.T) {
	if _, err := exec.LookPath("diff"); err != nil {
		t.Skip("no diff program")
	}
	source := obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: one, namespace: diff-test}, data: {k: v}}`)
	copyOnB := written(planB(t, []*unstructured.Unstructured{source}, nil, cmRule).Items[0])
	_ = unstructured.SetNestedField(copyOnB.Object, "by-hand", "data", "k")
	res := planB(t, []*unstructured.Unstructured{source}, []*unstructured.Unstructured{copyOnB}, cmRule)
	var out, errOut bytes.Buffer
	// "$(rm -rf x)" is dropped, as kubectl drops arguments with other characters.
	t.Setenv(ExternalDiffEnv, "diff -u -r $(rm)")
	if err := externalDiff(res.Items, false, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "-  k: by-hand") || !strings.Contains(out.String(), "+  k: v") {
		t.Errorf("external diff output:\n%s", out.String())
	}
	if !strings.Contains(errOut.String(), "ignoring the argument") {
		t.Errorf("stderr: %s", errOut.String())
	}
}

// TestPlanSyncModes: sync-diff shows the drift of a ReportOnly rule as the write it would
// be (with the reason that it is not made), and nothing for what a CreateOnly rule leaves
// to the cluster.
func TestPlanSyncModes(t *testing.T) {
	source := obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: one, namespace: diff-test}, data: {k: v}}`)
	create := planB(t, []*unstructured.Unstructured{source}, nil, cmRule).Items[0]
	edited := written(create)
	_ = unstructured.SetNestedField(edited.Object, "by-hand", "data", "k")
	for _, tc := range []struct {
		mode v1alpha1.SyncMode
		onB  []*unstructured.Unstructured
		want []string
	}{
		{v1alpha1.SyncModeReportOnly, nil, []string{"create ConfigMap diff-test/one configmaps"}},
		{v1alpha1.SyncModeReportOnly, []*unstructured.Unstructured{edited}, []string{"update ConfigMap diff-test/one configmaps"}},
		{v1alpha1.SyncModeCreateOnly, nil, []string{"create ConfigMap diff-test/one configmaps"}},
		{v1alpha1.SyncModeCreateOnly, []*unstructured.Unstructured{edited}, []string{"none ConfigMap diff-test/one configmaps"}},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			rule := cmRule.DeepCopy()
			rule.Spec.SyncMode = tc.mode
			res := planB(t, []*unstructured.Unstructured{source}, tc.onB, rule)
			if diff := cmp.Diff(tc.want, actions(res.Items)); diff != "" {
				t.Fatalf("plan (-want +got):\n%s", diff)
			}
			it := res.Items[0]
			if tc.mode == v1alpha1.SyncModeReportOnly && !strings.Contains(it.Reason, "ReportOnly") {
				t.Errorf("reason %q does not say the rule only reports", it.Reason)
			}
			if tc.mode == v1alpha1.SyncModeReportOnly && tc.onB != nil && !strings.Contains(unifiedDiff(it, false), "by-hand") {
				t.Errorf("the drift is not shown:\n%s", unifiedDiff(it, false))
			}
		})
	}
}

// TestPlanDeletingRule: --deleting previews a rule's deletion as the controller carries
// it out: with deletionPolicy Delete every copy it wrote is deleted (never an object made
// here), with Retain the copies stay.
func TestPlanDeletingRule(t *testing.T) {
	source := obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: one, namespace: diff-test}, data: {k: v}}`)
	copyOnB := written(planB(t, []*unstructured.Unstructured{source}, nil, cmRule).Items[0])
	mine := obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: mine, namespace: diff-test, labels: {cluster-registry.k8s.cisco.com/synced-by-rule: configmaps}}}`)
	for _, tc := range []struct {
		policy v1alpha1.DeletionPolicy
		want   []string
	}{
		{v1alpha1.DeletionPolicyDelete, []string{"delete ConfigMap diff-test/one configmaps"}},
		{v1alpha1.DeletionPolicyRetain, nil},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			rule := cmRule.DeepCopy()
			rule.Spec.DeletionPolicy = tc.policy
			a := fakeView("ctx-a", idA, source)
			a.Clusters = []v1alpha1.Cluster{cluster("a", idA)}
			b := fakeView("ctx-b", idB, obj(t, nsYAML), copyOnB, mine)
			b.Clusters = []v1alpha1.Cluster{cluster("a", idA), cluster("b", idB)}
			b.Rules = []v1alpha1.ResourceSyncRule{*rule}
			res := (&differ{local: b, byID: map[types.UID]*view{idA: a, idB: b}, deleting: []string{"configmaps"}}).plan(context.Background())
			if diff := cmp.Diff(tc.want, actions(res.Items)); diff != "" {
				t.Fatalf("plan (-want +got):\n%s", diff)
			}
			if tc.policy == v1alpha1.DeletionPolicyRetain && (len(res.Notes) == 0 || !strings.Contains(strings.Join(res.Notes, "\n"), "Retain")) {
				t.Errorf("notes %v do not say the copies stay", res.Notes)
			}
		})
	}
}

// TestPlanPeerTheControllerCannotRead: the controller reads a peer with its reader token,
// not with the user's context; a peer its Cluster says is not Ready is reported and
// neither synced from nor deleted for, even though the user's context reads it.
func TestPlanPeerTheControllerCannotRead(t *testing.T) {
	source := obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: one, namespace: diff-test}, data: {k: v}}`)
	copyOnB := written(planB(t, []*unstructured.Unstructured{source}, nil, cmRule).Items[0])
	a := fakeView("ctx-a", idA) // the origin no longer has it, as the user sees
	a.Clusters = []v1alpha1.Cluster{cluster("a", idA)}
	b := fakeView("ctx-b", idB, obj(t, nsYAML), copyOnB)
	failing := cluster("a", idA)
	failing.Status.State, failing.Status.Message = v1alpha1.ClusterStateInvalidAuthInfo, "the reader token is rejected"
	b.Clusters = []v1alpha1.Cluster{failing, cluster("b", idB)}
	res := (&differ{local: b, byID: map[types.UID]*view{idA: a, idB: b}, preview: []*v1alpha1.ResourceSyncRule{cmRule}}).plan(context.Background())
	if diff := cmp.Diff([]string{"none ConfigMap diff-test/one configmaps"}, actions(res.Items)); diff != "" {
		t.Fatalf("plan (-want +got):\n%s", diff)
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "cannot read its peer a") || !strings.Contains(res.Warnings[0], "reader token is rejected") {
		t.Errorf("warnings %v", res.Warnings)
	}
}

// TestPlanRuleThePolicyRefuses: a rule outside this cluster's policy is inert here, and
// sync-diff says which SyncPolicy entry it needs, as the rule's condition does.
func TestPlanRuleThePolicyRefuses(t *testing.T) {
	crb := obj(t, `{apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRoleBinding, metadata: {name: admin}, roleRef: {kind: ClusterRole, name: cluster-admin}}`)
	rule := &v1alpha1.ResourceSyncRule{
		ObjectMeta: metav1.ObjectMeta{Name: "crbs"},
		Spec: v1alpha1.ResourceSyncRuleSpec{
			GVK:   v1alpha1.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"},
			Rules: []v1alpha1.SyncRule{{}},
		},
	}
	res := planB(t, []*unstructured.Unstructured{crb}, nil, rule)
	if len(res.Items) != 0 {
		t.Errorf("items %v, want none: the rule does not run here", actions(res.Items))
	}
	notes := strings.Join(res.Notes, "\n")
	if !strings.Contains(notes, "rule crbs does not run here") || !strings.Contains(notes, "kind: ClusterRoleBinding") {
		t.Errorf("notes %q do not say the rule is refused and the entry it needs", notes)
	}
}
