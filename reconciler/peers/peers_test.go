package peers

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
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
)

// TestMain keeps client-go's klog lines (read errors of the test servers' answers) out
// of the test output.
func TestMain(m *testing.M) {
	klog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

// newManager returns a Manager of the registry namespace with opts (the scheme filled in).
func newManager(t *testing.T, opts Options) *Manager {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	opts.Scheme, opts.Namespace, opts.LocalID = scheme, v1alpha1.DefaultNamespace, "local"
	m, err := NewManager(opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// run starts m with ctx and returns once it has started; the channel closes when Start
// returns.
func run(t *testing.T, m *Manager, ctx context.Context) <-chan struct{} {
	t.Helper()
	stopped := make(chan struct{})
	go func() { _ = m.Start(ctx); close(stopped) }()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		m.mu.Lock()
		started := m.started
		m.mu.Unlock()
		if started {
			return stopped
		}
		if time.Now().After(deadline) {
			t.Fatal("the manager did not start")
		}
	}
}

// startManager runs a Manager with the given address policy until the test ends.
func startManager(t *testing.T, addresses kubeconfig.AddressPolicy) *Manager {
	t.Helper()
	m := newManager(t, Options{HealthInterval: 100 * time.Millisecond, FailureThreshold: 1, MaxBackoff: 200 * time.Millisecond, Addresses: addresses})
	ctx, cancel := context.WithCancel(context.Background())
	stopped := run(t, m, ctx)
	t.Cleanup(func() { cancel(); <-stopped })
	return m
}

// readerToken is the token of the reader Secrets of peerOf.
const readerToken = "reader-token"

// peerOf returns the Cluster (cluster ID "uid-"+name) and reader Secret (token
// readerToken) of a peer at server.
func peerOf(t *testing.T, name, server string, ca []byte) (*v1alpha1.Cluster, *corev1.Secret) {
	t.Helper()
	kc, err := kubeconfig.Render(kubeconfig.Reader{ClusterName: name, Server: server, CAData: ca, Token: readerToken})
	if err != nil {
		t.Fatal(err)
	}
	c := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.ClusterSpec{ClusterID: types.UID("uid-" + name)}}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: v1alpha1.DefaultNamespace, Name: name}, Data: map[string][]byte{v1alpha1.KubeconfigKey: kc}}
	return c, s
}

// clusterServer is a TLS API server that answers as the cluster uid (its kube-system
// namespace) and 404 to everything else.
func clusterServer(uid types.UID) *httptest.Server {
	return httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/namespaces/kube-system" {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"kube-system","uid":%q}}`, uid)
			return
		}
		http.NotFound(w, r)
	}))
}

// otherCA returns a PEM certificate of a CA that signed none of the test servers (they
// all share httptest's certificate).
func otherCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "other"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// TestEnsureReportsOnlyTheClass: a peer's address is checked before it is dialled, and
// what a peer answers reaches the state as a class, never quoted.
func TestEnsureReportsOnlyTheClass(t *testing.T) {
	const leak = "internal-secret-body"
	impostor := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// It serves the discovery of the core group, as an API server does (the
		// connection's mapper reads it to map a Namespace).
		if r.URL.Path == "/api/v1" {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"v1","resources":[{"name":"namespaces","singularName":"namespace","namespaced":false,"kind":"Namespace","verbs":["get"]}]}`)
			return
		}
		if r.URL.Path == "/api/v1/namespaces/kube-system" {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"kube-system","uid":"uid-someone-else `+leak+`"}}`)
			return
		}
		http.NotFound(w, r)
	}))
	defer impostor.Close()
	broken := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, leak, http.StatusInternalServerError)
	}))
	defer broken.Close()
	redirect := httptest.NewTLSServer(http.RedirectHandler("http://127.0.0.1:1/"+leak, http.StatusFound))
	defer redirect.Close()
	caOf := func(s *httptest.Server) []byte {
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
	}

	for _, tc := range []struct {
		name      string
		policy    kubeconfig.AddressPolicy
		server    string
		ca        []byte
		wantState v1alpha1.ClusterState
		wantMsg   string
	}{
		{"loopback refused by default", kubeconfig.AddressPolicy{}, impostor.URL, caOf(impostor), v1alpha1.ClusterStateInvalidAuthInfo, ClassAddressRefused},
		{"link-local refused even with loopback allowed", kubeconfig.AddressPolicy{AllowLoopback: true}, "https://169.254.169.254", nil, v1alpha1.ClusterStateInvalidAuthInfo, ClassAddressRefused},
		{"an impostor is the wrong cluster", kubeconfig.AddressPolicy{AllowLoopback: true}, impostor.URL, caOf(impostor), v1alpha1.ClusterStateInvalidAuthInfo, "wrong cluster"},
		{"an error body is not quoted", kubeconfig.AddressPolicy{AllowLoopback: true}, broken.URL, caOf(broken), v1alpha1.ClusterStateFailed, ClassUnexpected + " (HTTP 500)"},
		{"a redirect is not followed", kubeconfig.AddressPolicy{AllowLoopback: true}, redirect.URL, caOf(redirect), v1alpha1.ClusterStateFailed, ClassRedirect},
		{"another CA is a TLS failure", kubeconfig.AddressPolicy{AllowLoopback: true}, broken.URL, otherCA(t), v1alpha1.ClusterStateFailed, ClassTLS},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := startManager(t, tc.policy)
			c, s := peerOf(t, "p", tc.server, tc.ca)
			m.Ensure(c, s, false)
			var p Peer
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				p, _ = m.Get("p")
				if p.State != "" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no state: %+v", p)
				}
			}
			if diff := cmp.Diff(tc.wantState, p.State); diff != "" {
				t.Errorf("state (-want +got):\n%s", diff)
			}
			if !strings.Contains(p.Message, tc.wantMsg) {
				t.Errorf("message %q, want it to contain %q", p.Message, tc.wantMsg)
			}
			for _, bad := range []string{leak, "127.0.0.1", "169.254"} {
				if strings.Contains(p.Message, bad) {
					t.Errorf("message %q quotes %q", p.Message, bad)
				}
			}
		})
	}
}

