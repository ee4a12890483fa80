// Package serverside server-side applies manifests and reports, per object, what
// `kubectl apply` would (created, configured, unchanged). It is apart from package
// manifests so that reading the manifests links no client: the plugin's sync-diff, which
// decodes -f files with manifests.Decode, links no controller runtime.
package serverside

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/manifests"
)

// Outcome is what applying one object did, as `kubectl apply` reports it.
type Outcome string

// The outcomes of Apply.
const (
	Created    Outcome = "created"
	Configured Outcome = "configured"
	Unchanged  Outcome = "unchanged"
	// Deleted: install removed an object an earlier install made that the settings no
	// longer ask for (the members' default grant, with --member-grants=none).
	Deleted Outcome = "deleted"
)

// Result is the outcome of applying one object.
type Result struct {
	Object  *unstructured.Unstructured
	Outcome Outcome
}

// Apply server-side applies objs in order with fieldManager, taking ownership of
// conflicting fields, and reports per object whether it was created, configured or
// left unchanged. It stops at the first error, which names the object.
func Apply(ctx context.Context, c client.Client, fieldManager string, objs []*unstructured.Unstructured) ([]Result, error) {
	results := make([]Result, 0, len(objs))
	for _, obj := range objs {
		outcome, _, err := ApplyObject(ctx, c, fieldManager, obj, false)
		if err != nil {
			return results, fmt.Errorf("applying %s %s: %w", obj.GetKind(), manifests.ObjectName(obj), err)
		}
		results = append(results, Result{Object: obj, Outcome: outcome})
	}
	return results, nil
}

// ApplyObject server-side applies obj with fieldManager, taking over conflicting fields,
// and returns the outcome and the object as the API server returned it. It is the one
// apply-and-report of the module: every verb that applies goes through it.
//
// With dryRun the API server persists nothing, and since a dry run does not change the
// resourceVersion the outcome compares the object before and after (without managed
// fields and resourceVersion). Errors are the client's, unwrapped, so that callers can
// tell an API server's answer from an unreachable one.
func ApplyObject(ctx context.Context, c client.Client, fieldManager string, obj *unstructured.Unstructured, dryRun bool) (Outcome, *unstructured.Unstructured, error) {
	before := &unstructured.Unstructured{}
	before.SetGroupVersionKind(obj.GroupVersionKind())
	existed := true
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), before); err != nil {
		if !apierrors.IsNotFound(err) {
			return "", nil, err
		}
		existed = false
	}
	after := obj.DeepCopy()
	opts := []client.ApplyOption{client.FieldOwner(fieldManager), client.ForceOwnership}
	if dryRun {
		opts = append(opts, client.DryRunAll)
	}
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(after), opts...); err != nil {
		return "", nil, err
	}
	switch {
	case !existed:
		return Created, after, nil
	case dryRun && !sameIgnoringBookkeeping(before, after):
		return Configured, after, nil
	case !dryRun && before.GetResourceVersion() != after.GetResourceVersion():
		return Configured, after, nil
	default:
		return Unchanged, after, nil
	}
}

// sameIgnoringBookkeeping compares two versions of an object without their managed
// fields and resource version.
func sameIgnoringBookkeeping(a, b *unstructured.Unstructured) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	for _, u := range []*unstructured.Unstructured{a, b} {
		u.SetManagedFields(nil)
		u.SetResourceVersion("")
	}
	return equality.Semantic.DeepEqual(a.Object, b.Object)
}
