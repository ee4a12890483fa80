package syncrules

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/credentials/seal"
	"github.com/kubectl-registry/kubectl-registry/reconciler/e2e/harness"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner/members"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

// receivedNotice opens, with the key of the member cl is the API server of (holder), the
// departure notice credential issuer sealed to it (v1alpha1.SealedNoticeKey of the
// credential it keeps), as its admin can.
func receivedNotice(cl client.Client, holder, issuer types.UID) (members.Notice, error) {
	ctx := context.Background()
	var s corev1.Secret
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: v1alpha1.ReceivedReaderSecretName(issuer)}, &s); err != nil {
		return members.Notice{}, err
	}
	sealed := s.Data[v1alpha1.SealedNoticeKey]
	if len(sealed) == 0 {
		return members.Notice{}, fmt.Errorf("the credential from %s holds no notice token", issuer)
	}
	var keySecret corev1.Secret
	if err := cl.Get(ctx, client.ObjectKey{Namespace: v1alpha1.ReadersNamespace(ns), Name: v1alpha1.ReaderKeySecretName}, &keySecret); err != nil {
		return members.Notice{}, err
	}
	key, err := seal.ParsePrivateKey(keySecret.Data[v1alpha1.PrivateKeyKey])
	if err != nil {
		return members.Notice{}, err
	}
	raw, err := key.Open(issuer, holder, sealed)
	if err != nil {
		return members.Notice{}, err
	}
	return members.ParseNotice(raw)
}

// TestStoppedDuringRemoval: first's controller is stopped; second and third remove it
// (leave --force, then --confirm) and revoke every credential first held. When first's
// controller starts again it reads none of them, yet learns its departure from their
// departure notices, read with the notice tokens they sealed to it, and forgets the
// group within a minute. The notice token gets first's own notice and nothing else: not
// the registry's objects, not a Secret, not a list of notices. An admin's join brings
// first back.
func TestStoppedDuringRemoval(t *testing.T) {
	testbed.SkipIfNoAssets(t)
	names := []string{"first", "second", "third"}
	t.Cleanup(func() { clearRecords(t, names) })
	cl, ctls := harness.FormGroupControllers(t, bed, nil, names...)
	first := cl["first"]
	ctx := context.Background()
	ids := map[string]types.UID{}
	for _, n := range names {
		id, err := bed.Cluster(n).KubeSystemUID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ids[n] = id
	}
	notices := map[string]members.Notice{}
	harness.Eventually(t, 60*time.Second, "first holds a notice token of second and of third", func() error {
		for _, n := range []string{"second", "third"} {
			nt, err := receivedNotice(first, ids["first"], ids[n])
			if err != nil {
				return fmt.Errorf("from %s: %w", n, err)
			}
			notices[n] = nt
		}
		return nil
	})
	// The server and CA first pinned for second, with a token.
	var pinned corev1.Secret
	if err := first.Get(ctx, client.ObjectKey{Namespace: ns, Name: "second"}, &pinned); err != nil {
		t.Fatal(err)
	}
	pin, ok := kubeconfig.Read(pinned.Data[v1alpha1.KubeconfigKey])
	if !ok {
		t.Fatal("first's reader Secret of second does not read")
	}
	as := func(token string) client.Client {
		data, err := kubeconfig.Render(kubeconfig.Reader{ClusterName: "second", Server: pin.Server, CAData: pin.CAData, Token: token})
		if err != nil {
			t.Fatal(err)
		}
		return harness.ReaderClient(t, data)
	}
	readerData, err := harness.ReceivedKubeconfig(first, ids["first"], ids["second"])
	if err != nil {
		t.Fatal(err)
	}
	reader, _ := kubeconfig.Read(readerData)

	ctls["first"].Stop(t)
	out := harness.RunCLI(t, bed.KubeconfigPath, "leave", "first", "--force", "--context", "second")
	if !strings.Contains(out, "--confirm") {
		t.Errorf("leave --force of first on second does not say how to confirm:\n%s", out)
	}
	harness.RunCLI(t, bed.KubeconfigPath, "leave", "first", "--confirm", "--context", "third")
	harness.Eventually(t, 60*time.Second, "second and third drop first and revoke its reader", func() error {
		for _, n := range []string{"second", "third"} {
			if _, held, err := harness.HoldsClusterOf(cl[n], ids["first"]); err != nil || held {
				return fmt.Errorf("%s still holds first (%v)", n, err)
			}
		}
		// first's reader of second is rejected: the notice is all first can read.
		err := as(reader.Token).List(ctx, &v1alpha1.ClusterList{})
		if !apierrors.IsUnauthorized(err) {
			return fmt.Errorf("first's reader token of second: %v, want Unauthorized", err)
		}
		return nil
	})

	// What the notice token reads on second: its notice, nothing else.
	nc := as(notices["second"].Token)
	var cm corev1.ConfigMap
	if err := nc.Get(ctx, client.ObjectKey{Namespace: v1alpha1.ReadersNamespace(ns), Name: notices["second"].Name}, &cm); err != nil {
		t.Fatalf("first's notice token does not get its notice on second: %v", err)
	}
	if got := cm.Data[v1alpha1.DepartureKey]; !strings.HasPrefix(got, string(ids["first"])+"@") {
		t.Errorf("first's notice on second holds %q, want second's record of first's departure", got)
	}
	for what, err := range map[string]error{
		"list the notices":            nc.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(v1alpha1.ReadersNamespace(ns))),
		"get another notice":          nc.Get(ctx, client.ObjectKey{Namespace: v1alpha1.ReadersNamespace(ns), Name: v1alpha1.DepartureNoticePrefix + "00000000000000000000000000000000"}, &corev1.ConfigMap{}),
		"list Clusters":               nc.List(ctx, &v1alpha1.ClusterList{}),
		"get second's Cluster":        nc.Get(ctx, client.ObjectKey{Name: "second"}, &v1alpha1.Cluster{}),
		"list the registry's Secrets": nc.List(ctx, &corev1.SecretList{}, client.InNamespace(ns)),
		"get kube-system":             nc.Get(ctx, client.ObjectKey{Name: "kube-system"}, &corev1.Namespace{}),
		"list rules":                  nc.List(ctx, &v1alpha1.ResourceSyncRuleList{}),
	} {
		if !apierrors.IsForbidden(err) {
			t.Errorf("first's notice token may %s on second: %v, want Forbidden", what, err)
		}
	}

	start := time.Now()
	ctls["first"] = harness.Serve(t, bed.Cluster("first"))
	harness.Eventually(t, 60*time.Second, "first forgets the group", func() error {
		for _, n := range []string{"second", "third"} {
			if _, held, err := harness.HoldsClusterOf(first, ids[n]); err != nil || held {
				return fmt.Errorf("first still holds %s (%v)", n, err)
			}
		}
		return nil
	})
	t.Logf("first forgot the group %s after its controller started", time.Since(start).Round(time.Second))
	var own v1alpha1.Cluster
	if err := first.Get(ctx, client.ObjectKey{Name: "first"}, &own); err != nil {
		t.Fatal(err)
	}
	if v := own.Annotations[v1alpha1.LeftClustersAnnotation]; !strings.Contains(v, string(ids["first"])) {
		t.Errorf("first's own Cluster does not record its departure: %s=%q", v1alpha1.LeftClustersAnnotation, v)
	}

	t.Run("an admin's join on a member brings it back", func(t *testing.T) {
		harness.RunCLI(t, bed.KubeconfigPath, "join", "--context", "second", "--peer-context", "first", "--allow-loopback", "--wait", "--timeout", "2m")
		harness.Eventually(t, 120*time.Second, "the group is whole again", func() error {
			for _, n := range names {
				if err := harness.Members(cl[n], n, names...); err != nil {
					return err
				}
			}
			return nil
		})
		harness.Eventually(t, 60*time.Second, "second's notice of first goes with the admission", func() error {
			err := cl["second"].Get(ctx, client.ObjectKey{Namespace: v1alpha1.ReadersNamespace(ns), Name: notices["second"].Name}, &corev1.ConfigMap{})
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("second's notice of first: %v, want it deleted", err)
			}
			return nil
		})
	})
}

