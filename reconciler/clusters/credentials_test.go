package clusters_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/clusters"
	"github.com/kubectl-registry/kubectl-registry/reconciler/credentials/issue"
	"github.com/kubectl-registry/kubectl-registry/reconciler/credentials/seal"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
	"github.com/kubectl-registry/kubectl-registry/reconciler/peers"
)

// TestPeerCredential: the connection to a peer uses the credential the peer issued to
// this cluster when there is one, and falls back to the shared reader Secret when the
// peer rejects it.
// credentialPeer is a peer's API server that answers kube-system with its ID to the
// token "good-token" only, with the kubeconfig of a token for it (kc) and the credential
// it issued this cluster, sealed to a key (sealed).
type credentialPeer struct {
	kc     func(token string) map[string][]byte
	sealed func(token string, to *seal.Key) *corev1.Secret
}

func newCredentialPeer(t *testing.T) credentialPeer {
	t.Helper()
	// The peer: answers kube-system with its ID to the token "good-token" only.
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer good-token" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Unauthorized","code":401}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/v1/namespaces/kube-system":
			fmt.Fprintf(w, `{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"kube-system","uid":%q}}`, peerID)
			return
		case "/api":
			fmt.Fprint(w, `{"kind":"APIVersions","versions":["v1"],"serverAddressByClientCIDRs":[]}`)
			return
		case "/apis":
			fmt.Fprint(w, `{"kind":"APIGroupList","apiVersion":"v1","groups":[]}`)
			return
		case "/api/v1":
			fmt.Fprint(w, `{"kind":"APIResourceList","groupVersion":"v1","resources":[{"name":"namespaces","singularName":"namespace","namespaced":false,"kind":"Namespace","verbs":["get","list","watch"]}]}`)
			return
		}
		w.WriteHeader(http.StatusNotFound)
	}))
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	kc := func(token string) map[string][]byte {
		data, err := kubeconfig.Render(kubeconfig.Reader{ClusterName: "peer", Server: srv.URL, CAData: ca, Token: token})
		if err != nil {
			t.Fatal(err)
		}
		return map[string][]byte{v1alpha1.KubeconfigKey: data}
	}
	received := func(token string) *corev1.Secret {
		s := readerSecret(v1alpha1.ReceivedReaderSecretName(peerID), v1alpha1.SecretTypeClusterRegistry, kc(token))
		s.Annotations = map[string]string{v1alpha1.OwnershipAnnotation: string(peerID)}
		return s
	}
	sealed := func(token string, to *seal.Key) *corev1.Secret {
		b, err := seal.Seal(to.PublicKey(), peerID, localID, kc(token)[v1alpha1.KubeconfigKey])
		if err != nil {
			t.Fatal(err)
		}
		s := received(token)
		s.Data = map[string][]byte{v1alpha1.SealedKubeconfigKey: b}
		return s
	}
	return credentialPeer{kc: kc, sealed: sealed}
}

