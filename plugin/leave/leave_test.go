package leave

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/plugintest"
	"github.com/kubectl-registry/kubectl-registry/plugin/join"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/e2e/harness"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner/members"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

var bed *testbed.Bed

func TestMain(m *testing.M) {
	os.Exit(testbed.Main(m, testbed.Options{
		Names:             []string{"a", "b", "c"},
		CRDDirectoryPaths: []string{"../../manifests/crds"},
	}, &bed))
}

func runLeave(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := plugintest.Command{New: []plugintest.NewCmd{NewCmdLeave}, Timeout: 3 * time.Minute}
	return cmd.Run(t, append([]string{"leave", "--kubeconfig", bed.KubeconfigPath, "--timeout", "2m"}, args...)...)
}

func runJoin(t *testing.T, args ...string) {
	t.Helper()
	cmd := plugintest.Command{New: []plugintest.NewCmd{join.NewCmdJoin}, Timeout: 3 * time.Minute}
	if _, _, err := cmd.Run(t, append([]string{"join", "--kubeconfig", bed.KubeconfigPath, "--allow-loopback", "--wait"}, args...)...); err != nil {
		t.Fatalf("join: %v", err)
	}
}

// holds returns the names of the Clusters on cl and the Secrets of its registry namespace.
func holds(cl client.Client) ([]string, error) {
	ctx := context.Background()
	var clusters v1alpha1.ClusterList
	if err := cl.List(ctx, &clusters); err != nil {
		return nil, err
	}
	var secrets corev1.SecretList
	if err := cl.List(ctx, &secrets, client.InNamespace(v1alpha1.DefaultNamespace)); err != nil {
		return nil, err
	}
	var out []string
	names := map[string]string{}
	for _, c := range clusters.Items {
		out = append(out, "cluster/"+c.Name)
		names[string(c.Spec.ClusterID)] = c.Name
	}
	for _, s := range secrets.Items {
		switch {
		case s.Type != v1alpha1.SecretTypeClusterRegistry:
		case s.Labels[v1alpha1.ReaderForLabel] != "":
			// A credential this cluster issued to a peer.
			out = append(out, "credential-for/"+s.Annotations[v1alpha1.PeerClusterNameAnnotation])
		case s.Labels[v1alpha1.ReaderFromLabel] != "":
			// A credential a member issued to this cluster.
			from := s.Annotations[v1alpha1.OwnershipAnnotation]
			if n, ok := names[from]; ok {
				from = n
			}
			out = append(out, "credential-from/"+from)
		default:
			out = append(out, "secret/"+s.Name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// holdsExactly waits until cl holds exactly the Clusters, reader Secrets and reader
// credentials (to and from each other member) of names,
// then checks that it stays so for a while: a departed cluster must not come back.
func holdsExactly(t *testing.T, cl client.Client, on string, names ...string) {
	t.Helper()
	var want []string
	for _, n := range names {
		want = append(want, "cluster/"+n, "secret/"+n)
		if n != on {
			// The reader credentials each member issues to each other.
			want = append(want, "credential-for/"+n, "credential-from/"+n)
		}
	}
	sort.Strings(want)
	check := func() error {
		got, err := holds(cl)
		if err != nil {
			return err
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			return fmt.Errorf("%s holds %v, want %v", on, got, want)
		}
		return nil
	}
	harness.Eventually(t, 90*time.Second, on+" holds "+strings.Join(names, ","), check)
	for range 8 {
		time.Sleep(time.Second)
		if err := check(); err != nil {
			t.Fatalf("after settling: %v", err)
		}
	}
}

// hasEvent checks that an event with reason is recorded on the Cluster named name.
func hasEvent(cl client.Client, name, reason string) error {
	var events corev1.EventList
	if err := cl.List(context.Background(), &events); err != nil {
		return err
	}
	for _, e := range events.Items {
		if e.InvolvedObject.Kind == "Cluster" && e.InvolvedObject.Name == name && e.Reason == reason {
			return nil
		}
	}
	return fmt.Errorf("no %s event on Cluster %s among %d events", reason, name, len(events.Items))
}

func leftEntries(t *testing.T, cl client.Client, name string) members.Departures {
	t.Helper()
	var c v1alpha1.Cluster
	if err := cl.Get(context.Background(), client.ObjectKey{Name: name}, &c); err != nil {
		t.Fatal(err)
	}
	d, bad := members.ParseDepartures(c.Annotations[v1alpha1.LeftClustersAnnotation])
	if len(bad) > 0 {
		t.Fatalf("Cluster %s has unreadable departures: %v", name, bad)
	}
	return d
}

func id(t *testing.T, name string) types.UID {
	t.Helper()
	uid, err := bed.Cluster(name).KubeSystemUID(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return uid
}

// TestLeave forms a group of three with a controller each, and removes members from it
// in the three ways leave offers: from another member, by the cluster itself, and by
// force while the cluster is cut off; each time it joins the cluster back. The subtests
// build on each other.
func TestLeave(t *testing.T) {
	testbed.SkipIfNoAssets(t)
	ctx := context.Background()
	cl := harness.FormGroup(t, bed, "a", "b", "c")
	idC := id(t, "c")

	// b syncs every ClusterFeature of its peers: c's feature is a synced object that must
	// be kept when c leaves. The members' default grant holds none of the registry's
	// kinds: b's admin grants them ClusterFeatures.
	harness.Grant(t, cl, v1alpha1.GroupVersion.Group, "clusterfeatures")
	rule := &v1alpha1.ResourceSyncRule{
		ObjectMeta: metav1.ObjectMeta{Name: "features"},
		Spec: v1alpha1.ResourceSyncRuleSpec{
			GVK:   v1alpha1.GroupVersionKind{Group: v1alpha1.GroupVersion.Group, Version: "v1alpha1", Kind: "ClusterFeature"},
			Rules: []v1alpha1.SyncRule{{}},
		},
	}
	rule.Annotations = map[string]string{v1alpha1.SyncDisabledAnnotation: "true"}
	if err := cl["b"].Create(ctx, rule); err != nil {
		t.Fatal(err)
	}
	feature := &v1alpha1.ClusterFeature{ObjectMeta: metav1.ObjectMeta{Name: "from-c"}, Spec: v1alpha1.ClusterFeatureSpec{FeatureName: "from-c"}}
	if err := cl["c"].Create(ctx, feature); err != nil {
		t.Fatal(err)
	}
	copyOnB := func() error {
		var f v1alpha1.ClusterFeature
		if err := cl["b"].Get(ctx, client.ObjectKey{Name: "from-c"}, &f); err != nil {
			return err
		}
		if f.Annotations[v1alpha1.OwnershipAnnotation] != string(idC) {
			return fmt.Errorf("the ClusterFeature from-c on b is not c's copy: %v", f.Annotations)
		}
		return nil
	}
	harness.Eventually(t, 60*time.Second, "c's feature is synced to b", copyOnB)

	t.Run("an unknown cluster is refused with the members", func(t *testing.T) {
		_, _, err := runLeave(t, "nosuch", "--context", "a")
		plugintest.WantExitCode(t, err, 2)
		if err == nil || !strings.Contains(err.Error(), "context a has no Cluster nosuch") || !strings.Contains(err.Error(), "a, b, c") {
			t.Errorf("error %v", err)
		}
	})

	t.Run("dry run writes nothing", func(t *testing.T) {
		out, _, err := runLeave(t, "c", "--context", "a", "--dry-run=client", "-o", "yaml")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, v1alpha1.ConfirmedDeparturesAnnotation+": "+string(idC)+"@") {
			t.Errorf("dry run output lacks the departure of c:\n%s", out)
		}
		if d := leftEntries(t, cl["a"], "a"); len(d) != 0 {
			t.Errorf("dry run wrote departures %v", d)
		}
	})

	t.Run("from other members: one records it, a second confirms it", func(t *testing.T) {
		out, errOut, err := runLeave(t, "c", "--context", "a")
		if err != nil {
			t.Fatal(err)
		}
		if want := "cluster.clusterregistry.k8s.cisco.com/c: departure recorded on cluster.clusterregistry.k8s.cisco.com/a on context a, not in force yet\n"; out != want {
			t.Errorf("stdout %q, want %q", out, want)
		}
		if want := "kubectl registry leave c --confirm --context <context of that member>"; !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
		// One member's record removes nothing.
		holdsExactly(t, cl["c"], "c", "a", "b", "c")
		holdsExactly(t, cl["b"], "b", "a", "b", "c")
		out, errOut, err = runLeave(t, "c", "--context", "b", "--confirm", "--wait")
		if err != nil {
			t.Fatal(err)
		}
		if want := "cluster.clusterregistry.k8s.cisco.com/c left the group (recorded on cluster.clusterregistry.k8s.cisco.com/b on context b)\n"; out != want {
			t.Errorf("stdout %q, want %q", out, want)
		}
		for _, m := range []string{"a: done", "b: done", "c: done"} {
			if !strings.Contains(errOut, m) {
				t.Errorf("stderr lacks %q:\n%s", m, errOut)
			}
		}
		holdsExactly(t, cl["a"], "a", "a", "b")
		holdsExactly(t, cl["b"], "b", "a", "b")
		holdsExactly(t, cl["c"], "c", "c")
		// The departure spread to b's own Cluster.
		if _, ok := leftEntries(t, cl["b"], "b")[idC]; !ok {
			t.Errorf("b's Cluster does not list c as departed")
		}
		// Synced objects are kept.
		if err := copyOnB(); err != nil {
			t.Errorf("c's feature on b: %v", err)
		}
		// The controllers say what they did: an event on their own Cluster.
		for _, m := range []struct{ on, reason string }{{"a", "ClusterLeft"}, {"b", "ClusterLeft"}, {"c", "LeftGroup"}} {
			harness.Eventually(t, 30*time.Second, m.on+" records "+m.reason, func() error { return hasEvent(cl[m.on], m.on, m.reason) })
		}
	})

	t.Run("again changes nothing", func(t *testing.T) {
		var before v1alpha1.Cluster
		if err := cl["a"].Get(ctx, client.ObjectKey{Name: "a"}, &before); err != nil {
			t.Fatal(err)
		}
		// c is no longer a member as a sees it.
		_, _, err := runLeave(t, "c", "--context", "a")
		plugintest.WantExitCode(t, err, 2)
		// From c itself, which still knows its departure.
		_, errOut, err := runLeave(t, "--context", "c")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(errOut, "already left the group") {
			t.Errorf("stderr %q", errOut)
		}
		var after v1alpha1.Cluster
		if err := cl["a"].Get(ctx, client.ObjectKey{Name: "a"}, &after); err != nil {
			t.Fatal(err)
		}
		if before.Annotations[v1alpha1.LeftClustersAnnotation] != after.Annotations[v1alpha1.LeftClustersAnnotation] {
			t.Errorf("departures changed: %q -> %q", before.Annotations[v1alpha1.LeftClustersAnnotation], after.Annotations[v1alpha1.LeftClustersAnnotation])
		}
	})

	t.Run("join brings it back", func(t *testing.T) {
		runJoin(t, "--context", "c", "--peer-context", "b")
		harness.Eventually(t, 90*time.Second, "the group of three forms again", func() error {
			for _, n := range []string{"a", "b", "c"} {
				if err := harness.Members(cl[n], n, "a", "b", "c"); err != nil {
					return err
				}
			}
			return nil
		})
		harness.Eventually(t, 60*time.Second, "the departure is dropped everywhere", func() error {
			for _, n := range []string{"a", "b", "c"} {
				if d := leftEntries(t, cl[n], n); len(d) != 0 {
					return fmt.Errorf("%s still lists departures %v", n, d)
				}
			}
			return nil
		})
	})

	t.Run("by the cluster itself", func(t *testing.T) {
		if _, _, err := runLeave(t, "--context", "b", "--wait"); err != nil {
			t.Fatal(err)
		}
		holdsExactly(t, cl["a"], "a", "a", "c")
		holdsExactly(t, cl["c"], "c", "a", "c")
		holdsExactly(t, cl["b"], "b", "b")
		runJoin(t, "--context", "b", "--peer-context", "a")
		harness.Eventually(t, 90*time.Second, "the group of three forms again", func() error {
			for _, n := range []string{"a", "b", "c"} {
				if err := harness.Members(cl[n], n, "a", "b", "c"); err != nil {
					return err
				}
			}
			return nil
		})
	})

	t.Run("by force while it is cut off", func(t *testing.T) {
		if err := bed.Cluster("c").Cut(); err != nil {
			t.Fatal(err)
		}
		healed := false
		defer func() {
			if !healed {
				_ = bed.Cluster("c").Heal()
			}
		}()
		// Both members record the departure below, and b's --wait skips c only once b's
		// controller has seen it not Ready: waiting for a alone raced b's health check.
		harness.Eventually(t, 90*time.Second, "a and b see c not Ready", func() error {
			for _, n := range []string{"a", "b"} {
				state, _, err := harness.PeerState(cl[n], "c")
				if err != nil {
					return err
				}
				if state == v1alpha1.ClusterStateReady {
					return fmt.Errorf("c is %s on %s", state, n)
				}
			}
			return nil
		})
		start := time.Now()
		_, _, err := runLeave(t, "c", "--context", "a")
		plugintest.WantExitCode(t, err, 2)
		if err == nil || !strings.Contains(err.Error(), "--force") {
			t.Errorf("error %v does not point at --force", err)
		}
		_, errOut, err := runLeave(t, "c", "--context", "a", "--force")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(errOut, "it takes effect when 1 more record it") {
			t.Errorf("stderr does not say how many more members must confirm:\n%s", errOut)
		}
		_, errOut, err = runLeave(t, "c", "--context", "b", "--confirm", "--wait")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(errOut, "not waiting for c") {
			t.Errorf("stderr does not say c is not waited for:\n%s", errOut)
		}
		if d := time.Since(start); d > time.Minute {
			t.Errorf("leave with a dead peer took %s", d)
		}
		holdsExactly(t, cl["a"], "a", "a", "b")
		holdsExactly(t, cl["b"], "b", "a", "b")
		// c comes back: it learns of its departure from a member and forgets the group.
		if err := bed.Cluster("c").Heal(); err != nil {
			t.Fatal(err)
		}
		healed = true
		holdsExactly(t, cl["c"], "c", "c")
		holdsExactly(t, cl["a"], "a", "a", "b")
	})

	t.Run("the departed cluster's Secret copies are gone", func(t *testing.T) {
		for _, n := range []string{"a", "b"} {
			var s corev1.Secret
			err := cl[n].Get(ctx, client.ObjectKey{Namespace: v1alpha1.DefaultNamespace, Name: "c"}, &s)
			if !apierrors.IsNotFound(err) {
				t.Errorf("%s: Secret c: %v", n, err)
			}
		}
	})
}
