package members

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// TestFirstContact: a cluster this cluster knows only through relays is learnt when every
// relay of it agrees (name, ID, server, CA, public key); relays that disagree are never
// settled by seniority: nothing is learnt, the conflict is reported naming each relay,
// whether or not each verifies.
func TestFirstContact(t *testing.T) {
	ca := testCA(t)
	// Local: l knows a (senior, created first) and c.
	local := objs(
		[]Object{cl("a", idA, mark(idA), created(1)), sec("a", defaultExpiryAt, mark(idA))},
		[]Object{cl("c", idC, mark(idC), created(2)), sec("c", defaultExpiryAt, mark(idC))},
	)
	key := func(k string) mod { return annotate(v1alpha1.ReaderPublicKeyAnnotation, k) }
	yOf := func(cmods []mod, smods ...mod) []Object {
		return []Object{cl("y", idY, append([]mod{mark(idY), key("key-y")}, cmods...)...), sec("y", 30, append([]mod{mark(idY)}, smods...)...)}
	}
	for _, tc := range []struct {
		name      string
		views     []View
		bad       []string
		want      []string
		conflicts [][]string // per conflict: the names, then the offers' substrings
		// seenReady adds a member this cluster last saw Ready (b), whose view is not read.
		seenReady bool
		// connecting adds a member b whose Cluster has no state and its Ready condition
		// Unknown (its connection is being made), not read.
		connecting bool
		waiting    string // a substring of the plan's conflicts
	}{
		{
			name: "relays that agree: learnt, from the senior peer",
			views: []View{
				peer("a", idA, objs(own("a", idA), yOf(nil, token("from a")))...),
				peer("c", idC, objs(own("c", idC), yOf(nil, token("from c")))...),
			},
			want: []string{"create Cluster y from=a describes=uid-y", "create Secret cluster-registry/y from=a describes=uid-y"},
		},
		{
			name: "one relay: learnt",
			views: []View{
				peer("a", idA, own("a", idA)...),
				peer("c", idC, objs(own("c", idC), yOf(nil))...),
			},
			want: []string{"create Cluster y from=c describes=uid-y", "create Secret cluster-registry/y from=c describes=uid-y"},
		},
		{
			name: "relays naming another server: not learnt, whichever is senior",
			views: []View{
				peer("a", idA, objs(own("a", idA), yOf(nil))...),
				peer("c", idC, objs(own("c", idC), yOf(nil, readerServer("https://fake.example:6443", nil)))...),
			},
			conflicts: [][]string{{"y", "peer a relays Cluster y (clusterID uid-y) at https://y.example:6443, CA none", "peer c relays Cluster y (clusterID uid-y) at https://fake.example:6443, CA none"}},
		},
		{
			name: "relays naming another CA: not learnt",
			views: []View{
				peer("a", idA, objs(own("a", idA), yOf(nil, readerServer("https://y.example:6443", ca)))...),
				peer("c", idC, objs(own("c", idC), yOf(nil))...),
			},
			conflicts: [][]string{{"y", "peer a relays Cluster y (clusterID uid-y) at https://y.example:6443, CA sha256:", "peer c relays Cluster y (clusterID uid-y) at https://y.example:6443, CA none"}},
		},
		{
			name: "relays advertising another public key: not learnt",
			views: []View{
				peer("a", idA, objs(own("a", idA), yOf([]mod{key("attacker's key")}))...),
				peer("c", idC, objs(own("c", idC), yOf(nil))...),
			},
			conflicts: [][]string{{"y", "peer a relays Cluster y", "peer c relays Cluster y"}},
		},
		{
			name: "one ID under two names: neither is learnt",
			views: []View{
				peer("a", idA, objs(own("a", idA), yOf(nil))...),
				peer("c", idC, objs(own("c", idC), []Object{cl("yy", idY, mark(idY), key("key-y")), sec("yy", 30, mark(idY))})...),
			},
			conflicts: [][]string{{"y, yy", "peer a relays Cluster y (clusterID uid-y)", "peer c relays Cluster yy (clusterID uid-y)"}},
		},
		{
			name: "one name for two IDs: neither is learnt",
			views: []View{
				peer("a", idA, objs(own("a", idA), yOf(nil))...),
				peer("c", idC, objs(own("c", idC), []Object{cl("y", idB, mark(idB), key("key-y")), sec("y", 30, mark(idB))})...),
			},
			conflicts: [][]string{{"y", "peer a relays Cluster y (clusterID uid-y)", "peer c relays Cluster y (clusterID uid-b)"}},
		},
		{
			name: "a relay whose token did not authenticate there still disagrees: nothing is learnt",
			views: []View{
				peer("a", idA, objs(own("a", idA), yOf(nil))...),
				peer("c", idC, objs(own("c", idC), yOf(nil, readerServer("https://fake.example:6443", nil)))...),
			},
			bad:       []string{"a/y/"},
			conflicts: [][]string{{"y", "peer a relays Cluster y (clusterID uid-y) at https://y.example:6443", "peer c relays Cluster y (clusterID uid-y) at https://fake.example:6443"}},
		},
		{
			name:      "a member last seen Ready is not read yet: nothing is learnt until it is",
			seenReady: true,
			views: []View{
				peer("a", idA, objs(own("a", idA), yOf(nil))...),
				peer("c", idC, objs(own("c", idC), yOf(nil))...),
			},
			waiting: "Cluster y (cluster uid-y) offered by peer a not learnt yet: waiting to read what member(s) b relay of it",
		},
		{
			name:       "a member whose connection is being made (no state, Ready Unknown: a restart) is not read yet either",
			connecting: true,
			views: []View{
				peer("a", idA, objs(own("a", idA), yOf(nil))...),
				peer("c", idC, objs(own("c", idC), yOf(nil))...),
			},
			waiting: "Cluster y (cluster uid-y) offered by peer a not learnt yet: waiting to read what member(s) b relay of it",
		},
		{
			name: "a member read with its bootstrap credential is not read yet either",
			views: []View{
				peer("a", idA, objs(own("a", idA), yOf(nil))...),
				func() View {
					v := peer("c", idC, objs(own("c", idC), yOf(nil, readerServer("https://fake.example:6443", nil)))...)
					v.Bootstrap = true
					return v
				}(),
			},
			seenReady: true,
			waiting:   "waiting to read what member(s) b, c relay of it",
		},
		{
			name: "a cluster known here (the admin's join) is not first contact: its relays are renewals only",
			views: []View{
				peer("a", idA, objs(own("a", idA), yOf(nil, readerServer("https://fake.example:6443", nil)))...),
				peer("c", idC, objs(own("c", idC), yOf(nil))...),
			},
			want: nil,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			loc := slices.Clone(local)
			if strings.HasPrefix(tc.name, "a cluster known here") {
				loc = objs(local, []Object{cl("y", idY), sec("y", 30)})
			}
			if tc.connecting {
				b := cl("b", idB, mark(idB))
				b.Status.Conditions = []v1alpha1.ClusterCondition{{Type: v1alpha1.ClusterConditionReady, Status: corev1.ConditionUnknown, Reason: "Connecting"}}
				loc = objs(loc, []Object{b, sec("b", defaultExpiryAt, mark(idB))})
			}
			if tc.seenReady {
				b := cl("b", idB, mark(idB))
				b.Status.State = v1alpha1.ClusterStateReady
				loc = objs(loc, []Object{b, sec("b", defaultExpiryAt, mark(idB))})
				for i, o := range loc {
					if c, ok := o.(*v1alpha1.Cluster); ok && c.Name == "c" {
						c = c.DeepCopy()
						c.Status.State = v1alpha1.ClusterStateReady
						loc[i] = c
					}
				}
			}
			in := input(loc, tc.views)
			in.Now = t0
			in.BadRelays = map[string]bool{}
			for _, v := range in.Peers {
				for i := range v.Secrets {
					k := RelayKey(v.Name, &v.Secrets[i])
					for _, b := range tc.bad {
						if strings.HasPrefix(k, b) {
							in.BadRelays[k] = true
						}
					}
				}
			}
			res := Plan(in)
			if diff := cmp.Diff(tc.want, summary(res)); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
			if tc.waiting != "" {
				if diff := cmp.Diff([]string{tc.waiting}, conflictsMatching(res.Conflicts, []string{tc.waiting})); diff != "" {
					t.Errorf("conflicts (-want +got):\n%s", diff)
				}
			}
			for _, w := range res.Writes {
				if !w.Verify && w.From != "" && w.Describes == idY {
					t.Errorf("write of %s learnt from %s without verification", w.Object.GetName(), w.From)
				}
			}
			var got [][]string
			for _, c := range res.RelayConflicts {
				msg := c.Message()
				g := []string{strings.Join(c.Names, ", ")}
				for _, want := range tc.conflicts[min(len(got), len(tc.conflicts)-1)][1:] {
					if strings.Contains(msg, want) {
						g = append(g, want)
					} else {
						g = append(g, msg)
					}
				}
				got = append(got, g)
				if !slices.Contains(res.Refused, msg) {
					t.Errorf("conflict %q is not among the refusals reported", msg)
				}
				if !strings.Contains(msg, "kubectl registry join") {
					t.Errorf("conflict %q does not say what to do", msg)
				}
			}
			if diff := cmp.Diff(tc.conflicts, got); diff != "" {
				t.Errorf("conflicts (-want +got):\n%s", diff)
			}
		})
	}
}
