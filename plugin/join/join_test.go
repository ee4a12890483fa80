package join

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/manifests"
	"github.com/kubectl-registry/kubectl-registry/manifests/serverside"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/plugintest"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/e2e/harness"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// bed has the clusters a, b and c, which get the registry and a controller each, and d,
// which stays without (the "registry not installed" cases).
var bed *testbed.Bed

func TestMain(m *testing.M) {
	os.Exit(testbed.Main(m, testbed.Options{
		Names:             []string{"a", "b", "c", "d"},
		CRDDirectoryPaths: []string{"../../manifests/crds"},
	}, &bed))
}

// runJoin runs "kubectl registry join" through cobra under a root that has the kubeconfig
// flags, like the plugin's, against the bed's kubeconfig.
func runJoin(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := plugintest.Command{New: []plugintest.NewCmd{NewCmdJoin}, Timeout: 4 * time.Minute}
	return cmd.Run(t, append([]string{"join", "--kubeconfig", bed.KubeconfigPath}, args...)...)
}

// golden compares got with testdata/<name>, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	plugintest.Golden(t, filepath.Join("testdata", name), got, *update)
}

// snapshot fingerprints what a user or join can change on a cluster: the Clusters (all
// but their status, which the controllers keep changing) and the Secrets of the registry
// namespace.
func snapshot(t *testing.T, cl client.Client) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	var clusters v1alpha1.ClusterList
	if err := cl.List(ctx, &clusters); err != nil {
		t.Fatal(err)
	}
	for _, c := range clusters.Items {
		var managed []metav1.ManagedFieldsEntry
		for _, m := range c.ManagedFields {
			if m.Subresource != "status" {
				managed = append(managed, m)
			}
		}
		b, err := json.Marshal(struct {
			UID         string
			Generation  int64
			Labels      map[string]string
			Annotations map[string]string
			Spec        v1alpha1.ClusterSpec
			Managed     []metav1.ManagedFieldsEntry
		}{string(c.UID), c.Generation, c.Labels, c.Annotations, c.Spec, managed})
		if err != nil {
			t.Fatal(err)
		}
		out["cluster/"+c.Name] = string(b)
	}
	var secrets corev1.SecretList
	if err := cl.List(ctx, &secrets, client.InNamespace(v1alpha1.DefaultNamespace)); err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		out["secret/"+s.Name] = string(s.UID) + "@" + s.ResourceVersion
	}
	return out
}

func members(clients map[string]client.Client, names ...string) func() error {
	return func() error {
		for _, n := range names {
			if err := harness.Members(clients[n], n, names...); err != nil {
				return err
			}
		}
		return nil
	}
}

