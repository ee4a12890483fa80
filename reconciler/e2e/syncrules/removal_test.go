package syncrules

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

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

// membershipRecords are the annotations by which a member records departures and
// admissions on its own Cluster.
var membershipRecords = []string{
	v1alpha1.LeftClustersAnnotation, v1alpha1.ConfirmedDeparturesAnnotation,
	v1alpha1.AdmittedClustersAnnotation, v1alpha1.JoinedAtAnnotation,
}

// clearRecords removes the departure and admission records from the own Cluster of each
// named cluster of the bed, and every Cluster and registry Secret describing a cluster
// of gone: the bed is shared, and the next test forms its group from nothing. It runs
// after the controllers stopped.
func clearRecords(t *testing.T, names []string, gone ...types.UID) {
	t.Helper()
	ctx := context.Background()
	for _, n := range names {
		c, err := bed.Cluster(n).Client()
		if err != nil {
			t.Errorf("%s: %v", n, err)
			continue
		}
		own := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: n}}
		if err := harness.Update(ctx, c, own, func() {
			for _, k := range membershipRecords {
				delete(own.Annotations, k)
			}
		}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("clearing the records of %s: %v", n, err)
		}
		for _, id := range gone {
			var list v1alpha1.ClusterList
			if err := c.List(ctx, &list); err != nil {
				t.Errorf("%s: %v", n, err)
				continue
			}
			for i := range list.Items {
				if list.Items[i].Spec.ClusterID == id {
					_ = c.Delete(ctx, &list.Items[i])
				}
			}
			var secrets corev1.SecretList
			if err := c.List(ctx, &secrets, client.InNamespace(ns)); err != nil {
				t.Errorf("%s: %v", n, err)
				continue
			}
			for i := range secrets.Items {
				if secrets.Items[i].Annotations[v1alpha1.OwnershipAnnotation] == string(id) || secrets.Items[i].Name == v1alpha1.IssuedReaderSecretName(id) {
					_ = c.Delete(ctx, &secrets.Items[i])
				}
			}
			sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: v1alpha1.ReadersNamespace(ns), Name: v1alpha1.ReaderServiceAccountName(id)}}
			_ = c.Delete(ctx, sa)
		}
	}
}

