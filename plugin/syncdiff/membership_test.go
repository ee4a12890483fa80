package syncdiff

import (
	"bytes"
	"context"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner"
)

const idC = types.UID("id-c")

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(v1alpha1.AddToScheme(s))
	return s
}

// member is a Cluster CR as it is stored: with its reader Secret's reference and, for
// a copy, the ownership marks.
func member(name string, id types.UID, copyOf types.UID) v1alpha1.Cluster {
	c := cluster(name, id)
	c.Spec.AuthInfo.SecretRef.Name = name
	c.Spec.AuthInfo.SecretRef.Namespace = v1alpha1.DefaultNamespace
	if copyOf != "" {
		c.Annotations = map[string]string{v1alpha1.OwnershipAnnotation: string(copyOf)}
		c.Labels = map[string]string{v1alpha1.OwnershipLabel: string(copyOf)}
	}
	return c
}

// readerSecret is the reader Secret of a cluster, a copy when copyOf is set.
func readerSecret(t *testing.T, name, token string, copyOf types.UID) *unstructured.Unstructured {
	t.Helper()
	s := obj(t, `{apiVersion: v1, kind: Secret, metadata: {name: `+name+`, namespace: cluster-registry}, type: `+
		string(v1alpha1.SecretTypeClusterRegistry)+`, data: {kubeconfig: `+kubeconfigData(t, name, token)+`}}`)
	if copyOf != "" {
		s.SetAnnotations(map[string]string{v1alpha1.OwnershipAnnotation: string(copyOf)})
		s.SetLabels(map[string]string{v1alpha1.OwnershipLabel: string(copyOf)})
	}
	return s
}

// kubeconfigData is the base64 data of a reader kubeconfig for cluster name holding the
// token whose base64 is token: one the controller accepts.
func kubeconfigData(t *testing.T, name, token string) string {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(token)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := kubeconfig.Render(kubeconfig.Reader{ClusterName: name, Server: "https://" + name + ".example:6443", Token: string(raw)})
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(kc)
}

// memberView is a cluster of the group held in memory: its Clusters (typed, and listed
// like the other objects) and its objects.
func memberView(t *testing.T, ctxName string, id types.UID, clusters []v1alpha1.Cluster, objs ...*unstructured.Unstructured) *view {
	t.Helper()
	for i := range clusters {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&clusters[i])
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: m}
		u.SetGroupVersionKind(clusterGVK)
		objs = append(objs, u)
	}
	v := fakeView(ctxName, id, objs...)
	v.Clusters = clusters
	return v
}

func membershipActions(items []Item) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.Action+" "+objectRef(it)+" from "+it.From)
	}
	return out
}

func TestMembershipPlan(t *testing.T) {
	scheme := testScheme(t)
	// a knows a, b and c; b was joined to a one way: it has a's Cluster and Secret from a
	// hand-made swap (no marks), and knows nothing of c.
	a := memberView(t, "ctx-a", idA,
		[]v1alpha1.Cluster{member("a", idA, ""), member("b", idB, idB), member("c", idC, idC)},
		readerSecret(t, "a", "dG9rZW4tYQ==", ""), readerSecret(t, "b", "dG9rZW4tYg==", idB), readerSecret(t, "c", "dG9rZW4tYw==", idC))
	b := memberView(t, "ctx-b", idB,
		[]v1alpha1.Cluster{member("a", idA, ""), member("b", idB, "")},
		readerSecret(t, "a", "b2xkLXRva2Vu", ""), readerSecret(t, "b", "dG9rZW4tYg==", ""))
	byID := map[types.UID]*view{idA: a, idB: b}
	res := (&differ{local: b, byID: byID}).membership(context.Background(), v1alpha1.DefaultNamespace, scheme)
	if len(res.Warnings) != 0 {
		t.Errorf("warnings: %v", res.Warnings)
	}
	want := []string{
		"update Cluster a from a",
		"update Secret cluster-registry/a from a",
		"create Cluster c from a",
		"create Secret cluster-registry/c from a",
		"none Cluster b from ",
		"none Secret cluster-registry/b from ",
	}
	if diff := cmp.Diff(want, membershipActions(res.Items)); diff != "" {
		t.Fatalf("plan (-want +got):\n%s", diff)
	}
	for _, it := range res.Items {
		if !it.Membership || it.Cluster != "b" || it.Context != "ctx-b" {
			t.Errorf("item %+v", it)
		}
	}

	// The adopted Secret: the marks are added and the stale token replaced, masked.
	d := unifiedDiff(res.Items[1], false)
	for _, want := range []string{
		"+    " + v1alpha1.OwnershipAnnotation + ": id-a",
		"-  kubeconfig: '*** (before)'",
		"+  kubeconfig: '*** (after)'",
	} {
		if !strings.Contains(d, want) {
			t.Errorf("the Secret diff has no %q:\n%s", want, d)
		}
	}
	if strings.Contains(d, kubeconfigData(t, "a", "b2xkLXRva2Vu")) || strings.Contains(d, kubeconfigData(t, "a", "dG9rZW4tYQ==")) {
		t.Errorf("the Secret diff shows the data:\n%s", d)
	}
	if d := unifiedDiff(res.Items[1], true); !strings.Contains(d, "+  kubeconfig: "+kubeconfigData(t, "a", "dG9rZW4tYQ==")) {
		t.Errorf("--show-secrets hides the data:\n%s", d)
	}
	if res.Items[2].Object == nil || res.Items[2].Origin != idC {
		t.Errorf("the create of Cluster c: %+v", res.Items[2])
	}
	var out bytes.Buffer
	printText(&out, b, res.Items, false, false, false)
	for _, want := range []string{
		"cluster b (context ctx-b): 2 create, 2 update, 2 unchanged",
		"  update    Cluster a (membership, from a)",
		"  create    Secret cluster-registry/c (membership, from a)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the text output has no %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "dG9rZW4tYw==") {
		t.Errorf("the text output shows Secret data:\n%s", out.String())
	}

	// a: its peer b is read, and nothing is to be written (b's view has nothing newer).
	res = (&differ{local: a, byID: byID}).membership(context.Background(), v1alpha1.DefaultNamespace, scheme)
	for _, it := range res.Items {
		if it.difference() {
			t.Errorf("a: unexpected %s", it.Action+" "+objectRef(it))
		}
	}
}

