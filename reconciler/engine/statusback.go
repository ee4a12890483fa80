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
	"github.com/kubectl-registry/kubectl-registry/reconciler/engine/rulestatus"
	"github.com/kubectl-registry/kubectl-registry/reconciler/engine/writer"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner"
)

// reconcileBack brings the status of a local original from its copies on the peers (rules
// with syncStatusBack): the copy with a status of the Ready peer with the lowest cluster
// ID that has one. It writes only the local original: its status, and the annotations recording
// which generations the status corresponds to. The peer's copy passes the checks a copy
// passes (backCheck): a rule the policy refuses brings nothing back, nor does a
// quarantined peer, and the original with the peer's status must be a copy this
// cluster's policy would accept from that peer.
func (e *Engine) reconcileBack(ctx context.Context, it item) error {
	ri, err := e.writes.Client(writer.Self, it.gvk, it.namespace)
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
	policy, err := e.policy(ctx)
	if err != nil {
		return err
	}
	copyObj, from, fromPeer := e.backSource(it, orig, policy)
	if copyObj == nil {
		return nil
	}
	from.track.Record(it, false, "", rulestatus.Failure{}) // forgets a refusal of an earlier look
	status, hasStatus := copyObj.Object["status"]
	if !hasStatus {
		return nil
	}
	wantAnn := map[string]string{
		v1alpha1.OriginGenerationAnnotation: copyObj.GetAnnotations()[v1alpha1.SourceGenerationAnnotation],
		v1alpha1.CopyGenerationAnnotation:   strconv.FormatInt(copyObj.GetGeneration(), 10),
	}
	// Written as the member whose copy brings the status: what it may change of an
	// original made here is this cluster's RBAC's to say (writer/identity.go).
	m, err := e.writes.Mapping(it.gvk)
	if err != nil {
		return fmt.Errorf("kind %s is not served by the local cluster: %w", it.gvk, err)
	}
	w, err := e.writes.Of(policy, fromPeer, "", false)
	if err != nil {
		return err
	}
	wri, err := e.writes.Resource(w, m, it.namespace)
	if err != nil {
		return err
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
		updated, err := wri.Update(ctx, orig, metav1.UpdateOptions{FieldManager: v1alpha1.FieldManager})
		if err != nil {
			backFailed(from, it, err)
			return fmt.Errorf("recording the synced generations on %s: %w", it, err)
		}
		orig = updated
	}
	if apiequality.Semantic.DeepEqual(orig.Object["status"], status) {
		return nil
	}
	orig.Object["status"] = runtime.DeepCopyJSONValue(status)
	if _, err := wri.UpdateStatus(ctx, orig, metav1.UpdateOptions{FieldManager: v1alpha1.FieldManager}); err != nil {
		backFailed(from, it, err)
		return fmt.Errorf("writing the status of %s from its copy: %w", it, err)
	}
	e.log.Info("status synced back", "object", it.String(), "copyGeneration", wantAnn[v1alpha1.CopyGenerationAnnotation])
	return nil
}

// backSource returns the peer's copy whose status comes back to the local original orig:
// of the first rule by name with syncStatusBack that matches it and runs here, the copy
// with a status of the Ready, unquarantined peer with the lowest cluster ID whose copy
// passes backCheck (a refused copy is reported on the rule); nil when there is none.
func (e *Engine) backSource(it item, orig *unstructured.Unstructured, policy planner.Policy) (copyObj *unstructured.Unstructured, from *ruleEntry, fromPeer types.UID) {
	key := types.NamespacedName{Namespace: it.namespace, Name: it.name}
	peerList := e.opts.Peers.List()
	sort.Slice(peerList, func(i, j int) bool { return peerList[i].ClusterID < peerList[j].ClusterID })
	for _, r := range e.snapshot() {
		if r.compiled == nil || !r.rsr.Spec.SyncStatusBack || r.compiled.GVK != it.gvk || r.rsr.DeletionTimestamp != nil {
			continue
		}
		if policy.RuleAllowed(r.rsr, r.compiled) != nil {
			continue // inert here, as for its copies
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
			if !p.Ready || p.Bootstrap || policy.Quarantined(p.ClusterID) {
				continue
			}
			c, synced, _ := e.views.Lookup(p.Name, tgvk, tk.Namespace, tk.Name)
			if !synced || c == nil || types.UID(c.GetAnnotations()[v1alpha1.OwnershipAnnotation]) != e.opts.LocalID {
				continue
			}
			if _, has := c.Object["status"]; !has {
				continue // no status to bring back: another peer's copy may have one
			}
			if ref := backCheck(policy, orig, c, p.Name); ref != nil {
				e.refused(it, r, *ref)
				continue
			}
			copyObj, from, fromPeer = c, r, p.ClusterID
			break
		}
		if copyObj != nil {
			break
		}
	}
	return copyObj, from, fromPeer
}

// backCheck checks the status a peer's copy brings back to the local original orig as a
// copy is checked (planner.Policy.CheckCopy): the original with the peer's status is the
// "copy", from the peer named peer, with its size checked. A status that is not an
// object is refused.
func backCheck(policy planner.Policy, orig, peerCopy *unstructured.Unstructured, peer string) *planner.Refusal {
	status, ok := peerCopy.Object["status"]
	if !ok {
		return nil
	}
	if _, isMap := status.(map[string]any); !isMap {
		return &planner.Refusal{Reason: v1alpha1.ReasonCopyRefused, Message: fmt.Sprintf("%s %s: the status %s offers is not an object", orig.GetKind(), orig.GetName(), peer)}
	}
	back := orig.DeepCopy()
	back.Object["status"] = status
	return policy.CheckCopy(orig, back, peer, true)
}

// backFailed records on rule r that the status of the original it did not flow back: the
// API server refused the write (NotGranted when the member's identity may not write it).
func backFailed(r *ruleEntry, it item, err error) {
	f := planner.ClassifyWriteError(err)
	r.track.Record(it, false, "", rulestatus.Failure{Reason: f.Reason, Message: "status back: " + f.String()})
}
