package credentials

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
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

// deleting marks c as being deleted (a finalizer holds it).
func deleting(c v1alpha1.Cluster) v1alpha1.Cluster {
	c.DeletionTimestamp = &metav1.Time{Time: t0}
	c.Finalizers = []string{"example.com/hold"}
	return c
}

func sa(id types.UID) corev1.ServiceAccount {
	return corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{
		Namespace: "cluster-registry-readers", Name: v1alpha1.ReaderServiceAccountName(id), UID: "sa-" + types.UID(v1alpha1.ReaderKey(id)),
		Labels:      map[string]string{v1alpha1.ReaderForLabel: v1alpha1.ReaderKey(id)},
		Annotations: map[string]string{v1alpha1.PeerClusterIDAnnotation: string(id)},
	}}
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

func TestPlan(t *testing.T) {
	peerNames := func(ps []Peer) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return out
	}
	saNames := func(sas []corev1.ServiceAccount) []string {
		var out []string
		for _, s := range sas {
			out = append(out, s.Name)
		}
		return out
	}
	type summary struct {
		Create, Keep, Revoke []string
		RotateShared, Left   bool
	}
	tests := []struct {
		name string
		in   Input
		want summary
	}{
		{
			name: "every peer gets a reader of its own; the local cluster none",
			in:   Input{LocalID: idL, Clusters: []v1alpha1.Cluster{cluster("l", idL), cluster("b", idB), cluster("a", idA)}},
			want: summary{Create: []string{"a", "b"}},
		},
		{
			name: "an existing reader is kept",
			in:   Input{LocalID: idL, Clusters: []v1alpha1.Cluster{cluster("l", idL), cluster("a", idA), cluster("b", idB)}, ServiceAccounts: []corev1.ServiceAccount{sa(idA)}},
			want: summary{Create: []string{"b"}, Keep: []string{"a"}},
		},
		{
			name: "two Clusters of one ID give one reader",
			in:   Input{LocalID: idL, Clusters: []v1alpha1.Cluster{cluster("a2", idA), cluster("a", idA)}},
			want: summary{Create: []string{"a"}},
		},
		{
			name: "a departed peer's reader is revoked and the shared token rotated once its Cluster is deleted here",
			in: Input{LocalID: idL, Clusters: []v1alpha1.Cluster{cluster("l", idL), cluster("a", idA)},
				Departed: map[types.UID]bool{idB: true}, ServiceAccounts: []corev1.ServiceAccount{sa(idA), sa(idB)}},
			want: summary{Keep: []string{"a"}, Revoke: []string{v1alpha1.ReaderServiceAccountName(idB)}, RotateShared: true},
		},
		{
			// A member that rejects a departed cluster's credential has dropped it: leave
			// --wait, run by the departed cluster, reads the rejection as done.
			name: "a departed peer whose Cluster is still here is neither revoked nor renewed yet",
			in: Input{LocalID: idL, Clusters: []v1alpha1.Cluster{cluster("l", idL), cluster("a", idA), cluster("b", idB)},
				Departed: map[types.UID]bool{idB: true}, ServiceAccounts: []corev1.ServiceAccount{sa(idA), sa(idB)}},
			want: summary{Keep: []string{"a"}},
		},
		{
			name: "a departed peer whose Cluster is being deleted is revoked",
			in: Input{LocalID: idL, Clusters: []v1alpha1.Cluster{cluster("l", idL), cluster("a", idA), deleting(cluster("b", idB))},
				Departed: map[types.UID]bool{idB: true}, ServiceAccounts: []corev1.ServiceAccount{sa(idA), sa(idB)}},
			want: summary{Keep: []string{"a"}, Revoke: []string{v1alpha1.ReaderServiceAccountName(idB)}, RotateShared: true},
		},
		{
			name: "a departure already carried out rotates nothing again",
			in: Input{LocalID: idL, Clusters: []v1alpha1.Cluster{cluster("l", idL), cluster("a", idA), cluster("b", idB)},
				Departed: map[types.UID]bool{idB: true}, ServiceAccounts: []corev1.ServiceAccount{sa(idA)}},
			want: summary{Keep: []string{"a"}},
		},
		{
			name: "a peer whose Cluster is gone keeps its reader: deletion needs its departure",
			in:   Input{LocalID: idL, Clusters: []v1alpha1.Cluster{cluster("l", idL)}, ServiceAccounts: []corev1.ServiceAccount{sa(idA)}},
		},
		{
			name: "a cluster that left issues and renews nothing, and revokes nothing",
			in: Input{LocalID: idL, Clusters: []v1alpha1.Cluster{cluster("l", idL), cluster("a", idA), cluster("b", idB)},
				Departed: map[types.UID]bool{idL: true, idB: true}, ServiceAccounts: []corev1.ServiceAccount{sa(idB), sa(idA)}},
			want: summary{Left: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Plan(tt.in)
			got := summary{Create: peerNames(res.Create), Keep: peerNames(res.Keep), Revoke: saNames(res.Revoke), RotateShared: res.RotateShared, Left: res.Left}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Plan (-want +got):\n%s", diff)
			}
		})
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

