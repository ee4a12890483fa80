package credentials

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	"github.com/kubectl-registry/kubectl-registry/reconciler/credentials/issue"
	"github.com/kubectl-registry/kubectl-registry/reconciler/credentials/seal"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
)

// minter mints tokens stating when they expire, and records for whom.
type minter struct {
	mu    sync.Mutex
	now   time.Time
	calls []string
}

func (m *minter) forNamespace(ns string) issue.TokenMinter { return nsMinter{m: m, ns: ns} }

type nsMinter struct {
	m  *minter
	ns string
}

func (n nsMinter) CreateToken(_ context.Context, sa string, tr *authenticationv1.TokenRequest, _ metav1.CreateOptions) (*authenticationv1.TokenRequest, error) {
	n.m.mu.Lock()
	defer n.m.mu.Unlock()
	n.m.calls = append(n.m.calls, n.ns+"/"+sa)
	exp := n.m.now.Add(time.Duration(*tr.Spec.ExpirationSeconds) * time.Second)
	return &authenticationv1.TokenRequest{Status: authenticationv1.TokenRequestStatus{
		Token: jwt(exp), ExpirationTimestamp: metav1.NewTime(exp),
	}}, nil
}

const registryNS = v1alpha1.DefaultNamespace

// fixture is cluster l with its own Cluster and shared reader Secret, and Clusters of a
// and b.
func fixture(t *testing.T, extra ...client.Object) (client.Client, *Reconciler, *minter) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	own := cluster("l", idL)
	own.Spec.AuthInfo.SecretRef = v1alpha1.NamespacedName{Name: "l", Namespace: registryNS}
	shared := secret("l", "https://l.example:6443", t0.Add(24*time.Hour))
	shared.Namespace = registryNS
	sharedSA := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: registryNS, Name: v1alpha1.ReaderName}}
	a, b := cluster("a", idA), cluster("b", idB)
	objs := append([]client.Object{&own, shared, sharedSA, &a, &b}, extra...)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	m := &minter{now: t0}
	keys := NewPeerKeys()
	keys.Set(idA, mustKey(t).PublicKey())
	keys.Set(idB, mustKey(t).PublicKey())
	r := &Reconciler{
		PeerKeys: keys,
		Client:   c, APIReader: c, Tokens: m.forNamespace,
		Identity:      issue.Identity{ID: idL, Name: "l"},
		Namespace:     registryNS,
		TokenLifetime: 24 * time.Hour,
		Departed:      func(time.Time, []v1alpha1.Cluster) map[types.UID]bool { return nil },
		Now:           func() time.Time { return t0 },
	}
	return c, r, m
}

func names(t *testing.T, c client.Client, list client.ObjectList, ns string) []string {
	t.Helper()
	if err := c.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []string
	switch l := list.(type) {
	case *corev1.ServiceAccountList:
		for _, o := range l.Items {
			out = append(out, o.Name)
		}
	case *corev1.SecretList:
		for _, o := range l.Items {
			out = append(out, o.Name)
		}
	}
	sort.Strings(out)
	return out
}

