package engine

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner"
)

// TestBackCheck: the status a peer's copy brings back to the local original passes the
// checks a copy passes: fromClusters names the peer it comes from, the registry's objects
// and a status over the size limit are refused, and a status that is not an object is
// refused.
func TestBackCheck(t *testing.T) {
	orig := func(ns string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"replicas": int64(1)}}}
		u.SetAPIVersion("example.com/v1")
		u.SetKind("Widget")
		u.SetNamespace(ns)
		u.SetName("w")
		return u
	}
	peerCopy := func(status any) *unstructured.Unstructured {
		u := orig("apps").DeepCopy()
		u.Object["status"] = status
		return u
	}
	onlyFirst := planner.NewPolicy([]v1alpha1.SyncPolicySpec{{FromClusters: []string{"first"}}}, v1alpha1.DefaultNamespace, nil)
	for _, tc := range []struct {
		name       string
		policy     planner.Policy
		orig, peer *unstructured.Unstructured
		from       string
		want       string // the refusal's reason, empty when allowed
	}{
		{name: "a status from a peer the policy admits", policy: onlyFirst, orig: orig("apps"), peer: peerCopy(map[string]any{"ready": true}), from: "first"},
		{name: "no status: nothing to check", policy: onlyFirst, orig: orig("apps"), peer: orig("apps"), from: "third"},
		{name: "a peer outside fromClusters", policy: onlyFirst, orig: orig("apps"), peer: peerCopy(map[string]any{"ready": true}), from: "third", want: v1alpha1.ReasonNotAllowed},
		{name: "a status that is not an object", policy: planner.Policy{}, orig: orig("apps"), peer: peerCopy("owned"), from: "first", want: v1alpha1.ReasonCopyRefused},
		{name: "a status over the size limit", policy: planner.Policy{}, orig: orig("apps"), peer: peerCopy(map[string]any{"pad": strings.Repeat("x", planner.MaxCopySize)}), from: "first", want: v1alpha1.ReasonCopyRefused},
		{name: "an original in a system namespace, not allowed there", policy: planner.Policy{}, orig: orig("kube-system"), peer: peerCopy(map[string]any{"ready": true}), from: "first", want: v1alpha1.ReasonNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref := backCheck(tc.policy, tc.orig, tc.peer, tc.from)
			got := ""
			if ref != nil {
				got = ref.Reason
			}
			if got != tc.want {
				t.Errorf("backCheck = %q (%v), want %q", got, ref, tc.want)
			}
			if ref == nil {
				if _, ok := tc.orig.Object["status"]; ok {
					t.Errorf("backCheck changed the original")
				}
			}
		})
	}
}