func TestPeerCredential(t *testing.T) {
	cp := newCredentialPeer(t)
	kc, sealed := cp.kc, cp.sealed
	localKey, otherKey := mustKey(t), mustKey(t)
	// reason and says are the ReaderCredentialReady condition the peer's Cluster gets.
	tests := []struct {
		name     string
		shared   string
		received *corev1.Secret
		reason   string
		says     string
	}{
		{"a rejected credential gives way to the shared Secret", "good-token", sealed("bad-token", localKey), v1alpha1.ReasonBootstrapCredential, "rejected the credential"},
		{"a sealed credential is opened with the local key: the shared token is rejected", "bad-token", sealed("good-token", localKey), v1alpha1.ReasonIssuedCredential, "issued this cluster"},
		{"a credential sealed to another key gives way to the shared Secret", "good-token", sealed("bad-token", otherKey), v1alpha1.ReasonBootstrapCredential, "not usable"},
		{"no credential issued yet: the shared Secret", "good-token", nil, v1alpha1.ReasonBootstrapCredential, "not issued this cluster a reader credential yet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := []client.Object{cluster("local", localID, "local"), cluster("peer", peerID, "peer"),
				readerSecret("peer", v1alpha1.SecretTypeClusterRegistry, kc(tt.shared))}
			if tt.received != nil {
				objs = append(objs, tt.received)
			}
			f := newFixture(t, interceptor.Funcs{}, objs...)
			f.r.Keys = issue.NewKeys(localKey)
			f.startLoopbackPeers(t)
			deadline := time.Now().Add(15 * time.Second)
			for {
				if _, err := f.reconcile(t, "peer"); err != nil {
					t.Fatal(err)
				}
				if p, ok := f.peers.Get("peer"); ok && p.Ready {
					if _, err := f.reconcile(t, "peer"); err != nil {
						t.Fatal(err)
					}
					st := f.get(t, "peer").Status
					c, ok := condsOf(st)[v1alpha1.ClusterConditionReaderCredentialReady]
					msg := condMessage(st, v1alpha1.ClusterConditionReaderCredentialReady)
					if !ok || c.Reason != tt.reason || !strings.Contains(msg, tt.says) {
						t.Errorf("ReaderCredentialReady %s %q, want reason %s saying %q", c.Reason, msg, tt.reason, tt.says)
					}
					return
				}
				if time.Now().After(deadline) {
					p, _ := f.peers.Get("peer")
					t.Fatalf("the peer is not Ready within 15s: %s %s: %s", p.State, p.Reason, p.Message)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

// TestKeyPendingWaits: at a restart, a peer that sealed a credential to this cluster is
// not connected with its shared reader Secret while the local key pair loads (which
// would connect it twice: with the bootstrap credential, then with its own), but once
// the key is in, with the credential it issued; and with the shared Secret when the key
// has not loaded within KeyWait.
func TestKeyPendingWaits(t *testing.T) {
	cp := newCredentialPeer(t)
	localKey := mustKey(t)
	for _, tt := range []struct {
		name   string
		next   func(f *fixture, keys *issue.Keys) // after the first reconcile
		reason string                             // ReaderCredentialReady once connected
	}{
		{"the key loads: the credential the peer issued", func(_ *fixture, keys *issue.Keys) { keys.Set(localKey); keys.Report(nil) }, v1alpha1.ReasonIssuedCredential},
		{"no key within clusters.KeyWait: the shared Secret", func(f *fixture, _ *issue.Keys) { *f.now = f.now.Add(clusters.KeyWait) }, v1alpha1.ReasonBootstrapCredential},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, interceptor.Funcs{}, cluster("local", localID, "local"), cluster("peer", peerID, "peer"),
				readerSecret("peer", v1alpha1.SecretTypeClusterRegistry, cp.kc("good-token")), cp.sealed("good-token", localKey))
			keys := &issue.Keys{}
			f.r.Keys = keys
			f.startLoopbackPeers(t)
			res, err := f.reconcile(t, "peer")
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := f.peers.Get("peer"); ok {
				t.Fatal("the peer was connected before the local key pair loaded")
			}
			st := f.get(t, "peer").Status
			c, msg := condsOf(st)[v1alpha1.ClusterConditionReady], condMessage(st, v1alpha1.ClusterConditionReady)
			if c.Status != corev1.ConditionUnknown || !strings.Contains(msg, "waiting for this cluster's key pair") || res.RequeueAfter == 0 {
				t.Errorf("Ready %s %q, requeue %s; want Unknown, waiting for the key pair, requeued", c.Status, msg, res.RequeueAfter)
			}
			tt.next(f, keys)
			deadline := time.Now().Add(15 * time.Second)
			for {
				if _, err := f.reconcile(t, "peer"); err != nil {
					t.Fatal(err)
				}
				if p, ok := f.peers.Get("peer"); ok && p.Ready {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the peer is not Ready within 15s")
				}
				time.Sleep(50 * time.Millisecond)
			}
			if c := condsOf(f.get(t, "peer").Status)[v1alpha1.ClusterConditionReaderCredentialReady]; c.Reason != tt.reason {
				t.Errorf("ReaderCredentialReady %s, want %s", c.Reason, tt.reason)
			}
		})
	}
}

// startLoopbackPeers gives the fixture a started peers.Manager that may dial loopback
// peers (credentialPeer's servers), checking them once an hour.
func (f *fixture) startLoopbackPeers(t *testing.T) {
	t.Helper()
	pm, err := peers.NewManager(peers.Options{Scheme: newScheme(t), Namespace: v1alpha1.DefaultNamespace, LocalID: localID,
		Addresses: kubeconfig.AddressPolicy{AllowLoopback: true}, HealthInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	f.peers, f.r.Peers = pm, pm
	f.startPeers(t)
}

func mustKey(t *testing.T) *seal.Key {
	t.Helper()
	k, err := seal.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestUnusedCredentialLoggedOncePerChange: a sealed credential that does not open is
// logged when the reason changes, not at every reconcile (the heartbeat); a credential
// that opens again, then fails again, is logged again.
func TestUnusedCredentialLoggedOncePerChange(t *testing.T) {
	localKey, otherKey := mustKey(t), mustKey(t)
	shared, err := kubeconfig.Render(kubeconfig.Reader{ClusterName: "peer", Server: "https://127.0.0.1:1", Token: "shared-token"})
	if err != nil {
		t.Fatal(err)
	}
	sealedTo := func(to *seal.Key) *corev1.Secret {
		b, err := seal.Seal(to.PublicKey(), peerID, localID, shared)
		if err != nil {
			t.Fatal(err)
		}
		s := readerSecret(v1alpha1.ReceivedReaderSecretName(peerID), v1alpha1.SecretTypeClusterRegistry, map[string][]byte{v1alpha1.SealedKubeconfigKey: b})
		s.Annotations = map[string]string{v1alpha1.OwnershipAnnotation: string(peerID)}
		return s
	}
	notLoaded := "the credential cluster " + string(peerID) + " issued to this cluster is sealed, and this cluster's key is not loaded yet"
	_, openErr := localKey.Open(peerID, localID, sealedTo(otherKey).Data[v1alpha1.SealedKubeconfigKey])
	if openErr == nil {
		t.Fatal("a credential sealed to another key opens")
	}
	noOpen := "the credential cluster " + string(peerID) + " issued to this cluster: " + openErr.Error()
	steps := []struct {
		name string
		// keys is the local key pair (nil: not loaded, and the bootstrapper reported an
		// error: the peer is not waited for, see TestKeyPendingWaits); received the
		// credential held.
		keys     *seal.Key
		received *corev1.Secret
		// logged are the reasons logged over three reconciles.
		logged []string
	}{
		{"the key is not loaded (the bootstrapper reported why)", nil, sealedTo(otherKey), []string{notLoaded}},
		{"the key is loaded: sealed to another key", localKey, sealedTo(otherKey), []string{noOpen}},
		{"the same reason again: nothing logged", localKey, sealedTo(otherKey), nil},
		{"a credential that opens: nothing logged", localKey, sealedTo(localKey), nil},
		{"sealed to another key again: logged again", localKey, sealedTo(otherKey), []string{noOpen}},
	}
	f := newFixture(t, interceptor.Funcs{}, cluster("local", localID, "local"), cluster("peer", peerID, "peer"),
		readerSecret("peer", v1alpha1.SecretTypeClusterRegistry, map[string][]byte{v1alpha1.KubeconfigKey: shared}))
	var logged []string
	log := funcr.NewJSON(func(obj string) {
		var line struct{ Msg, Reason string }
		if err := json.Unmarshal([]byte(obj), &line); err != nil {
			t.Errorf("log line %s: %v", obj, err)
		}
		if strings.HasPrefix(line.Msg, "the reader credential the peer issued to this cluster is not used") {
			logged = append(logged, line.Reason)
		}
	}, funcr.Options{})
	ctx := logf.IntoContext(context.Background(), log)
	for _, step := range steps {
		f.r.Keys = issue.NewKeys(step.keys)
		if step.keys == nil {
			f.r.Keys.Report(errors.New("reading the key Secret: forbidden"))
		}
		var existing corev1.Secret
		if err := f.client.Get(ctx, client.ObjectKeyFromObject(step.received), &existing); err == nil {
			existing.Data = step.received.Data
			if err := f.client.Update(ctx, &existing); err != nil {
				t.Fatal(err)
			}
		} else if err := f.client.Create(ctx, step.received.DeepCopy()); err != nil {
			t.Fatal(err)
		}
		logged = nil
		for range 3 {
			if _, err := f.r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: "peer"}}); err != nil {
				t.Fatal(err)
			}
		}
		if diff := cmp.Diff(step.logged, logged); diff != "" {
			t.Errorf("%s: logged reasons (-want +got):\n%s", step.name, diff)
		}
	}
}

// TestLocalReaderKeyCondition: the local Cluster's status carries the ReaderKeyReady
// condition of what the bootstrapper reported of the key pair (issue.KeyCondition);
// nothing before it reports, or when this cluster seals nothing (no Keys).
func TestLocalReaderKeyCondition(t *testing.T) {
	key := mustKey(t)
	forbidden := errors.New("reading the key Secret: forbidden")
	invalid := fmt.Errorf("%w: bad length", issue.ErrInvalidKeySecret)
	tests := []struct {
		name string
		keys func() *issue.Keys
		want *cond // nil: no condition
	}{
		{"no Keys", func() *issue.Keys { return nil }, nil},
		{"not reported yet", func() *issue.Keys { return &issue.Keys{} }, nil},
		{"advertised", func() *issue.Keys { k := issue.NewKeys(key); k.Report(nil); return k },
			&cond{isTrue, v1alpha1.ReasonReaderKeyAdvertised}},
		{"the key Secret cannot be read", func() *issue.Keys { k := &issue.Keys{}; k.Report(forbidden); return k },
			&cond{isFalse, v1alpha1.ReasonReaderKeySecretFailed}},
		{"the key Secret holds no valid key", func() *issue.Keys { k := &issue.Keys{}; k.Report(invalid); return k },
			&cond{isFalse, v1alpha1.ReasonReaderKeyInvalid}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, interceptor.Funcs{}, cluster("local", localID, "local"))
			f.r.Keys = tt.keys()
			if _, err := f.reconcile(t, "local"); err != nil {
				t.Fatal(err)
			}
			var got *cond
			if c, ok := condsOf(f.get(t, "local").Status)[v1alpha1.ClusterConditionReaderKeyReady]; ok {
				got = &c
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ReaderKeyReady (-want +got):\n%s", diff)
			}
		})
	}
}