// TestReconcileIssuesAndRevokes: each peer gets a ServiceAccount and a Secret with its
// token for the advertised server; nothing is minted again while current; a departure
// rotates the shared reader once and revokes only the departed peer's reader, once the
// departed peer's Cluster is deleted here.
func TestReconcileIssuesAndRevokes(t *testing.T) {
	ctx := context.Background()
	c, r, m := fixture(t)
	readers := v1alpha1.ReadersNamespace(registryNS)
	if _, err := r.Reconcile(ctx, reconcile.Request{}); err != nil {
		t.Fatal(err)
	}
	wantSAs := []string{v1alpha1.ReaderServiceAccountName(idA), v1alpha1.ReaderServiceAccountName(idB)}
	if diff := cmp.Diff(wantSAs, names(t, c, &corev1.ServiceAccountList{}, readers)); diff != "" {
		t.Errorf("reader ServiceAccounts (-want +got):\n%s", diff)
	}
	wantSecrets := []string{v1alpha1.IssuedReaderSecretName(idA), v1alpha1.IssuedReaderSecretName(idB), "l"}
	if diff := cmp.Diff(wantSecrets, names(t, c, &corev1.SecretList{}, registryNS)); diff != "" {
		t.Errorf("registry Secrets (-want +got):\n%s", diff)
	}
	var issued corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: registryNS, Name: v1alpha1.IssuedReaderSecretName(idA)}, &issued); err != nil {
		t.Fatal(err)
	}
	if len(issued.Data[v1alpha1.SealedKubeconfigKey]) == 0 || len(issued.Data[v1alpha1.KubeconfigKey]) != 0 || issued.Type != v1alpha1.SecretTypeClusterRegistry || issued.Labels[v1alpha1.ReaderForLabel] != v1alpha1.ReaderKey(idA) {
		t.Errorf("issued Secret: data %v, type %q, labels %v; want it sealed, typed and labelled", keys(issued.Data), issued.Type, issued.Labels)
	}
	// The bootstrap credential may get exactly the issued credentials, by name.
	if diff := cmp.Diff([]string{v1alpha1.IssuedReaderSecretName(idA), v1alpha1.IssuedReaderSecretName(idB)}, bootstrapNames(t, c)); diff != "" {
		t.Errorf("bootstrap Role (-want +got):\n%s", diff)
	}
	// Each peer's reader token, then its departure notice token.
	notice := registryNS + "/" + v1alpha1.NoticeName
	if diff := cmp.Diff([]string{readers + "/" + v1alpha1.ReaderServiceAccountName(idA), notice, readers + "/" + v1alpha1.ReaderServiceAccountName(idB), notice}, m.calls); diff != "" {
		t.Errorf("tokens minted (-want +got):\n%s", diff)
	}
	if len(issued.Data[v1alpha1.SealedNoticeKey]) == 0 {
		t.Errorf("issued Secret: no %s", v1alpha1.SealedNoticeKey)
	}

	// Nothing is due: nothing is minted.
	if _, err := r.Reconcile(ctx, reconcile.Request{}); err != nil {
		t.Fatal(err)
	}
	if len(m.calls) != 4 {
		t.Errorf("a second reconcile minted %d more tokens, want none", len(m.calls)-4)
	}

	// b leaves: while its Cluster is still here (the membership has not carried the
	// departure out), nothing is revoked or minted.
	r.Departed = func(time.Time, []v1alpha1.Cluster) map[types.UID]bool { return map[types.UID]bool{idB: true} }
	if _, err := r.Reconcile(ctx, reconcile.Request{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: registryNS, Name: v1alpha1.ReaderName}, &corev1.ServiceAccount{}); err != nil {
		t.Errorf("the shared reader was rotated before b's Cluster was deleted: %v", err)
	}
	if diff := cmp.Diff(wantSAs, names(t, c, &corev1.ServiceAccountList{}, readers)); diff != "" {
		t.Errorf("reader ServiceAccounts before b's Cluster was deleted (-want +got):\n%s", diff)
	}
	if len(m.calls) != 4 {
		t.Errorf("b's departure minted %d more tokens, want none", len(m.calls)-4)
	}

	// The membership deletes b's Cluster: the shared reader is recreated and b's reader
	// revoked, once.
	if err := c.Delete(ctx, &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "b"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, reconcile.Request{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: registryNS, Name: v1alpha1.ReaderName}, &corev1.ServiceAccount{}); !apierrors.IsNotFound(err) {
		t.Errorf("the shared reader ServiceAccount was not deleted (the bootstrapper recreates it): %v", err)
	}
	if diff := cmp.Diff([]string{v1alpha1.ReaderServiceAccountName(idA)}, names(t, c, &corev1.ServiceAccountList{}, readers)); diff != "" {
		t.Errorf("reader ServiceAccounts after b left (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{v1alpha1.IssuedReaderSecretName(idA), "l"}, names(t, c, &corev1.SecretList{}, registryNS)); diff != "" {
		t.Errorf("registry Secrets after b left (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{v1alpha1.IssuedReaderSecretName(idA)}, bootstrapNames(t, c)); diff != "" {
		t.Errorf("bootstrap Role after b left (-want +got):\n%s", diff)
	}
	// The bootstrapper recreates the shared reader; the next reconcile rotates nothing.
	recreated := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: registryNS, Name: v1alpha1.ReaderName}}
	if err := c.Create(ctx, recreated); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, reconcile.Request{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: registryNS, Name: v1alpha1.ReaderName}, &corev1.ServiceAccount{}); err != nil {
		t.Errorf("the shared reader was rotated again: %v", err)
	}
	if len(m.calls) != 4 {
		t.Errorf("after b left, %d more tokens were minted, want none", len(m.calls)-4)
	}

	// The local cluster leaves: the bootstrap credential may get nothing (a rule
	// without names would grant every Secret), and the issued Secrets go.
	r.Departed = func(time.Time, []v1alpha1.Cluster) map[types.UID]bool { return map[types.UID]bool{idL: true} }
	if _, err := r.Reconcile(ctx, reconcile.Request{}); err != nil {
		t.Fatal(err)
	}
	var role rbacv1.Role
	if err := c.Get(ctx, client.ObjectKey{Namespace: registryNS, Name: v1alpha1.BootstrapRoleName}, &role); err != nil || len(role.Rules) != 0 {
		t.Errorf("bootstrap Role after the local cluster left: %v, rules %v; want it without rules", err, role.Rules)
	}
	if diff := cmp.Diff([]string{"l"}, names(t, c, &corev1.SecretList{}, registryNS)); diff != "" {
		t.Errorf("registry Secrets after the local cluster left (-want +got):\n%s", diff)
	}
}

