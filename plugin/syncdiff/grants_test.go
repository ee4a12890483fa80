package syncdiff

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// TestPlanGrants: sync-diff asks b's authorizer whether a's identity may make the writes
// it plans, once per verb, resource and namespace, and shows what it may not as failed,
// NotGranted, as b's controller reports it; a user who may not ask gets a note and the
// writes as planned.
func TestPlanGrants(t *testing.T) {
	onA := []*unstructured.Unstructured{
		obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: granted, namespace: diff-test}}`),
		obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: also-granted, namespace: diff-test}}`),
	}
	onB := []*unstructured.Unstructured{
		// a's copy that a no longer has: its delete.
		obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: gone, namespace: diff-test,
			labels: {cluster-registry.k8s.cisco.com/synced-by-rule: configmaps, cluster-registry.k8s.cisco.com/resource-owner-cluster-id: id-a},
			annotations: {cluster-registry.k8s.cisco.com/resource-owner-cluster-id: id-a}}}`),
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	for _, tc := range []struct {
		name      string
		review    reviewer
		want      map[string]string // action and object: the start of the reason
		wantAsked int
		wantNote  string
	}{
		{
			name: "create granted, delete not",
			review: func(_ context.Context, sar *authorizationv1.SubjectAccessReview) (*authorizationv1.SubjectAccessReview, error) {
				a := sar.Spec.ResourceAttributes
				sar.Status.Allowed = sar.Spec.User == "system:serviceaccount:cluster-registry:member-a" &&
					cmp.Equal(sar.Spec.Groups, []string{v1alpha1.MembersGroup, "system:authenticated"}) &&
					a.Verb == "create" && a.Resource == "configmaps" && a.Namespace == "diff-test"
				return sar, nil
			},
			want: map[string]string{
				"create ConfigMap diff-test/granted":      "",
				"create ConfigMap diff-test/also-granted": "",
				"failed ConfigMap diff-test/gone":         "NotGranted: system:serviceaccount:cluster-registry:member-a may not delete configmaps in namespace diff-test",
			},
			wantAsked: 2,
		},
		{
			name: "the user may not ask",
			review: func(_ context.Context, sar *authorizationv1.SubjectAccessReview) (*authorizationv1.SubjectAccessReview, error) {
				return nil, apierrors.NewForbidden(schema.GroupResource{Group: "authorization.k8s.io", Resource: "subjectaccessreviews"}, "", nil)
			},
			want: map[string]string{
				"create ConfigMap diff-test/granted":      "",
				"create ConfigMap diff-test/also-granted": "",
				"delete ConfigMap diff-test/gone":         "",
			},
			wantAsked: 1,
			wantNote:  "not checked: you may not create SubjectAccessReviews",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := fakeView("ctx-a", idA, onA...)
			a.Clusters = []v1alpha1.Cluster{cluster("a", idA)}
			b := fakeView("ctx-b", idB, append([]*unstructured.Unstructured{obj(t, nsYAML)}, onB...)...)
			b.Clusters = []v1alpha1.Cluster{cluster("a", idA), cluster("b", idB)}
			asked := 0
			b.mapper = mapper
			b.review = func(ctx context.Context, sar *authorizationv1.SubjectAccessReview) (*authorizationv1.SubjectAccessReview, error) {
				asked++
				return tc.review(ctx, sar)
			}
			p := &differ{local: b, byID: map[types.UID]*view{idA: a, idB: b}, preview: []*v1alpha1.ResourceSyncRule{cmRule}, namespace: v1alpha1.DefaultNamespace}
			res := p.plan(context.Background())
			got := map[string]string{}
			for _, it := range res.Items {
				reason := ""
				if it.Action == ActionFailed {
					reason = it.Reason
				}
				got[it.Action+" "+objectRef(it)] = reason
			}
			for k, want := range tc.want {
				if !strings.HasPrefix(got[k], want) {
					t.Errorf("%s: reason %q, want it to start with %q", k, got[k], want)
				}
			}
			if diff := cmp.Diff(keys(tc.want), keys(got), cmpSorted); diff != "" {
				t.Errorf("items (-want +got):\n%s", diff)
			}
			if asked != tc.wantAsked {
				t.Errorf("%d SubjectAccessReviews, want %d", asked, tc.wantAsked)
			}
			if note := strings.Join(res.Notes, "\n"); !strings.Contains(note, tc.wantNote) {
				t.Errorf("notes %q, want %q", note, tc.wantNote)
			}
		})
	}
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
