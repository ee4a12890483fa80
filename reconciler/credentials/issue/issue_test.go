package issue

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// TestIdentityOwn: the own Cluster is the one of the local name and cluster ID; a Cluster
// of the name with another ID (a peer's copy named alike) or of the ID with another name
// is not.
func TestIdentityOwn(t *testing.T) {
	c := func(name string, id types.UID) v1alpha1.Cluster {
		return v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.ClusterSpec{ClusterID: id}}
	}
	id := Identity{ID: "uid-l", Name: "local"}
	tests := []struct {
		name     string
		clusters []v1alpha1.Cluster
		want     string // name/ID of the Cluster found, "" for nil
	}{
		{"none", nil, ""},
		{"the name with another ID, the ID with another name", []v1alpha1.Cluster{c("local", "uid-x"), c("other", "uid-l")}, ""},
		{"found among others", []v1alpha1.Cluster{c("a", "uid-a"), c("local", "uid-l"), c("b", "uid-b")}, "local/uid-l"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			if own := id.Own(tt.clusters); own != nil {
				got = own.Name + "/" + string(own.Spec.ClusterID)
			}
			if got != tt.want {
				t.Errorf("Own = %q, want %q", got, tt.want)
			}
		})
	}
}