func TestMembershipConflictsAndUnreadablePeers(t *testing.T) {
	scheme := testScheme(t)
	// b made a Cluster "c" by hand for another cluster: a's c is not copied over it.
	a := memberView(t, "ctx-a", idA,
		[]v1alpha1.Cluster{member("a", idA, ""), member("b", idB, idB), member("c", idC, idC)},
		readerSecret(t, "a", "dG9rZW4tYQ==", ""), readerSecret(t, "c", "dG9rZW4tYw==", idC))
	mine := member("c", "id-other", "")
	b := memberView(t, "ctx-b", idB,
		[]v1alpha1.Cluster{member("a", idA, idA), member("b", idB, ""), mine},
		readerSecret(t, "a", "dG9rZW4tYQ==", idA), readerSecret(t, "b", "dG9rZW4tYg==", ""))
	res := (&differ{local: b, byID: map[types.UID]*view{idA: a, idB: b}}).membership(context.Background(), v1alpha1.DefaultNamespace, scheme)
	var conflicts []Item
	for _, it := range res.Items {
		if it.Action == string(planner.ActionConflict) {
			conflicts = append(conflicts, it)
		} else if it.difference() {
			t.Errorf("unexpected %s %s", it.Action, objectRef(it))
		}
	}
	if len(conflicts) != 1 || conflicts[0].Kind != "Cluster" || conflicts[0].Name != "c" || !strings.Contains(conflicts[0].Reason, "created locally") {
		t.Fatalf("conflicts %+v", conflicts)
	}

	// a is not read (no context reaches it): it counts as unreachable, so its Cluster
	// and Secret stay as they are, and no peer's relay is trusted for them.
	stale := memberView(t, "ctx-b", idB,
		[]v1alpha1.Cluster{member("a", idA, idA), member("b", idB, "")},
		readerSecret(t, "a", "b2xk", idA), readerSecret(t, "b", "dG9rZW4tYg==", ""))
	res = (&differ{local: stale, byID: map[types.UID]*view{idB: stale}}).membership(context.Background(), v1alpha1.DefaultNamespace, scheme)
	for _, it := range res.Items {
		if it.difference() {
			t.Errorf("unreadable peer: unexpected %s %s", it.Action, objectRef(it))
		}
	}

	// A disabled peer is no peer: not read, and not counted unreachable either.
	disabled := member("a", idA, idA)
	disabled.Annotations[v1alpha1.ClusterDisabledAnnotation] = "true"
	c := memberView(t, "ctx-b", idB, []v1alpha1.Cluster{disabled, member("b", idB, "")},
		readerSecret(t, "a", "dG9rZW4tYQ==", idA), readerSecret(t, "b", "dG9rZW4tYg==", ""))
	in, ok := (&differ{local: c, byID: map[types.UID]*view{idA: a, idB: c}}).membershipInput(context.Background(), v1alpha1.DefaultNamespace, &result{})
	if !ok || len(in.Peers) != 0 || len(in.Unreachable) != 0 || in.LocalName != "b" || len(in.Local.Secrets) != 2 {
		t.Errorf("input with a disabled peer: peers %d unreachable %v local name %q secrets %d", len(in.Peers), in.Unreachable, in.LocalName, len(in.Local.Secrets))
	}
	if !strings.Contains(string(in.Local.Secrets[0].Data["kubeconfig"]), "token: token-a") {
		t.Errorf("the Secret data is not decoded: %q", in.Local.Secrets[0].Data)
	}
}

