package engine

import (
	"fmt"
	"sort"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// Candidate is the copy one source peer asks for, after matching and mutation, with the
// ownership marks set.
type Candidate struct {
	// Rule is the name of the ResourceSyncRule that produced it.
	Rule string
	// Peer and PeerID name the source peer.
	Peer   string
	PeerID types.UID
	// Origin is the cluster the object comes from (kept across hops).
	Origin types.UID
	// Object is the desired copy.
	Object *unstructured.Unstructured
	// SyncStatus says the copy's status follows the source.
	SyncStatus bool
}

// Input is what Decide decides one local object from.
type Input struct {
	// LocalID is the local cluster's ID.
	LocalID types.UID
	// Observed is the local object at the key, nil when there is none.
	Observed *unstructured.Unstructured
	// Candidates are the copies the sources ask for.
	Candidates []Candidate
	// OriginGone holds the origins seen, through a healthy synced watch, to no longer
	// have a matching object for this key: the positive observation a delete needs.
	OriginGone map[types.UID]bool
}

// ActionType is what Decide asks for.
type ActionType string

// The actions.
const (
	ActionNone     ActionType = "none"
	ActionCreate   ActionType = "create"
	ActionUpdate   ActionType = "update"
	ActionDelete   ActionType = "delete"
	ActionConflict ActionType = "conflict"
)

// Action is the decision for one local object.
type Action struct {
	Type ActionType
	// Object is what to write for create and update (an update carries the observed
	// resourceVersion), or the object to delete.
	Object *unstructured.Unstructured
	// Source is the candidate chosen, for create and update.
	Source *Candidate
	// Reason explains a conflict, a delete or a skipped source.
	Reason string
}

// Choose orders candidates: a copy read from its origin first, then by rule and peer
// name; it returns the first, or nil.
func Choose(cands []Candidate) *Candidate {
	if len(cands) == 0 {
		return nil
	}
	sorted := append([]Candidate(nil), cands...)
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		ad, bd := a.PeerID == a.Origin, b.PeerID == b.Origin
		if ad != bd {
			return ad
		}
		if a.Rule != b.Rule {
			return a.Rule < b.Rule
		}
		return a.Peer < b.Peer
	})
	return &sorted[0]
}

// Decide is the planner: desired against observed. It is pure. Its rules:
//   - no local object: create the chosen candidate;
//   - a local object without the ownership mark was made here and is never touched: a
//     conflict;
//   - a copy follows its own origin's candidate when there is one; a copy of another
//     origin than the chosen candidate's is taken over only once its origin is seen to
//     no longer have the object;
//   - a copy that differs from the candidate is updated (exact restore of the mutated
//     source; finalizers and ownerReferences stay as the local cluster set them);
//   - a copy with no candidate is deleted only with the positive observation that its
//     origin no longer has it; otherwise it is left as it is.
func Decide(in Input) Action {
	best := Choose(in.Candidates)
	obs := in.Observed
	if best == nil {
		if obs == nil {
			return Action{Type: ActionNone}
		}
		mark := types.UID(obs.GetAnnotations()[v1alpha1.OwnershipAnnotation])
		if mark == "" || mark == in.LocalID {
			return Action{Type: ActionNone}
		}
		if in.OriginGone[mark] {
			return Action{Type: ActionDelete, Object: obs, Reason: fmt.Sprintf("origin cluster %s no longer has a matching object", mark)}
		}
		return Action{Type: ActionNone, Reason: "no source has the object, but its origin has not been seen to delete it"}
	}
	if obs == nil {
		return Action{Type: ActionCreate, Object: best.Object.DeepCopy(), Source: best}
	}
	mark := types.UID(obs.GetAnnotations()[v1alpha1.OwnershipAnnotation])
	if mark != "" && mark != in.LocalID && mark != best.Origin {
		// The copy keeps following its own origin while that origin still asks for it,
		// even when another origin's candidate sorts first.
		var same []Candidate
		for _, c := range in.Candidates {
			if c.Origin == mark {
				same = append(same, c)
			}
		}
		if c := Choose(same); c != nil {
			best = c
		}
	}
	switch {
	case mark == "":
		return Action{Type: ActionConflict, Object: obs, Source: best, Reason: "a local object without the ownership mark is in the way"}
	case mark == in.LocalID:
		return Action{Type: ActionConflict, Object: obs, Source: best, Reason: "the local object is marked as originating in this cluster"}
	case mark != best.Origin && !in.OriginGone[mark]:
		return Action{Type: ActionConflict, Object: obs, Source: best,
			Reason: fmt.Sprintf("the local copy comes from cluster %s, which still has it; cluster %s has one too", mark, best.Origin)}
	}
	if Equal(best.Object, obs, best.SyncStatus) {
		return Action{Type: ActionNone}
	}
	return Action{Type: ActionUpdate, Object: Merge(best.Object, obs, best.SyncStatus), Source: best}
}

// Equal reports whether the observed object already is the desired copy: same labels,
// annotations and content (everything but metadata and, unless syncStatus, status).
func Equal(desired, observed *unstructured.Unstructured, syncStatus bool) bool {
	if !equalMap(desired.GetLabels(), observed.GetLabels()) || !equalMap(desired.GetAnnotations(), observed.GetAnnotations()) {
		return false
	}
	return apiequality.Semantic.DeepEqual(content(desired.Object, syncStatus), content(observed.Object, syncStatus))
}

func equalMap(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func content(obj map[string]any, withStatus bool) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		if k == "metadata" || (k == "status" && !withStatus) {
			continue
		}
		out[k] = v
	}
	return out
}

// Merge returns the update that turns observed into desired: desired's content, labels
// and annotations on observed's identity (name, namespace, uid, resourceVersion) and with
// the metadata the local cluster owns (finalizers, ownerReferences) kept. Without
// syncStatus the observed status is kept.
func Merge(desired, observed *unstructured.Unstructured, syncStatus bool) *unstructured.Unstructured {
	out := &unstructured.Unstructured{Object: map[string]any{}}
	for k, v := range desired.DeepCopy().Object {
		if k == "metadata" || (k == "status" && !syncStatus) {
			continue
		}
		out.Object[k] = v
	}
	if st, ok := observed.Object["status"]; ok && !syncStatus {
		out.Object["status"] = runtimeDeepCopy(st)
	}
	meta, _ := runtimeDeepCopy(observed.Object["metadata"]).(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	out.Object["metadata"] = meta
	out.SetLabels(desired.GetLabels())
	out.SetAnnotations(desired.GetAnnotations())
	return out
}

func runtimeDeepCopy(v any) any {
	if v == nil {
		return nil
	}
	return (&unstructured.Unstructured{Object: map[string]any{"v": v}}).DeepCopy().Object["v"]
}
