package kube

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// String names the target's API server for messages: "the API server at URL (context
// "c")", without the context when none is selected.
func (t Target) String() string {
	if t.Name == "" || t.Config == nil || t.Name == t.Config.Host {
		host := ""
		if t.Config != nil {
			host = t.Config.Host
		}
		return fmt.Sprintf("the API server at %s", host)
	}
	return fmt.Sprintf("the API server at %s (context %q)", t.Config.Host, t.Name)
}

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

// IsAPIStatus reports whether err is an answer of the API server (a Status), as opposed
// to a failure to reach it.
func IsAPIStatus(err error) bool {
	var status apierrors.APIStatus
	return errors.As(err, &status)
}

// ExplainAdmin adds what the user can do about an error of a verb that needs
// cluster-admin on t: doing says what needs it ("installing the registry needs the rights
// to create CRDs, ..."). An error that is no answer of the API server names t.
func ExplainAdmin(err error, t Target, doing string) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%w\n%s (cluster-admin) on %s", err, doing, t)
	case !IsAPIStatus(err) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("talking to %s: %w", t, err)
	default:
		return err
	}
}
