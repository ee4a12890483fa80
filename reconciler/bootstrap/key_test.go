package bootstrap

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/credentials/seal"
)

func (e *env) keySecret() (*corev1.Secret, error) {
	var s corev1.Secret
	err := e.c.Get(e.ctx, client.ObjectKey{Namespace: v1alpha1.ReadersNamespace(testNS), Name: v1alpha1.ReaderKeySecretName}, &s)
	return &s, err
}

// TestReconcileKey: the bootstrapper makes the key pair once, keeps it in the readers
// namespace, advertises its public key on the local Cluster, and reads the same key
// back after a restart.
func TestReconcileKey(t *testing.T) {
	e := newEnv(t, func(_ *env, o *Options) { o.LocalServer = localServer })
	e.r.Keys = &Keys{}
	e.mustReconcile()
	key := e.r.Keys.Get()
	if key == nil {
		t.Fatal("no key after the first reconcile")
	}
	s, err := e.keySecret()
	if err != nil {
		t.Fatalf("the key Secret: %v", err)
	}
	stored, err := seal.ParsePrivateKey(s.Data[v1alpha1.PrivateKeyKey])
	if err != nil || stored.PublicKey() != key.PublicKey() {
		t.Fatalf("the key Secret holds another key (%v)", err)
	}
	if got := e.cluster().Annotations[v1alpha1.ReaderPublicKeyAnnotation]; got != key.PublicKey() {
		t.Fatalf("the local Cluster advertises %q, want %q", got, key.PublicKey())
	}

	// A restart: the same key, nothing written.
	e.r.Keys = &Keys{}
	e.takeWrites()
	e.mustReconcile()
	if got := e.r.Keys.Get(); got == nil || got.PublicKey() != key.PublicKey() {
		t.Fatal("a restarted controller does not read back its key")
	}
	if w := e.takeWrites(); len(w) != 0 {
		t.Errorf("writes after a restart: %q, want none", w)
	}

	// The advertisement removed by hand comes back.
	c := e.cluster()
	delete(c.Annotations, v1alpha1.ReaderPublicKeyAnnotation)
	if err := e.c.Update(e.ctx, c); err != nil {
		t.Fatal(err)
	}
	e.mustReconcile()
	if got := e.cluster().Annotations[v1alpha1.ReaderPublicKeyAnnotation]; got != key.PublicKey() {
		t.Errorf("after removal the local Cluster advertises %q, want the key again", got)
	}
}

// TestReconcileBadKeySecret: a key Secret holding no valid key is reported, with what
// to do, and never replaced by the controller; nothing is advertised.
func TestReconcileBadKeySecret(t *testing.T) {
	bad := &corev1.Secret{}
	bad.Namespace, bad.Name = v1alpha1.ReadersNamespace(testNS), v1alpha1.ReaderKeySecretName
	bad.Data = map[string][]byte{v1alpha1.PrivateKeyKey: []byte("short")}
	e := newEnv(t, func(_ *env, o *Options) { o.LocalServer = localServer }, bad)
	e.r.Keys = &Keys{}
	_, err := e.reconcile()
	if err == nil || !strings.Contains(err.Error(), "delete it to make a new key pair") {
		t.Fatalf("Reconcile = %v, want the bad key reported", err)
	}
	if !strings.Contains(strings.Join(e.events, "\n"), "KeyFailed") {
		t.Errorf("events %q lack KeyFailed", e.events)
	}
	if e.r.Keys.Get() != nil {
		t.Error("a key is loaded from a bad Secret")
	}
	if _, ok := e.cluster().Annotations[v1alpha1.ReaderPublicKeyAnnotation]; ok {
		t.Error("a public key is advertised without a valid key")
	}
	s, _ := e.keySecret()
	if string(s.Data[v1alpha1.PrivateKeyKey]) != "short" {
		t.Error("the controller replaced the admin's key Secret")
	}
	// The shared reader Secret is still made: the key failing leaves the rest working.
	var shared corev1.Secret
	if err := e.c.Get(e.ctx, client.ObjectKey{Namespace: testNS, Name: testName}, &shared); err != nil {
		t.Errorf("the reader Secret: %v", err)
	}
}
