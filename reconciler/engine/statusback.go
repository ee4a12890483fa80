package engine

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// reconcileBack brings the status of a local original from its copies on the peers (rules
// with syncStatusBack): the copy of the first peer by name that has one. It writes only
// the local original: its status, and the annotations recording which generations the
// status corresponds to.
func (e *Engine) reconcileBack(ctx context.Context, it item) error {
	ri, err := e.resource(it.gvk, it.namespace)
	if err != nil {
		return err
	}
	orig, err := ri.Get(ctx, it.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if orig.GetAnnotations()[v1alpha1.OwnershipAnnotation] != "" {
		return nil // a copy itself: its status is its own cluster's
	}
	key := types.NamespacedName{Namespace: it.namespace, Name: it.name}
	peerList := e.opts.Peers.List()
	sort.Slice(peerList, func(i, j int) bool { return peerList[i].Name < peerList[j].Name })
	var copyObj *unstructured.Unstructured
	for _, r := range e.snapshot() {
		if r.compiled == nil || !r.rsr.Spec.SyncStatusBack || r.compiled.GVK != it.gvk {
			continue
		}
		mut, ok := r.compiled.Match(orig)
		if !ok {
			continue
		}
		tk, ok := mut.TargetKey(key)
		if !ok {
			continue
		}
		tgvk := mut.TargetGVK(it.gvk)
		for _, p := range peerList {
			if !p.Ready {
				continue
			}
			c, synced, _ := e.watchers.lookup(p.Name, tgvk, tk.Namespace, tk.Name)
			if synced && c != nil && types.UID(c.GetAnnotations()[v1alpha1.OwnershipAnnotation]) == e.opts.LocalID {
				copyObj = c
				break
			}
		}
		if copyObj != nil {
			break
		}
	}
	if copyObj == nil {
		return nil
	}
	status, hasStatus := copyObj.Object["status"]
	if !hasStatus {
		return nil
	}
	wantAnn := map[string]string{
		v1alpha1.OriginGenerationAnnotation: copyObj.GetAnnotations()[v1alpha1.SourceGenerationAnnotation],
		v1alpha1.CopyGenerationAnnotation:   strconv.FormatInt(copyObj.GetGeneration(), 10),
	}
	ann := orig.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	annChanged := false
	for k, v := range wantAnn {
		if ann[k] != v {
			ann[k] = v
			annChanged = true
		}
	}
	if annChanged {
		orig.SetAnnotations(ann)
		updated, err := ri.Update(ctx, orig, metav1.UpdateOptions{FieldManager: v1alpha1.FieldManager})
		if err != nil {
			return fmt.Errorf("recording the synced generations on %s: %w", it, err)
		}
		orig = updated
	}
	if apiequality.Semantic.DeepEqual(orig.Object["status"], status) {
		return nil
	}
	orig.Object["status"] = runtime.DeepCopyJSONValue(status)
	if _, err := ri.UpdateStatus(ctx, orig, metav1.UpdateOptions{FieldManager: v1alpha1.FieldManager}); err != nil {
		return fmt.Errorf("writing the status of %s from its copy: %w", it, err)
	}
	e.log.Info("status synced back", "object", it.String(), "copyGeneration", wantAnn[v1alpha1.CopyGenerationAnnotation])
	return nil
}
