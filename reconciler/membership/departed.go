package membership

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// Departures are the clusters that left the group, with the time they left: the
// entries of v1alpha1.LeftClustersAnnotation.
type Departures map[types.UID]time.Time

// ParseDepartures reads a LeftClustersAnnotation value. Entries that cannot be read are
// returned apart, so that the caller can report them; the others still count.
func ParseDepartures(v string) (Departures, []string) {
	d := Departures{}
	var bad []string
	for entry := range strings.SplitSeq(v, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		id, at, ok := strings.Cut(entry, "@")
		t, err := time.Parse(time.RFC3339Nano, at)
		if !ok || id == "" || err != nil {
			bad = append(bad, entry)
			continue
		}
		d.Add(types.UID(id), t)
	}
	return d, bad
}

// Add records that id left at t, keeping the later time.
func (d Departures) Add(id types.UID, t time.Time) {
	if prev, ok := d[id]; !ok || t.After(prev) {
		d[id] = t
	}
}

// Format writes the annotation value: entries sorted by cluster ID, times in UTC.
func (d Departures) Format() string {
	ids := slices.Sorted(maps.Keys(d))
	entries := make([]string, len(ids))
	for i, id := range ids {
		entries[i] = string(id) + "@" + d[id].UTC().Format(time.RFC3339Nano)
	}
	return strings.Join(entries, ",")
}

// JoinedAt is the time of the join that brought the cluster a Cluster CR describes back
// into the group, or the zero time.
func JoinedAt(c *v1alpha1.Cluster) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, c.Annotations[v1alpha1.JoinedAtAnnotation])
	return t
}

// InForce returns the departures that apply given every Cluster CR seen (the local ones
// and the peers'): an entry for X counts unless a Cluster CR describing X was joined
// again at or after its time. Unreadable entries are reported in the second result.
func InForce(sets ...[]v1alpha1.Cluster) (Departures, []string) {
	all := Departures{}
	joined := map[types.UID]time.Time{}
	var problems []string
	for _, set := range sets {
		for i := range set {
			c := &set[i]
			if v, ok := c.Annotations[v1alpha1.LeftClustersAnnotation]; ok {
				d, bad := ParseDepartures(v)
				for id, t := range d {
					all.Add(id, t)
				}
				for _, b := range bad {
					problems = append(problems, fmt.Sprintf("Cluster %s: entry %q of %s is not <clusterID>@<RFC 3339 time>: ignored", c.Name, b, v1alpha1.LeftClustersAnnotation))
				}
			}
			if t := JoinedAt(c); t.After(joined[c.Spec.ClusterID]) {
				joined[c.Spec.ClusterID] = t
			}
		}
	}
	for id, t := range all {
		if !t.After(joined[id]) {
			delete(all, id)
		}
	}
	slices.Sort(problems)
	problems = slices.Compact(problems)
	return all, problems
}
