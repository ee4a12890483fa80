package planner

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/rules"
)

// CompileRule compiles a ResourceSyncRule as the engine runs it: rules.Compile, plus the
// engine's own check that syncStatus and syncStatusBack are not combined.
func CompileRule(rsr *v1alpha1.ResourceSyncRule) (*rules.Rule, error) {
	compiled, err := rules.Compile(rsr)
	if err != nil {
		return nil, err
	}
	if rsr.Spec.SyncStatusBack {
		for i, sr := range rsr.Spec.Rules {
			if sr.Mutations.SyncStatus {
				return nil, &rules.InvalidRuleError{Rule: rsr.Name, Problems: []rules.Problem{{
					Field:   fmt.Sprintf("spec.rules[%d].mutations.syncStatus", i),
					Message: "cannot be combined with spec.syncStatusBack: status would flow both ways",
				}}}
			}
		}
	}
	return compiled, nil
}

// CoreRule returns the built-in rule that syncs ResourceSyncRules themselves to every
// member, as the engine runs it; sync-diff adds it to every cluster's rules.
func CoreRule() *v1alpha1.ResourceSyncRule {
	return &v1alpha1.ResourceSyncRule{
		ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.CoreRuleName},
		Spec: v1alpha1.ResourceSyncRuleSpec{
			GVK:   v1alpha1.GroupVersionKind{Group: v1alpha1.GroupVersion.Group, Version: v1alpha1.GroupVersion.Version, Kind: "ResourceSyncRule"},
			Rules: []v1alpha1.SyncRule{{}},
		},
	}
}

// MembershipObject reports whether obj belongs to the membership sync: a Cluster of the
// registry or a reader kubeconfig Secret. The engine never reads or writes those.
func MembershipObject(obj *unstructured.Unstructured) bool {
	gvk := obj.GroupVersionKind()
	switch {
	case gvk.Group == v1alpha1.GroupVersion.Group && gvk.Kind == "Cluster":
		return true
	case gvk.Group == "" && gvk.Kind == "Secret":
		t, _, _ := unstructured.NestedString(obj.Object, "type")
		return t == string(v1alpha1.SecretTypeClusterRegistry)
	}
	return false
}

// Mark sets the ownership marks and the rule label on a copy.
func Mark(u *unstructured.Unstructured, origin types.UID, rule string) {
	a := u.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[v1alpha1.OwnershipAnnotation] = string(origin)
	u.SetAnnotations(a)
	l := u.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l[v1alpha1.OwnershipLabel] = string(origin)
	l[v1alpha1.RuleLabel] = rule
	u.SetLabels(l)
}

// ContainsGVK reports whether list holds gvk.
func ContainsGVK(list []schema.GroupVersionKind, gvk schema.GroupVersionKind) bool {
	for _, g := range list {
		if g == gvk {
			return true
		}
	}
	return false
}

// Target is a local object a rule may write: its kind and key.
type Target struct {
	GVK schema.GroupVersionKind
	Key types.NamespacedName
}

// TargetOf returns the local object the rule r writes for a peer's object o, and whether
// there is one: o is of the rule's kind, matches it, is not a membership object nor a
// peer's copy of an object of this cluster (localID), and the rule's name and namespace
// rewrites apply to it. The engine queues this key on o's events; sync-diff plans it.
func TargetOf(r *rules.Rule, localID types.UID, o *unstructured.Unstructured) (Target, bool) {
	if o == nil || MembershipObject(o) || types.UID(o.GetAnnotations()[v1alpha1.OwnershipAnnotation]) == localID {
		return Target{}, false
	}
	mut, ok := r.Match(o)
	if !ok {
		return Target{}, false
	}
	tk, ok := mut.TargetKey(types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()})
	if !ok {
		return Target{}, false
	}
	return Target{GVK: mut.TargetGVK(r.GVK), Key: tk}, true
}

// LocalNamespaces returns the namespaces the copies of a rule can land in, or nil for
// all: the namespaces it reads from sources, unless a namespace rewrite moves copies.
func LocalNamespaces(rsr *v1alpha1.ResourceSyncRule, compiled *rules.Rule) []string {
	nss, restricted := compiled.SourceNamespaces()
	if !restricted {
		return nil
	}
	for _, sr := range rsr.Spec.Rules {
		if sr.Mutations.Namespace != nil {
			return nil
		}
	}
	return nss
}
