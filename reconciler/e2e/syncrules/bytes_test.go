package syncrules

import (
	"context"
	"encoding/pem"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/e2e/harness"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
	"github.com/kubectl-registry/kubectl-registry/reconciler/peers/hostilepeer"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

// TestHostilePeerBytes: second's admin is given two Clusters whose API servers are
// hostile fakes on loopback (peers/hostilepeer): one answers the list of Clusters with
// 100,000 of them, the other answers every health check with a kube-system namespace of
// 300 MB; both are streamed, never held, by the fakes. Second's controller (the built
// binary, with its default limits) reads neither whole: each peer is refused with reason
// MembershipRefused on its Cluster's Ready condition, none of the 100,000 Clusters is
// taken, the controller keeps running, and its RSS stays far under the Deployment's
// 256 MiB limit.
func TestHostilePeerBytes(t *testing.T) {
	testbed.SkipIfNoAssets(t)
	names := []string{"first", "second", "third"}
	cl, controllers := harness.FormGroupControllers(t, bed, nil, names...)
	second := cl["second"]
	ctx := context.Background()

	many := hostilepeer.New("uid-hostile-many")
	many.Clusters = 100000
	defer many.Close()
	huge := hostilepeer.New("uid-hostile-huge")
	huge.HugeNamespaceBytes = 300 << 20
	defer huge.Close()

	// Settled: the group formed, its peers synced.
	time.Sleep(5 * time.Second)
	// Every controller: the others see the hostile Clusters relayed by second, and check
	// the relayed reader Secrets against the fakes.
	before, peak := map[string]int64{}, map[string]int64{}
	for _, n := range names {
		rss, err := rssBytes(controllers[n].Pid())
		if err != nil {
			t.Fatal(err)
		}
		before[n], peak[n] = rss, rss
	}
	for _, h := range []struct {
		name string
		srv  *hostilepeer.Server
	}{{"hostile-many", many}, {"hostile-huge", huge}} {
		ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: h.srv.Certificate().Raw})
		kc, err := kubeconfig.Render(kubeconfig.Reader{ClusterName: h.name, Server: h.srv.URL, CAData: ca, Token: "hostile-token"})
		if err != nil {
			t.Fatal(err)
		}
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: h.name}, Type: v1alpha1.SecretTypeClusterRegistry,
			Data: map[string][]byte{v1alpha1.KubeconfigKey: kc}}
		cluster := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: h.name}, Spec: v1alpha1.ClusterSpec{ClusterID: types.UID("uid-" + h.name),
			AuthInfo: v1alpha1.AuthInfo{SecretRef: v1alpha1.NamespacedName{Name: h.name}}}}
		t.Cleanup(func() {
			for _, n := range names {
				_ = cl[n].Delete(ctx, &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: h.name}})
				_ = cl[n].Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: h.name}})
			}
		})
		if err := second.Create(ctx, secret); err != nil {
			t.Fatal(err)
		}
		if err := second.Create(ctx, cluster); err != nil {
			t.Fatal(err)
		}
	}
	sample := func() {
		for _, n := range names {
			if rss, err := rssBytes(controllers[n].Pid()); err == nil && rss > peak[n] {
				peak[n] = rss
			}
		}
	}
	for _, h := range []struct{ name, says string }{
		{"hostile-many", "more than 1000 items"},
		{"hostile-huge", "larger than 3 MiB"},
	} {
		harness.Eventually(t, 90*time.Second, h.name+" refused on second", func() error {
			sample()
			var c v1alpha1.Cluster
			if err := second.Get(ctx, client.ObjectKey{Name: h.name}, &c); err != nil {
				return err
			}
			for _, cond := range c.Status.Conditions {
				if cond.Type == v1alpha1.ClusterConditionReady {
					if cond.Status != corev1.ConditionFalse || cond.Reason != v1alpha1.ReasonMembershipRefused || !strings.Contains(cond.Message, h.says) {
						return fmt.Errorf("Ready: %s %s %q", cond.Status, cond.Reason, cond.Message)
					}
					if c.Status.State != v1alpha1.ClusterStateFailed {
						return fmt.Errorf("state %s", c.Status.State)
					}
					return nil
				}
			}
			return fmt.Errorf("no Ready condition: %+v", c.Status)
		})
	}
	// A while more: the peers stay refused, nothing of them is taken.
	for range 10 {
		sample()
		time.Sleep(time.Second)
	}
	var clusters v1alpha1.ClusterList
	if err := second.List(ctx, &clusters); err != nil {
		t.Fatal(err)
	}
	if len(clusters.Items) != len(names)+2 {
		t.Errorf("second has %d Clusters, want the group's %d and the two hostile ones", len(clusters.Items), len(names))
	}
	for _, n := range names {
		if !controllers[n].Running() {
			t.Fatalf("%s's controller exited", n)
		}
		t.Logf("%s's controller RSS: %d MiB before, %d MiB at most while the hostile peers were refused", n, before[n]>>20, peak[n]>>20)
		if peak[n] > 160<<20 || peak[n]-before[n] > 64<<20 {
			t.Errorf("%s's controller grew from %d to %d MiB (the Deployment's limit is %d MiB)", n, before[n]>>20, peak[n]>>20, controllerMemoryLimit>>20)
		}
	}
	t.Logf("the fakes wrote %d KiB (100,000 Clusters, at most %d KiB to one request) and %d KiB (300 MB namespace, at most %d KiB to one request)",
		many.Written.Load()>>10, many.MaxWritten.Load()>>10, huge.Written.Load()>>10, huge.MaxWritten.Load()>>10)
	// What one request was sent includes what the sockets buffer on loopback.
	if w := huge.MaxWritten.Load(); w > 32<<20 {
		t.Errorf("a controller read %d MiB of the 300 MB namespace in one request", w>>20)
	}
}