// TestAuthenticate: an offered kubeconfig is checked against the address policy and the
// cluster its server says it is, before anything is written from it.
func TestAuthenticate(t *testing.T) {
	srv := clusterServer("uid-p")
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	_, s := peerOf(t, "p", srv.URL, ca)
	data := s.Data[v1alpha1.KubeconfigKey]
	loopback := kubeconfig.AddressPolicy{AllowLoopback: true}
	for _, tc := range []struct {
		name   string
		policy kubeconfig.AddressPolicy
		want   types.UID
		class  string
	}{
		{"loopback refused", kubeconfig.AddressPolicy{}, "uid-p", ClassAddressRefused},
		{"another cluster", loopback, "uid-x", ClassWrongCluster},
		{"the cluster it names", loopback, "uid-p", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Authenticate(context.Background(), data, tc.policy, tc.want)
			class := ""
			if err != nil {
				_, class = Classify(err)
			}
			if class != tc.class {
				t.Errorf("Authenticate: %v (class %q), want class %q", err, class, tc.class)
			}
		})
	}
}

// TestStartStopsWhileAConnectionReports: a connection that reports a change as the
// manager shuts down (set, then notify, which takes the manager's lock) must not hang
// Start. Start used to hold the lock while it waited for each connection to stop: one
// make test run hung 17 minutes in TestPeerCredential. The connection is held inside
// its report (in the log line set writes) until Start is waiting for it.
func TestStartStopsWhileAConnectionReports(t *testing.T) {
	server := clusterServer("uid-p")
	defer server.Close()

	reporting, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	log := funcr.New(func(_, args string) {
		if strings.Contains(args, "peer state changed") {
			once.Do(func() { close(reporting); <-release })
		}
	}, funcr.Options{})

	m := newManager(t, Options{HealthInterval: time.Hour, FailureThreshold: 1, MaxBackoff: time.Second, Addresses: kubeconfig.AddressPolicy{AllowLoopback: true}})
	ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), log))
	defer cancel()
	stopped := run(t, m, ctx)

	c, s := peerOf(t, "p", server.URL, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: server.Certificate().Raw}))
	m.Ensure(c, s, false)
	select {
	case <-reporting:
	case <-time.After(10 * time.Second):
		t.Fatal("the connection never reported Ready")
	}

	// Shut down while the connection is inside its report, and let it go on only once
	// Start is waiting for it: either Start holds the lock (the connection's notify
	// then waits for it), or it has taken the connections out and let the lock go.
	cancel()
	held := time.Time{}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if !m.mu.TryLock() {
			if held.IsZero() {
				held = time.Now()
			} else if time.Since(held) > 200*time.Millisecond {
				break
			}
			continue
		}
		held = time.Time{}
		taken := len(m.conns) == 0
		m.mu.Unlock()
		if taken {
			break
		}
	}
	close(release)

	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Start did not return: it waits for a connection that waits for Start's lock")
	}
}

// TestEnsureAfterStopConnectsNothing: connections do not live on a context the manager
// keeps, so once Start has returned a peer asked for is not connected (it would
// otherwise run for good, on a context nobody cancels).
func TestEnsureAfterStopConnectsNothing(t *testing.T) {
	dialled := make(chan struct{}, 1)
	server := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		select {
		case dialled <- struct{}{}:
		default:
		}
		http.NotFound(w, nil)
	}))
	defer server.Close()
	m := newManager(t, Options{HealthInterval: 50 * time.Millisecond, FailureThreshold: 1, MaxBackoff: 50 * time.Millisecond, Addresses: kubeconfig.AddressPolicy{AllowLoopback: true}})
	ctx, cancel := context.WithCancel(context.Background())
	stopped := run(t, m, ctx)
	cancel()
	<-stopped

	c, s := peerOf(t, "p", server.URL, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: server.Certificate().Raw}))
	p := m.Ensure(c, s, false)
	if diff := cmp.Diff([]any{v1alpha1.ReasonClusterNotConnected, "the controller is stopping"}, []any{p.Reason, p.Message}); diff != "" {
		t.Errorf("Ensure after Start returned (-want +got):\n%s", diff)
	}
	select {
	case <-dialled:
		t.Error("a peer was dialled after the manager stopped")
	case <-time.After(500 * time.Millisecond):
	}
	if _, ok := m.Get("p"); ok {
		t.Error("the manager keeps a connection after it stopped")
	}
}

