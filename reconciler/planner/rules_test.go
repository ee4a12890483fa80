package planner

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// TestTargetOf: the local key a peer's object maps to, which the engine queues on the
// object's events and sync-diff plans: none for objects the rule does not write.
func TestTargetOf(t *testing.T) {
	rsr := &v1alpha1.ResourceSyncRule{
		ObjectMeta: metav1.ObjectMeta{Name: "sharded"},
		Spec: v1alpha1.ResourceSyncRuleSpec{
			GVK: v1alpha1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
			Rules: []v1alpha1.SyncRule{{
				Matches:   []v1alpha1.SyncRuleMatch{{Namespaces: []string{"apps"}}},
				Mutations: v1alpha1.Mutations{Name: &v1alpha1.NameMutations{StripSuffix: "-east"}},
			}},
		},
	}
	compiled, err := CompileRule(rsr)
	if err != nil {
		t.Fatal(err)
	}
	const local types.UID = "uid-local"
	for _, tc := range []struct {
		name string
		obj  string
		want *Target
	}{
		{"matching, rewritten", `{apiVersion: v1, kind: ConfigMap, metadata: {name: web-east, namespace: apps}}`,
			&Target{GVK: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Key: types.NamespacedName{Namespace: "apps", Name: "web"}}},
		{"lacks the suffix to strip", `{apiVersion: v1, kind: ConfigMap, metadata: {name: web, namespace: apps}}`, nil},
		{"another namespace", `{apiVersion: v1, kind: ConfigMap, metadata: {name: web-east, namespace: other}}`, nil},
		{"a peer's copy of ours", `{apiVersion: v1, kind: ConfigMap, metadata: {name: web-east, namespace: apps,
			annotations: {cluster-registry.k8s.cisco.com/resource-owner-cluster-id: uid-local}}}`, nil},
		{"a membership Secret", `{apiVersion: v1, kind: Secret, type: k8s.cisco.com/cluster-registry-secret, metadata: {name: web-east, namespace: apps}}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := TargetOf(compiled, local, fieldsObj(t, tc.obj))
			var gotp *Target
			if ok {
				gotp = &got
			}
			if diff := cmp.Diff(tc.want, gotp); diff != "" {
				t.Errorf("TargetOf (-want +got):\n%s", diff)
			}
		})
	}
	if diff := cmp.Diff([]string{"apps"}, LocalNamespaces(rsr, compiled)); diff != "" {
		t.Errorf("LocalNamespaces (-want +got):\n%s", diff)
	}
	moved := rsr.DeepCopy()
	moved.Spec.Rules[0].Mutations.Namespace = &v1alpha1.NameMutations{AddSuffix: "-copy"}
	if got := LocalNamespaces(moved, compiled); got != nil {
		t.Errorf("LocalNamespaces with a namespace rewrite = %v, want nil (all)", got)
	}
}
