package members

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig/document"
)

// Opener opens a credential that issuer sealed to this cluster (seal.Key.Open for the
// local cluster as recipient).
type Opener func(issuer types.UID, sealed []byte) ([]byte, error)

// Choose returns the Secret a connection to cluster x uses: the token of the credential
// x issued to this cluster (received, nil when there is none; opened with open), for
// the server and CA of x's shared reader Secret (the pinned ones: re-pinning x there
// moves the credential too), while it is a sealed copy of x's with a usable kubeconfig
// whose token has not expired; else x's shared reader Secret itself, the bootstrap
// credential. A credential that does not open (open nil, or another key) is not used;
// the error says why. The controller (reconciler/clusters) and "kubectl registry leave"
// both choose with it.
func Choose(shared, received *corev1.Secret, x types.UID, now time.Time, open Opener) (*corev1.Secret, error) {
	if received == nil || received.Type != v1alpha1.SecretTypeClusterRegistry ||
		received.Annotations[v1alpha1.OwnershipAnnotation] != string(x) {
		return shared, nil
	}
	sealed := received.Data[v1alpha1.SealedKubeconfigKey]
	if len(sealed) == 0 {
		return shared, nil // not sealed: never issued so, and never kept so
	}
	if open == nil {
		return shared, fmt.Errorf("the credential cluster %s issued to this cluster is sealed, and this cluster's key is not loaded yet", x)
	}
	raw, err := open(x, sealed)
	if err != nil {
		return shared, fmt.Errorf("the credential cluster %s issued to this cluster: %w", x, err)
	}
	r, ok := document.Read(raw)
	if !ok || r.Token == "" {
		return shared, nil
	}
	if exp, _, ok := document.TokenTimes(r.Token); ok && !now.Before(exp) {
		return shared, nil
	}
	pin, ok := document.Read(shared.Data[v1alpha1.KubeconfigKey])
	if !ok || pin.Server == "" {
		return shared, nil
	}
	data, err := document.Render(document.Reader{ClusterName: "peer", Server: pin.Server, CAData: pin.CAData, Token: r.Token})
	if err != nil {
		return shared, nil
	}
	out := received.DeepCopy()
	out.Data = map[string][]byte{v1alpha1.KubeconfigKey: data}
	return out, nil
}
