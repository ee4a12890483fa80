package clusters_test

import (
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/bootstrap"
	"github.com/kubectl-registry/kubectl-registry/reconciler/credentials/seal"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
	"github.com/kubectl-registry/kubectl-registry/reconciler/peers"
)

// TestPeerCredential: the connection to a peer uses the credential the peer issued to
// this cluster when there is one, and falls back to the shared reader Secret when the
// peer rejects it.
func TestPeerCredential(t *testing.T) {
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
	localKey, otherKey := mustKey(t), mustKey(t)
	sealed := func(token string, to *seal.Key) *corev1.Secret {
		b, err := seal.Seal(to.PublicKey(), peerID, localID, kc(token)[v1alpha1.KubeconfigKey])
		if err != nil {
			t.Fatal(err)
		}
		s := received(token)
		s.Data = map[string][]byte{v1alpha1.SealedKubeconfigKey: b}
		return s
	}
	tests := []struct {
		name     string
		shared   string
		received *corev1.Secret
	}{
		{"the credential is used: the shared token is rejected", "bad-token", received("good-token")},
		{"a rejected credential gives way to the shared Secret", "good-token", received("bad-token")},
		{"a sealed credential is opened with the local key: the shared token is rejected", "bad-token", sealed("good-token", localKey)},
		{"a credential sealed to another key gives way to the shared Secret", "good-token", sealed("bad-token", otherKey)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, interceptor.Funcs{}, cluster("local", localID, "local"), cluster("peer", peerID, "peer"),
				readerSecret("peer", v1alpha1.SecretTypeClusterRegistry, kc(tt.shared)), tt.received)
			f.r.Keys = bootstrap.NewKeys(localKey)
			pm, err := peers.NewManager(peers.Options{Scheme: newScheme(t), Namespace: v1alpha1.DefaultNamespace,
				Addresses: kubeconfig.AddressPolicy{AllowLoopback: true}, HealthInterval: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			f.peers, f.r.Peers = pm, pm
			f.startPeers(t)
			deadline := time.Now().Add(15 * time.Second)
			for {
				if _, err := f.reconcile(t, "peer"); err != nil {
					t.Fatal(err)
				}
				if p, ok := f.peers.Get("peer"); ok && p.Ready {
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

func mustKey(t *testing.T) *seal.Key {
	t.Helper()
	k, err := seal.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}
