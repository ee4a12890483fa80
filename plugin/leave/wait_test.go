package leave

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube/kubefake"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/plugintest"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
)

// selfLeaver returns a Factory whose context b is a member of the group a, b that leaves
// by itself: its controller (stood in for by a Patch interceptor) drops its Cluster of a
// once the departure is recorded. Member a answers reads with the credential it issued
// to b while it has (accepted) of them, then rejects it with 401 Unauthorized, as a
// member that revoked it; each call to a is counted in calls.
func selfLeaver(t *testing.T, accepted int32, calls *atomic.Int32) *kubefake.Factory {
	t.Helper()
	ks := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: metav1.NamespaceSystem, UID: "id-b"}}
	data, err := kubeconfig.Render(kubeconfig.Reader{ClusterName: "a", Server: kubefake.Host("a"), Token: "issued-to-b"})
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: v1alpha1.DefaultNamespace, Name: "a"},
		Type:       v1alpha1.SecretTypeClusterRegistry,
		Data:       map[string][]byte{v1alpha1.KubeconfigKey: data},
	}
	f := kubefake.New(nil)
	f.AddWithFuncs("a", interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if calls.Add(1) > accepted {
				return apierrors.NewUnauthorized("Unauthorized")
			}
			return c.List(ctx, list, opts...)
		},
	}, fakeCluster("a", true), fakeCluster("b", true))
	b := f.AddWithFuncs("b", interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if err := c.Patch(ctx, obj, patch, opts...); err != nil {
				return err
			}
			return c.Delete(ctx, &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "a"}})
		},
	}, ks, fakeCluster("a", true), fakeCluster("b", true), secret)
	b.Kubernetes = k8sfake.NewClientset(ks.DeepCopy())
	f.Current = "b"
	return f
}

// runWait runs "kubectl registry leave <args>" against f as runFake does, polling every
// 10ms.
func runWait(t *testing.T, f *kubefake.Factory, args ...string) (stderr string, err error) {
	t.Helper()
	streams, _, _, errOut := genericiooptions.NewTestIOStreams()
	o := NewOptions(f, streams)
	o.Now = func() time.Time { return now }
	o.PollInterval = 10 * time.Millisecond
	err = plugintest.RunVerb(t, newCmdLeave(o), args...)
	return errOut.String(), err
}

// TestWaitSelfLeave: a cluster that leaves by itself can read the other members only with
// the credentials they issued to it, and they revoke those once they have dropped it.
// --wait takes a member's rejection of a credential it accepted before the departure was
// recorded as that member being done, however late the member revokes it compared with
// the polls (the API server accepts a revoked token for up to about 10 s: a member that
// dropped the cluster and revoked its credential between two polls used to be waited for
// until --timeout, CI's TestLeave "by the cluster itself"). A credential rejected from the
// start proves nothing and is waited for.
func TestWaitSelfLeave(t *testing.T) {
	t.Run("revoked after the departure is recorded", func(t *testing.T) {
		var calls atomic.Int32
		// The read before the departure is recorded is accepted; every poll is rejected.
		f := selfLeaver(t, 1, &calls)
		stderr, err := runWait(t, f, "--context", "b", "--wait", "--timeout", "5s")
		if err != nil {
			t.Fatalf("leave --wait: %v\nstderr:\n%s", err, stderr)
		}
		for _, want := range []string{"b: done\n", "a: done (it revoked the credential it issued to the departed cluster, which it does once it has dropped it)\n"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, stderr)
			}
		}
	})

	t.Run("rejected from the start", func(t *testing.T) {
		var calls atomic.Int32
		f := selfLeaver(t, 0, &calls)
		stderr, err := runWait(t, f, "--context", "b", "--wait", "--timeout", "500ms")
		if err == nil || !strings.Contains(err.Error(), "a: cannot list its Clusters: Unauthorized") {
			t.Errorf("leave --wait: %v, want a time-out waiting for a\nstderr:\n%s", err, stderr)
		}
	})

	t.Run("another member's leave: a rejection is not done", func(t *testing.T) {
		// From member b, a leaves: b reads a with the credential a issued to b, which a
		// does not revoke; a rejection is a failure to read, waited through.
		var calls atomic.Int32
		f := selfLeaver(t, 1, &calls)
		stderr, err := runWait(t, f, "a", "--context", "b", "--wait", "--timeout", "500ms")
		if err == nil || !strings.Contains(err.Error(), "a: cannot list its Clusters: Unauthorized") {
			t.Errorf("leave --wait: %v, want a time-out waiting for a\nstderr:\n%s", err, stderr)
		}
	})
}
