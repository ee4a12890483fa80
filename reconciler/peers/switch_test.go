package peers

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
	"github.com/kubectl-registry/kubectl-registry/reconciler/peers/simpeer"
)

// TestCredentialSwitch: a peer read with its bootstrap credential, then with the one it
// issued on the same server, keeps its connection and the Clusters it read (listed once),
// every request after the switch carries the new token (the bootstrap one revoked, nothing
// is refused), no watch opened with the bootstrap token stays open (they resume with the
// new one), the Secrets the new credential reads are read, and a Cluster changed after
// the switch is seen; a credential of another server, or the bootstrap credential again,
// makes a new connection.
func TestCredentialSwitch(t *testing.T) {
	g, err := simpeer.NewGroup()
	if err != nil {
		t.Fatal(err)
	}
	m := startManager(t, kubeconfig.AddressPolicy{AllowLoopback: true})
	const issuedToken = "issued-token"
	clusters := simpeer.Clusters.Key()
	// start serves the peer name: its Cluster, the credential it issued this cluster and
	// a relayed reader Secret, accepting the bootstrap token and the issued one.
	start := func(t *testing.T, name string) *simpeer.Server {
		srv := startSimPeer(t, g, name, simpeer.Options{})
		srv.SetTokens(readerToken, issuedToken)
		serve(t, srv, simpeer.Clusters, servedCluster(name, v1alpha1.ClusterTypeLocal, g.CAData()))
		serve(t, srv, simpeer.Secrets, sealedCredentials()[0])
		serve(t, srv, simpeer.Secrets, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "west", Namespace: v1alpha1.DefaultNamespace},
			Data: map[string][]byte{v1alpha1.KubeconfigKey: []byte("kubeconfig")}})
		return srv
	}
	// issued connects m to the peer name with the credential it issued, naming srv.
	issued := func(t *testing.T, name string, srv *simpeer.Server) Peer {
		c, s := peerOf(t, name, srv.URL(), g.CAData())
		kc, err := kubeconfig.Render(kubeconfig.Reader{ClusterName: name, Server: srv.URL(), CAData: g.CAData(), Token: issuedToken})
		if err != nil {
			t.Fatal(err)
		}
		s.Name, s.Data[v1alpha1.KubeconfigKey] = "issued-"+name, kc
		return m.Ensure(c, s, false)
	}
	// secrets lists the Secrets the peer's reader holds.
	secrets := func(t *testing.T, p Peer) []string {
		var list corev1.SecretList
		if err := p.Reader().List(context.Background(), &list, client.InNamespace(v1alpha1.DefaultNamespace)); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, s := range list.Items {
			names = append(names, s.Name)
		}
		slices.Sort(names)
		return names
	}
	mine := v1alpha1.IssuedReaderSecretName("local")

	t.Run("the issued credential, same server", func(t *testing.T) {
		srv := start(t, "same")
		ensureSimPeer(t, m, g, srv, "same", true)
		boot := waitSynced(t, m, "same")
		if !boot.Bootstrap || !slices.Equal(secrets(t, boot), []string{mine}) {
			t.Fatalf("read with the bootstrap credential: bootstrap %t, Secrets %v", boot.Bootstrap, secrets(t, boot))
		}
		p := issued(t, "same", srv)
		if p.Bootstrap || p.Readable() || p.Credential() == boot.Credential() {
			t.Fatalf("just switched: bootstrap %t, readable %t, credential %d (before %d)", p.Bootstrap, p.Readable(), p.Credential(), boot.Credential())
		}
		// The bootstrap credential revoked at once: a request it sent just before the
		// switch may be refused, nothing after (below).
		srv.SetTokens(issuedToken)
		p = waitReadable(t, m, "same")
		if got := secrets(t, p); !slices.Equal(got, []string{mine, "west"}) {
			t.Errorf("Secrets read with the issued credential: %v", got)
		}
		// The watches opened with the bootstrap token (the Clusters', the issued
		// credential's) resumed with the issued one.
		waitFor(t, "no watch open with the bootstrap token", func() bool {
			return srv.OpenWatches(readerToken) == 0 && srv.OpenWatches(issuedToken) == 3
		})
		before := srv.Stats()
		changed := servedCluster("same", v1alpha1.ClusterTypeLocal, g.CAData())
		changed.Annotations["changed"] = "yes"
		write(t, srv.Update, simpeer.Clusters, changed)
		waitFor(t, "the changed Cluster", func() bool {
			var c v1alpha1.Cluster
			return p.Reader().Get(context.Background(), client.ObjectKey{Name: "same"}, &c) == nil && c.Annotations["changed"] == "yes"
		})
		waitFor(t, "three more health checks", func() bool { return srv.Stats().Requests["get"] >= before.Requests["get"]+3 })
		if again := issued(t, "same", srv); again.Credential() != p.Credential() {
			t.Errorf("the same credential again: credential %d, was %d", again.Credential(), p.Credential())
		}
		after := srv.Stats()
		if after.Initial[clusters] != 1 || after.Connections != 1 || after.Requests["unauthorized"] != before.Requests["unauthorized"] {
			t.Errorf("after the switch: Clusters listed %d times, %d connections, %d requests refused (want 1, 1, %d)",
				after.Initial[clusters], after.Connections, after.Requests["unauthorized"], before.Requests["unauthorized"])
		}

		// Back to the bootstrap credential (the issued one rejected): a new connection.
		srv.SetTokens(readerToken)
		ensureSimPeer(t, m, g, srv, "same", true)
		if back := waitSynced(t, m, "same"); back.Credential() == p.Credential() {
			t.Errorf("back to the bootstrap credential: credential %d, as before", back.Credential())
		}
		waitFor(t, "the Clusters listed again", func() bool { return srv.Stats().Initial[clusters] == 2 })
	})

	t.Run("a bootstrap connection not Ready", func(t *testing.T) {
		srv := start(t, "refused")
		srv.SetTokens(issuedToken) // the bootstrap credential refused
		ensureSimPeer(t, m, g, srv, "refused", true)
		m.mu.Lock()
		old := m.conns["refused"]
		m.mu.Unlock()
		issued(t, "refused", srv)
		m.mu.Lock()
		replaced := m.conns["refused"] != old
		m.mu.Unlock()
		if !replaced {
			t.Error("a bootstrap connection that never answered was switched in place, not replaced")
		}
		waitReadable(t, m, "refused")
	})

	t.Run("the issued credential, another server", func(t *testing.T) {
		srv, other := start(t, "moved"), start(t, "moved")
		ensureSimPeer(t, m, g, srv, "moved", true)
		waitSynced(t, m, "moved")
		issued(t, "moved", other)
		p := waitReadable(t, m, "moved")
		if got := secrets(t, p); !slices.Equal(got, []string{mine, "west"}) {
			t.Errorf("Secrets read with the issued credential: %v", got)
		}
		if n := other.Stats().Initial[clusters]; n != 1 {
			t.Errorf("the server the issued credential names listed the Clusters %d times, want 1", n)
		}
		waitFor(t, "the first server's watches closed", func() bool { return srv.Stats().TotalWatches() == 0 })
	})
}

