package members

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

func TestParseDepartures(t *testing.T) {
	t1 := time.Date(2026, 11, 21, 5, 0, 0, 0, time.UTC)
	t2 := t1.Add(1500 * time.Millisecond)
	for _, tc := range []struct {
		name    string
		in      string
		want    Departures
		bad     []string
		formats string
	}{
		{name: "empty", in: "", want: Departures{}, formats: ""},
		{name: "one", in: "uid-x@2026-11-21T05:00:00Z", want: Departures{"uid-x": t1}, formats: "uid-x@2026-11-21T05:00:00Z"},
		{name: "sorted, spaces, sub-second times kept", in: " uid-y@2026-11-21T05:00:01.5Z , uid-x@2026-11-21T06:00:00+01:00", want: Departures{"uid-x": t1, "uid-y": t2},
			formats: "uid-x@2026-11-21T05:00:00Z,uid-y@2026-11-21T05:00:01.5Z"},
		{name: "the later of two entries for one cluster", in: "uid-x@2026-11-21T05:00:01.5Z,uid-x@2026-11-21T05:00:00Z", want: Departures{"uid-x": t2},
			formats: "uid-x@2026-11-21T05:00:01.5Z"},
		{name: "unreadable entries are returned apart", in: "uid-x,@2026-11-21T05:00:00Z,uid-y@yesterday,uid-z@2026-11-21T05:00:00Z", want: Departures{"uid-z": t1},
			bad: []string{"uid-x", "@2026-11-21T05:00:00Z", "uid-y@yesterday"}, formats: "uid-z@2026-11-21T05:00:00Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, bad := ParseDepartures(tc.in)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("departures (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.bad, bad); diff != "" {
				t.Errorf("unreadable (-want +got):\n%s", diff)
			}
			if f := got.Format(); f != tc.formats {
				t.Errorf("Format() = %q, want %q", f, tc.formats)
			}
			again, _ := ParseDepartures(got.Format())
			if diff := cmp.Diff(got, again); diff != "" {
				t.Errorf("Format does not round-trip (-first +again):\n%s", diff)
			}
		})
	}
}

// rec lists the departures entries ("id@h", ...) in annotation k.
func rec(k string, entries ...string) mod {
	var out []string
	for _, e := range entries {
		id, h, _ := strings.Cut(e, "@")
		n, _ := strconv.Atoi(h)
		out = append(out, id+"@"+at(n))
	}
	return annotate(k, strings.Join(out, ","))
}

// confirmed, decided and admitted are a member's records: departures its admin
// recorded, departures in force as its controller decided, admissions.
func confirmed(entries ...string) mod {
	return rec(v1alpha1.ConfirmedDeparturesAnnotation, entries...)
}
func decided(entries ...string) mod { return rec(v1alpha1.LeftClustersAnnotation, entries...) }
func admitted(entries ...string) mod {
	return rec(v1alpha1.AdmittedClustersAnnotation, entries...)
}

