package harness

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// Stays checks that f keeps returning nil for d: something that must not happen does not.
func Stays(t *testing.T, d time.Duration, what string, f func() error) {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if err := f(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
}

// HoldsClusterOf returns the name of the Cluster of the cluster id that cl holds, and
// whether it holds one.
func HoldsClusterOf(cl client.Client, id types.UID) (string, bool, error) {
	var list v1alpha1.ClusterList
	if err := cl.List(context.Background(), &list); err != nil {
		return "", false, err
	}
	for _, c := range list.Items {
		if c.Spec.ClusterID == id {
			return c.Name, true, nil
		}
	}
	return "", false, nil
}

// RunCLI runs the built kubectl-registry with the kubeconfig and returns its output; it
// fails the test when the command fails.
func RunCLI(t *testing.T, kubeconfig string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, Binary(t), append(args, "--kubeconfig", kubeconfig)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl registry %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// CredentialsExchanged checks that every named member (a key of clients, whose local
// Cluster has its name) has issued each of the others a reader credential and holds the
// one each of the others issued it. A member is Ready to its peers while they still read
// it with its bootstrap credential, so Members alone does not say the exchange is over:
// a test that compares snapshots of a group waits for this first.
func CredentialsExchanged(clients map[string]client.Client, names ...string) error {
	ctx := context.Background()
	ids := map[string]types.UID{}
	for _, n := range names {
		var c v1alpha1.Cluster
		if err := clients[n].Get(ctx, client.ObjectKey{Name: n}, &c); err != nil {
			return fmt.Errorf("the local Cluster of %s: %w", n, err)
		}
		ids[n] = c.Spec.ClusterID
	}
	for _, x := range names {
		for _, y := range names {
			if x == y {
				continue
			}
			for _, name := range []string{v1alpha1.IssuedReaderSecretName(ids[y]), v1alpha1.ReceivedReaderSecretName(ids[y])} {
				if err := clients[x].Get(ctx, client.ObjectKey{Namespace: v1alpha1.DefaultNamespace, Name: name}, &corev1.Secret{}); err != nil {
					return fmt.Errorf("on %s, the credential Secret %s (peer %s): %w", x, name, y, err)
				}
			}
		}
	}
	return nil
}
