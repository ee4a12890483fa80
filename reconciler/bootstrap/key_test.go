package bootstrap

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/credentials/issue"
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

// TestReconcileKeyReported: what the bootstrapper reports of the key pair, which the
// local Cluster's ReaderKeyReady condition shows (KeyCondition): advertised; a key
// Secret that cannot be read (an API error) or holds no valid key, each with its
// reason; and a change signalled on Changes each time the outcome changes, not at every
// reconcile.
func TestReconcileKeyReported(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, v1alpha1.ReaderKeySecretName, errors.New("no RBAC"))
	bad := &corev1.Secret{}
	bad.Namespace, bad.Name = v1alpha1.ReadersNamespace(testNS), v1alpha1.ReaderKeySecretName
	bad.Data = map[string][]byte{v1alpha1.PrivateKeyKey: []byte("short")}
	tests := []struct {
		name    string
		objs    []client.Object
		getErr  error
		want    corev1.ConditionStatus
		reason  string
		wantErr error
	}{
		{name: "made and advertised", want: corev1.ConditionTrue, reason: v1alpha1.ReasonReaderKeyAdvertised},
		{name: "the key Secret cannot be read", getErr: forbidden, want: corev1.ConditionFalse, reason: v1alpha1.ReasonReaderKeySecretFailed, wantErr: forbidden},
		{name: "the key Secret holds no valid key", objs: []client.Object{bad}, want: corev1.ConditionFalse, reason: v1alpha1.ReasonReaderKeyInvalid, wantErr: issue.ErrInvalidKeySecret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, func(_ *env, o *Options) { o.LocalServer = localServer }, tt.objs...)
			e.getHook = func(key client.ObjectKey, _ client.Object) error {
				if key.Name == v1alpha1.ReaderKeySecretName && tt.getErr != nil {
					return tt.getErr
				}
				return nil
			}
			e.r.Keys = &Keys{}
			changes := e.r.Keys.Changes()
			for i := range 3 {
				_, _ = e.reconcile()
				signalled := len(changes) > 0
				if signalled {
					<-changes
				}
				if signalled != (i == 0) {
					t.Errorf("reconcile %d: change signalled %v, want %v", i, signalled, i == 0)
				}
			}
			s := e.r.Keys.State()
			if !errors.Is(s.Err, tt.wantErr) || (tt.wantErr == nil) != (s.Err == nil) {
				t.Errorf("reported %v, want %v", s.Err, tt.wantErr)
			}
			c, ok := issue.KeyCondition(s, testNS)
			if !ok || c.Type != v1alpha1.ClusterConditionReaderKeyReady || c.Status != tt.want || c.Reason != tt.reason {
				t.Errorf("KeyCondition = %+v, %v; want %s %s", c, ok, tt.want, tt.reason)
			}
		})
	}
}

// TestReconcileKeyMadeMeanwhile: when another replica creates the key Secret between
// this one's read and its create, this one reads that key and uses it, not an error.
func TestReconcileKeyMadeMeanwhile(t *testing.T) {
	e := newEnv(t, func(_ *env, o *Options) { o.LocalServer = localServer })
	e.r.Keys = &Keys{}
	other, err := seal.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	raced := false
	e.writeHook = func(verb string, obj client.Object) error {
		if verb != "create" || obj.GetName() != v1alpha1.ReaderKeySecretName || raced {
			return nil
		}
		raced = true
		s := obj.(*corev1.Secret).DeepCopy()
		s.Data = map[string][]byte{v1alpha1.PrivateKeyKey: other.Bytes()}
		if err := e.c.Create(e.ctx, s); err != nil {
			t.Fatalf("the other replica's create: %v", err)
		}
		return apierrors.NewAlreadyExists(schema.GroupResource{Resource: "secrets"}, obj.GetName())
	}
	e.mustReconcile()
	if !raced {
		t.Fatal("the key Secret was not created: the race was not exercised")
	}
	if got := e.r.Keys.Get(); got == nil || got.PublicKey() != other.PublicKey() {
		t.Errorf("the controller uses another key than the one the other replica made")
	}
}