// TestDecide: a departure takes effect when the departing cluster records it, or when a
// strict majority of the members record it on their own Clusters as read from them.
func TestDecide(t *testing.T) {
	now := t0.Add(10 * time.Hour)
	// group returns the local Clusters of l (with mods on its own Cluster) knowing ids.
	group := func(ownMods []mod, ids ...types.UID) []v1alpha1.Cluster {
		cs := []v1alpha1.Cluster{*cl("l", idL, ownMods...)}
		for _, id := range ids {
			cs = append(cs, *cl(strings.TrimPrefix(string(id), "uid-"), id, mark(id)))
		}
		return cs
	}
	member := func(id types.UID, mods ...mod) View {
		name := strings.TrimPrefix(string(id), "uid-")
		return View{Name: name, ClusterID: id, Clusters: []v1alpha1.Cluster{*cl(name, id, mods...)}}
	}
	const idD, idE types.UID = "uid-d", "uid-e"
	for _, tc := range []struct {
		name     string
		local    []v1alpha1.Cluster
		views    []View
		want     map[types.UID]Tally
		problems []string // substrings, in order
	}{
		{name: "nothing", local: group(nil, idA, idX), views: []View{member(idA), member(idX)}, want: map[types.UID]Tally{}},
		{
			name:  "one member alone does not remove another",
			local: group(nil, idA, idX), views: []View{member(idA, confirmed("uid-x@1")), member(idX)},
			want: map[types.UID]Tally{idX: {At: t0.Add(time.Hour), Records: []types.UID{idA}, Members: 3}},
		},
		{
			name:  "nor does it by writing that the departure is in force",
			local: group(nil, idA, idX), views: []View{member(idA, decided("uid-x@1")), member(idX)},
			want: map[types.UID]Tally{idX: {At: t0.Add(time.Hour), Records: []types.UID{idA}, Members: 3}},
		},
		{
			name:  "a majority of three removes",
			local: group([]mod{confirmed("uid-x@2")}, idA, idX), views: []View{member(idA, confirmed("uid-x@1")), member(idX)},
			want: map[types.UID]Tally{idX: {At: t0.Add(2 * time.Hour), Records: []types.UID{idA, idL}, Members: 3, InForce: true}},
		},
		{
			name:  "the departing cluster's own record is enough",
			local: group(nil, idA, idX), views: []View{member(idA), member(idX, confirmed("uid-x@1"))},
			want: map[types.UID]Tally{idX: {At: t0.Add(time.Hour), Self: true, Members: 2, InForce: true}},
		},
		{
			name:  "read with the bootstrap credential, it still counts: its own API server serves it",
			local: group(nil, idA, idX),
			views: []View{member(idA), func() View { v := member(idX, confirmed("uid-x@1")); v.Bootstrap = true; return v }()},
			want:  map[types.UID]Tally{idX: {At: t0.Add(time.Hour), Self: true, Members: 2, InForce: true}},
		},
		{
			name:  "copies are not records: a local copy, or a peer's copy of a third member",
			local: append(group([]mod{confirmed("uid-x@1")}, idX, idC), *cl("a", idA, mark(idA), confirmed("uid-x@1")), *cl("b", idB, mark(idB), decided("uid-x@1"))),
			views: []View{member(idX), {Name: "c", ClusterID: idC, Clusters: []v1alpha1.Cluster{*cl("c", idC), *cl("a", idA, mark(idA), confirmed("uid-x@1"))}}},
			want:  map[types.UID]Tally{idX: {At: t0.Add(time.Hour), Records: []types.UID{idL}, Members: 5}},
		},
		{
			name:  "five members: two colluding do not remove a third",
			local: group(nil, idA, idB, idC, idX),
			views: []View{member(idA, confirmed("uid-x@1")), member(idB, confirmed("uid-x@1")), member(idC), member(idX)},
			want:  map[types.UID]Tally{idX: {At: t0.Add(time.Hour), Records: []types.UID{idA, idB}, Members: 5}},
		},
		{
			name:  "five members: two colluding do not remove the local cluster",
			local: group(nil, idA, idB, idC, idX),
			views: []View{member(idA, confirmed("uid-l@1")), member(idB, decided("uid-l@1")), member(idC), member(idX)},
			want:  map[types.UID]Tally{idL: {At: t0.Add(time.Hour), Records: []types.UID{idA, idB}, Members: 5}},
		},
		{
			name:  "five members: three remove one",
			local: group(nil, idA, idB, idC, idX),
			views: []View{member(idA, confirmed("uid-x@1")), member(idB, confirmed("uid-x@1")), member(idC, confirmed("uid-x@3")), member(idX)},
			want:  map[types.UID]Tally{idX: {At: t0.Add(3 * time.Hour), Records: []types.UID{idA, idB, idC}, Members: 5, InForce: true}},
		},
		{
			name:  "the majority removes the local cluster",
			local: group(nil, idA, idB),
			views: []View{member(idA, confirmed("uid-l@1")), member(idB, decided("uid-l@1"))},
			want:  map[types.UID]Tally{idL: {At: t0.Add(time.Hour), Records: []types.UID{idA, idB}, Members: 3, InForce: true}},
		},
		{
			name:  "a member's admission cancels the earlier records",
			local: group([]mod{decided("uid-x@1")}, idA, idX),
			views: []View{member(idA, confirmed("uid-x@1"), admitted("uid-x@2")), member(idX, confirmed("uid-x@1"))},
			want:  map[types.UID]Tally{},
		},
		{
			name:  "a record after the admission counts",
			local: group([]mod{confirmed("uid-x@3")}, idA, idX),
			views: []View{member(idA, confirmed("uid-x@3"), admitted("uid-x@2")), member(idX)},
			want:  map[types.UID]Tally{idX: {At: t0.Add(3 * time.Hour), Records: []types.UID{idA, idL}, Members: 3, InForce: true}},
		},
		{
			name:     "a removed cluster cannot admit itself",
			local:    group([]mod{confirmed("uid-x@1")}, idA, idX),
			views:    []View{member(idA, confirmed("uid-x@1")), member(idX, admitted("uid-x@2"))},
			want:     map[types.UID]Tally{idX: {At: t0.Add(time.Hour), Records: []types.UID{idA, idL}, Members: 3, InForce: true}},
			problems: []string{"Cluster x: an admission of cluster uid-x recorded on its own Cluster: refused"},
		},
		{
			name:  "nor cancel its removal by dating its join",
			local: group([]mod{confirmed("uid-x@1")}, idA, idX),
			views: []View{member(idA, confirmed("uid-x@1")), member(idX, annotate(v1alpha1.JoinedAtAnnotation, at(2)))},
			want:  map[types.UID]Tally{idX: {At: t0.Add(time.Hour), Records: []types.UID{idA, idL}, Members: 3, InForce: true}},
		},
		{
			name:     "a record dated ahead of this cluster's clock is refused",
			local:    group([]mod{confirmed("uid-x@1")}, idA, idX),
			views:    []View{member(idA, annotate(v1alpha1.ConfirmedDeparturesAnnotation, string(idX)+"@9999-01-01T00:00:00Z")), member(idX)},
			want:     map[types.UID]Tally{idX: {At: t0.Add(time.Hour), Records: []types.UID{idL}, Members: 3}},
			problems: []string{"Cluster a: departure of uid-x at 9999-01-01T00:00:00Z is ahead"},
		},
		{
			name:     "an admission dated ahead is refused",
			local:    group([]mod{confirmed("uid-x@1")}, idA, idX),
			views:    []View{member(idA, confirmed("uid-x@1"), annotate(v1alpha1.AdmittedClustersAnnotation, string(idX)+"@9999-01-01T00:00:00Z")), member(idX)},
			want:     map[types.UID]Tally{idX: {At: t0.Add(time.Hour), Records: []types.UID{idA, idL}, Members: 3, InForce: true}},
			problems: []string{"Cluster a: admission of uid-x at 9999-01-01T00:00:00Z is ahead"},
		},
		{
			name:  "a member disabled here is counted but its records are not",
			local: append(group([]mod{confirmed("uid-x@1")}, idX), *cl("a", idA, mark(idA), annotate(disabledKey, "true"))),
			views: []View{member(idA, confirmed("uid-x@1")), member(idX)},
			want:  map[types.UID]Tally{idX: {At: t0.Add(time.Hour), Records: []types.UID{idL}, Members: 3}},
		},
		{
			name:  "a cluster that left by itself is no longer a member, and its records do not count",
			local: group([]mod{confirmed("uid-b@1")}, idA, idB, idX),
			views: []View{member(idA), member(idB), member(idX, confirmed("uid-x@1", "uid-b@1"))},
			want: map[types.UID]Tally{
				idX: {At: t0.Add(time.Hour), Self: true, Members: 3, InForce: true},
				idB: {At: t0.Add(time.Hour), Records: []types.UID{idL}, Members: 3},
			},
		},
		{
			name:  "a departure decided here holds once its records are no longer read",
			local: group([]mod{decided("uid-x@1")}, idA),
			views: []View{member(idA)},
			want:  map[types.UID]Tally{idX: {At: t0.Add(time.Hour), Records: []types.UID{idL}, Members: 2, InForce: true}},
		},
		{
			name:  "until a member admits it again",
			local: group([]mod{decided("uid-x@1")}, idA),
			views: []View{member(idA, admitted("uid-x@2"))},
			want:  map[types.UID]Tally{},
		},
		{
			name:  "a group of two: one member cannot remove the other",
			local: group([]mod{confirmed("uid-x@1")}, idX),
			views: []View{member(idX)},
			want:  map[types.UID]Tally{idX: {At: t0.Add(time.Hour), Records: []types.UID{idL}, Members: 2}},
		},
		{
			name:     "unreadable entries are reported",
			local:    group(nil, idA, idX),
			views:    []View{member(idA, annotate(v1alpha1.ConfirmedDeparturesAnnotation, "garbage")), member(idX)},
			want:     map[types.UID]Tally{},
			problems: []string{`Cluster a: entry "garbage" of ` + v1alpha1.ConfirmedDeparturesAnnotation},
		},
		{
			name:  "the members D and E are counted though not Ready",
			local: group(nil, idA, idD, idE),
			views: []View{member(idA, confirmed("uid-e@1"))},
			want:  map[types.UID]Tally{idE: {At: t0.Add(time.Hour), Records: []types.UID{idA}, Members: 4}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Decide(now, idL, tc.local, tc.views...)
			if diff := cmp.Diff(tc.want, got.Tallies, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("tallies (-want +got):\n%s", diff)
			}
			want := Departures{}
			for id, tl := range tc.want {
				if tl.InForce {
					want[id] = tl.At
				}
			}
			if diff := cmp.Diff(want, got.InForce); diff != "" {
				t.Errorf("in force (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.problems, conflictsMatching(got.Problems, tc.problems)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			for id, tl := range got.Tallies {
				if tl.InForce != (tl.Needed() == 0) {
					t.Errorf("%s: InForce %v but Needed %d", id, tl.InForce, tl.Needed())
				}
			}
		})
	}
}
