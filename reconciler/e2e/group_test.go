package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/conditions"
	"github.com/kubectl-registry/kubectl-registry/reconciler/e2e/harness"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

var bed *testbed.Bed

func TestMain(m *testing.M) {
	os.Exit(testbed.Main(m, testbed.Options{Names: []string{"a", "b", "c"}, CRDDirectoryPaths: []string{"../../manifests/crds"}}, &bed))
}

// TestGroup walks the seed's quickstart with three clusters, then breaks the group in
// the ways the controller must survive. The subtests build on each other.
func TestGroup(t *testing.T) {
	testbed.SkipIfNoAssets(t)
	a, b, c := harness.Install(t, bed.Cluster("a")), harness.Install(t, bed.Cluster("b")), harness.Install(t, bed.Cluster("c"))

	metricsA := harness.FreeAddr(t)
	harness.Serve(t, bed.Cluster("a"), "--metrics-bind-address", metricsA)
	metrics := harness.MetricsAt(t, bed.Cluster("a"), metricsA)
	ctlB := harness.Serve(t, bed.Cluster("b"))
	top := t // controllers started in a subtest live as long as the whole test

	t.Run("quickstart with two clusters", func(t *testing.T) {
		harness.Eventually(t, 30*time.Second, "a bootstraps", func() error { return harness.LocalReady(a, "a") })
		harness.Eventually(t, 30*time.Second, "b bootstraps", func() error { return harness.LocalReady(b, "b") })
		harness.Swap(t, a, b, "a")
		harness.Swap(t, b, a, "b")
		harness.Eventually(t, 30*time.Second, "a and b form a group", func() error {
			if err := harness.Members(a, "a", "a", "b"); err != nil {
				return err
			}
			return harness.Members(b, "b", "a", "b")
		})
	})

	t.Run("attach a third cluster through one member", func(t *testing.T) {
		harness.Serve(top, bed.Cluster("c"))
		harness.Eventually(t, 30*time.Second, "c bootstraps", func() error { return harness.LocalReady(c, "c") })
		harness.Swap(t, a, c, "a")
		harness.Swap(t, c, a, "c")
		harness.Eventually(t, 60*time.Second, "membership spreads to all three", func() error {
			for name, cl := range map[string]client.Client{"a": a, "b": b, "c": c} {
				if err := harness.Members(cl, name, "a", "b", "c"); err != nil {
					return err
				}
			}
			return nil
		})
		// The next subtest counts objects: the credential exchange must be over.
		harness.Eventually(t, 60*time.Second, "the three exchange their credentials", func() error {
			return harness.CredentialsExchanged(map[string]client.Client{"a": a, "b": b, "c": c}, "a", "b", "c")
		})
		// b learnt about c from a: its copies carry c's ID as the ownership mark.
		cID, _ := bed.Cluster("c").KubeSystemUID(context.Background())
		var cc v1alpha1.Cluster
		if err := b.Get(context.Background(), client.ObjectKey{Name: "c"}, &cc); err != nil {
			t.Fatal(err)
		}
		if cc.Annotations[v1alpha1.OwnershipAnnotation] != string(cID) || cc.Labels[v1alpha1.OwnershipLabel] != string(cID) {
			t.Errorf("b's copy of Cluster c has ownership %q/%q, want %s", cc.Annotations[v1alpha1.OwnershipAnnotation], cc.Labels[v1alpha1.OwnershipLabel], cID)
		}
		var cs corev1.Secret
		if err := b.Get(context.Background(), client.ObjectKey{Namespace: v1alpha1.DefaultNamespace, Name: "c"}, &cs); err != nil {
			t.Fatal(err)
		}
		if cs.Annotations[v1alpha1.OwnershipAnnotation] != string(cID) || cs.Type != v1alpha1.SecretTypeClusterRegistry {
			t.Errorf("b's copy of Secret c: ownership %q, type %q", cs.Annotations[v1alpha1.OwnershipAnnotation], cs.Type)
		}
	})

	t.Run("a peer's API server goes away and comes back", func(t *testing.T) {
		before := countAll(t, a, b)
		if err := bed.Cluster("c").Cut(); err != nil {
			t.Fatal(err)
		}
		cut := time.Now()
		harness.Eventually(t, 30*time.Second, "a sees c down", func() error {
			state, msg, err := harness.PeerState(a, "c")
			if err != nil {
				return err
			}
			if state != v1alpha1.ClusterStateFailed {
				return fmt.Errorf("c is %q on a: %s", state, msg)
			}
			return nil
		})
		t.Logf("a reported c Failed %s after the cut", time.Since(cut).Round(100*time.Millisecond))
		if after := countAll(t, a, b); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("objects on a and b changed while c was cut: %v -> %v", before, after)
		}
		if err := bed.Cluster("c").Heal(); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, 60*time.Second, "c returns to Ready everywhere", func() error {
			for name, cl := range map[string]client.Client{"a": a, "b": b, "c": c} {
				if err := harness.Members(cl, name, "a", "b", "c"); err != nil {
					return err
				}
			}
			return nil
		})
	})

	t.Run("a renewed reader token reaches every member", func(t *testing.T) {
		var old corev1.Secret
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: v1alpha1.DefaultNamespace, Name: "c"}, &old); err != nil {
			t.Fatal(err)
		}
		// Deleting c's reader Secret makes c's controller issue a new token at once.
		if err := c.Delete(context.Background(), &old); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, 30*time.Second, "the new token reaches a and b", func() error {
			var fresh corev1.Secret
			if err := c.Get(context.Background(), client.ObjectKey{Namespace: v1alpha1.DefaultNamespace, Name: "c"}, &fresh); err != nil {
				return err
			}
			if string(fresh.Data[v1alpha1.KubeconfigKey]) == string(old.Data[v1alpha1.KubeconfigKey]) {
				return fmt.Errorf("c has not issued a new token")
			}
			for name, cl := range map[string]client.Client{"a": a, "b": b} {
				var copy corev1.Secret
				if err := cl.Get(context.Background(), client.ObjectKey{Namespace: v1alpha1.DefaultNamespace, Name: "c"}, &copy); err != nil {
					return err
				}
				if string(copy.Data[v1alpha1.KubeconfigKey]) != string(fresh.Data[v1alpha1.KubeconfigKey]) {
					return fmt.Errorf("%s still has the old token of c", name)
				}
			}
			return nil
		})
		harness.Eventually(t, 30*time.Second, "everyone stays Ready", func() error {
			for name, cl := range map[string]client.Client{"a": a, "b": b, "c": c} {
				if err := harness.Members(cl, name, "a", "b", "c"); err != nil {
					return err
				}
			}
			return nil
		})
	})

	t.Run("a revoked reader token is replaced by hand and peers recover without a restart", func(t *testing.T) {
		// While c is cut off (so no open watch carries the news), recreating c's reader
		// ServiceAccounts revokes every token issued for them: the shared one and the one
		// c issued to each peer (what a and b read c with); c's controller issues new
		// ones for the new ServiceAccounts.
		cDirect, err := client.New(bed.Cluster("c").DirectConfig(), client.Options{Scheme: c.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		if err := bed.Cluster("c").Cut(); err != nil {
			t.Fatal(err)
		}
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: v1alpha1.DefaultNamespace, Name: v1alpha1.ReaderName}}
		if err := cDirect.Delete(context.Background(), sa); err != nil {
			t.Fatal(err)
		}
		for _, peer := range []string{"a", "b"} {
			id, err := bed.Cluster(peer).KubeSystemUID(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			own := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: v1alpha1.ReadersNamespace(v1alpha1.DefaultNamespace), Name: v1alpha1.ReaderServiceAccountName(id)}}
			if err := cDirect.Delete(context.Background(), own); err != nil {
				t.Fatalf("revoking the reader c issued to %s: %v", peer, err)
			}
		}
		var fresh corev1.Secret
		harness.Eventually(t, 30*time.Second, "c issues a token for the new ServiceAccount", func() error {
			var sa corev1.ServiceAccount
			if err := cDirect.Get(context.Background(), client.ObjectKey{Namespace: v1alpha1.DefaultNamespace, Name: v1alpha1.ReaderName}, &sa); err != nil {
				return err
			}
			if err := cDirect.Get(context.Background(), client.ObjectKey{Namespace: v1alpha1.DefaultNamespace, Name: "c"}, &fresh); err != nil {
				return err
			}
			if fresh.Annotations[v1alpha1.TokenServiceAccountUIDAnnotation] != string(sa.UID) {
				return fmt.Errorf("the Secret's token is not for ServiceAccount %s", sa.UID)
			}
			return nil
		})
		// The API server caches token reviews for a few seconds: wait until it rejects
		// the old token (asked directly, the proxy still being cut).
		var old corev1.Secret
		if err := a.Get(context.Background(), client.ObjectKey{Namespace: v1alpha1.DefaultNamespace, Name: "c"}, &old); err != nil {
			t.Fatal(err)
		}
		oldCfg, err := kubeconfig.Parse(old.Data[v1alpha1.KubeconfigKey])
		if err != nil {
			t.Fatal(err)
		}
		oldCfg.Host = bed.Cluster("c").APIServerURL()
		oldReader, err := client.New(oldCfg, client.Options{Scheme: c.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, 30*time.Second, "the old token is revoked", func() error {
			err := oldReader.Get(context.Background(), client.ObjectKey{Name: "kube-system"}, &corev1.Namespace{})
			if !apierrors.IsUnauthorized(err) {
				return fmt.Errorf("the old token still works: %v", err)
			}
			return nil
		})
		// ... and the credentials c had issued to a and b.
		var cOnA v1alpha1.Cluster
		if err := a.Get(context.Background(), client.ObjectKey{Name: "c"}, &cOnA); err != nil {
			t.Fatal(err)
		}
		cID := cOnA.Spec.ClusterID
		for name, cl := range map[string]client.Client{"a": a, "b": b} {
			var own v1alpha1.Cluster
			if err := cl.Get(context.Background(), client.ObjectKey{Name: name}, &own); err != nil {
				t.Fatal(err)
			}
			held, err := harness.ReceivedKubeconfig(cl, own.Spec.ClusterID, cID)
			if err != nil {
				t.Fatalf("%s's credential from c: %v", name, err)
			}
			heldCfg, err := kubeconfig.Parse(held)
			if err != nil {
				t.Fatal(err)
			}
			heldCfg.Host = bed.Cluster("c").APIServerURL()
			heldReader, err := client.New(heldCfg, client.Options{Scheme: c.Scheme()})
			if err != nil {
				t.Fatal(err)
			}
			harness.Eventually(t, 30*time.Second, "the credential c issued to "+name+" is revoked", func() error {
				err := heldReader.Get(context.Background(), client.ObjectKey{Name: "kube-system"}, &corev1.Namespace{})
				if !apierrors.IsUnauthorized(err) {
					return fmt.Errorf("it still works: %v", err)
				}
				return nil
			})
		}
		if err := bed.Cluster("c").Heal(); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, 30*time.Second, "a sees c's old token rejected", func() error {
			state, msg, err := harness.PeerState(a, "c")
			if err != nil {
				return err
			}
			if state != v1alpha1.ClusterStateInvalidAuthInfo {
				return fmt.Errorf("c is %q on a: %s", state, msg)
			}
			return nil
		})
		// The user copies c's new Secret to a (what join does); a reconnects without a
		// restart and relays the newer token to b, which cannot read c either.
		// a's controller writes this Secret too: harness.Update retries on conflict.
		onA := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: v1alpha1.DefaultNamespace, Name: "c"}}
		if err := harness.Update(context.Background(), a, onA, func() {
			onA.Data = fresh.Data
			for k, v := range fresh.Annotations {
				onA.Annotations[k] = v
			}
		}); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, 60*time.Second, "the group recovers", func() error {
			for name, cl := range map[string]client.Client{"a": a, "b": b, "c": c} {
				if err := harness.Members(cl, name, "a", "b", "c"); err != nil {
					return err
				}
			}
			return nil
		})
	})

	t.Run("the reader identity peers hold cannot write", func(t *testing.T) {
		var s corev1.Secret
		if err := a.Get(context.Background(), client.ObjectKey{Namespace: v1alpha1.DefaultNamespace, Name: "b"}, &s); err != nil {
			t.Fatal(err)
		}
		reader := harness.ReaderClient(t, s.Data[v1alpha1.KubeconfigKey])
		err := reader.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: v1alpha1.DefaultNamespace, Name: "intruder"}})
		if !apierrors.IsForbidden(err) {
			t.Errorf("the reader of b created a ConfigMap on b: %v", err)
		}
		var cl v1alpha1.Cluster
		if err := reader.Get(context.Background(), client.ObjectKey{Name: "b"}, &cl); err != nil {
			t.Fatalf("the reader of b cannot read b's Cluster: %v", err)
		}
		cl.Labels = map[string]string{"x": "y"}
		if err := reader.Update(context.Background(), &cl); !apierrors.IsForbidden(err) {
			t.Errorf("the reader of b updated Cluster b on b: %v", err)
		}
	})

	t.Run("disabled peer", func(t *testing.T) {
		var cc v1alpha1.Cluster
		if err := a.Get(context.Background(), client.ObjectKey{Name: "c"}, &cc); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(cc.DeepCopy())
		if cc.Annotations == nil {
			cc.Annotations = map[string]string{}
		}
		cc.Annotations[v1alpha1.ClusterDisabledAnnotation] = "true"
		if err := a.Patch(context.Background(), &cc, patch); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, 30*time.Second, "c is Disabled on a", func() error {
			state, _, err := harness.PeerState(a, "c")
			if err != nil {
				return err
			}
			if state != v1alpha1.ClusterStateDisabled {
				return fmt.Errorf("c is %q on a", state)
			}
			return nil
		})
		// Membership sync from c or b must not undo the local decision.
		time.Sleep(2 * time.Second)
		if err := a.Get(context.Background(), client.ObjectKey{Name: "c"}, &cc); err != nil {
			t.Fatal(err)
		}
		if cc.Annotations[v1alpha1.ClusterDisabledAnnotation] != "true" {
			t.Fatalf("the disabled annotation was overwritten: %v", cc.Annotations)
		}
		patch = client.MergeFrom(cc.DeepCopy())
		delete(cc.Annotations, v1alpha1.ClusterDisabledAnnotation)
		if err := a.Patch(context.Background(), &cc, patch); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, 30*time.Second, "c is back", func() error { return harness.Members(a, "a", "a", "b", "c") })
	})
	t.Run("metrics report each peer", func(t *testing.T) {
		harness.Eventually(t, 30*time.Second, "per-peer metrics", func() error {
			body, err := metrics.Get()
			if err != nil {
				return err
			}
			for _, want := range []string{`kubectl_registry_peer_up{cluster="b"} 1`, `kubectl_registry_peer_up{cluster="c"} 1`, `kubectl_registry_peer_last_success_timestamp_seconds{cluster="b"}`,
				// What the alerts of manifests/monitoring read besides.
				`leader_election_master_status{name="registry-e2e"} 1`, `kubectl_registry_reader_token_renew_after_timestamp_seconds `} {
				if !strings.Contains(body, want) {
					return fmt.Errorf("/metrics lacks %s", want)
				}
			}
			return nil
		})
	})

	t.Run("a second replica takes over when the leader stops", func(t *testing.T) {
		harness.Serve(top, bed.Cluster("b"))
		holder := func() (string, error) {
			var l coordinationv1.Lease
			if err := b.Get(context.Background(), client.ObjectKey{Namespace: v1alpha1.DefaultNamespace, Name: "registry-e2e"}, &l); err != nil {
				return "", err
			}
			if l.Spec.HolderIdentity == nil {
				return "", nil
			}
			return *l.Spec.HolderIdentity, nil
		}
		first, err := holder()
		if err != nil || first == "" {
			t.Fatalf("no leader on b: %q %v", first, err)
		}
		ctlB.Stop(t)
		harness.Eventually(t, 30*time.Second, "the second replica leads", func() error {
			h, err := holder()
			if err != nil {
				return err
			}
			if h == "" || h == first {
				return fmt.Errorf("holder %q", h)
			}
			return nil
		})
		// The new leader does the work: it restores b's reader Secret.
		var s corev1.Secret
		if err := b.Get(context.Background(), client.ObjectKey{Namespace: v1alpha1.DefaultNamespace, Name: "b"}, &s); err != nil {
			t.Fatal(err)
		}
		if err := b.Delete(context.Background(), &s); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, 30*time.Second, "the new leader restores b's Secret and the group stays whole", func() error {
			var again corev1.Secret
			if err := b.Get(context.Background(), client.ObjectKey{Namespace: v1alpha1.DefaultNamespace, Name: "b"}, &again); err != nil {
				return err
			}
			for name, cl := range map[string]client.Client{"a": a, "b": b, "c": c} {
				if err := harness.Members(cl, name, "a", "b", "c"); err != nil {
					return err
				}
			}
			return nil
		})
	})

	// The remaining subtests leave invalid objects behind: keep them last.
	t.Run("bad auth info is reported, nothing crashes", func(t *testing.T) {
		var good corev1.Secret
		if err := a.Get(context.Background(), client.ObjectKey{Namespace: v1alpha1.DefaultNamespace, Name: "b"}, &good); err != nil {
			t.Fatal(err)
		}
		execKubeconfig := "apiVersion: v1\nkind: Config\ncurrent-context: x\nclusters: [{name: x, cluster: {server: 'https://203.0.113.1'}}]\n" +
			"users: [{name: x, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: ['-c', 'touch /tmp/pwned']}}}]\n" +
			"contexts: [{name: x, context: {cluster: x, user: x}}]\n"
		// withAuth is a kubeconfig whose user has the YAML fields user and whose cluster has
		// cluster besides its server.
		withAuth := func(user, cluster string) string {
			c := "server: 'https://203.0.113.1'"
			if cluster != "" {
				c += ", " + cluster
			}
			return "apiVersion: v1\nkind: Config\ncurrent-context: x\nclusters: [{name: x, cluster: {" + c + "}}]\n" +
				"users: [{name: x, user: {" + user + "}}]\ncontexts: [{name: x, context: {cluster: x, user: x}}]\n"
		}
		secretOf := func(name string, typ corev1.SecretType, data map[string][]byte) *corev1.Secret {
			return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: v1alpha1.DefaultNamespace, Name: name}, Type: typ, Data: data}
		}
		kc := func(b []byte) map[string][]byte { return map[string][]byte{v1alpha1.KubeconfigKey: b} }
		tests := []struct {
			name      string
			secret    *corev1.Secret
			noRef     bool
			wantState v1alpha1.ClusterState
			wantMsg   string
		}{
			{name: "bad-missing-secret", wantState: v1alpha1.ClusterStateMissingAuthInfo, wantMsg: "not found"},
			{name: "bad-no-secretref", noRef: true, wantState: v1alpha1.ClusterStateMissingAuthInfo, wantMsg: "secretRef"},
			{name: "bad-type", secret: secretOf("bad-type", corev1.SecretTypeOpaque, good.Data), wantState: v1alpha1.ClusterStateInvalidAuthInfo, wantMsg: "has type"},
			{name: "bad-key", secret: secretOf("bad-key", v1alpha1.SecretTypeClusterRegistry, map[string][]byte{"config": good.Data[v1alpha1.KubeconfigKey]}), wantState: v1alpha1.ClusterStateInvalidAuthInfo, wantMsg: `no "kubeconfig" key`},
			{name: "bad-garbage", secret: secretOf("bad-garbage", v1alpha1.SecretTypeClusterRegistry, kc([]byte("{{{ not a kubeconfig"))), wantState: v1alpha1.ClusterStateInvalidAuthInfo, wantMsg: "invalid kubeconfig"},
			{name: "bad-exec", secret: secretOf("bad-exec", v1alpha1.SecretTypeClusterRegistry, kc([]byte(execKubeconfig))), wantState: v1alpha1.ClusterStateInvalidAuthInfo, wantMsg: "exec"},
			{name: "bad-wrong-cluster", secret: secretOf("bad-wrong-cluster", v1alpha1.SecretTypeClusterRegistry, good.Data), wantState: v1alpha1.ClusterStateInvalidAuthInfo, wantMsg: "not 00000000-0000-0000-0000-00000000000"},
			{name: "bad-token-file", secret: secretOf("bad-token-file", v1alpha1.SecretTypeClusterRegistry, kc([]byte(withAuth("tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token", "")))), wantState: v1alpha1.ClusterStateInvalidAuthInfo, wantMsg: "tokenFile: file paths are not allowed"},
			{name: "bad-ca-file", secret: secretOf("bad-ca-file", v1alpha1.SecretTypeClusterRegistry, kc([]byte(withAuth("token: abc", "certificate-authority: /etc/ssl/certs/ca-certificates.crt")))), wantState: v1alpha1.ClusterStateInvalidAuthInfo, wantMsg: "certificate-authority: file paths are not allowed"},
			{name: "bad-proxy", secret: secretOf("bad-proxy", v1alpha1.SecretTypeClusterRegistry, kc([]byte(withAuth("token: abc", "proxy-url: http://127.0.0.1:3128")))), wantState: v1alpha1.ClusterStateInvalidAuthInfo, wantMsg: "proxies are not allowed"},
			{name: "bad-insecure", secret: secretOf("bad-insecure", v1alpha1.SecretTypeClusterRegistry, kc([]byte(withAuth("token: abc", "insecure-skip-tls-verify: true")))), wantState: v1alpha1.ClusterStateInvalidAuthInfo, wantMsg: "TLS verification must not be turned off"},
			{name: "bad-huge", secret: secretOf("bad-huge", v1alpha1.SecretTypeClusterRegistry, kc([]byte(withAuth("token: abc", "")+"# "+strings.Repeat("x", 200<<10)+"\n"))), wantState: v1alpha1.ClusterStateInvalidAuthInfo, wantMsg: "more than the limit"},
		}
		for i, tt := range tests {
			cl := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: tt.name}, Spec: v1alpha1.ClusterSpec{ClusterID: types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i))}}
			if !tt.noRef {
				cl.Spec.AuthInfo.SecretRef = v1alpha1.NamespacedName{Name: tt.name, Namespace: v1alpha1.DefaultNamespace}
			}
			if tt.secret != nil {
				if err := a.Create(context.Background(), tt.secret); err != nil {
					t.Fatal(err)
				}
			}
			if err := a.Create(context.Background(), cl); err != nil {
				t.Fatal(err)
			}
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				harness.Eventually(t, 30*time.Second, tt.name+" reported", func() error {
					state, msg, err := harness.PeerState(a, tt.name)
					if err != nil {
						return err
					}
					if state != tt.wantState || !strings.Contains(msg, tt.wantMsg) {
						return fmt.Errorf("state %q message %q, want %q and a message containing %q", state, msg, tt.wantState, tt.wantMsg)
					}
					return nil
				})
			})
		}
		if _, err := os.Stat("/tmp/pwned"); err == nil {
			t.Fatal("the exec plugin of an untrusted kubeconfig was run")
		}
		// The real members stay Ready on a.
		for _, name := range []string{"b", "c"} {
			if state, msg, err := harness.PeerState(a, name); err != nil || state != v1alpha1.ClusterStateReady {
				t.Errorf("%s on a: %q %q %v", name, state, msg, err)
			}
		}
	})

	t.Run("two Clusters claiming the local ID are both reported", func(t *testing.T) {
		cID, err := bed.Cluster("c").KubeSystemUID(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		dup := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c-duplicate"}, Spec: v1alpha1.ClusterSpec{ClusterID: cID}}
		if err := c.Create(context.Background(), dup); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"c", "c-duplicate"} {
			harness.Eventually(t, 30*time.Second, name+" reports the conflict", func() error {
				var cl v1alpha1.Cluster
				if err := c.Get(context.Background(), client.ObjectKey{Name: name}, &cl); err != nil {
					return err
				}
				cond, ok := conditions.Get(cl.Status.Conditions, v1alpha1.ClusterConditionLocalConflict)
				if !ok || cond.Status != corev1.ConditionTrue || !strings.Contains(cond.Message, "c, c-duplicate") {
					return fmt.Errorf("LocalConflict on %s: %+v", name, cond)
				}
				return nil
			})
		}
		// Nothing else changes: c's own Cluster and Secret are still there.
		if err := localSecretExists(c, "c"); err != nil {
			t.Error(err)
		}
	})
}

