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
// (deciding again on the written object asks for nothing: no ping-pong). With a rival, a
// second origin whose cluster ID sorts first offers the object too: a new copy follows
// the rival, and a copy of the first origin keeps following it while it has the object.
func FuzzDecide(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n","labels":{"x":"1"}},"data":{"k":"v"}}`),
		[]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n","resourceVersion":"7","annotations":{"`+v1alpha1.OwnershipAnnotation+`":"origin"}},"data":{"k":"old","extra":"x"}}`),
		true, false, false)
	f.Add([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n"},"data":{"k":"v"}}`),
		[]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n","annotations":{"`+v1alpha1.OwnershipAnnotation+`":"origin"}},"data":{"k":"old"}}`),
		true, false, true)
	f.Add([]byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"data":{}}`), []byte(`{}`), false, true, false)
	f.Add([]byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"data":{}}`), []byte(`{}`), true, false, true)
	f.Add([]byte(`{"kind":"X","status":{"a":[1,2,{"b":null}]}}`), []byte(`{"kind":"X","metadata":{"finalizers":["f"]},"status":{"a":1}}`), true, true, false)
	f.Fuzz(func(t *testing.T, desiredJSON, observedJSON []byte, withCandidate, originGone, rival bool) {
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
		lower := types.UID("a-rival") // sorts before "origin"
		if withCandidate && rival {
			other := desired.DeepCopy()
			Mark(other, lower, "rule")
			_ = unstructured.SetNestedField(other.Object, "rival", "rivalData")
			// Named so that it sorts last by peer name: the cluster ID decides.
			in.Candidates = append(in.Candidates, Candidate{Rule: "rule", Peer: "z", PeerID: lower, Origin: lower, Object: other})
		}
		act := Decide(in)
		// Gather records the deletion evidence of the observed copy's origin only: Decide
		// must read no other origin's.
		others := in
		others.OriginGone = map[types.UID]bool{origin: originGone, lower: !originGone, "local": true, "": true, "x": true}
		if again := Decide(others); again.Type != act.Type || again.Reason != act.Reason || (again.Source == nil) != (act.Source == nil) ||
			(again.Source != nil && again.Source.Origin != act.Source.Origin) {
			t.Fatalf("the evidence of origins other than the copy's changes the plan: %s (%s) then %s (%s)", act.Type, act.Reason, again.Type, again.Reason)
		}
		if withCandidate && rival && act.Source != nil {
			mark := types.UID("")
			if observed != nil {
				mark = types.UID(observed.GetAnnotations()[v1alpha1.OwnershipAnnotation])
			}
			switch {
			case act.Type == ActionCreate && act.Source.Origin != lower:
				t.Fatalf("a new copy follows %s, not the lowest cluster ID %s", act.Source.Origin, lower)
			case mark == origin && act.Source.Origin != origin:
				t.Fatalf("a copy of %s, which still has it, is taken over by %s (%s)", origin, act.Source.Origin, act.Type)
			}
		}
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
