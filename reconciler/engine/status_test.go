package engine

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// TestOffered: a peer offers its own objects and copies of non-members' objects, not its
// copies of ours or of other members' (which its informer may hold for syncStatusBack).
func TestOffered(t *testing.T) {
	const local, peer, other, gone types.UID = "uid-local", "uid-peer", "uid-other", "uid-gone"
	members := []types.UID{peer, other}
	for _, tc := range []struct {
		origin types.UID
		want   bool
	}{
		{origin: "", want: true},
		{origin: peer, want: true},
		{origin: gone, want: true},
		{origin: local, want: false},
		{origin: other, want: false},
	} {
		u := &unstructured.Unstructured{Object: map[string]any{}}
		if tc.origin != "" {
			u.SetAnnotations(map[string]string{v1alpha1.OwnershipAnnotation: string(tc.origin)})
		}
		if got := offered(u, local, peer, members); got != tc.want {
			t.Errorf("offered, origin %q = %v, want %v", tc.origin, got, tc.want)
		}
	}
}