func localSecretExists(cl client.Client, name string) error {
	var s corev1.Secret
	return cl.Get(context.Background(), client.ObjectKey{Namespace: v1alpha1.DefaultNamespace, Name: name}, &s)
}

// countAll counts the Cluster CRs and registry Secrets of the clients.
func countAll(t *testing.T, cls ...client.Client) []int {
	t.Helper()
	var out []int
	for _, cl := range cls {
		var cs v1alpha1.ClusterList
		var ss corev1.SecretList
		if err := cl.List(context.Background(), &cs); err != nil {
			t.Fatal(err)
		}
		if err := cl.List(context.Background(), &ss, client.InNamespace(v1alpha1.DefaultNamespace)); err != nil {
			t.Fatal(err)
		}
		out = append(out, len(cs.Items), len(ss.Items))
	}
	return out
}

// TestInvalidClusterName: serve refuses a cluster name that is not an RFC 1123 label,
// with a clear message and exit code 2.
func TestInvalidClusterName(t *testing.T) {
	testbed.SkipIfNoAssets(t)
	out, err := exec.Command(harness.Binary(t), "serve", "--kubeconfig", bed.KubeconfigPath, "--context", "a", "--cluster-name", "Not_A_Label").CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("exit: %v, want code 2; output:\n%s", err, out)
	}
	if !strings.Contains(string(out), `invalid cluster name "Not_A_Label"`) {
		t.Errorf("output does not explain the error:\n%s", out)
	}
}
