package members

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/credentials/seal"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig/document"
)

// chooseSecret is a reader Secret of a kubeconfig for server whose token expires at exp.
func chooseSecret(name, server string, exp time.Time, mods ...func(*corev1.Secret)) *corev1.Secret {
	data, err := document.Render(document.Reader{ClusterName: "x", Server: server, Token: fakeJWT(exp, exp.Add(-24*time.Hour), "")})
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

func TestChoose(t *testing.T) {
	const x, local types.UID = "x", "local"
	key := chooseKey(t)
	open := func(issuer types.UID, sealed []byte) ([]byte, error) { return key.Open(issuer, local, sealed) }
	shared := chooseSecret("shared", "https://x.example:6443", t0.Add(time.Hour))
	mine := func(mods ...func(*corev1.Secret)) *corev1.Secret {
		s := chooseSecret("mine", "https://x.example:6443", t0.Add(time.Hour))
		b, err := seal.Seal(key.PublicKey(), x, local, s.Data[v1alpha1.KubeconfigKey])
		if err != nil {
			t.Fatal(err)
		}
		s.Annotations[v1alpha1.OwnershipAnnotation] = string(x)
		s.Data = map[string][]byte{v1alpha1.SealedKubeconfigKey: b}
		for _, m := range mods {
			m(s)
		}
		return s
	}
	sealedGarbage := func(s *corev1.Secret) {
		b, err := seal.Seal(key.PublicKey(), x, local, []byte("nope"))
		if err != nil {
			t.Fatal(err)
		}
		s.Data[v1alpha1.SealedKubeconfigKey] = b
	}
	tests := []struct {
		name     string
		received *corev1.Secret
		now      time.Time
		want     string
	}{
		{"no credential of its own: the shared one", nil, t0, "shared"},
		{"its own credential", mine(), t0, "mine"},
		{"its own credential expired: the shared one", mine(), t0.Add(time.Hour), "shared"},
		{"a Secret not copied from x: the shared one", mine(func(s *corev1.Secret) { s.Annotations[v1alpha1.OwnershipAnnotation] = "y" }), t0, "shared"},
		{"an unreadable credential: the shared one", mine(sealedGarbage), t0, "shared"},
		{"another type: the shared one", mine(func(s *corev1.Secret) { s.Type = corev1.SecretTypeOpaque }), t0, "shared"},
		{"in clear: the shared one", chooseSecret("mine", "https://x.example:6443", t0.Add(time.Hour), func(s *corev1.Secret) {
			s.Annotations[v1alpha1.OwnershipAnnotation] = string(x)
		}), t0, "shared"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := Choose(shared, tt.received, x, tt.now, open); got.Name != tt.want || err != nil {
				t.Errorf("Choose = %s, %v; want %s", got.Name, err, tt.want)
			}
		})
	}
}

func chooseKey(t *testing.T) *seal.Key {
	t.Helper()
	k, err := seal.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestChooseSealed: a credential sealed to this cluster is opened with its key and used
// with the pinned server; one that does not open (another key, no key loaded) gives way
// to the shared Secret, and the error says why.
func TestChooseSealed(t *testing.T) {
	const x, local types.UID = "x", "local"
	shared := chooseSecret("shared", "https://x.example:6443", t0.Add(time.Hour))
	mine, thief := chooseKey(t), chooseKey(t)
	plain := chooseSecret("mine", "https://elsewhere.example:6443", t0.Add(2*time.Hour))
	sealedFor := func(k *seal.Key) *corev1.Secret { return sealedCopy(t, plain, k, x, local) }
	opener := func(k *seal.Key) Opener {
		return func(issuer types.UID, sealed []byte) ([]byte, error) { return k.Open(issuer, local, sealed) }
	}
	got, err := Choose(shared, sealedFor(mine), x, t0, opener(mine))
	if err != nil || got.Name != "mine" {
		t.Fatalf("Choose = %s, %v; want mine", got.Name, err)
	}
	r, _ := document.Read(got.Data[v1alpha1.KubeconfigKey])
	want, _ := document.Read(plain.Data[v1alpha1.KubeconfigKey])
	if r.Server != "https://x.example:6443" || r.Token != want.Token {
		t.Errorf("opened credential: server %q, its token: %v; want the pinned server and the sealed token", r.Server, r.Token == want.Token)
	}
	for _, tt := range []struct {
		name    string
		open    Opener
		wantErr string
	}{
		{"another member's key", opener(thief), "does not open"},
		{"no key loaded", nil, "not loaded yet"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Choose(shared, sealedFor(mine), x, t0, tt.open)
			if got.Name != "shared" || err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Choose = %s, %v; want shared and an error containing %q", got.Name, err, tt.wantErr)
			}
		})
	}
}