// TestMembershipOpsAreGeneric: a delete is a deletion, an op the CLI does not know is
// shown with its name and a diff.
func TestMembershipOpsAreGeneric(t *testing.T) {
	live := readerSecret(t, "a", "b2xk", idA)
	desired := readerSecret(t, "a", "bmV3", idA)
	items := []Item{
		{Cluster: "b", Context: "ctx-b", Membership: true, Action: "delete", APIVersion: "v1", Kind: "Secret", Namespace: "cluster-registry", Name: "a", live: live},
		{Cluster: "b", Context: "ctx-b", Membership: true, Action: "rotate", APIVersion: "v1", Kind: "Secret", Namespace: "cluster-registry", Name: "a", live: live, Object: desired},
	}
	var out bytes.Buffer
	printText(&out, memberView(t, "ctx-b", idB, []v1alpha1.Cluster{member("b", idB, "")}), items, false, false, false)
	for _, want := range []string{
		"1 delete, 1 rotate, 0 unchanged",
		"  delete    Secret cluster-registry/a (membership)",
		"  rotate    Secret cluster-registry/a (membership)",
		"-  kubeconfig: '*** (before)'",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output has no %q:\n%s", want, out.String())
		}
	}
	if live, desired := diffPair(items[0], false); live == nil || desired != nil {
		t.Errorf("a delete diffs %v against %v", live, desired)
	}
}

// TestRuleCopiesAreRun: a rule on a peer that the built-in rule copies here is run here.
func TestRuleCopiesAreRun(t *testing.T) {
	rsr := obj(t, `{apiVersion: clusterregistry.k8s.cisco.com/v1alpha1, kind: ResourceSyncRule, metadata: {name: configmaps},
  spec: {groupVersionKind: {version: v1, kind: ConfigMap}, rules: [{match: [{namespaces: [diff-test]}]}]}}`)
	cm := obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: one, namespace: diff-test}, data: {k: v}}`)
	res := planB(t, []*unstructured.Unstructured{rsr, cm}, nil)
	want := []string{
		"create ConfigMap diff-test/one configmaps",
		"create ResourceSyncRule configmaps " + v1alpha1.CoreRuleName,
	}
	if diff := cmp.Diff(want, actions(res.Items)); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
	// The same rule with the resource-sync-disabled annotation stays on a.
	rsr.SetAnnotations(map[string]string{v1alpha1.SyncDisabledAnnotation: "true"})
	if res := planB(t, []*unstructured.Unstructured{rsr, cm}, nil); len(res.Items) != 0 {
		t.Errorf("a sync-disabled rule: %v", actions(res.Items))
	}
}

func TestValidateNamespace(t *testing.T) {
	o := NewOptions(nil, genericiooptions.NewTestIOStreamsDiscard())
	if err := o.Validate(); err != nil {
		t.Errorf("the defaults: %v", err)
	}
	if o.Namespace != v1alpha1.DefaultNamespace {
		t.Errorf("the default registry namespace is %q", o.Namespace)
	}
	o.Namespace = "Not_A_Namespace"
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--namespace") {
		t.Errorf("an invalid --namespace: %v", err)
	}
}

// TestMembershipRefusals: what the controller refuses to trust (here a departure dated
// ahead of the clock) is shown, and nothing is planned for it.
func TestMembershipRefusals(t *testing.T) {
	scheme := testScheme(t)
	aOwn := member("a", idA, "")
	aOwn.Annotations = map[string]string{v1alpha1.LeftClustersAnnotation: string(idB) + "@9999-01-01T00:00:00Z"}
	a := memberView(t, "ctx-a", idA, []v1alpha1.Cluster{aOwn, member("b", idB, idB)},
		readerSecret(t, "a", "dG9rZW4tYQ==", ""), readerSecret(t, "b", "dG9rZW4tYg==", idB))
	b := memberView(t, "ctx-b", idB, []v1alpha1.Cluster{member("a", idA, idA), member("b", idB, "")},
		readerSecret(t, "a", "dG9rZW4tYQ==", idA), readerSecret(t, "b", "dG9rZW4tYg==", ""))
	res := (&differ{local: b, byID: map[types.UID]*view{idA: a, idB: b}}).membership(context.Background(), v1alpha1.DefaultNamespace, scheme)
	found := false
	for _, it := range res.Items {
		if it.Action == string(planner.ActionConflict) && strings.Contains(it.Reason, "departure of "+string(idB)+" at 9999-01-01T00:00:00Z is ahead") {
			found = true
		}
		if it.Action == string(planner.ActionDelete) {
			t.Errorf("b plans to delete %s: the departure dated ahead must not count", objectRef(it))
		}
	}
	if !found {
		t.Errorf("the refusal is not shown: %+v", res.Items)
	}
}
