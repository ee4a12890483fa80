package members

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/credentials/seal"
)

func readerCluster(name string, id types.UID) v1alpha1.Cluster {
	return v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.ClusterSpec{ClusterID: id}}
}

// deletingCluster marks c as being deleted (a finalizer holds it).
func deletingCluster(c v1alpha1.Cluster) v1alpha1.Cluster {
	c.DeletionTimestamp = &metav1.Time{Time: t0}
	c.Finalizers = []string{"example.com/hold"}
	return c
}

func readerSA(id types.UID) corev1.ServiceAccount {
	return corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{
		Namespace: "cluster-registry-readers", Name: v1alpha1.ReaderServiceAccountName(id), UID: "sa-" + types.UID(v1alpha1.ReaderKey(id)),
		Labels:      map[string]string{v1alpha1.ReaderForLabel: v1alpha1.ReaderKey(id)},
		Annotations: map[string]string{v1alpha1.PeerClusterIDAnnotation: string(id)},
	}}
}

// sealedTo turns an issued Secret into one sealed to publicKey (its data is not opened
// by TokenDue: only its shape counts).
func sealedTo(publicKey string) func(*corev1.Secret) {
	return func(s *corev1.Secret) {
		s.Data = map[string][]byte{v1alpha1.SealedKubeconfigKey: []byte("sealed")}
		s.Annotations[v1alpha1.SealedToAnnotation] = seal.Fingerprint(publicKey)
	}
}

