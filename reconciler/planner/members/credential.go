package members

import (
	"fmt"
	"sync"
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
	out, expires, err := choose(shared, received, x, open)
	if out != shared && !expires.IsZero() && !now.Before(expires) {
		return shared, nil
	}
	return out, err
}

// choose is Choose at no time in particular: it returns, besides Choose's answer, when
// the token of the credential it chooses expires (zero: unknown, or the shared Secret is
// chosen). From then on Choose chooses the shared Secret.
func choose(shared, received *corev1.Secret, x types.UID, open Opener) (*corev1.Secret, time.Time, error) {
	if received == nil || received.Type != v1alpha1.SecretTypeClusterRegistry ||
		received.Annotations[v1alpha1.OwnershipAnnotation] != string(x) {
		return shared, time.Time{}, nil
	}
	sealed := received.Data[v1alpha1.SealedKubeconfigKey]
	if len(sealed) == 0 {
		return shared, time.Time{}, nil // not sealed: never issued so, and never kept so
	}
	if open == nil {
		return shared, time.Time{}, fmt.Errorf("the credential cluster %s issued to this cluster is sealed, and this cluster's key is not loaded yet", x)
	}
	raw, err := open(x, sealed)
	if err != nil {
		return shared, time.Time{}, fmt.Errorf("the credential cluster %s issued to this cluster: %w", x, err)
	}
	r, ok := document.Read(raw)
	if !ok || r.Token == "" {
		return shared, time.Time{}, nil
	}
	expires, _, _ := document.TokenTimes(r.Token)
	pin, ok := document.Read(shared.Data[v1alpha1.KubeconfigKey])
	if !ok || pin.Server == "" {
		return shared, time.Time{}, nil
	}
	data, err := document.Render(document.Reader{ClusterName: "peer", Server: pin.Server, CAData: pin.CAData, Token: r.Token})
	if err != nil {
		return shared, time.Time{}, nil
	}
	out := received.DeepCopy()
	out.Data = map[string][]byte{v1alpha1.KubeconfigKey: data}
	return out, expires, nil
}

// Chooser is Choose with a memory of its last answer for each peer: the controller
// chooses on every reconcile of a peer's Cluster, and opening, reading and rendering the
// same kubeconfig each time cost 7 % of a member's CPU in a first sync among 100 peers.
// The answer is kept for the two Secrets' resourceVersions and the key that opened the
// credential; only the token's expiry is looked at again. Secrets without a
// resourceVersion (not read from an API server) are chosen anew. Safe for concurrent use.
type Chooser struct {
	mu   sync.Mutex
	last map[string]chosen
}

// chosen is a Chooser's last answer for a peer.
type chosen struct {
	// versions are what the answer was chosen from.
	versions [4]string
	x        types.UID
	key      any
	// out is the credential chosen (nil: the shared Secret); err and expires as choose
	// returns them.
	out     *corev1.Secret
	err     error
	expires time.Time
}

// Choose is Choose for the peer name, whose credentials key opens (compared with ==:
// another key chooses anew). The Secret it returns when it is not shared is the same for
// every call until the inputs change: the caller must not change it.
func (c *Chooser) Choose(name string, shared, received *corev1.Secret, x types.UID, now time.Time, key any, open Opener) (*corev1.Secret, error) {
	versions := [4]string{string(shared.UID), shared.ResourceVersion}
	if received != nil {
		versions[2], versions[3] = string(received.UID), received.ResourceVersion
	}
	c.mu.Lock()
	last, ok := c.last[name]
	c.mu.Unlock()
	if !ok || last.versions != versions || last.x != x || last.key != key || shared.ResourceVersion == "" || (received != nil && received.ResourceVersion == "") {
		out, expires, err := choose(shared, received, x, open)
		last = chosen{versions: versions, x: x, key: key, err: err, expires: expires}
		if out != shared {
			last.out = out
		}
		c.mu.Lock()
		if c.last == nil {
			c.last = map[string]chosen{}
		}
		c.last[name] = last
		c.mu.Unlock()
	}
	if last.out == nil || (!last.expires.IsZero() && !now.Before(last.expires)) {
		return shared, last.err
	}
	return last.out, last.err
}

// Forget drops what c keeps of the peer name.
func (c *Chooser) Forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.last, name)
}
