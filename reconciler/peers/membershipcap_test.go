package peers

import (
	"context"
	"encoding/pem"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
	"github.com/kubectl-registry/kubectl-registry/reconciler/peers/hostilepeer"
)

// TestMembershipRefused: a peer whose API server offers 100,000 Clusters is refused
// while the list is read (at the cap of 1,000 items): it is not Ready, says why, and
// neither the list nor its objects are held.
func TestMembershipRefused(t *testing.T) {
	srv := hostilepeer.New("uid-hostile")
	srv.Clusters = 100000
	defer srv.Close()
	m := newManager(t, Options{HealthInterval: 100 * time.Millisecond, FailureThreshold: 1, MaxBackoff: 200 * time.Millisecond,
		Addresses: kubeconfig.AddressPolicy{AllowLoopback: true}, MaxMembershipObjects: 1000, RefusalRetry: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	stopped := run(t, m, ctx)
	defer func() { cancel(); <-stopped }()

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	c, s := peerOf(t, "hostile", srv.URL, ca)
	c.Spec.ClusterID = "uid-hostile"
	m.Ensure(c, s, true)
	var p Peer
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		p, _ = m.Get("hostile")
		if p.Reason == v1alpha1.ReasonMembershipRefused {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the peer is not refused: %+v", p)
		}
	}
	if p.Ready || p.State != v1alpha1.ClusterStateFailed || p.Reader() != nil || !strings.Contains(p.Message, "more than 1000 items") {
		t.Errorf("the refused peer: ready %v, state %s, message %q", p.Ready, p.State, p.Message)
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	written := srv.Written.Load()
	t.Logf("the server wrote %d KiB of its %d Clusters; heap %d MiB before, %d MiB after, %d MiB allocated meanwhile",
		written>>10, srv.Clusters, before.HeapAlloc>>20, after.HeapAlloc>>20, (after.TotalAlloc-before.TotalAlloc)>>20)
	// What the server wrote includes what the sockets buffer on loopback (a few MiB).
	if full := int64(srv.Clusters) * 130; written > full/2 {
		t.Errorf("the server wrote %d bytes, half of its list or more: the list was read past the cap", written)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Errorf("%d MiB allocated while refusing the peer", alloc>>20)
	}
	// Refused, it stays so (its health check does not make it Ready again).
	time.Sleep(500 * time.Millisecond)
	if p, _ = m.Get("hostile"); p.Ready || p.Reason != v1alpha1.ReasonMembershipRefused {
		t.Errorf("after its health checks, the refused peer is %+v", p)
	}
}

// TestAuthenticateBounded: the check of a relayed reader Secret reads the server it names
// (a member's) through the byte limits: a 300 MB kube-system namespace is refused after
// about the 3 MiB object limit.
func TestAuthenticateBounded(t *testing.T) {
	srv := hostilepeer.New("uid-hostile")
	srv.HugeNamespaceBytes = 300 << 20
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	kc, err := kubeconfig.Render(kubeconfig.Reader{ClusterName: "hostile", Server: srv.URL, CAData: ca, Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	err = Authenticate(context.Background(), kc, kubeconfig.AddressPolicy{AllowLoopback: true}, "uid-hostile")
	if !IsTooLarge(err) {
		t.Fatalf("authenticating against a 300 MB namespace: %v", err)
	}
	if w := srv.MaxWritten.Load(); w > 32<<20 {
		t.Errorf("the server wrote %d MiB to the request", w>>20)
	}
}
