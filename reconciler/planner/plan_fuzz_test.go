package planner

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// FuzzDecide feeds the planner arbitrary desired and observed objects (JSON) and checks
// that it never panics, never deletes without the positive observation, never touches
// an object without the ownership mark, and that an update it asks for is a fixed point
// (deciding again on the written object asks for nothing: no ping-pong).
func FuzzDecide(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n","labels":{"x":"1"}},"data":{"k":"v"}}`),
		[]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n","resourceVersion":"7","annotations":{"`+v1alpha1.OwnershipAnnotation+`":"origin"}},"data":{"k":"old","extra":"x"}}`),
		true, false)
	f.Add([]byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"data":{}}`), []byte(`{}`), false, true)
	f.Add([]byte(`{"kind":"X","status":{"a":[1,2,{"b":null}]}}`), []byte(`{"kind":"X","metadata":{"finalizers":["f"]},"status":{"a":1}}`), true, true)
	f.Fuzz(func(t *testing.T, desiredJSON, observedJSON []byte, withCandidate, originGone bool) {
		desired := &unstructured.Unstructured{}
		if err := desired.UnmarshalJSON(desiredJSON); err != nil {
			return
		}
		var observed *unstructured.Unstructured
		if len(observedJSON) > 2 {
			observed = &unstructured.Unstructured{}
			if err := observed.UnmarshalJSON(observedJSON); err != nil {
				return
			}
		}
		origin := types.UID("origin")
		Mark(desired, origin, "rule")
		in := Input{LocalID: "local", Observed: observed, OriginGone: map[types.UID]bool{origin: originGone}}
		if withCandidate {
			in.Candidates = []Candidate{{Rule: "rule", Peer: "p", PeerID: origin, Origin: origin, Object: desired}}
		}
		act := Decide(in)
		unmarked := observed != nil && observed.GetAnnotations()[v1alpha1.OwnershipAnnotation] == ""
		switch act.Type {
		case ActionDelete:
			if !originGone || observed == nil || unmarked {
				t.Fatalf("delete without positive observation or of an unmarked object: %+v", act)
			}
		case ActionUpdate:
			if unmarked {
				t.Fatalf("update of an unmarked object")
			}
			again := Decide(Input{LocalID: "local", Observed: act.Object, Candidates: in.Candidates, OriginGone: in.OriginGone})
			if again.Type != ActionNone {
				t.Fatalf("the update is not a fixed point: then %s", again.Type)
			}
		case ActionCreate:
			if observed != nil {
				t.Fatalf("create over an existing object")
			}
		}
	})
}
