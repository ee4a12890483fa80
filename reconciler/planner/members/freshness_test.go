package members

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig/document"
)

// TestTokenFreshness: which of two relayed tokens is newer is read from the tokens
// themselves (exp, then iat); only between tokens of the same second does the issue
// time's annotation decide (the relay is verified before it is written anyway).
func TestTokenFreshness(t *testing.T) {
	base := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	secret := func(exp, iat time.Time, annotated string) *corev1.Secret {
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "x", Annotations: map[string]string{"cluster-registry.k8s.cisco.com/token-expires-at": annotated}},
			Data:       map[string][]byte{v1alpha1.KubeconfigKey: readerKubeconfig("x", "https://x.example", nil, exp, "")},
		}
	}
	issued := func(s *corev1.Secret, at time.Duration, note string) *corev1.Secret {
		s.Annotations[v1alpha1.TokenIssuedAtAnnotation] = base.Add(-24*time.Hour + at).Format(time.RFC3339Nano)
		r, _ := kubeconfig.Read(s.Data[v1alpha1.KubeconfigKey])
		exp, _, _ := kubeconfig.TokenTimes(r.Token)
		s.Data[v1alpha1.KubeconfigKey] = readerKubeconfig("x", "https://x.example", nil, exp, note)
		return s
	}
	tests := []struct {
		name       string
		newer, old *corev1.Secret
	}{
		{"later expiry", secret(base.Add(time.Second), base, ""), secret(base, base, "")},
		{"the expiry annotation says nothing", secret(base.Add(time.Hour), base, "2026-01-01T00:00:00Z"), secret(base, base, "9999-01-01T00:00:00Z")},
		// A token for a recreated ServiceAccount issued in the same second as the revoked one.
		{"same second: the issue time's nanoseconds", issued(secret(base, base, ""), 900, "new"), issued(secret(base, base, ""), 100, "old")},
		// The bootstrapper's clock turned a second the API server's had not: the token
		// annotated later has the smaller sub-second part (e2e TestGroup, a token
		// renewed and the ServiceAccount recreated within a second).
		{"same second of the tokens, not of the annotations", issued(secret(base, base, ""), 1200*time.Millisecond, "new"), issued(secret(base, base, ""), 900*time.Millisecond, "old")},
		{"an issue time annotated beats none", issued(secret(base, base, ""), 0, "new"), secret(base, base, "")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !kubeconfigs(nil).newer(tt.newer, tt.old) {
				t.Fatal("the newer token is not newer")
			}
			if (kubeconfigs{}).newer(tt.old, tt.newer) {
				t.Fatal("order is not antisymmetric")
			}
			// Between two relays of the same rank, the plan takes the newer token too.
			s := newPlanState(Input{})
			relay := func(sec *corev1.Secret) source {
				src := source{relayOnly: true, secret: sec}
				src.exp, src.iat = s.kc.tokenTimes(sec)
				return src
			}
			if !s.better(relay(tt.newer), relay(tt.old)) || s.better(relay(tt.old), relay(tt.newer)) {
				t.Fatal("the plan prefers the older relay")
			}
		})
	}
}

// TestKubeconfigsReadOnce: a plan's kubeconfigs answer what document.Read answers, for
// kubeconfigs it accepts and for those it refuses, and keep one entry per content
// however many Secrets (relays) carry it.
func TestKubeconfigsReadOnce(t *testing.T) {
	exp := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	good, other := readerKubeconfig("x", "https://x.example", nil, exp, ""), readerKubeconfig("y", "https://y.example", nil, exp, "")
	bad := []byte("not: [a kubeconfig")
	k := kubeconfigs{}
	for range 3 { // three relays of each
		for _, data := range [][]byte{good, other, bad} {
			want, wantOK := document.Read(data)
			got, ok := k.read(append([]byte(nil), data...))
			if diff := cmp.Diff(want, got); diff != "" || ok != wantOK {
				t.Errorf("read %.20q: ok %t, want %t (-want +got):\n%s", data, ok, wantOK, diff)
			}
		}
	}
	if len(k) != 3 {
		t.Errorf("kubeconfigs hold %d entries, want one per content (3)", len(k))
	}
}
