package syncdiff

import (
	"context"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner"
)

// The controller writes what comes from a member as the member's identity
// (v1alpha1.MemberUser, in v1alpha1.MembersGroup), which the cluster's RBAC authorizes
// (docs/rules.md, "What a member may write"). sync-diff asks the same authorizer, with a
// SubjectAccessReview per identity, verb, resource and namespace, whether the writes it
// plans are granted; a write that is not is shown failed, NotGranted, as the controller
// reports it. A user who may not create SubjectAccessReviews gets a note, and the writes
// as planned.

// grantKey is one question to the authorizer.
type grantKey struct {
	user      string
	verb      string
	gvr       schema.GroupVersionResource
	namespace string
}

// checkGrants marks the items whose write the identity of their origin's member may not
// make here.
func (p *differ) checkGrants(ctx context.Context, res *result) {
	if p.local.review == nil || p.local.mapper == nil {
		return
	}
	policy, err := p.policy(ctx)
	if err != nil {
		return // reported where the plan read it
	}
	answers := map[grantKey]bool{}
	for i := range res.Items {
		it := &res.Items[i]
		verb := ""
		switch it.Action {
		case string(planner.ActionCreate):
			verb = "create"
		case string(planner.ActionUpdate):
			verb = "update"
		case string(planner.ActionDelete):
			verb = "delete"
		default:
			continue
		}
		if it.Rule == v1alpha1.CoreRuleName || it.Origin == "" {
			continue // the controller's own writes
		}
		member, ok := policy.MemberName(it.Origin)
		if verb != "delete" {
			// A copy is written as the member that served it (its origin, or the relay),
			// as the engine writes it.
			member, ok = it.From, it.From != ""
		}
		if !ok {
			continue // refused before any write, or the controller's own delete
		}
		gv, err := schema.ParseGroupVersion(it.APIVersion)
		if err != nil {
			continue
		}
		m, err := p.local.mapper.RESTMapping(gv.WithKind(it.Kind).GroupKind(), gv.Version)
		if err != nil {
			continue
		}
		k := grantKey{user: v1alpha1.MemberUser(p.namespace, member), verb: verb, gvr: m.Resource, namespace: it.Namespace}
		allowed, asked := answers[k]
		if !asked {
			allowed, err = p.granted(ctx, k)
			if err != nil {
				res.Notes = append(res.Notes, fmt.Sprintf("cluster %s (context %s): whether the members' identities may write their copies is not checked: %v",
					p.local.Name(), p.local.Context, err))
				return
			}
			answers[k] = allowed
		}
		if !allowed {
			where := ""
			if it.Namespace != "" {
				where = " in namespace " + it.Namespace
			}
			it.Action = ActionFailed
			it.Reason = fmt.Sprintf("%s: %s may not %s %s%s here (grant the member's identity with a RoleBinding: docs/rules.md, \"What a member may write\")",
				v1alpha1.ReasonNotGranted, k.user, verb, m.Resource.GroupResource(), where)
		}
	}
}

// granted asks the local cluster whether k.user, in the members' group, may make k.
func (p *differ) granted(ctx context.Context, k grantKey) (bool, error) {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   k.user,
		Groups: []string{v1alpha1.MembersGroup, "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: k.verb, Group: k.gvr.Group, Version: k.gvr.Version, Resource: k.gvr.Resource, Namespace: k.namespace,
		},
	}}
	got, err := p.local.review(ctx, sar)
	if apierrors.IsForbidden(err) {
		return false, fmt.Errorf("you may not create SubjectAccessReviews: %w", err)
	}
	if err != nil {
		return false, err
	}
	return got.Status.Allowed, nil
}