// annotateOwn sets (or, for "", removes) annotations on the Cluster name of cl, as its
// admin does.
func annotateOwn(t *testing.T, cl client.Client, name string, set map[string]string) {
	t.Helper()
	c := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := harness.Update(context.Background(), cl, c, func() {
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		for k, v := range set {
			if v == "" {
				delete(c.Annotations, k)
			} else {
				c.Annotations[k] = v
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
}

// TestHostileRemoval: the admin of first is hostile and runs no honest controller. In a
// group of three, first alone cannot evict second: a departure of second recorded on
// first's own Cluster, as pending and as in force, and on first's copy of third's
// Cluster, removes nothing. Being removed by second and third (one records it, the
// other confirms it), first cannot keep itself in: a join date and an admission of
// itself dated after the departure, on its own Cluster while the others still read it
// and on its copies of their Clusters, do not cancel it. An admin's join on a member
// brings it back.
func TestHostileRemoval(t *testing.T) {
	testbed.SkipIfNoAssets(t)
	names := []string{"first", "second", "third"}
	// Registered before the controllers start, so it runs after they stop.
	t.Cleanup(func() { clearRecords(t, names) })
	cl, ctls := harness.FormGroupControllers(t, bed, nil, names...)
	first, second, third := cl["first"], cl["second"], cl["third"]
	ctx := context.Background()
	ids := map[string]types.UID{}
	for _, n := range names {
		id, err := bed.Cluster(n).KubeSystemUID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ids[n] = id
	}
	now := func() string { return time.Now().UTC().Format(time.RFC3339Nano) }
	holds := func(on client.Client, onName, want string) error {
		name, ok, err := harness.HoldsClusterOf(on, ids[want])
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%s holds no Cluster of %s", onName, want)
		}
		_ = name
		return nil
	}
	top := t

	t.Run("one member's admin cannot evict another", func(t *testing.T) {
		ctls["first"].Stop(t)
		defer func() {
			annotateOwn(t, first, "first", map[string]string{v1alpha1.LeftClustersAnnotation: "", v1alpha1.ConfirmedDeparturesAnnotation: ""})
			annotateOwn(t, first, "third", map[string]string{v1alpha1.ConfirmedDeparturesAnnotation: ""})
			ctls["first"] = harness.Serve(top, bed.Cluster("first"))
		}()
		at := now()
		annotateOwn(t, first, "first", map[string]string{
			v1alpha1.LeftClustersAnnotation:        string(ids["second"]) + "@" + at,
			v1alpha1.ConfirmedDeparturesAnnotation: string(ids["second"]) + "@" + at,
		})
		// A relayed copy that says third recorded it too.
		annotateOwn(t, first, "third", map[string]string{v1alpha1.ConfirmedDeparturesAnnotation: string(ids["second"]) + "@" + at})
		harness.Stays(t, 15*time.Second, "second stays a member", func() error {
			if err := holds(third, "third", "second"); err != nil {
				return err
			}
			for _, n := range []string{"first", "third"} {
				if err := holds(second, "second", n); err != nil {
					return err
				}
			}
			var own v1alpha1.Cluster
			if err := second.Get(ctx, client.ObjectKey{Name: "second"}, &own); err != nil {
				return err
			}
			if v := own.Annotations[v1alpha1.LeftClustersAnnotation]; strings.Contains(v, string(ids["second"])) {
				return fmt.Errorf("second's controller decided it left: %s", v)
			}
			return nil
		})
	})
	harness.Eventually(t, 90*time.Second, "the group is whole again", func() error {
		for _, n := range names {
			if err := harness.Members(cl[n], n, names...); err != nil {
				return err
			}
		}
		return nil
	})

	t.Run("a removed member's admin cannot keep it in", func(t *testing.T) {
		out := harness.RunCLI(t, bed.KubeconfigPath, "leave", "first", "--context", "second")
		if !strings.Contains(out, "not in force yet") {
			t.Errorf("leave from second alone: %s", out)
		}
		harness.Stays(t, 5*time.Second, "one record removes nothing", func() error { return holds(third, "third", "first") })
		// While second and third still read it, first's admin dates its join and an
		// admission of itself after the departure (within the clock skew allowed), on its
		// own Cluster and on its copies of the others' Clusters.
		ahead := time.Now().Add(2 * time.Minute).UTC().Format(time.RFC3339Nano)
		forged := map[string]string{
			v1alpha1.JoinedAtAnnotation:         ahead,
			v1alpha1.AdmittedClustersAnnotation: string(ids["first"]) + "@" + ahead,
		}
		annotateOwn(t, first, "first", forged)
		for _, n := range []string{"second", "third"} {
			annotateOwn(t, first, n, map[string]string{v1alpha1.AdmittedClustersAnnotation: string(ids["first"]) + "@" + ahead})
		}
		harness.Eventually(t, 30*time.Second, "second and third read first's forgery", func() error {
			for _, n := range []string{"second", "third"} {
				var c v1alpha1.Cluster
				if err := cl[n].Get(ctx, client.ObjectKey{Name: "first"}, &c); err != nil {
					return err
				}
				if c.Annotations[v1alpha1.JoinedAtAnnotation] != ahead {
					return fmt.Errorf("%s's copy of first does not carry the forged join yet", n)
				}
			}
			return nil
		})
		harness.RunCLI(t, bed.KubeconfigPath, "leave", "first", "--confirm", "--context", "third")
		harness.Eventually(t, 60*time.Second, "second and third drop first", func() error {
			for _, n := range []string{"second", "third"} {
				if _, ok, err := harness.HoldsClusterOf(cl[n], ids["first"]); err != nil || ok {
					return fmt.Errorf("%s still holds first (%v)", n, err)
				}
			}
			return nil
		})
		harness.Stays(t, 10*time.Second, "first stays out", func() error {
			for _, n := range []string{"second", "third"} {
				if _, ok, err := harness.HoldsClusterOf(cl[n], ids["first"]); err != nil || ok {
					return fmt.Errorf("%s holds first again (%v)", n, err)
				}
			}
			return nil
		})
		annotateOwn(t, first, "first", map[string]string{v1alpha1.JoinedAtAnnotation: "", v1alpha1.AdmittedClustersAnnotation: ""})
	})

	t.Run("an admin's join on a member brings it back", func(t *testing.T) {
		out := harness.RunCLI(t, bed.KubeconfigPath, "join", "--context", "second", "--peer-context", "first", "--allow-loopback", "--wait", "--timeout", "2m")
		if !strings.Contains(out, "admission of it recorded") {
			t.Errorf("join does not say it recorded the admission:\n%s", out)
		}
		harness.Eventually(t, 120*time.Second, "the group is whole again", func() error {
			for _, n := range names {
				if err := harness.Members(cl[n], n, names...); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

// TestHostileFirstContact: a fourth cluster joins third while second's controller is
// down; first's admin (its controller stopped) relays a fourth of its own making: the
// same name and ID, a fake API server on loopback that answers fourth's kube-system UID
// and accepts any token, its own CA. When second's controller comes back it meets both
// relays: it learns neither, whichever member is senior, and its RelaysAgree condition
// says why, naming both. Once first relays what third relays, second learns fourth,
// pinned to fourth's real API server.
func TestHostileFirstContact(t *testing.T) {
	testbed.SkipIfNoAssets(t)
	names := []string{"first", "second", "third"}
	ctx := context.Background()
	extra, err := testbed.Start(ctx, testbed.Options{Names: []string{"fourth"}, CRDDirectoryPaths: []string{"../../../manifests/crds"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := extra.Stop(); err != nil {
			t.Logf("stopping fourth: %v", err)
		}
	})
	fourthID, err := extra.Cluster("fourth").KubeSystemUID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { clearRecords(t, names, fourthID) })
	cl, ctls := harness.FormGroupControllers(t, bed, nil, names...)
	first, second, third := cl["first"], cl["second"], cl["third"]
	top := t

	// second's controller is down while fourth joins; first's admin stops its own.
	ctls["second"].Stop(t)
	ctls["first"].Stop(t)
	fourth := harness.Install(t, extra.Cluster("fourth"))
	harness.Serve(t, extra.Cluster("fourth"))
	harness.Eventually(t, 60*time.Second, "fourth bootstraps", func() error { return harness.LocalReady(fourth, "fourth") })
	harness.Swap(t, third, fourth, "third")
	harness.Swap(t, fourth, third, "fourth")
	harness.Eventually(t, 60*time.Second, "third and fourth read each other", func() error {
		for _, p := range []struct {
			on   client.Client
			peer string
		}{{third, "fourth"}, {fourth, "third"}} {
			state, msg, err := harness.PeerState(p.on, p.peer)
			if err != nil {
				return err
			}
			if state != v1alpha1.ClusterStateReady {
				return fmt.Errorf("%s is %q: %s", p.peer, state, msg)
			}
		}
		return nil
	})
	var real v1alpha1.Cluster
	if err := third.Get(ctx, client.ObjectKey{Name: "fourth"}, &real); err != nil {
		t.Fatal(err)
	}

	// first's forgery: fourth's Cluster as third relays it, but with a reader Secret for
	// first's fake server and first's own key.
	fake := fakeAPIServer(t, fourthID)
	kc, err := kubeconfig.Render(kubeconfig.Reader{ClusterName: "fourth", Server: fake.URL, CAData: certPEM(fake), Token: fakeToken(time.Now().Add(time.Hour))})
	if err != nil {
		t.Fatal(err)
	}
	forged := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "fourth", Annotations: map[string]string{
		v1alpha1.OwnershipAnnotation: string(fourthID),
	}}, Spec: *real.Spec.DeepCopy()}
	var firstOwn v1alpha1.Cluster
	if err := first.Get(ctx, client.ObjectKey{Name: "first"}, &firstOwn); err != nil {
		t.Fatal(err)
	}
	if k := firstOwn.Annotations[v1alpha1.ReaderPublicKeyAnnotation]; k != "" {
		forged.Annotations[v1alpha1.ReaderPublicKeyAnnotation] = k
	}
	forged.Spec.KubernetesAPIEndpoints = []v1alpha1.KubernetesAPIEndpoint{{ServerAddress: fake.URL}}
	forgedSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: real.Spec.AuthInfo.SecretRef.Name,
		Annotations: map[string]string{v1alpha1.OwnershipAnnotation: string(fourthID)}},
		Type: v1alpha1.SecretTypeClusterRegistry, Data: map[string][]byte{v1alpha1.KubeconfigKey: kc}}
	for _, o := range []client.Object{forgedSecret, forged} {
		if err := first.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("conflicting relays: fourth is not learnt, and second says why", func(t *testing.T) {
		ctls["second"] = harness.Serve(top, bed.Cluster("second"))
		harness.Eventually(t, 60*time.Second, "second reports the conflict on its Cluster", func() error {
			var own v1alpha1.Cluster
			if err := second.Get(ctx, client.ObjectKey{Name: "second"}, &own); err != nil {
				return err
			}
			c, ok := conditions.Get(own.Status.Conditions, v1alpha1.ClusterConditionRelaysAgree)
			if !ok || c.Status != corev1.ConditionFalse || c.Reason != v1alpha1.ReasonConflictingRelays {
				return fmt.Errorf("RelaysAgree is %+v", c)
			}
			for _, want := range []string{"Cluster fourth not learnt", "peer first relays Cluster fourth", fake.URL, "peer third relays Cluster fourth", extra.Cluster("fourth").Host()} {
				if !strings.Contains(c.Message, want) {
					return fmt.Errorf("RelaysAgree's message lacks %q: %s", want, c.Message)
				}
			}
			return nil
		})
		harness.Stays(t, 10*time.Second, "second learns no fourth", func() error {
			if name, ok, err := harness.HoldsClusterOf(second, fourthID); err != nil || ok {
				return fmt.Errorf("second holds Cluster %s of fourth (%v)", name, err)
			}
			return nil
		})
	})

	t.Run("once the relays agree, fourth is learnt, pinned to its real server", func(t *testing.T) {
		for _, o := range []client.Object{forged, forgedSecret} {
			if err := first.Delete(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		ctls["first"] = harness.Serve(top, bed.Cluster("first"))
		harness.Eventually(t, 90*time.Second, "second learns fourth", func() error {
			var s corev1.Secret
			if err := second.Get(ctx, client.ObjectKey{Namespace: ns, Name: real.Spec.AuthInfo.SecretRef.Name}, &s); err != nil {
				return err
			}
			r, ok := kubeconfig.Read(s.Data[v1alpha1.KubeconfigKey])
			if !ok || r.Server != extra.Cluster("fourth").Host() {
				return fmt.Errorf("second's reader Secret of fourth names %q, want %q", r.Server, extra.Cluster("fourth").Host())
			}
			var own v1alpha1.Cluster
			if err := second.Get(ctx, client.ObjectKey{Name: "second"}, &own); err != nil {
				return err
			}
			if !conditions.IsTrue(own.Status.Conditions, v1alpha1.ClusterConditionRelaysAgree) {
				return fmt.Errorf("RelaysAgree is not True: %+v", own.Status.Conditions)
			}
			return nil
		})
	})

	all := append([]string{"fourth"}, names...)
	cl["fourth"] = fourth
	harness.Eventually(t, 90*time.Second, "the group of four forms", func() error {
		for _, n := range all {
			if err := harness.Members(cl[n], n, all...); err != nil {
				return err
			}
		}
		return nil
	})

	// fourth leaves by itself, so that the bed's group is three again.
	annotateOwn(t, fourth, "fourth", map[string]string{v1alpha1.ConfirmedDeparturesAnnotation: string(fourthID) + "@" + time.Now().UTC().Format(time.RFC3339Nano)})
	harness.Eventually(t, 60*time.Second, "the members drop fourth and revoke what they issued it", func() error {
		for _, n := range names {
			if name, ok, err := harness.HoldsClusterOf(cl[n], fourthID); err != nil || ok {
				return fmt.Errorf("%s still holds Cluster %s of fourth (%v)", n, name, err)
			}
			err := cl[n].Get(ctx, client.ObjectKey{Namespace: ns, Name: v1alpha1.IssuedReaderSecretName(fourthID)}, &corev1.Secret{})
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("%s still holds the credential it issued to fourth (%v)", n, err)
			}
		}
		return nil
	})
}