// bootstrapNames returns the Secret names the bootstrap Role grants, checking that its
// rules grant nothing else.
func bootstrapNames(t *testing.T, c client.Client) []string {
	t.Helper()
	var role rbacv1.Role
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: registryNS, Name: v1alpha1.BootstrapRoleName}, &role); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, rule := range role.Rules {
		if len(rule.ResourceNames) == 0 || !cmp.Equal(rule.Resources, []string{"secrets"}) || !cmp.Equal(rule.APIGroups, []string{""}) ||
			!cmp.Equal(rule.Verbs, []string{"get", "list", "watch"}) {
			t.Errorf("bootstrap Role rule %+v grants more than getting named Secrets", rule)
		}
		out = append(out, rule.ResourceNames...)
	}
	return out
}

// TestReconcileIssuesWhenTheBootstrapRoleFails: a bootstrap Role that cannot be written
// (an install without the controller's right to) is an error to retry, and does not stop
// the credentials from being issued.
func TestReconcileIssuesWhenTheBootstrapRoleFails(t *testing.T) {
	ctx := context.Background()
	c, r, _ := fixture(t)
	r.Client = interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{
		Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*rbacv1.Role); ok {
				return apierrors.NewForbidden(rbacv1.Resource("roles"), obj.GetName(), errors.New("not allowed"))
			}
			return cl.Create(ctx, obj, opts...)
		},
	})
	rec := record.NewFakeRecorder(10)
	r.Recorder = rec
	if _, err := r.Reconcile(ctx, reconcile.Request{}); err == nil || !strings.Contains(err.Error(), v1alpha1.BootstrapRoleName) {
		t.Errorf("Reconcile = %v, want an error naming the bootstrap Role", err)
	}
	select {
	case ev := <-rec.Events:
		if !strings.HasPrefix(ev, corev1.EventTypeWarning+" "+EventReasonBootstrapRoleFailed) || !strings.Contains(ev, "kubectl registry install") {
			t.Errorf("event %q, want a %s Warning saying what to do", ev, EventReasonBootstrapRoleFailed)
		}
	default:
		t.Errorf("no %s event on the local Cluster", EventReasonBootstrapRoleFailed)
	}
	want := []string{v1alpha1.IssuedReaderSecretName(idA), v1alpha1.IssuedReaderSecretName(idB), "l"}
	if diff := cmp.Diff(want, names(t, c, &corev1.SecretList{}, registryNS)); diff != "" {
		t.Errorf("registry Secrets (-want +got):\n%s", diff)
	}
}

