package engine

import (
	"net/http"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"

	"github.com/kubectl-registry/kubectl-registry/reconciler/peers"
)

// TestPeerClientsFollowTheCredential: the clients the engine reads a peer with are kept
// while the peer's connection and credential are, and built again when either changes,
// though its Config is the same (a connection's token is not in it).
func TestPeerClientsFollowTheCredential(t *testing.T) {
	e, err := New(Options{LocalID: "uid-local", LocalName: "local", Namespace: "cluster-registry", Peers: &peers.Manager{}, Metrics: NewMetrics(nil)})
	if err != nil {
		t.Fatal(err)
	}
	peer := func(n uint64) peers.Peer {
		return peers.Connected("p", "uid-p", nil).WithConfig(&rest.Config{Host: "https://127.0.0.1:6443"}, &http.Client{}, meta.NewDefaultRESTMapper(nil)).WithCredential(n)
	}
	clients := func(n uint64) any {
		t.Helper()
		c, _, err := e.peerClients(peer(n))
		if err != nil {
			t.Fatal(err)
		}
		return c.Dynamic
	}
	first := clients(1)
	if clients(1) != first {
		t.Error("the clients of a peer whose credential did not change were built again")
	}
	if clients(2) == first {
		t.Error("the clients of a peer whose credential changed were kept")
	}
}
