// Package serverapply server-side applies one object with the plugin's field manager and
// explains what went wrong, for the verbs that write objects a user gives (apply,
// create, edit): shared here so that no verb imports another.
package serverapply

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/manifests/serverside"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// ContextTimeout bounds the work on one context.
const ContextTimeout = 30 * time.Second

// Object server-side applies obj with the plugin's field manager and reports the
// outcome: serverside.ApplyObject with v1alpha1.FieldManager.
func Object(ctx context.Context, c client.Client, obj *unstructured.Unstructured, dryRun bool) (serverside.Outcome, *unstructured.Unstructured, error) {
	return serverside.ApplyObject(ctx, c, v1alpha1.FieldManager, obj, dryRun)
}

// ObjectRef names obj as kubectl's name printer does: "kind.group/name".
func ObjectRef(obj *unstructured.Unstructured) string {
	var b strings.Builder
	p := &printers.NamePrinter{}
	if err := p.PrintObj(obj, &b); err != nil {
		return strings.ToLower(obj.GetKind()) + "/" + obj.GetName()
	}
	return strings.TrimSpace(b.String())
}

// Explain wraps an error of applying obj to t with what the user needs to act on it.
func Explain(err error, obj *unstructured.Unstructured, t kube.Target) error {
	ref := ObjectRef(obj)
	if ns := obj.GetNamespace(); ns != "" {
		ref += " in namespace " + ns
	}
	switch {
	case meta.IsNoMatchError(err):
		hint := ""
		if obj.GroupVersionKind().Group == v1alpha1.GroupVersion.Group {
			hint = "; is the registry installed? run: kubectl registry install --context " + t.Name
		}
		return fmt.Errorf("applying %s: the API server at %s does not serve kind %s%s: %w", ref, t.Config.Host, obj.GroupVersionKind(), hint, err)
	case IsAPIStatus(err):
		return fmt.Errorf("applying %s: %w", ref, err)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("applying %s: no answer from the API server at %s: %w", ref, t.Config.Host, err)
	default:
		return fmt.Errorf("cannot reach the API server at %s: %w", t.Config.Host, err)
	}
}

// IsAPIStatus reports whether err is an API server's answer (a Status), not a failure
// to reach it.
func IsAPIStatus(err error) bool {
	var status apierrors.APIStatus
	return errors.As(err, &status)
}
