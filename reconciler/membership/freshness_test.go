package membership

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-registry/kubectl-registry/reconciler/bootstrap"
)

// TestTokenFreshness: two tokens issued within one second expire in the same second;
// the issue time tells which is newer, so a relayed renewal is not lost.
func TestTokenFreshness(t *testing.T) {
	secret := func(expires, issued string) *corev1.Secret {
		a := map[string]string{bootstrap.ExpiresAtAnnotation: expires}
		if issued != "" {
			a[bootstrap.IssuedAtAnnotation] = issued
		}
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Annotations: a}}
	}
	tests := []struct {
		name       string
		newer, old *corev1.Secret
	}{
		{"same expiry second, later issue", secret("2026-01-02T10:00:00Z", "2026-01-01T10:00:00.9Z"), secret("2026-01-02T10:00:00Z", "2026-01-01T10:00:00.1Z")},
		{"later expiry", secret("2026-01-02T10:00:01Z", ""), secret("2026-01-02T10:00:00Z", "")},
		{"later expiry wins over nanoseconds", secret("2026-01-02T10:00:01Z", "2026-01-01T10:00:01.0Z"), secret("2026-01-02T10:00:00Z", "2026-01-01T10:00:00.99Z")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !expiresAt(tt.newer).After(expiresAt(tt.old)) {
				t.Fatalf("%v is not newer than %v", expiresAt(tt.newer), expiresAt(tt.old))
			}
			if expiresAt(tt.old).After(expiresAt(tt.newer)) {
				t.Fatal("order is not antisymmetric")
			}
		})
	}
}
