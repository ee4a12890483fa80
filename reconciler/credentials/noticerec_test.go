package credentials

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner/members"
)

// TestReconcileNotices: the notice token is sealed to the peer with the name of its
// notice; a departure the local cluster records gets that notice (the record, for that
// peer only) while b still holds a credential, and the notice Role lists it; the
// notice stays once b's reader is revoked, and goes when its last notice token expired.
func TestReconcileNotices(t *testing.T) {
	ctx := context.Background()
	keyB := mustKey(t)
	c, r, _ := fixture(t)
	r.PeerKeys.Set(idB, keyB.PublicKey())
	now := t0
	r.Now = func() time.Time { return now }
	readers := v1alpha1.ReadersNamespace(registryNS)
	if _, err := r.Reconcile(ctx, reconcile.Request{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, reconcile.Request{}); err != nil {
		t.Fatal(err)
	}
	var sa corev1.ServiceAccount
	if err := c.Get(ctx, client.ObjectKey{Namespace: readers, Name: v1alpha1.ReaderServiceAccountName(idB)}, &sa); err != nil {
		t.Fatal(err)
	}
	name := sa.Annotations[v1alpha1.DepartureNoticeAnnotation]
	var issued corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: registryNS, Name: v1alpha1.IssuedReaderSecretName(idB)}, &issued); err != nil {
		t.Fatal(err)
	}
	raw, err := keyB.Open(idL, idB, issued.Data[v1alpha1.SealedNoticeKey])
	if err != nil {
		t.Fatalf("b cannot open its notice token: %v", err)
	}
	n, err := members.ParseNotice(raw)
	if err != nil || n.Name != name || n.Token == "" {
		t.Fatalf("b's notice: %+v, %v; want the name %s and a token", n, err, name)
	}
	if _, err := mustKey(t).Open(idL, idB, issued.Data[v1alpha1.SealedNoticeKey]); err == nil {
		t.Error("another key opens b's notice token")
	}
	noticeNames := func() []string {
		var role rbacv1.Role
		if err := c.Get(ctx, client.ObjectKey{Namespace: readers, Name: v1alpha1.NoticeName}, &role); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, rule := range role.Rules {
			if !cmp.Equal(rule.Verbs, []string{"get"}) || !cmp.Equal(rule.Resources, []string{"configmaps"}) || len(rule.ResourceNames) == 0 {
				t.Errorf("notice Role rule %+v grants more than getting named ConfigMaps", rule)
			}
			out = append(out, rule.ResourceNames...)
		}
		return out
	}
	if got := noticeNames(); len(got) != 0 {
		t.Errorf("notice Role lists %v before any departure", got)
	}

	// l's admin records b's departure (leave --force b): the notice.
	recorded := t0.Add(-time.Minute)
	var own v1alpha1.Cluster
	if err := c.Get(ctx, client.ObjectKey{Name: "l"}, &own); err != nil {
		t.Fatal(err)
	}
	own.Annotations = map[string]string{v1alpha1.ConfirmedDeparturesAnnotation: string(idB) + "@" + recorded.Format(time.RFC3339)}
	if err := c.Update(ctx, &own); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, reconcile.Request{}); err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKey{Namespace: readers, Name: name}, &cm); err != nil {
		t.Fatalf("no notice for b: %v", err)
	}
	if want := string(idB) + "@" + recorded.Format(time.RFC3339Nano); cm.Data[v1alpha1.DepartureKey] != want {
		t.Errorf("notice holds %q, want %q", cm.Data[v1alpha1.DepartureKey], want)
	}
	if diff := cmp.Diff([]string{name}, noticeNames()); diff != "" {
		t.Errorf("notice Role (-want +got):\n%s", diff)
	}

	// In force, b's Cluster deleted: b's reader is revoked, its notice stays.
	r.Departed = func(time.Time, []v1alpha1.Cluster) map[types.UID]bool { return map[types.UID]bool{idB: true} }
	if err := c.Delete(ctx, &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "b"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, reconcile.Request{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: readers, Name: v1alpha1.ReaderServiceAccountName(idB)}, &corev1.ServiceAccount{}); err == nil {
		t.Error("b's reader was not revoked")
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: readers, Name: name}, &corev1.ConfigMap{}); err != nil {
		t.Errorf("b's notice went with its reader: %v", err)
	}
	if diff := cmp.Diff([]string{name}, noticeNames()); diff != "" {
		t.Errorf("notice Role after the revocation (-want +got):\n%s", diff)
	}

	// The last notice token issued to b has expired: the notice goes.
	now = t0.Add(r.TokenLifetime + time.Second)
	if _, err := r.Reconcile(ctx, reconcile.Request{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: readers, Name: name}, &corev1.ConfigMap{}); err == nil {
		t.Error("b's notice outlived every notice token")
	}
	if got := noticeNames(); len(got) != 0 {
		t.Errorf("notice Role lists %v once no notice is left", got)
	}
}
