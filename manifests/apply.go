package manifests

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Outcome is what applying one object did, as `kubectl apply` reports it.
type Outcome string

// The outcomes of Apply.
const (
	Created    Outcome = "created"
	Configured Outcome = "configured"
	Unchanged  Outcome = "unchanged"
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
		outcome, err := applyOne(ctx, c, fieldManager, obj)
		if err != nil {
			return results, fmt.Errorf("applying %s %s: %w", obj.GetKind(), objectName(obj), err)
		}
		results = append(results, Result{Object: obj, Outcome: outcome})
	}
	return results, nil
}

func applyOne(ctx context.Context, c client.Client, fieldManager string, obj *unstructured.Unstructured) (Outcome, error) {
	before := &unstructured.Unstructured{}
	before.SetGroupVersionKind(obj.GroupVersionKind())
	existed := true
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), before); err != nil {
		if !apierrors.IsNotFound(err) {
			return "", err
		}
		existed = false
	}
	after := obj.DeepCopy()
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(after), client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
		return "", err
	}
	switch {
	case !existed:
		return Created, nil
	case before.GetResourceVersion() != after.GetResourceVersion():
		return Configured, nil
	default:
		return Unchanged, nil
	}
}

func objectName(obj *unstructured.Unstructured) string {
	if ns := obj.GetNamespace(); ns != "" {
		return ns + "/" + obj.GetName()
	}
	return obj.GetName()
}
