package kube

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Connect returns the client of the one cluster a single-context verb (install,
// uninstall) works on: the context the kubeconfig flags of cmd select.
func Connect(f Factory, cmd *cobra.Command, o ClientOptions) (client.Client, Target, error) {
	targets, err := f.Targets(cmd, nil)
	if err != nil {
		return nil, Target{}, err
	}
	t := targets[0]
	c, err := f.Client(t, o)
	if err != nil {
		return nil, t, err
	}
	return c, t, nil
}

// Ping checks within timeout that the API server of t answers, and returns the cluster
// ID (the UID of kube-system), or "" when the user may not read it: an answer of the API
// server, even a refusal, is not an error.
func Ping(ctx context.Context, c client.Client, t Target, timeout time.Duration) (types.UID, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var ns corev1.Namespace
	err := c.Get(ctx, client.ObjectKey{Name: metav1.NamespaceSystem}, &ns)
	switch {
	case err == nil:
		return ns.UID, nil
	case IsAPIStatus(err):
		return "", nil
	default:
		return "", fmt.Errorf("cannot reach %s: %w", t, err)
	}
}
