package planner

import (
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// ErrNamespaceMissing: the copy's namespace does not exist and the rule does not create
// namespaces.
var ErrNamespaceMissing = errors.New("namespace does not exist in this cluster")

// WriteFailure is a write of a copy that the local API server refused, classified.
type WriteFailure struct {
	// Reason is the condition reason (v1alpha1.ReasonImmutableField, ...).
	Reason string
	// Fields are the fields the API server named, for immutable and invalid copies.
	Fields []string
	// Message is the API server's answer, short.
	Message string
	// Lasting is true when retrying the same content cannot succeed (an immutable field):
	// the copy waits for its source to change.
	Lasting bool
}

// ClassifyWriteError classifies the local API server's answer to a create or update of a
// copy. It is pure: sync-diff and the tests call it with the same errors.
func ClassifyWriteError(err error) WriteFailure {
	msg := err.Error()
	if len(msg) > 400 {
		msg = msg[:400] + "..."
	}
	f := WriteFailure{Reason: v1alpha1.ReasonWriteFailed, Message: msg}
	switch {
	case errors.Is(err, ErrNamespaceMissing):
		f.Reason = v1alpha1.ReasonNamespaceMissing
	case apierrors.IsInvalid(err):
		f.Reason = v1alpha1.ReasonInvalidCopy
		var st apierrors.APIStatus
		if errors.As(err, &st) && st.Status().Details != nil {
			for _, c := range st.Status().Details.Causes {
				if immutableCause(c) {
					f.Reason, f.Lasting = v1alpha1.ReasonImmutableField, true
				}
			}
			for _, c := range st.Status().Details.Causes {
				if c.Field != "" && (f.Reason != v1alpha1.ReasonImmutableField || immutableCause(c)) {
					f.Fields = appendOnce(f.Fields, c.Field)
				}
			}
		}
	case apierrors.IsRequestEntityTooLargeError(err) || strings.Contains(msg, "too large"):
		f.Reason = v1alpha1.ReasonCopyTooLarge
	case apierrors.IsForbidden(err) && memberNotGranted(msg):
		f.Reason = v1alpha1.ReasonNotGranted
		f.Message = msg + " (grant the member's identity with a RoleBinding or ClusterRoleBinding: docs/rules.md, \"What a member may write\")"
	case apierrors.IsForbidden(err):
		f.Reason = v1alpha1.ReasonWriteForbidden
	}
	return f
}

// memberNotGranted reports whether a Forbidden answer is RBAC's refusal of a member's
// identity (v1alpha1.MemberUser), not an admission plugin's.
func memberNotGranted(msg string) bool {
	i := strings.Index(msg, `User "system:serviceaccount:`)
	if i < 0 {
		return false
	}
	rest := msg[i+len(`User "system:serviceaccount:`):]
	ns, name, ok := strings.Cut(rest, ":")
	return ok && ns != "" && strings.HasPrefix(name, v1alpha1.MemberIdentityPrefix) && strings.Contains(rest, `" cannot `)
}

// immutableCause reports whether a cause of an Invalid answer is a field that cannot be
// changed: "field is immutable", "may not change once set", or a kind's own "updates to
// ... are forbidden" (a StatefulSet's spec).
func immutableCause(c metav1.StatusCause) bool {
	m := strings.ToLower(c.Message)
	return strings.Contains(m, "immutable") || strings.Contains(m, "may not change once set") ||
		(c.Type == metav1.CauseTypeForbidden && strings.Contains(m, "updates to") && strings.Contains(m, "forbidden"))
}

func appendOnce(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// String says what happened, for the rule's status and events.
func (f WriteFailure) String() string {
	switch {
	case f.Reason == v1alpha1.ReasonImmutableField && len(f.Fields) > 0:
		return fmt.Sprintf("the source changed %s, which this cluster cannot update in place (set spec.onImmutableChange: Recreate to replace the copy): %s",
			strings.Join(f.Fields, ", "), f.Message)
	case f.Reason == v1alpha1.ReasonImmutableField:
		return "the source changed a field this cluster cannot update in place (set spec.onImmutableChange: Recreate to replace the copy): " + f.Message
	}
	return f.Message
}