// TestJoin forms a group of three with join, on real API servers with a controller per
// cluster. The subtests build on each other.
func TestJoin(t *testing.T) {
	testbed.SkipIfNoAssets(t)
	clients := map[string]client.Client{}
	for _, n := range []string{"a", "b", "c"} {
		clients[n] = harness.Install(t, bed.Cluster(n))
		harness.Serve(t, bed.Cluster(n))
	}
	for _, n := range []string{"a", "b", "c"} {
		harness.Eventually(t, 60*time.Second, n+" bootstraps", func() error { return harness.LocalReady(clients[n], n) })
	}
	a := clients["a"]

	t.Run("errors write nothing", func(t *testing.T) {
		before := snapshot(t, a)

		_, _, err := runJoin(t, "--context", "a", "--peer-context", "nosuch", "--allow-loopback")
		plugintest.WantExitCode(t, err, 2, `--peer-context "nosuch": no such context in the kubeconfig`, "See 'kubectl registry join --help' for usage.")

		_, _, err = runJoin(t, "--context", "a", "--peer-context", "b")
		plugintest.WantExitCode(t, err, 2, "context a advertises its API server at "+bed.Cluster("a").Host()+", a loopback address",
			"--server", "--allow-loopback")

		_, _, err = runJoin(t, "--context", "a", "--peer-context", "b", "--one-way", "--peer-server", "b.example.com")
		plugintest.WantExitCode(t, err, 2, "--peer-server has no effect with --one-way")

		_, _, err = runJoin(t, "--context", "a", "--peer-context", "a", "--allow-loopback")
		plugintest.WantExitCode(t, err, 2, "context a and context a are the same cluster", "join needs two different clusters")

		if err := bed.Cluster("b").Cut(); err != nil {
			t.Fatal(err)
		}
		_, _, err = runJoin(t, "--context", "a", "--peer-context", "b", "--allow-loopback")
		if herr := bed.Cluster("b").Heal(); herr != nil {
			t.Fatal(herr)
		}
		plugintest.WantExitCode(t, err, 2, "cannot reach the API server of context b at "+bed.Cluster("b").Host())

		// The advertised address of a, rewritten to a port nobody listens on.
		_, _, err = runJoin(t, "--context", "a", "--peer-context", "b", "--allow-loopback", "--server", harness.FreeAddr(t))
		plugintest.WantExitCode(t, err, 2, "this machine cannot reach https://127.0.0.1:", "where context a advertises its API server to b", "pass --server")

		// The advertised address of a, rewritten to the API server of another cluster
		// (whose certificate another CA signed).
		_, _, err = runJoin(t, "--context", "a", "--peer-context", "b", "--allow-loopback", "--server", bed.Cluster("c").Host())
		plugintest.WantExitCode(t, err, 2, "the API server at "+bed.Cluster("c").Host()+" (from the reader kubeconfig of context a) fails TLS verification",
			"Either it is not the API server of a", "pass --server")

		if diff := cmp.Diff(before, snapshot(t, a)); diff != "" {
			t.Errorf("a changed although every join failed (-before +after):\n%s", diff)
		}
		var cl v1alpha1.Cluster
		if err := a.Get(context.Background(), client.ObjectKey{Name: "b"}, &cl); !apierrors.IsNotFound(err) {
			t.Errorf("Cluster b on a: %v, want not found", err)
		}
	})

	t.Run("registry not installed", func(t *testing.T) {
		d := bed.Cluster("d")
		// d has the CRDs (the bed installs them) but not the namespace.
		_, _, err := runJoin(t, "--context", "a", "--peer-context", "d", "--allow-loopback")
		plugintest.WantExitCode(t, err, 2, "the registry is not installed on context d: the namespace cluster-registry is missing",
			"run: kubectl registry install --context d")

		// Installed, but no controller runs there.
		dc := harness.Install(t, d)
		_, _, err = runJoin(t, "--context", "a", "--peer-context", "d", "--allow-loopback")
		plugintest.WantExitCode(t, err, 2, "context d has no local Cluster", `Is "kubectl registry serve" running there?`)

		// Without the CRD.
		crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "clusters." + v1alpha1.GroupVersion.Group}}
		if err := dc.Delete(context.Background(), crd); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, 30*time.Second, "the CRD is gone", func() error {
			err := dc.Get(context.Background(), client.ObjectKeyFromObject(crd), crd)
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("CRD still there: %v", err)
		})
		harness.Eventually(t, 30*time.Second, "join reports the missing CRD", func() error {
			_, _, err := runJoin(t, "--context", "a", "--peer-context", "d", "--allow-loopback")
			if err == nil || !strings.Contains(err.Error(), "the CRD clusters.clusterregistry.k8s.cisco.com is missing; run: kubectl registry install --context d") {
				return fmt.Errorf("error %v", err)
			}
			return nil
		})
	})

	t.Run("join a and b", func(t *testing.T) {
		stdout, stderr, err := runJoin(t, "--context", "a", "--peer-context", "b", "--allow-loopback", "--wait")
		if err != nil {
			t.Fatal(err)
		}
		golden(t, "join-a-b.golden", stdout)
		if !strings.Contains(stderr, "waiting: on ") {
			t.Logf("no progress line on stderr (the controllers were fast): %q", stderr)
		}
		harness.Eventually(t, 30*time.Second, "a and b form a group", members(clients, "a", "b"))
	})

	t.Run("attach c through a", func(t *testing.T) {
		stdout, _, err := runJoin(t, "--context", "a", "--peer-context", "c", "--allow-loopback", "--wait")
		if err != nil {
			t.Fatal(err)
		}
		golden(t, "join-a-c.golden", stdout)
		harness.Eventually(t, 60*time.Second, "membership spreads to b", members(clients, "a", "b", "c"))
		// The members issue each other credentials after they are Ready; the next subtest
		// compares snapshots, so the exchange must be over first.
		harness.Eventually(t, 60*time.Second, "the members exchange credentials", func() error {
			return harness.CredentialsExchanged(clients, "a", "b", "c")
		})
	})

	t.Run("joining again changes nothing", func(t *testing.T) {
		beforeA, beforeB := snapshot(t, a), snapshot(t, clients["b"])
		stdout, _, err := runJoin(t, "--context", "a", "--peer-context", "b", "--allow-loopback", "--wait")
		if err != nil {
			t.Fatal(err)
		}
		golden(t, "rejoin-a-b.golden", stdout)
		for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
			if strings.Contains(line, " on ") && !strings.Contains(line, " unchanged on ") && !strings.Contains(line, " Ready and synced on ") {
				t.Errorf("line %q: want unchanged", line)
			}
		}
		if diff := cmp.Diff(beforeA, snapshot(t, a)); diff != "" {
			t.Errorf("a changed (-before +after):\n%s", diff)
		}
		if diff := cmp.Diff(beforeB, snapshot(t, clients["b"])); diff != "" {
			t.Errorf("b changed (-before +after):\n%s", diff)
		}
	})

	t.Run("an address chosen with --server is kept", func(t *testing.T) {
		// a advertises its proxy; b's admin chooses to reach a directly. The membership
		// sync takes a's renewed tokens from a's own view but never its address.
		chosen := bed.Cluster("a").APIServerURL()
		if _, _, err := runJoin(t, "--context", "a", "--peer-context", "b", "--allow-loopback", "--server", chosen, "--wait"); err != nil {
			t.Fatal(err)
		}
		b := clients["b"]
		server := func() (string, error) {
			var s corev1.Secret
			if err := b.Get(context.Background(), client.ObjectKey{Namespace: v1alpha1.DefaultNamespace, Name: "a"}, &s); err != nil {
				return "", err
			}
			cfg, err := kubeconfig.Parse(s.Data[v1alpha1.KubeconfigKey])
			if err != nil {
				return "", err
			}
			return cfg.Host, nil
		}
		// b's Cluster of a: the endpoint and the pin.
		endpoint := func() (string, string, error) {
			var c v1alpha1.Cluster
			if err := b.Get(context.Background(), client.ObjectKey{Name: "a"}, &c); err != nil {
				return "", "", err
			}
			addr := ""
			for _, ep := range c.Spec.KubernetesAPIEndpoints {
				if ep.ClientNetwork == "" {
					addr = ep.ServerAddress
				}
			}
			return addr, c.Annotations[v1alpha1.PinnedServerAnnotation], nil
		}
		// Longer than the membership sync took to put a's advertised address back before
		// the pin (about 30 s), with a's token renewed meanwhile by its own view.
		deadline := time.Now().Add(40 * time.Second)
		for time.Now().Before(deadline) {
			got, err := server()
			if err != nil {
				t.Fatal(err)
			}
			if got != chosen {
				t.Fatalf("b reaches a at %s, not the address its admin chose (%s)", got, chosen)
			}
			addr, pin, err := endpoint()
			if err != nil {
				t.Fatal(err)
			}
			if addr != chosen || pin != chosen {
				t.Fatalf("b's Cluster of a has the endpoint %s (pinned %q), not the address its admin chose (%s)", addr, pin, chosen)
			}
			time.Sleep(300 * time.Millisecond)
		}
		harness.Eventually(t, 30*time.Second, "a stays Ready on b", members(clients, "a", "b", "c"))
		// Joining again without --server re-pins the advertised address.
		if _, _, err := runJoin(t, "--context", "a", "--peer-context", "b", "--allow-loopback", "--wait"); err != nil {
			t.Fatal(err)
		}
		if got, err := server(); err != nil || got != bed.Cluster("a").Host() {
			t.Fatalf("after join without --server, b reaches a at %s (%v), want %s", got, err, bed.Cluster("a").Host())
		}
		harness.Eventually(t, 30*time.Second, "b's Cluster of a is no longer pinned", func() error {
			addr, pin, err := endpoint()
			switch {
			case err != nil:
				return err
			case pin != "" || addr != bed.Cluster("a").Host():
				return fmt.Errorf("endpoint %s, pinned %q; want %s, not pinned", addr, pin, bed.Cluster("a").Host())
			}
			return nil
		})
	})

	t.Run("dry run", func(t *testing.T) {
		beforeA, beforeC := snapshot(t, a), snapshot(t, clients["c"])

		stdout, _, err := runJoin(t, "--context", "a", "--peer-context", "c", "--allow-loopback", "--dry-run=client")
		if err != nil {
			t.Fatal(err)
		}
		golden(t, "dry-run-a-c.golden", stdout)

		// a's API server, under another name its certificate holds.
		server := strings.Replace(bed.Cluster("a").Host(), "127.0.0.1", "localhost", 1)
		// Without --show-secrets the reader Secrets' data (live tokens) is masked.
		stdout, _, err = runJoin(t, "--context", "a", "--peer-context", "c", "--allow-loopback", "--dry-run=client", "-o", "yaml")
		if err != nil {
			t.Fatal(err)
		}
		masked, err := manifests.Decode([]byte(stdout))
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range masked {
			if o.GetKind() != "Secret" {
				continue
			}
			data, _, _ := unstructured.NestedStringMap(o.Object, "data")
			if want := map[string]string{v1alpha1.KubeconfigKey: "Kioq"}; !cmp.Equal(data, want) {
				t.Errorf("Secret %s printed with data %v, want it masked as %v", o.GetName(), data, want)
			}
		}

		stdout, stderr, err := runJoin(t, "--context", "a", "--peer-context", "c", "--allow-loopback", "--dry-run=client", "-o", "yaml", "--show-secrets", "--server", server)
		if err != nil {
			t.Fatal(err)
		}
		if want := "note: context a advertises its API server at " + bed.Cluster("a").Host() + " itself"; !strings.Contains(stderr, want) {
			t.Errorf("stderr %q lacks %q", stderr, want)
		}
		if !strings.HasPrefix(stdout, "# on context c\n") || !strings.Contains(stdout, "---\n# on context a\n") {
			t.Errorf("the YAML does not name the sides:\n%s", stdout)
		}
		objs, err := manifests.Decode([]byte(stdout))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, o := range objs {
			got = append(got, o.GetKind()+"/"+o.GetName())
			if o.GetResourceVersion() != "" || o.GetUID() != "" || o.Object["status"] != nil {
				t.Errorf("%s/%s carries server fields: %v", o.GetKind(), o.GetName(), o.Object)
			}
		}
		if diff := cmp.Diff([]string{"Secret/a", "Cluster/a", "Secret/c", "Cluster/c"}, got); diff != "" {
			t.Errorf("objects (-want +got):\n%s", diff)
		}
		if len(objs) == 4 {
			var s corev1.Secret
			if err := fromUnstructured(objs[0].Object, &s); err != nil {
				t.Fatal(err)
			}
			cfg, err := kubeconfig.Parse(s.Data[v1alpha1.KubeconfigKey])
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != server {
				t.Errorf("the copied reader kubeconfig of a has server %s, want %s", cfg.Host, server)
			}
			var c v1alpha1.Cluster
			if err := fromUnstructured(objs[1].Object, &c); err != nil {
				t.Fatal(err)
			}
			if eps := c.Spec.KubernetesAPIEndpoints; len(eps) != 1 || eps[0].ServerAddress != server {
				t.Errorf("the copied Cluster a has endpoints %+v, want %s", eps, server)
			}
			var cs corev1.Secret
			if err := fromUnstructured(objs[2].Object, &cs); err != nil {
				t.Fatal(err)
			}
			if cfg, err := kubeconfig.Parse(cs.Data[v1alpha1.KubeconfigKey]); err != nil || cfg.Host != bed.Cluster("c").Host() {
				t.Errorf("the copied reader kubeconfig of c: %v, server %v, want %s", err, cfg, bed.Cluster("c").Host())
			}
		}

		// A server-side dry run submits what changes, and writes nothing either.
		stdout, _, err = runJoin(t, "--context", "a", "--peer-context", "c", "--allow-loopback", "--dry-run=server", "--server", server)
		if err != nil {
			t.Fatal(err)
		}
		golden(t, "server-dry-run-a-c.golden", stdout)

		if diff := cmp.Diff(beforeA, snapshot(t, a)); diff != "" {
			t.Errorf("a changed in a dry run (-before +after):\n%s", diff)
		}
		if diff := cmp.Diff(beforeC, snapshot(t, clients["c"])); diff != "" {
			t.Errorf("c changed in a dry run (-before +after):\n%s", diff)
		}
	})

	t.Run("one way", func(t *testing.T) { testOneWay(t, clients) })
}

