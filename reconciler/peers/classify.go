package peers

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
)

// Failure classes of a peer, as status messages say them. What a peer's API server
// answers (error bodies, dial errors naming ports and addresses) is a stranger's input
// and, put in a status, would be read back by anyone with a reader token: a member
// pointing this cluster at addresses of its network would get a port scanner. Status
// messages therefore carry only the class; the controller's log has the detail.
const (
	ClassAddressRefused = "address refused by this cluster's policy (loopback, link-local and in-cluster addresses are not dialled; loopback needs serve --allow-loopback-peers)"
	ClassRedirect       = "the API server answered with a redirect, which is refused"
	ClassUnreachable    = "unreachable"
	ClassTLS            = "TLS failed (not the expected CA, or not a TLS server)"
	ClassUnauthorized   = "unauthorized (the reader token is refused)"
	ClassForbidden      = "forbidden (the reader may not read it: see the reader-aggregated ClusterRole there)"
	ClassWrongCluster   = "wrong cluster (the API server reached is not this cluster's)"
	ClassUnexpected     = "unexpected answer"
)

// Classify maps an error of a request to a peer to the Cluster reason and a short
// message that quotes nothing the peer sent.
func Classify(err error) (reason, message string) {
	var status apierrors.APIStatus
	switch {
	case err == nil:
		return v1alpha1.ReasonClusterReachable, ""
	case errors.Is(err, kubeconfig.ErrAddressRefused):
		return v1alpha1.ReasonInvalidAuthInfo, ClassAddressRefused
	case errors.Is(err, kubeconfig.ErrRedirectRefused):
		return v1alpha1.ReasonClusterUnreachable, ClassRedirect
	case errors.Is(err, ErrWrongCluster):
		return v1alpha1.ReasonClusterIDMismatch, ClassWrongCluster
	case apierrors.IsUnauthorized(err):
		return v1alpha1.ReasonInvalidAuthInfo, ClassUnauthorized
	case apierrors.IsForbidden(err):
		return v1alpha1.ReasonInvalidAuthInfo, ClassForbidden
	case isTLS(err):
		return v1alpha1.ReasonClusterUnreachable, ClassTLS
	case errors.As(err, &status) && status.Status().Code != 0:
		if apierrors.IsNotFound(err) {
			// Not an API server, or not a Kubernetes one: a wrong cluster.
			return v1alpha1.ReasonClusterIDMismatch, ClassWrongCluster
		}
		return v1alpha1.ReasonClusterUnreachable, fmt.Sprintf("%s (HTTP %d)", ClassUnexpected, status.Status().Code)
	case isNetwork(err):
		return v1alpha1.ReasonClusterUnreachable, ClassUnreachable
	}
	return v1alpha1.ReasonClusterUnreachable, ClassUnexpected
}

// ErrWrongCluster is returned (wrapped) when the server reached is another cluster than the one expected.
var ErrWrongCluster = errors.New("wrong cluster")

func isTLS(err error) bool {
	var (
		unknownAuthority x509.UnknownAuthorityError
		invalid          x509.CertificateInvalidError
		hostname         x509.HostnameError
		record           tls.RecordHeaderError
		verification     *tls.CertificateVerificationError
		alert            tls.AlertError
	)
	if errors.As(err, &unknownAuthority) || errors.As(err, &invalid) || errors.As(err, &hostname) ||
		errors.As(err, &record) || errors.As(err, &verification) || errors.As(err, &alert) {
		return true
	}
	// Handshake failures without a typed error ("tls: ...").
	return strings.Contains(err.Error(), "tls: ") || strings.Contains(err.Error(), "x509: ")
}

func isNetwork(err error) bool {
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		strings.Contains(err.Error(), "EOF") || strings.Contains(err.Error(), "connection")
}