// sealedTo turns an issued Secret into one sealed to publicKey (its data is not opened
// by Due: only its shape counts).
func sealedTo(publicKey string) func(*corev1.Secret) {
	return func(s *corev1.Secret) {
		s.Data = map[string][]byte{v1alpha1.SealedKubeconfigKey: []byte("sealed")}
		s.Annotations[v1alpha1.SealedToAnnotation] = seal.Fingerprint(publicKey)
	}
}

func TestDue(t *testing.T) {
	const srv = "https://x.example:6443"
	key, other := mustKey(t).PublicKey(), mustKey(t).PublicKey()
	tests := []struct {
		name      string
		s         *corev1.Secret
		publicKey string // the peer's current key
		now       time.Time
		want      bool
	}{
		{"missing", nil, key, t0, true},
		{"current", secret("s", srv, t0.Add(2*time.Hour), sealedTo(key)), key, t0, false},
		{"due for renewal", secret("s", srv, t0.Add(2*time.Hour), sealedTo(key)), key, t0.Add(time.Hour), true},
		{"issued for a ServiceAccount since recreated", secret("s", srv, t0.Add(2*time.Hour), sealedTo(key), func(s *corev1.Secret) { s.Annotations[v1alpha1.TokenServiceAccountUIDAnnotation] = "sa-0" }), key, t0, true},
		{"a copy, not ours", secret("s", srv, t0.Add(2*time.Hour), sealedTo(key), func(s *corev1.Secret) { s.Annotations[v1alpha1.OwnershipAnnotation] = "x" }), key, t0, true},
		{"another type", secret("s", srv, t0.Add(2*time.Hour), sealedTo(key), func(s *corev1.Secret) { s.Type = corev1.SecretTypeOpaque }), key, t0, true},
		{"sealed to the peer's former key", secret("s", srv, t0.Add(2*time.Hour), sealedTo(other)), key, t0, true},
		{"in clear (an earlier version issued it so)", secret("s", srv, t0.Add(2*time.Hour)), key, t0, true},
		{"marked sealed, holding plaintext", secret("s", srv, t0.Add(2*time.Hour), func(s *corev1.Secret) { s.Annotations[v1alpha1.SealedToAnnotation] = seal.Fingerprint(key) }), key, t0, true},
		{"sealed, with plaintext beside", secret("s", srv, t0.Add(2*time.Hour), sealedTo(key), func(s *corev1.Secret) { s.Data[v1alpha1.KubeconfigKey] = []byte("x") }), key, t0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Due(tt.s, "sa-1", tt.publicKey, tt.now); got != tt.want {
				t.Errorf("Due = %v, want %v", got, tt.want)
			}
		})
	}
}

// legacy marks c as named a legacy peer by the local admin.
func legacy(c v1alpha1.Cluster) v1alpha1.Cluster {
	c.Annotations = map[string]string{v1alpha1.LegacyPeerAnnotation: "true"}
	return c
}

