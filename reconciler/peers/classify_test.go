package peers

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
)

// TestClassify: what a peer answers is reduced to a class; nothing it sent reaches the
// message.
func TestClassify(t *testing.T) {
	const secret = "SSH-2.0-OpenSSH_9.2 internal-banner 10.0.0.5:22"
	dial := &url.Error{Op: "Get", URL: "https://10.0.0.5:22/api", Err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused " + secret)}}
	for _, tc := range []struct {
		name       string
		err        error
		wantReason string
		wantMsg    string
	}{
		{"refused address", fmt.Errorf("dial: %w: 169.254.169.254 is link-local", kubeconfig.ErrAddressRefused), v1alpha1.ReasonInvalidAuthInfo, ClassAddressRefused},
		{"redirect", &url.Error{Op: "Get", URL: "x", Err: fmt.Errorf("%w (to another address)", kubeconfig.ErrRedirectRefused)}, v1alpha1.ReasonClusterUnreachable, ClassRedirect},
		{"wrong cluster", fmt.Errorf("%w: "+secret, ErrWrongCluster), v1alpha1.ReasonClusterIDMismatch, ClassWrongCluster},
		{"unauthorized", apierrors.NewUnauthorized(secret), v1alpha1.ReasonInvalidAuthInfo, ClassUnauthorized},
		{"forbidden", apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "kube-system", errors.New(secret)), v1alpha1.ReasonInvalidAuthInfo, ClassForbidden},
		{"not found: not an API server", apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, secret), v1alpha1.ReasonClusterIDMismatch, ClassWrongCluster},
		{"server error", apierrors.NewInternalError(errors.New(secret)), v1alpha1.ReasonClusterUnreachable, ClassUnexpected + " (HTTP 500)"},
		{"TLS", &url.Error{Op: "Get", URL: "x", Err: x509.UnknownAuthorityError{}}, v1alpha1.ReasonClusterUnreachable, ClassTLS},
		{"not TLS", errors.New("tls: first record does not look like a TLS handshake " + secret), v1alpha1.ReasonClusterUnreachable, ClassTLS},
		{"dial error", dial, v1alpha1.ReasonClusterUnreachable, ClassUnreachable},
		{"timeout", fmt.Errorf("get: %w", context.DeadlineExceeded), v1alpha1.ReasonClusterUnreachable, ClassUnreachable},
		{"anything else", errors.New(secret), v1alpha1.ReasonClusterUnreachable, ClassUnexpected},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reason, msg := Classify(tc.err)
			if diff := cmp.Diff([]string{tc.wantReason, tc.wantMsg}, []string{reason, msg}); diff != "" {
				t.Errorf("Classify (-want +got):\n%s", diff)
			}
		})
	}
}
