package peers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
)

// ReadNotice gets the ConfigMap name of namespace from the API server at server (CA ca:
// the ones pinned for the peer, never what the peer offers) with token, through the
// address policy and the default byte limits: one request, a departure notice (see
// v1alpha1.NoticeName). A missing notice, or one the token may not get, is an API error
// (apierrors.IsNotFound, IsForbidden).
func ReadNotice(ctx context.Context, server string, ca []byte, token string, addresses kubeconfig.AddressPolicy, namespace, name string) (*corev1.ConfigMap, error) {
	data, err := kubeconfig.Render(kubeconfig.Reader{ClusterName: "peer", Server: server, CAData: ca, Token: token})
	if err != nil {
		return nil, fmt.Errorf("rendering the departure notice credential: %w", err)
	}
	cfg, err := kubeconfig.Parse(data)
	if err != nil {
		return nil, err
	}
	if err := addresses.Guard(cfg); err != nil {
		return nil, err
	}
	requests, _, err := kubeconfig.HTTPClients(cfg)
	if err != nil {
		return nil, err
	}
	requests = Limited(requests, Limits{}, nil)
	c, err := corev1client.NewForConfigAndClient(cfg, requests)
	if err != nil {
		return nil, err
	}
	return c.ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
}
