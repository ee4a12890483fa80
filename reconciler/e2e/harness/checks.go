package harness

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

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
