package engine

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

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

// CoreRule returns the built-in rule that syncs ResourceSyncRules to every member, as the
// engine runs it; sync-diff adds it to every cluster's rules.
func CoreRule() *v1alpha1.ResourceSyncRule { return coreRule() }

// MembershipObject reports whether obj belongs to the membership sync (a Cluster of the
// registry or a reader kubeconfig Secret): the engine never reads or writes those.
func MembershipObject(obj *unstructured.Unstructured) bool { return membershipObject(obj) }
