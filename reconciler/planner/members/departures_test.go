package members

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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

func TestInForce(t *testing.T) {
	leftAt := func(entries string) *v1alpha1.Cluster {
		return cl("a", idA, annotate(v1alpha1.LeftClustersAnnotation, entries))
	}
	joined := func(id types.UID, h int) *v1alpha1.Cluster {
		return cl("x", id, annotate(v1alpha1.JoinedAtAnnotation, at(h)))
	}
	for _, tc := range []struct {
		name string
		sets [][]v1alpha1.Cluster
		want []types.UID
	}{
		{name: "nothing", sets: nil},
		{name: "a departure", sets: [][]v1alpha1.Cluster{{*leftAt(string(idX) + "@" + at(2))}}, want: []types.UID{idX}},
		{name: "a join after it, seen in another set", sets: [][]v1alpha1.Cluster{{*leftAt(string(idX) + "@" + at(2))}, {*joined(idX, 3)}}},
		{name: "a join at the same time wins", sets: [][]v1alpha1.Cluster{{*leftAt(string(idX) + "@" + at(2)), *joined(idX, 2)}}},
		{name: "a join of another cluster does not cancel it", sets: [][]v1alpha1.Cluster{{*leftAt(string(idX) + "@" + at(2)), *joined(idY, 3)}}, want: []types.UID{idX}},
		{name: "the latest join counts", sets: [][]v1alpha1.Cluster{{*leftAt(string(idX) + "@" + at(2))}, {*joined(idX, 1)}, {*joined(idX, 3)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := InForce(time.Time{}, slices.Concat(tc.sets...))
			var ids []types.UID
			for id := range got {
				ids = append(ids, id)
			}
			if diff := cmp.Diff(tc.want, ids); diff != "" {
				t.Errorf("in force (-want +got):\n%s", diff)
			}
		})
	}
}