// waitReadable waits for the named peer to be Ready and readable (synced, with a
// credential other than its bootstrap one).
func waitReadable(t *testing.T, m *Manager, name string) Peer {
	t.Helper()
	var p Peer
	waitFor(t, "peer "+name+" Ready and readable", func() bool {
		p, _ = m.Get(name)
		return p.Ready && p.Readable()
	})
	return p
}

// waitFor polls ok until it holds, or fails the test after 20 s.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !ok(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestMarkSyncedWaitsForTheSecrets: a cache built for the bootstrap credential does not
// make a peer switched to its own credential synced before it watches the Secrets that
// credential reads (a switch between the cache's build and its first sync).
func TestMarkSyncedWaitsForTheSecrets(t *testing.T) {
	for _, tt := range []struct {
		bootstrap, secrets, want bool
	}{
		{bootstrap: true, secrets: false, want: true},
		{bootstrap: false, secrets: false, want: false},
		{bootstrap: false, secrets: true, want: true},
	} {
		m := newManager(t, Options{})
		c := addConn(m, "p")
		c.set(func(p *Peer) { p.Bootstrap = tt.bootstrap })
		cch := &membershipCache{}
		cch.secrets.Store(tt.secrets)
		c.markSynced(cch, link{})
		if got := c.snapshot().Synced; got != tt.want {
			t.Errorf("bootstrap %t, Secrets watched %t: synced %t, want %t", tt.bootstrap, tt.secrets, got, tt.want)
		}
	}
}
