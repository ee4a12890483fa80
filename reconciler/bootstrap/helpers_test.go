package bootstrap

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
)

const (
	testNS       = "cluster-registry"
	testName     = "alpha"
	testID       = types.UID("5d1c6c3e-0000-4000-8000-00000000a1fa")
	testLifetime = time.Hour
	endpoint1    = "https://alpha.example.com:6443"
	endpoint2    = "https://alpha-new.example.com:6443"
	localServer  = "https://127.0.0.1:34567"
)

// start is the fake clock's starting time: whole seconds, so RFC 3339 annotations are exact.
var start = time.Date(2030, time.January, 2, 3, 4, 5, 0, time.UTC)

func newScheme(t testing.TB) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// newCA returns a fresh self-signed CA certificate in PEM.
func newCA(t testing.TB, cn string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             start.Add(-time.Hour),
		NotAfter:              start.Add(365 * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// fakeClock is the injected clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func (c *fakeClock) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }

// mintCall is one recorded TokenRequest.
type mintCall struct {
	Namespace         string
	ServiceAccount    string
	ExpirationSeconds int64
}

// fakeMinter issues "token-1", "token-2", ... expiring at now + the asked lifetime
// (or granted, when set).
type fakeMinter struct {
	clock *fakeClock

	mu       sync.Mutex
	calls    []mintCall
	issued   []string
	granted  time.Duration // when non-zero, the lifetime granted instead of the asked one
	noExpiry bool          // when set, ExpirationTimestamp is left zero
	token    func(n int) string
	err      error
}

func (m *fakeMinter) forNamespace(ns string) TokenMinter { return nsMinter{m: m, ns: ns} }

func (m *fakeMinter) Calls() []mintCall {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]mintCall(nil), m.calls...)
}

func (m *fakeMinter) Issued() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.issued...)
}

type nsMinter struct {
	m  *fakeMinter
	ns string
}

func (n nsMinter) CreateToken(_ context.Context, sa string, tr *authenticationv1.TokenRequest, _ metav1.CreateOptions) (*authenticationv1.TokenRequest, error) {
	m := n.m
	m.mu.Lock()
	defer m.mu.Unlock()
	var secs int64
	if tr.Spec.ExpirationSeconds != nil {
		secs = *tr.Spec.ExpirationSeconds
	}
	m.calls = append(m.calls, mintCall{Namespace: n.ns, ServiceAccount: sa, ExpirationSeconds: secs})
	if m.err != nil {
		return nil, m.err
	}
	token := fmt.Sprintf("token-%d", len(m.calls))
	if m.token != nil {
		token = m.token(len(m.calls))
	}
	m.issued = append(m.issued, token)
	lifetime := time.Duration(secs) * time.Second
	if m.granted != 0 {
		lifetime = m.granted
	}
	out := tr.DeepCopy()
	out.Status.Token = token
	if !m.noExpiry {
		out.Status.ExpirationTimestamp = metav1.NewTime(m.clock.Now().Add(lifetime))
	}
	return out, nil
}

// env is a Reconciler over a fake client, with the fake clock and minter.
type env struct {
	t        *testing.T
	ctx      context.Context
	c        client.WithWatch
	clock    *fakeClock
	minter   *fakeMinter
	recorder *record.FakeRecorder
	r        *Reconciler

	localCA, endpointCA []byte

	mu     sync.Mutex
	writes []string
	uidSeq int
	// getHook, when set, runs before every Get; a non-nil error is returned instead.
	getHook func(key client.ObjectKey, obj client.Object) error
	// writeHook, when set, runs before every write; a non-nil error is returned instead.
	writeHook func(verb string, obj client.Object) error
	events    []string
}

// newEnv builds an env; configure adjusts the options (whose CAs are the env's) before
// the Reconciler is built.
func newEnv(t *testing.T, configure func(e *env, o *Options), objs ...client.Object) *env {
	t.Helper()
	e := &env{
		t:          t,
		ctx:        context.Background(),
		clock:      &fakeClock{t: start},
		recorder:   record.NewFakeRecorder(1000),
		localCA:    newCA(t, "local-ca"),
		endpointCA: newCA(t, "endpoint-ca"),
	}
	e.minter = &fakeMinter{clock: e.clock}
	e.c = fake.NewClientBuilder().
		WithScheme(newScheme(t)).
		WithStatusSubresource(&v1alpha1.Cluster{}).
		WithObjects(objs...).
		WithInterceptorFuncs(interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if h := e.hookGet(); h != nil {
					if err := h(key, obj); err != nil {
						return err
					}
				}
				return c.Get(ctx, key, obj, opts...)
			},
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if err := e.write("create", obj); err != nil {
					return err
				}
				// The API server assigns a UID; the fake client does not.
				orig := obj.GetUID()
				if orig == "" {
					obj.SetUID(e.nextUID())
				}
				err := c.Create(ctx, obj, opts...)
				if err != nil {
					obj.SetUID(orig)
				}
				return err
			},
			Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				if err := e.write("update", obj); err != nil {
					return err
				}
				return c.Update(ctx, obj, opts...)
			},
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				if err := e.write("patch", obj); err != nil {
					return err
				}
				return c.Patch(ctx, obj, patch, opts...)
			},
			Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
				if err := e.write("delete", obj); err != nil {
					return err
				}
				return c.Delete(ctx, obj, opts...)
			},
		}).
		Build()
	opts := Options{Namespace: testNS, LocalCA: e.localCA, TokenLifetime: testLifetime}
	if configure != nil {
		configure(e, &opts)
	}
	e.r = &Reconciler{
		Client:   e.c,
		Tokens:   e.minter.forNamespace,
		Identity: Identity{ID: testID, Name: testName},
		Options:  opts,
		Recorder: e.recorder,
		Now:      e.clock.Now,
	}
	return e
}

