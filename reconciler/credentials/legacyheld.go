package credentials

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig/document"
)

// LegacyExpiryWarning is how long before the credential a legacy peer holds expires the
// controller warns (the LegacyPeer condition's message, and the alert
// KubectlRegistryLegacyCredentialExpiring, which fires at the same time).
const LegacyExpiryWarning = 7 * 24 * time.Hour

// LegacyHeld is what a legacy peer holds of this cluster, as this cluster reads it
// through the peer's reader Secret: the Secret its Cluster of this cluster names, and the
// expiry its token states. A legacy peer's admin copies the credential this cluster
// issues by hand (docs/migrate.md), and the copy stops working at its expiry while the
// controller has long renewed its own: reading the copy is how the controller warns in
// time.
type LegacyHeld struct {
	// Secret is "namespace/name" of the Secret the peer's Cluster of this cluster names
	// ("" when the peer has no Cluster of this cluster).
	Secret string
	// Expires is the expiry the token of that Secret states; zero when unknown.
	Expires time.Time
	// Problem says why Expires is unknown: no Cluster of this cluster on the peer, no
	// such Secret, not readable, or no token with an expiry.
	Problem string
}

// HeldByLegacyPeer returns what the peer holds of the cluster localID: its Cluster of it
// among peerClusters, and the Secret it names, read with get (an error: not readable).
func HeldByLegacyPeer(peerClusters []v1alpha1.Cluster, localID types.UID, get func(namespace, name string) (*corev1.Secret, error)) LegacyHeld {
	var ref *v1alpha1.Cluster
	for i := range peerClusters {
		if peerClusters[i].Spec.ClusterID == localID {
			ref = &peerClusters[i]
			break
		}
	}
	if ref == nil {
		return LegacyHeld{Problem: "the peer has no Cluster of this cluster"}
	}
	// The peer writes the reference (its CRD need not bound it): only a valid name and
	// namespace are read, and shown, so a hostile peer cannot swell this cluster's status.
	sr := ref.Spec.AuthInfo.SecretRef
	if len(validation.IsDNS1123Subdomain(sr.Name)) > 0 || len(validation.IsDNS1123Label(sr.Namespace)) > 0 {
		return LegacyHeld{Problem: fmt.Sprintf("the peer's Cluster %s of this cluster names no valid Secret (namespace %s, name %s)",
			ref.Name, document.Quote(sr.Namespace), document.Quote(sr.Name))}
	}
	h := LegacyHeld{Secret: sr.Namespace + "/" + sr.Name}
	s, err := get(sr.Namespace, sr.Name)
	if err != nil {
		h.Problem = fmt.Sprintf("the Secret %s the peer's Cluster of this cluster names cannot be read: %v", h.Secret, err)
		return h
	}
	r, ok := document.Read(s.Data[v1alpha1.KubeconfigKey])
	if !ok {
		h.Problem = fmt.Sprintf("the Secret %s holds no valid reader kubeconfig", h.Secret)
		return h
	}
	exp, _, ok := document.TokenTimes(r.Token)
	if !ok {
		h.Problem = fmt.Sprintf("the token of the Secret %s states no expiry", h.Secret)
		return h
	}
	h.Expires = exp
	return h
}

// sentence describes h for the LegacyPeer condition at now.
func (h LegacyHeld) sentence(now time.Time) string {
	switch {
	case h.Expires.IsZero():
		return fmt.Sprintf("The credential the peer holds is unknown (%s): copy it to the peer (kubectl registry join --legacy, docs/migrate.md step 5).", h.Problem)
	case !now.Before(h.Expires):
		return fmt.Sprintf("The credential the peer holds (Secret %s there) expired at %s: the peer cannot read this cluster. Copy the current one to it (kubectl registry join --legacy, docs/migrate.md step 5).", h.Secret, h.Expires.UTC().Format(time.RFC3339))
	case h.Expires.Sub(now) < LegacyExpiryWarning:
		return fmt.Sprintf("The credential the peer holds (Secret %s there) expires at %s, within %s: copy the current one to it before then (kubectl registry join --legacy, docs/migrate.md step 5).", h.Secret, h.Expires.UTC().Format(time.RFC3339), LegacyExpiryWarning)
	default:
		return fmt.Sprintf("The credential the peer holds (Secret %s there) expires at %s.", h.Secret, h.Expires.UTC().Format(time.RFC3339))
	}
}
