package credentials

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/credentials/seal"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
)

const (
	idL types.UID = "0b9c2f1e-5d1a-4c1e-9a70-000000000001"
	idA types.UID = "0b9c2f1e-5d1a-4c1e-9a70-00000000000a"
	idB types.UID = "0b9c2f1e-5d1a-4c1e-9a70-00000000000b"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func cluster(name string, id types.UID) v1alpha1.Cluster {
	return v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.ClusterSpec{ClusterID: id}}
}

func TestKey(t *testing.T) {
	tests := []struct {
		id   types.UID
		want string
	}{
		{idA, string(idA)},
		{"Not_A_Label", "h-"},
		{types.UID(strings.Repeat("a", 300)), "h-"},
	}
	for _, tt := range tests {
		got := v1alpha1.ReaderKey(tt.id)
		if !strings.HasPrefix(got, tt.want) {
			t.Errorf("v1alpha1.ReaderKey(%q) = %q, want prefix %q", tt.id, got, tt.want)
		}
		for _, n := range []string{v1alpha1.ReaderServiceAccountName(tt.id), v1alpha1.IssuedReaderSecretName(tt.id), v1alpha1.ReceivedReaderSecretName(tt.id)} {
			if msgs := validation.IsDNS1123Subdomain(n); len(msgs) > 0 {
				t.Errorf("name %q of %q is not a DNS subdomain: %v", n, tt.id, msgs)
			}
		}
		if msgs := validation.IsValidLabelValue(got); len(msgs) > 0 {
			t.Errorf("v1alpha1.ReaderKey(%q) = %q is not a label value: %v", tt.id, got, msgs)
		}
	}
	if v1alpha1.ReaderKey("x-1") == v1alpha1.ReaderKey("x-2") || v1alpha1.ReaderKey("Not_A") == v1alpha1.ReaderKey("Not_B") {
		t.Error("v1alpha1.ReaderKey maps two IDs to one key")
	}
}

// jwt is an unsigned token in the shape of a ServiceAccount token, stating exp.
func jwt(exp time.Time) string {
	enc := base64.RawURLEncoding
	claims, _ := json.Marshal(map[string]any{"exp": exp.Unix(), "iat": exp.Add(-24 * time.Hour).Unix()})
	return enc.EncodeToString([]byte(`{"alg":"RS256"}`)) + "." + enc.EncodeToString(claims) + ".c2ln"
}

func secret(name, server string, exp time.Time, mods ...func(*corev1.Secret)) *corev1.Secret {
	data, err := kubeconfig.Render(kubeconfig.Reader{ClusterName: "x", Server: server, Token: jwt(exp)})
	if err != nil {
		panic(err)
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
		v1alpha1.TokenServiceAccountUIDAnnotation: "sa-1",
		v1alpha1.TokenRenewAfterAnnotation:        t0.Add(time.Hour).Format(time.RFC3339),
	}}, Type: v1alpha1.SecretTypeClusterRegistry, Data: map[string][]byte{v1alpha1.KubeconfigKey: data}}
	for _, m := range mods {
		m(s)
	}
	return s
}

func mustKey(t *testing.T) *seal.Key {
	t.Helper()
	k, err := seal.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}