func (e *env) hookGet() func(client.ObjectKey, client.Object) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.getHook
}

func (e *env) nextUID() types.UID {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.uidSeq++
	return types.UID(fmt.Sprintf("uid-%d", e.uidSeq))
}

func (e *env) write(verb string, obj client.Object) error {
	e.mu.Lock()
	hook := e.writeHook
	e.writes = append(e.writes, fmt.Sprintf("%s %T %s/%s", verb, obj, obj.GetNamespace(), obj.GetName()))
	e.mu.Unlock()
	if hook != nil {
		return hook(verb, obj)
	}
	return nil
}

// takeWrites returns the writes since the last call.
func (e *env) takeWrites() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	w := e.writes
	e.writes = nil
	return w
}

// reconcile runs one Reconcile and checks that no issued token shows in its error or
// in the events it recorded.
func (e *env) reconcile() (reconcile.Result, error) {
	e.t.Helper()
	res, err := e.r.Reconcile(e.ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: testName}})
	var msgs []string
	if err != nil {
		msgs = append(msgs, err.Error())
	}
	for drained := false; !drained; {
		select {
		case ev := <-e.recorder.Events:
			e.events = append(e.events, ev)
			msgs = append(msgs, ev)
		default:
			drained = true
		}
	}
	for _, tok := range e.minter.Issued() {
		for _, m := range msgs {
			if strings.Contains(m, tok) {
				e.t.Errorf("token %q leaked into an error or event: %q", tok, m)
			}
		}
	}
	return res, err
}

// mustReconcile runs one Reconcile that must succeed.
func (e *env) mustReconcile() reconcile.Result {
	e.t.Helper()
	res, err := e.reconcile()
	if err != nil {
		e.t.Fatalf("Reconcile: %v", err)
	}
	return res
}

func (e *env) cluster() *v1alpha1.Cluster {
	e.t.Helper()
	var c v1alpha1.Cluster
	if err := e.c.Get(e.ctx, client.ObjectKey{Name: testName}, &c); err != nil {
		e.t.Fatalf("getting Cluster %s: %v", testName, err)
	}
	return &c
}

func (e *env) serviceAccount() *corev1.ServiceAccount {
	e.t.Helper()
	var sa corev1.ServiceAccount
	if err := e.c.Get(e.ctx, client.ObjectKey{Namespace: testNS, Name: v1alpha1.ReaderName}, &sa); err != nil {
		e.t.Fatalf("getting the reader ServiceAccount: %v", err)
	}
	return &sa
}

func (e *env) secretAt(key client.ObjectKey) *corev1.Secret {
	e.t.Helper()
	var s corev1.Secret
	if err := e.c.Get(e.ctx, key, &s); err != nil {
		e.t.Fatalf("getting Secret %s: %v", key, err)
	}
	return &s
}

func (e *env) secret() *corev1.Secret {
	e.t.Helper()
	return e.secretAt(client.ObjectKey{Namespace: testNS, Name: testName})
}

func (e *env) secretNames() []string {
	e.t.Helper()
	var list corev1.SecretList
	if err := e.c.List(e.ctx, &list); err != nil {
		e.t.Fatal(err)
	}
	var names []string
	for _, s := range list.Items {
		names = append(names, s.Namespace+"/"+s.Name)
	}
	return names
}

// readerConfig is what a reader kubeconfig says.
type readerConfig struct {
	Server string
	CA     string
	Token  string
}

func parseReader(t testing.TB, s *corev1.Secret) readerConfig {
	t.Helper()
	cfg, err := kubeconfig.Parse(s.Data[v1alpha1.KubeconfigKey])
	if err != nil {
		t.Fatalf("the kubeconfig of Secret %s/%s does not parse: %v", s.Namespace, s.Name, err)
	}
	return readerConfig{Server: cfg.Host, CA: string(cfg.CAData), Token: cfg.BearerToken}
}

// tokenAnnotations are the annotations expected on a Secret whose token was issued at
// issued with lifetime.
func tokenAnnotations(issued time.Time, lifetime time.Duration, saUID types.UID) map[string]string {
	return map[string]string{
		v1alpha1.TokenRenewAfterAnnotation:        issued.Add(lifetime / 2).UTC().Format(time.RFC3339),
		v1alpha1.TokenExpiresAtAnnotation:         issued.Add(lifetime).UTC().Format(time.RFC3339),
		v1alpha1.TokenIssuedAtAnnotation:          issued.UTC().Format(time.RFC3339Nano),
		v1alpha1.TokenServiceAccountUIDAnnotation: string(saUID),
	}
}

// approx reports whether got is within a second of want.
func approx(got, want time.Duration) bool {
	d := got - want
	return d > -time.Second && d < time.Second
}