// TestListSeesEveryChange: List keeps its sorted snapshots between changes, and every
// change of a peer (conn.set), every connection added or removed shows in the next List;
// a caller that changes the slice it got changes nothing of the next.
func TestListSeesEveryChange(t *testing.T) {
	m := newManager(t, Options{})
	names := func(ps []Peer) []string {
		var out []string
		for _, p := range ps {
			out = append(out, fmt.Sprintf("%s:%s:%t", p.Name, p.State, p.Ready))
		}
		return out
	}
	b := addConn(m, "b")
	addConn(m, "a")
	if diff := cmp.Diff([]string{"a::false", "b::false"}, names(m.List())); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	got := m.List()
	got[0].Name, got[1] = "changed", Peer{}
	b.set(func(p *Peer) { p.State, p.Ready = v1alpha1.ClusterStateReady, true })
	if diff := cmp.Diff([]string{"a::false", "b:" + string(v1alpha1.ClusterStateReady) + ":true"}, names(m.List())); diff != "" {
		t.Errorf("List after a peer's change (-want +got):\n%s", diff)
	}
	shared := m.Shared()
	if again := m.Shared(); &again[0] != &shared[0] {
		t.Errorf("Shared copied the snapshots without a change")
	}
	m.Remove("a")
	if diff := cmp.Diff([]string{"b:" + string(v1alpha1.ClusterStateReady) + ":true"}, names(m.List())); diff != "" {
		t.Errorf("List after Remove (-want +got):\n%s", diff)
	}
	// Shared sees every change as List does, and never changes a slice it handed out.
	if diff := cmp.Diff(names(m.List()), names(m.Shared())); diff != "" {
		t.Errorf("Shared after Remove (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a::false", "b:" + string(v1alpha1.ClusterStateReady) + ":true"}, names(shared)); diff != "" {
		t.Errorf("a slice Shared handed out changed (-want +got):\n%s", diff)
	}
}

// TestACheckThatChangesNothingKeepsTheSnapshots: a successful health check of a peer
// already Ready changes neither its snapshot nor the peers' generation (the engine lists
// the peers again after each change; every peer is checked every interval), and still
// records the time of the success.
func TestACheckThatChangesNothingKeepsTheSnapshots(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newManager(t, Options{Registerer: reg})
	c := addConn(m, "p")
	kubeSystem := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: metav1.NamespaceSystem, UID: "uid-p"}}
	r := fake.NewClientBuilder().WithObjects(kubeSystem).Build()
	if err := c.check(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	first := m.Shared()
	if diff := cmp.Diff([]string{string(v1alpha1.ClusterStateReady), v1alpha1.ReasonClusterReachable}, []string{string(first[0].State), first[0].Reason}); diff != "" || !first[0].Ready {
		t.Fatalf("after the first check (-want +got):\n%s (ready %t)", diff, first[0].Ready)
	}
	gen := m.gen.Load()
	m.metrics.lastSuccess.Reset()
	if err := c.check(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if got := m.gen.Load(); got != gen {
		t.Errorf("a check that changed nothing moved the peers' generation from %d to %d", gen, got)
	}
	if again := m.Shared(); &again[0] != &first[0] {
		t.Error("a check that changed nothing made the peers be listed again")
	}
	if got := testutil.ToFloat64(m.metrics.lastSuccess.WithLabelValues("p")); time.Since(time.Unix(int64(got), 0)) > time.Minute {
		t.Errorf("the last success is %v, not now", got)
	}
	// A peer not Ready (as after failed checks): a success changes its snapshot.
	c.set(func(p *Peer) { p.Ready, p.State = false, v1alpha1.ClusterStateFailed })
	gen = m.gen.Load()
	if err := c.check(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if p, _ := m.Get("p"); !p.Ready || m.gen.Load() == gen {
		t.Errorf("a check of a peer not Ready left it so (ready %t, generation %d)", p.Ready, m.gen.Load())
	}
}

// addConn adds to m a connection to the peer name (ID "uid-"+name), not started, as
// Ensure would.
func addConn(m *Manager, name string) *conn {
	c := newConn(m, name, types.UID("uid-"+name), "fp", false, nil, linkID{})
	m.mu.Lock()
	m.conns[name] = c
	m.gen.Add(1) // as Ensure does
	m.mu.Unlock()
	return c
}