func TestPlanReaders(t *testing.T) {
	peerNames := func(ps []Reader) []string {
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
		in   ReadersInput
		want summary
	}{
		{
			name: "every peer gets a reader of its own; the local cluster none",
			in:   ReadersInput{LocalID: idL, Clusters: []v1alpha1.Cluster{readerCluster("l", idL), readerCluster("b", idB), readerCluster("a", idA)}},
			want: summary{Create: []string{"a", "b"}},
		},
		{
			name: "an existing reader is kept",
			in:   ReadersInput{LocalID: idL, Clusters: []v1alpha1.Cluster{readerCluster("l", idL), readerCluster("a", idA), readerCluster("b", idB)}, ServiceAccounts: []corev1.ServiceAccount{readerSA(idA)}},
			want: summary{Create: []string{"b"}, Keep: []string{"a"}},
		},
		{
			name: "two Clusters of one ID give one reader",
			in:   ReadersInput{LocalID: idL, Clusters: []v1alpha1.Cluster{readerCluster("a2", idA), readerCluster("a", idA)}},
			want: summary{Create: []string{"a"}},
		},
		{
			name: "a departed peer's reader is revoked and the shared token rotated once its Cluster is deleted here",
			in: ReadersInput{LocalID: idL, Clusters: []v1alpha1.Cluster{readerCluster("l", idL), readerCluster("a", idA)},
				Departed: map[types.UID]bool{idB: true}, ServiceAccounts: []corev1.ServiceAccount{readerSA(idA), readerSA(idB)}},
			want: summary{Keep: []string{"a"}, Revoke: []string{v1alpha1.ReaderServiceAccountName(idB)}, RotateShared: true},
		},
		{
			// A member that rejects a departed cluster's credential has dropped it: leave
			// --wait, run by the departed cluster, reads the rejection as done.
			name: "a departed peer whose Cluster is still here is neither revoked nor renewed yet",
			in: ReadersInput{LocalID: idL, Clusters: []v1alpha1.Cluster{readerCluster("l", idL), readerCluster("a", idA), readerCluster("b", idB)},
				Departed: map[types.UID]bool{idB: true}, ServiceAccounts: []corev1.ServiceAccount{readerSA(idA), readerSA(idB)}},
			want: summary{Keep: []string{"a"}},
		},
		{
			name: "a departed peer whose Cluster is being deleted is revoked",
			in: ReadersInput{LocalID: idL, Clusters: []v1alpha1.Cluster{readerCluster("l", idL), readerCluster("a", idA), deletingCluster(readerCluster("b", idB))},
				Departed: map[types.UID]bool{idB: true}, ServiceAccounts: []corev1.ServiceAccount{readerSA(idA), readerSA(idB)}},
			want: summary{Keep: []string{"a"}, Revoke: []string{v1alpha1.ReaderServiceAccountName(idB)}, RotateShared: true},
		},
		{
			name: "a departure already carried out rotates nothing again",
			in: ReadersInput{LocalID: idL, Clusters: []v1alpha1.Cluster{readerCluster("l", idL), readerCluster("a", idA), readerCluster("b", idB)},
				Departed: map[types.UID]bool{idB: true}, ServiceAccounts: []corev1.ServiceAccount{readerSA(idA)}},
			want: summary{Keep: []string{"a"}},
		},
		{
			name: "a peer whose Cluster is gone keeps its reader: deletion needs its departure",
			in:   ReadersInput{LocalID: idL, Clusters: []v1alpha1.Cluster{readerCluster("l", idL)}, ServiceAccounts: []corev1.ServiceAccount{readerSA(idA)}},
		},
		{
			name: "a cluster that left issues and renews nothing, and revokes nothing",
			in: ReadersInput{LocalID: idL, Clusters: []v1alpha1.Cluster{readerCluster("l", idL), readerCluster("a", idA), readerCluster("b", idB)},
				Departed: map[types.UID]bool{idL: true, idB: true}, ServiceAccounts: []corev1.ServiceAccount{readerSA(idB), readerSA(idA)}},
			want: summary{Left: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := PlanReaders(tt.in)
			got := summary{Create: peerNames(res.Create), Keep: peerNames(res.Keep), Revoke: saNames(res.Revoke), RotateShared: res.RotateShared, Left: res.Left}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("PlanReaders (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTokenDue(t *testing.T) {
	const srv = "https://x.example:6443"
	key, other := chooseKey(t).PublicKey(), chooseKey(t).PublicKey()
	tests := []struct {
		name      string
		s         *corev1.Secret
		publicKey string // the peer's current key
		now       time.Time
		want      bool
	}{
		{"missing", nil, key, t0, true},
		{"current", chooseSecret("s", srv, t0.Add(2*time.Hour), sealedTo(key)), key, t0, false},
		{"due for renewal", chooseSecret("s", srv, t0.Add(2*time.Hour), sealedTo(key)), key, t0.Add(time.Hour), true},
		{"issued for a ServiceAccount since recreated", chooseSecret("s", srv, t0.Add(2*time.Hour), sealedTo(key), func(s *corev1.Secret) { s.Annotations[v1alpha1.TokenServiceAccountUIDAnnotation] = "sa-0" }), key, t0, true},
		{"a copy, not ours", chooseSecret("s", srv, t0.Add(2*time.Hour), sealedTo(key), func(s *corev1.Secret) { s.Annotations[v1alpha1.OwnershipAnnotation] = "x" }), key, t0, true},
		{"another type", chooseSecret("s", srv, t0.Add(2*time.Hour), sealedTo(key), func(s *corev1.Secret) { s.Type = corev1.SecretTypeOpaque }), key, t0, true},
		{"sealed to the peer's former key", chooseSecret("s", srv, t0.Add(2*time.Hour), sealedTo(other)), key, t0, true},
		{"in clear (an earlier version issued it so)", chooseSecret("s", srv, t0.Add(2*time.Hour)), key, t0, true},
		{"marked sealed, holding plaintext", chooseSecret("s", srv, t0.Add(2*time.Hour), func(s *corev1.Secret) { s.Annotations[v1alpha1.SealedToAnnotation] = seal.Fingerprint(key) }), key, t0, true},
		{"sealed, with plaintext beside", chooseSecret("s", srv, t0.Add(2*time.Hour), sealedTo(key), func(s *corev1.Secret) { s.Data[v1alpha1.KubeconfigKey] = []byte("x") }), key, t0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := TokenDue(tt.s, "sa-1", seal.Fingerprint(tt.publicKey), tt.now); got != tt.want {
				t.Errorf("TokenDue = %v, want %v", got, tt.want)
			}
		})
	}
}

// legacyCluster marks c as named a legacy peer by the local admin.
func legacyCluster(c v1alpha1.Cluster) v1alpha1.Cluster {
	c.Annotations = map[string]string{v1alpha1.LegacyPeerAnnotation: "true"}
	return c
}

func TestPlanReadersLegacy(t *testing.T) {
	in := ReadersInput{LocalID: idL, Clusters: []v1alpha1.Cluster{readerCluster("l", idL), legacyCluster(readerCluster("seed", idB)), readerCluster("a", idA),
		// Another annotation value is no consent.
		func() v1alpha1.Cluster {
			c := readerCluster("c", "id-c")
			c.Annotations = map[string]string{v1alpha1.LegacyPeerAnnotation: "yes"}
			return c
		}()}, ServiceAccounts: []corev1.ServiceAccount{readerSA(idA)}}
	res := PlanReaders(in)
	got := map[string]bool{}
	for _, p := range append(res.Create, res.Keep...) {
		got[p.Name] = p.Legacy
	}
	want := map[string]bool{"a": false, "c": false, "seed": true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("legacy peers (-want +got):\n%s", diff)
	}
}

func TestLegacyTokenDue(t *testing.T) {
	const srv = "https://x.example:6443"
	tests := []struct {
		name string
		s    *corev1.Secret
		now  time.Time
		want bool
	}{
		{"missing", nil, t0, true},
		{"current, in the clear", chooseSecret("s", srv, t0.Add(2*time.Hour)), t0, false},
		{"due for renewal", chooseSecret("s", srv, t0.Add(2*time.Hour)), t0.Add(time.Hour), true},
		{"issued for a ServiceAccount since recreated", chooseSecret("s", srv, t0.Add(2*time.Hour), func(s *corev1.Secret) { s.Annotations[v1alpha1.TokenServiceAccountUIDAnnotation] = "sa-0" }), t0, true},
		{"a copy, not ours", chooseSecret("s", srv, t0.Add(2*time.Hour), func(s *corev1.Secret) { s.Annotations[v1alpha1.OwnershipAnnotation] = "x" }), t0, true},
		{"another type", chooseSecret("s", srv, t0.Add(2*time.Hour), func(s *corev1.Secret) { s.Type = corev1.SecretTypeOpaque }), t0, true},
		{"sealed: not what a legacy peer can use", chooseSecret("s", srv, t0.Add(2*time.Hour), sealedTo(chooseKey(t).PublicKey())), t0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := LegacyTokenDue(tt.s, "sa-1", tt.now); got != tt.want {
				t.Errorf("LegacyTokenDue = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestLegacySubjects(t *testing.T) {
	const readers = "cluster-registry-readers"
	tests := []struct {
		name  string
		peers []Reader
		want  []rbacv1.Subject
	}{
		{"no legacy peer: no subject", []Reader{{ID: idA}, {ID: idB}}, nil},
		{"the legacy peers' readers, sorted, once", []Reader{{ID: idB, Legacy: true}, {ID: idA}, {ID: idA, Legacy: true}, {ID: idB, Legacy: true}, {Legacy: true}}, []rbacv1.Subject{
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
		peers []Reader
		want  []rbacv1.PolicyRule
	}{
		{"no peers: no rule (one without names would grant every Secret)", nil, nil},
		{"a peer without an ID: no rule", []Reader{{Name: "b"}}, nil},
		{"the issued credentials, by name, sorted, once", []Reader{{ID: "b"}, {ID: "a"}, {ID: "b"}}, []rbacv1.PolicyRule{{
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