// testOneWay is the last part of TestJoin: d, which the "registry not installed" subtest left without the
// CRD, gets it back and a controller, and joins a one way.
func testOneWay(t *testing.T, clients map[string]client.Client) {
	ctx := context.Background()
	d := bed.Cluster("d")
	dc, err := d.Client()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifests.Objects()
	if err != nil {
		t.Fatal(err)
	}
	var crds []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			crds = append(crds, o)
		}
	}
	if _, err := serverside.Apply(ctx, dc, v1alpha1.FieldManager, crds); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 30*time.Second, "the Cluster CRD is served on d", func() error {
		fresh, err := d.Client()
		if err != nil {
			return err
		}
		return fresh.List(ctx, &v1alpha1.ClusterList{})
	})
	harness.Serve(t, d)
	harness.Eventually(t, 60*time.Second, "d bootstraps", func() error { return harness.LocalReady(dc, "d") })

	stdout, _, err := runJoin(t, "--context", "d", "--peer-context", "a", "--one-way", "--allow-loopback", "--wait")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "one-way-d-a.golden", stdout)

	// a reads d; d reads nobody; b learns d from a.
	var list v1alpha1.ClusterList
	if err := dc.List(ctx, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "d" {
		t.Errorf("d knows %d Clusters, want only itself", len(list.Items))
	}
	harness.Eventually(t, 60*time.Second, "b learns d from a", func() error {
		state, msg, err := harness.PeerState(clients["b"], "d")
		if err != nil {
			return err
		}
		if state != v1alpha1.ClusterStateReady {
			return fmt.Errorf("d is %q on b: %s", state, msg)
		}
		return nil
	})
}

func fromUnstructured(m map[string]any, into any) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, into)
}