// TestHostileNotice: first's admin is hostile. With first's controller stopped, it makes
// first unreadable to second (it deletes second's reader and its shared reader on
// first) and serves second a departure notice of second's own, under the name first's
// controller sealed to second, listed in the notice Role. second reads it (its log says
// so), counts it as first's record, one of three, and stays a member: one member's
// notice removes nobody.
func TestHostileNotice(t *testing.T) {
	testbed.SkipIfNoAssets(t)
	names := []string{"first", "second", "third"}
	t.Cleanup(func() { clearRecords(t, names) })
	cl, ctls := harness.FormGroupControllers(t, bed, nil, names...)
	first, second := cl["first"], cl["second"]
	ctx := context.Background()
	ids := map[string]types.UID{}
	for _, n := range names {
		id, err := bed.Cluster(n).KubeSystemUID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ids[n] = id
	}
	var notice members.Notice
	harness.Eventually(t, 60*time.Second, "second holds a notice token of first", func() error {
		var err error
		notice, err = receivedNotice(second, ids["second"], ids["first"])
		return err
	})

	ctls["first"].Stop(t)
	readers := v1alpha1.ReadersNamespace(ns)
	forged := &corev1.ConfigMap{}
	forged.Namespace, forged.Name = readers, notice.Name
	forged.Annotations = map[string]string{v1alpha1.PeerClusterIDAnnotation: string(ids["second"])}
	forged.Data = map[string]string{v1alpha1.DepartureKey: string(ids["second"]) + "@" + time.Now().UTC().Format(time.RFC3339Nano)}
	if err := first.Create(ctx, forged); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = first.Delete(context.Background(), forged) })
	role := &rbacv1.Role{}
	role.Namespace, role.Name = readers, v1alpha1.NoticeName
	if err := harness.Update(ctx, first, role, func() {
		role.Rules = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}, ResourceNames: []string{notice.Name}}}
	}); err != nil {
		t.Fatal(err)
	}
	for _, sa := range []client.ObjectKey{{Namespace: readers, Name: v1alpha1.ReaderServiceAccountName(ids["second"])}, {Namespace: ns, Name: v1alpha1.ReaderName}} {
		if err := first.Delete(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: sa.Namespace, Name: sa.Name}}); err != nil {
			t.Fatal(err)
		}
	}
	harness.Eventually(t, 60*time.Second, "second reads first's forged notice", func() error {
		if !ctls["second"].LogContains("departure notice read") {
			return errors.New("second's log does not say it read a departure notice yet")
		}
		return nil
	})
	harness.Stays(t, 20*time.Second, "second stays a member", func() error {
		for _, n := range []string{"first", "third"} {
			if _, held, err := harness.HoldsClusterOf(second, ids[n]); err != nil || !held {
				return fmt.Errorf("second no longer holds %s (%v)", n, err)
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

	// first's controller again: it issues second a new reader and shared token.
	if err := first.Delete(ctx, forged); err != nil {
		t.Fatal(err)
	}
	ctls["first"] = harness.Serve(t, bed.Cluster("first"))
	harness.Eventually(t, 120*time.Second, "the group is whole again", func() error {
		for _, n := range names {
			if err := harness.Members(cl[n], n, names...); err != nil {
				return err
			}
		}
		return nil
	})
}