// TestReconcileWaitsForTheSharedSecret: without the shared reader Secret (the server and
// CA peers reach this cluster at), ServiceAccounts are created but no token is minted.
func TestReconcileWaitsForTheSharedSecret(t *testing.T) {
	ctx := context.Background()
	c, r, m := fixture(t)
	if err := c.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: registryNS, Name: "l"}}); err != nil {
		t.Fatal(err)
	}
	res, err := r.Reconcile(ctx, reconcile.Request{})
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter == 0 || len(m.calls) != 0 {
		t.Errorf("requeue %s, %d tokens minted; want a requeue and none", res.RequeueAfter, len(m.calls))
	}
}

// TestReconcileSeals: a peer whose own Cluster advertises a public key gets its
// credential sealed to it (only that peer opens it, for this issuer); one whose own
// Cluster advertises none gets nothing (a credential in clear would be readable by every
// reader of the registry namespace), logged once; one whose own Cluster was not read
// yet gets nothing, whatever the local copy of its Cluster says; a new key of the peer
// gets a new credential, sealed to the new key.
func TestReconcileSeals(t *testing.T) {
	var logged []string
	ctx := logr.NewContext(context.Background(), funcr.New(func(prefix, args string) {
		if strings.Contains(args, "no public key to seal it to") {
			logged = append(logged, args)
		}
	}, funcr.Options{}))
	keyA, keyA2, keyB, forged := mustKey(t), mustKey(t), mustKey(t), mustKey(t)
	c, r, m := fixture(t)
	r.PeerKeys = NewPeerKeys()
	issued := func(id types.UID) (*corev1.Secret, error) {
		var s corev1.Secret
		err := c.Get(ctx, client.ObjectKey{Namespace: registryNS, Name: v1alpha1.IssuedReaderSecretName(id)}, &s)
		return &s, err
	}
	// The local copy of b's Cluster names a key (a relay could have written it): it is
	// not what b's credential is sealed to, and b's own Cluster has not been read.
	var b v1alpha1.Cluster
	if err := c.Get(ctx, client.ObjectKey{Name: "b"}, &b); err != nil {
		t.Fatal(err)
	}
	b.Annotations = map[string]string{v1alpha1.ReaderPublicKeyAnnotation: forged.PublicKey()}
	if err := c.Update(ctx, &b); err != nil {
		t.Fatal(err)
	}
	r.PeerKeys.Set(idA, keyA.PublicKey())
	if _, err := r.Reconcile(ctx, reconcile.Request{}); err != nil {
		t.Fatal(err)
	}
	sa, err := issued(idA)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := sa.Data[v1alpha1.KubeconfigKey]; ok || sa.Annotations[v1alpha1.SealedToAnnotation] != seal.Fingerprint(keyA.PublicKey()) {
		t.Fatalf("a's credential is not sealed to a's key: keys %v, sealed-to %q", keys(sa.Data), sa.Annotations[v1alpha1.SealedToAnnotation])
	}
	plain, err := keyA.Open(idL, idA, sa.Data[v1alpha1.SealedKubeconfigKey])
	if err != nil {
		t.Fatalf("a cannot open its credential: %v", err)
	}
	if rd, ok := kubeconfig.Read(plain); !ok || rd.Token == "" {
		t.Fatal("a's opened credential holds no token")
	}
	if _, err := keyB.Open(idL, idA, sa.Data[v1alpha1.SealedKubeconfigKey]); err == nil {
		t.Error("b's key opens a's credential")
	}
	if _, err := issued(idB); !apierrors.IsNotFound(err) {
		t.Errorf("b, whose own Cluster was not read, was issued a credential (%v)", err)
	}

	// b's own Cluster advertises no key: nothing, logged once; a credential in clear an
	// earlier version issued b is deleted.
	clear := secret(v1alpha1.IssuedReaderSecretName(idB), "https://l.example:6443", t0.Add(time.Hour))
	clear.Namespace = registryNS
	if err := c.Create(ctx, clear); err != nil {
		t.Fatal(err)
	}
	r.PeerKeys.Set(idB, "")
	for range 2 {
		if _, err := r.Reconcile(ctx, reconcile.Request{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := issued(idB); !apierrors.IsNotFound(err) {
		t.Errorf("b, which advertises no key, was issued a credential (%v)", err)
	}
	if len(logged) != 1 {
		t.Errorf("logged %d lines about b's missing key, want 1", len(logged))
	}
	for _, call := range m.calls {
		if strings.HasSuffix(call, v1alpha1.ReaderServiceAccountName(idB)) {
			t.Errorf("a token was minted for b: %s", call)
		}
	}
	// b advertises its key: b is issued a credential sealed to it.
	r.PeerKeys.Set(idB, keyB.PublicKey())
	if _, err := r.Reconcile(ctx, reconcile.Request{}); err != nil {
		t.Fatal(err)
	}
	if sb, err := issued(idB); err != nil || sb.Annotations[v1alpha1.SealedToAnnotation] != seal.Fingerprint(keyB.PublicKey()) {
		t.Errorf("b advertises a key: %v, sealed to %q", err, sb.Annotations[v1alpha1.SealedToAnnotation])
	}

	// Nothing is minted again while current.
	calls := len(m.calls)
	if _, err := r.Reconcile(ctx, reconcile.Request{}); err != nil {
		t.Fatal(err)
	}
	if len(m.calls) != calls {
		t.Errorf("%d tokens minted on an unchanged reconcile", len(m.calls)-calls)
	}

	// a's new key: a new credential sealed to it.
	r.PeerKeys.Set(idA, keyA2.PublicKey())
	if _, err := r.Reconcile(ctx, reconcile.Request{}); err != nil {
		t.Fatal(err)
	}
	sa, _ = issued(idA)
	if _, err := keyA2.Open(idL, idA, sa.Data[v1alpha1.SealedKubeconfigKey]); err != nil {
		t.Errorf("a's credential does not open with a's new key: %v", err)
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestReconcileRefusesABadPublicKey: a peer advertising a key nothing can be sealed to is
// issued nothing (no token minted, nothing unsealed); it is logged once per key, naming
// the annotation, and not retried as an error (the peer's Cluster reports it, see
// TestPeerKeyCondition); the other peers are issued theirs.
func TestReconcileRefusesABadPublicKey(t *testing.T) {
	var logged []string
	ctx := logr.NewContext(context.Background(), funcr.New(func(prefix, args string) {
		if strings.Contains(args, "no credential can be sealed to") {
			logged = append(logged, args)
		}
	}, funcr.Options{}))
	c, r, m := fixture(t)
	r.PeerKeys = NewPeerKeys()
	r.PeerKeys.Set(idA, "x25519:not-a-key")
	r.PeerKeys.Set(idB, mustKey(t).PublicKey())
	for range 2 {
		if _, err := r.Reconcile(ctx, reconcile.Request{}); err != nil {
			t.Fatalf("Reconcile = %v, want no error to retry", err)
		}
	}
	if len(logged) != 1 || !strings.Contains(logged[0], v1alpha1.ReaderPublicKeyAnnotation) {
		t.Errorf("logged %q, want one line naming %s", logged, v1alpha1.ReaderPublicKeyAnnotation)
	}
	r.PeerKeys.Set(idA, "x25519:another-bad-key")
	if _, err := r.Reconcile(ctx, reconcile.Request{}); err != nil {
		t.Fatalf("Reconcile = %v, want no error to retry", err)
	}
	if len(logged) != 2 {
		t.Errorf("logged %d lines, want another one for another bad key", len(logged))
	}
	var s corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: registryNS, Name: v1alpha1.IssuedReaderSecretName(idA)}, &s); !apierrors.IsNotFound(err) {
		t.Errorf("a was issued a credential (%v)", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: registryNS, Name: v1alpha1.IssuedReaderSecretName(idB)}, &s); err != nil {
		t.Errorf("b: %v", err)
	}
	for _, call := range m.calls {
		if strings.HasSuffix(call, v1alpha1.ReaderServiceAccountName(idA)) {
			t.Errorf("a token was minted for a: %s", call)
		}
	}
}

// TestPeerKeyCondition: the ReaderKeyReady condition of a peer's Cluster on the issuer
// says what the issuer does with the key the peer advertises: a malformed key
// (ReaderKeyInvalid) gets no credential, nor does no key (NoReaderKey), a valid
// key (ReaderKeyAdvertised) one sealed to it, whose fingerprint the message names.
func TestPeerKeyCondition(t *testing.T) {
	valid, err := seal.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		Status corev1.ConditionStatus
		Reason string
		// Issued says a credential was issued; SealedTo is its sealed-to annotation.
		Issued   bool
		SealedTo string
	}
	tests := []struct {
		name string
		key  string
		want outcome
	}{
		{"a valid key", valid.PublicKey(), outcome{corev1.ConditionTrue, v1alpha1.ReasonReaderKeyAdvertised, true, seal.Fingerprint(valid.PublicKey())}},
		{"no key", "", outcome{corev1.ConditionFalse, v1alpha1.ReasonNoReaderKey, false, ""}},
		{"not base64", "x25519:not-a-key", outcome{corev1.ConditionFalse, v1alpha1.ReasonReaderKeyInvalid, false, ""}},
		{"another algorithm", "rsa:" + strings.TrimPrefix(valid.PublicKey(), seal.PublicKeyPrefix), outcome{corev1.ConditionFalse, v1alpha1.ReasonReaderKeyInvalid, false, ""}},
		{"too short", seal.PublicKeyPrefix + "AAAA", outcome{corev1.ConditionFalse, v1alpha1.ReasonReaderKeyInvalid, false, ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cond := PeerKeyCondition(tt.key)
			if cond.Type != v1alpha1.ClusterConditionReaderKeyReady {
				t.Errorf("type %s, want %s", cond.Type, v1alpha1.ClusterConditionReaderKeyReady)
			}
			if tt.want.SealedTo != "" && !strings.Contains(cond.Message, tt.want.SealedTo) {
				t.Errorf("the message %q does not name the fingerprint %s", cond.Message, tt.want.SealedTo)
			}
			ctx := context.Background()
			c, r, _ := fixture(t)
			r.PeerKeys = NewPeerKeys()
			r.PeerKeys.Set(idA, tt.key)
			_, _ = r.Reconcile(ctx, reconcile.Request{})
			got := outcome{Status: cond.Status, Reason: cond.Reason}
			var s corev1.Secret
			if err := c.Get(ctx, client.ObjectKey{Namespace: registryNS, Name: v1alpha1.IssuedReaderSecretName(idA)}, &s); err == nil {
				got.Issued, got.SealedTo = true, s.Annotations[v1alpha1.SealedToAnnotation]
			} else if !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("condition and credential issued (-want +got):\n%s", diff)
			}
		})
	}
}
