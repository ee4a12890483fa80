package peers

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// TestSealedForOthers: a peer's Secrets are cached without managedFields, and without the
// data of a sealed credential issued to or received from another member; the credential
// issued to this cluster and reader Secrets in the clear keep theirs.
func TestSealedForOthers(t *testing.T) {
	const local, other = "uid-local", "uid-other"
	sealed := map[string][]byte{v1alpha1.SealedKubeconfigKey: []byte("blob")}
	inClear := map[string][]byte{v1alpha1.KubeconfigKey: []byte("apiVersion: v1")}
	secret := func(name string, data map[string][]byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}}, Data: data}
	}
	tests := []struct {
		name string
		in   *corev1.Secret
		want map[string][]byte
	}{
		{"issued to this cluster", secret(v1alpha1.IssuedReaderSecretName(local), sealed), sealed},
		{"issued to another member", secret(v1alpha1.IssuedReaderSecretName(other), sealed), nil},
		{"received from another member", secret(v1alpha1.ReceivedReaderSecretName(other), sealed), nil},
		{"a reader Secret in the clear", secret("west", inClear), inClear},
	}
	transform := sealedForOthers(local)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := transform(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			s := out.(*corev1.Secret)
			if diff := cmp.Diff(tt.want, s.Data); diff != "" {
				t.Errorf("data (-want +got):\n%s", diff)
			}
			if s.ManagedFields != nil {
				t.Errorf("managedFields kept: %v", s.ManagedFields)
			}
		})
	}
}