func TestPlanLegacy(t *testing.T) {
	in := Input{LocalID: idL, Clusters: []v1alpha1.Cluster{cluster("l", idL), legacy(cluster("seed", idB)), cluster("a", idA),
		// Another annotation value is no consent.
		func() v1alpha1.Cluster {
			c := cluster("c", "id-c")
			c.Annotations = map[string]string{v1alpha1.LegacyPeerAnnotation: "yes"}
			return c
		}()}, ServiceAccounts: []corev1.ServiceAccount{sa(idA)}}
	res := Plan(in)
	got := map[string]bool{}
	for _, p := range append(res.Create, res.Keep...) {
		got[p.Name] = p.Legacy
	}
	want := map[string]bool{"a": false, "c": false, "seed": true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("legacy peers (-want +got):\n%s", diff)
	}
}

func TestLegacyDue(t *testing.T) {
	const srv = "https://x.example:6443"
	tests := []struct {
		name string
		s    *corev1.Secret
		now  time.Time
		want bool
	}{
		{"missing", nil, t0, true},
		{"current, in the clear", secret("s", srv, t0.Add(2*time.Hour)), t0, false},
		{"due for renewal", secret("s", srv, t0.Add(2*time.Hour)), t0.Add(time.Hour), true},
		{"issued for a ServiceAccount since recreated", secret("s", srv, t0.Add(2*time.Hour), func(s *corev1.Secret) { s.Annotations[v1alpha1.TokenServiceAccountUIDAnnotation] = "sa-0" }), t0, true},
		{"a copy, not ours", secret("s", srv, t0.Add(2*time.Hour), func(s *corev1.Secret) { s.Annotations[v1alpha1.OwnershipAnnotation] = "x" }), t0, true},
		{"another type", secret("s", srv, t0.Add(2*time.Hour), func(s *corev1.Secret) { s.Type = corev1.SecretTypeOpaque }), t0, true},
		{"sealed: not what a legacy peer can use", secret("s", srv, t0.Add(2*time.Hour), sealedTo(mustKey(t).PublicKey())), t0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := LegacyDue(tt.s, "sa-1", tt.now); got != tt.want {
				t.Errorf("LegacyDue = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestLegacySubjects(t *testing.T) {
	const readers = "cluster-registry-readers"
	tests := []struct {
		name  string
		peers []Peer
		want  []rbacv1.Subject
	}{
		{"no legacy peer: no subject", []Peer{{ID: idA}, {ID: idB}}, nil},
		{"the legacy peers' readers, sorted, once", []Peer{{ID: idB, Legacy: true}, {ID: idA}, {ID: idA, Legacy: true}, {ID: idB, Legacy: true}, {Legacy: true}}, []rbacv1.Subject{
			{Kind: rbacv1.ServiceAccountKind, Namespace: readers, Name: v1alpha1.ReaderServiceAccountName(idA)},
			{Kind: rbacv1.ServiceAccountKind, Namespace: readers, Name: v1alpha1.ReaderServiceAccountName(idB)},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, LegacySubjects(readers, tt.peers)); diff != "" {
				t.Errorf("LegacySubjects (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBootstrapRules(t *testing.T) {
	tests := []struct {
		name  string
		peers []Peer
		want  []rbacv1.PolicyRule
	}{
		{"no peers: no rule (one without names would grant every Secret)", nil, nil},
		{"a peer without an ID: no rule", []Peer{{Name: "b"}}, nil},
		{"the issued credentials, by name, sorted, once", []Peer{{ID: "b"}, {ID: "a"}, {ID: "b"}}, []rbacv1.PolicyRule{{
			APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"},
			ResourceNames: []string{v1alpha1.IssuedReaderSecretName("a"), v1alpha1.IssuedReaderSecretName("b")},
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, BootstrapRules(tt.peers)); diff != "" {
				t.Errorf("BootstrapRules (-want +got):\n%s", diff)
			}
		})
	}
}

func mustKey(t *testing.T) *seal.Key {
	t.Helper()
	k, err := seal.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}
