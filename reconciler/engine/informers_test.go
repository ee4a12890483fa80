package engine

import (
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

func TestUselessCopies(t *testing.T) {
	const local, a, b, c types.UID = "uid-local", "uid-a", "uid-b", "uid-c"
	for _, tc := range []struct {
		name    string
		peer    types.UID
		members []types.UID
		keepOwn bool
		want    string
		// seen: the ownership label values (or "" for none) the peer's informer still sees.
		seen, hidden []string
	}{
		{name: "two peers: our copies and the other member's copies are left out", peer: a, members: []types.UID{b, a},
			want: v1alpha1.OwnershipLabel + " notin (uid-b,uid-local)", seen: []string{"", "uid-a", "uid-c"}, hidden: []string{"uid-local", "uid-b"}},
		{name: "status flows back: our copies are kept", peer: a, members: []types.UID{a, b}, keepOwn: true,
			want: v1alpha1.OwnershipLabel + " notin (uid-b)", seen: []string{"", "uid-local", "uid-c"}, hidden: []string{"uid-b"}},
		{name: "a single peer, status flows back: nothing left out", peer: a, members: []types.UID{a}, keepOwn: true, want: "", seen: []string{"", "uid-local"}},
		{name: "invalid label values are not left out", peer: a, members: []types.UID{a, "not a label value!", c},
			want: v1alpha1.OwnershipLabel + " notin (uid-c,uid-local)", seen: []string{""}, hidden: []string{"uid-c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := uselessCopies(local, tc.peer, tc.members, tc.keepOwn)
			if got != tc.want {
				t.Errorf("selector %q, want %q", got, tc.want)
			}
			sel, err := labels.Parse(got)
			if err != nil {
				t.Fatalf("the API server would refuse %q: %v", got, err)
			}
			set := func(v string) labels.Set {
				if v == "" {
					return labels.Set{"app": "x"} // an original: no ownership label
				}
				return labels.Set{v1alpha1.OwnershipLabel: v}
			}
			for _, v := range tc.seen {
				if !sel.Matches(set(v)) {
					t.Errorf("an object labelled %q is left out", v)
				}
			}
			for _, v := range tc.hidden {
				if sel.Matches(set(v)) {
					t.Errorf("an object labelled %q is kept", v)
				}
			}
		})
	}
}