// TestChooserRemembers: a Chooser answers what Choose answers, opening the credential
// again only when a Secret, the peer or the key changes, or the Secrets carry no
// resourceVersion; an expired token is given up without opening it again.
func TestChooserRemembers(t *testing.T) {
	const x, local types.UID = "x", "local"
	key, other := chooseKey(t), chooseKey(t)
	versioned := func(s *corev1.Secret, uid, rv string) *corev1.Secret {
		s = s.DeepCopy()
		s.UID, s.ResourceVersion = types.UID(uid), rv
		return s
	}
	shared := versioned(chooseSecret("shared", "https://x.example:6443", t0.Add(time.Hour)), "s", "1")
	plain := chooseSecret("mine", "https://elsewhere.example:6443", t0.Add(2*time.Hour))
	received := versioned(sealedCopy(t, plain, key, x, local), "r", "1")
	opens := 0
	opener := func(k *seal.Key) Opener {
		return func(issuer types.UID, sealed []byte) ([]byte, error) { opens++; return k.Open(issuer, local, sealed) }
	}
	var c Chooser
	for _, step := range []struct {
		name             string
		shared, received *corev1.Secret
		x                types.UID
		now              time.Time
		key              *seal.Key
		wantOpens        int
		want             string
	}{
		{name: "first", shared: shared, received: received, x: x, now: t0, key: key, wantOpens: 1, want: "mine"},
		{name: "the same Secrets", shared: shared, received: received, x: x, now: t0.Add(time.Minute), key: key, wantOpens: 1, want: "mine"},
		{name: "the credential updated", shared: shared, received: versioned(received, "r", "2"), x: x, now: t0, key: key, wantOpens: 2, want: "mine"},
		{name: "the shared Secret updated", shared: versioned(shared, "s", "2"), received: versioned(received, "r", "2"), x: x, now: t0, key: key, wantOpens: 3, want: "mine"},
		{name: "the same again", shared: versioned(shared, "s", "2"), received: versioned(received, "r", "2"), x: x, now: t0, key: key, wantOpens: 3, want: "mine"},
		{name: "another key", shared: versioned(shared, "s", "2"), received: versioned(received, "r", "2"), x: x, now: t0, key: other, wantOpens: 4, want: "shared"},
		{name: "the key back", shared: versioned(shared, "s", "2"), received: versioned(received, "r", "2"), x: x, now: t0, key: key, wantOpens: 5, want: "mine"},
		{name: "expired", shared: versioned(shared, "s", "2"), received: versioned(received, "r", "2"), x: x, now: t0.Add(2 * time.Hour), key: key, wantOpens: 5, want: "shared"},
		{name: "another peer ID", shared: versioned(shared, "s", "2"), received: versioned(received, "r", "2"), x: "y", now: t0, key: key, wantOpens: 5, want: "shared"},
		{name: "no resourceVersion", shared: versioned(shared, "s", ""), received: versioned(received, "r", "2"), x: x, now: t0, key: key, wantOpens: 6, want: "mine"},
		{name: "no resourceVersion again", shared: versioned(shared, "s", ""), received: versioned(received, "r", "2"), x: x, now: t0, key: key, wantOpens: 7, want: "mine"},
	} {
		open := opener(step.key)
		got, err := c.Choose("peer", step.shared, step.received, step.x, step.now, step.key, open)
		if got.Name != step.want || opens != step.wantOpens {
			t.Errorf("%s: Choose = %s, %d opens; want %s, %d", step.name, got.Name, opens, step.want, step.wantOpens)
		}
		n := opens
		wantSecret, wantErr := Choose(step.shared, step.received, step.x, step.now, open)
		opens = n
		if got.Name == "shared" && got != step.shared {
			t.Errorf("%s: the shared Secret answered is not the one passed", step.name)
		}
		if diff := cmp.Diff(wantSecret, got); diff != "" || (err == nil) != (wantErr == nil) {
			t.Errorf("%s: Chooser and Choose differ: %v / %v (-Choose +Chooser):\n%s", step.name, wantErr, err, diff)
		}
	}
	c.Forget("peer")
	if _, _ = c.Choose("peer", versioned(shared, "s", "2"), versioned(received, "r", "2"), x, t0, key, opener(key)); opens != 8 {
		t.Errorf("after Forget: %d opens, want 8", opens)
	}
}

// sealedCopy is plain as cluster x issues it to local: its kubeconfig sealed to k.
func sealedCopy(t *testing.T, plain *corev1.Secret, k *seal.Key, x, local types.UID) *corev1.Secret {
	t.Helper()
	b, err := seal.Seal(k.PublicKey(), x, local, plain.Data[v1alpha1.KubeconfigKey])
	if err != nil {
		t.Fatal(err)
	}
	s := plain.DeepCopy()
	s.Annotations[v1alpha1.OwnershipAnnotation] = string(x)
	s.Data = map[string][]byte{v1alpha1.SealedKubeconfigKey: b}
	return s
}
