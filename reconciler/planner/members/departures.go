package members

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
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

// MaxSkew is how far ahead of this cluster's clock a departure or join time may be:
// members' clocks differ by a little, never by more. A later time is refused, or a
// member could date an entry ahead to remove another member for good, or to never be
// made to leave.
const MaxSkew = 5 * time.Minute

// Disabled reports whether a local Cluster CR has the cluster-disabled annotation: the
// cluster is quarantined here, and nothing about it is taken from other members.
func Disabled(c *v1alpha1.Cluster) bool {
	return c.Annotations[v1alpha1.ClusterDisabledAnnotation] == "true"
}

// JoinedAt is the time of the join that brought the cluster a Cluster CR describes back
// into the group, or the zero time.
func JoinedAt(c *v1alpha1.Cluster) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, c.Annotations[v1alpha1.JoinedAtAnnotation])
	return t
}

// InForce returns the departures that apply, judged at now by this cluster's clock,
// given the local Cluster CRs and the Ready peers' views. Unreadable and refused entries
// are reported in the second result.
//
// What a member may say is limited:
//   - A member's departure records are read from its own Cluster CR only: the local
//     cluster's, the local copies (written from each member's own view), and each peer's
//     own Cluster CR in its view; never from a peer's copy of a third member's, which
//     that peer could forge. A disabled member's records do not count.
//   - An entry X@T counts only if T is not ahead of now by more than MaxSkew, and the
//     member that recorded it had not joined (again) after T: it was part of the group
//     when X left.
//   - An entry for X is cancelled by a join of X at or after T, read from any Cluster CR
//     describing X (joins spread through relays), unless the join time is ahead of now
//     by more than MaxSkew.
//
// A zero now judges nothing ahead (the CLI's read of what is recorded).
func InForce(now time.Time, local []v1alpha1.Cluster, views ...View) (Departures, []string) {
	all := Departures{}
	joined := map[types.UID]time.Time{}
	var problems []string
	ahead := func(t time.Time) bool { return !now.IsZero() && t.After(now.Add(MaxSkew)) }
	disabled := map[types.UID]bool{}
	for i := range local {
		if Disabled(&local[i]) {
			disabled[local[i].Spec.ClusterID] = true
		}
	}
	record := func(c *v1alpha1.Cluster) {
		v, ok := c.Annotations[v1alpha1.LeftClustersAnnotation]
		if !ok || disabled[c.Spec.ClusterID] {
			return
		}
		d, bad := ParseDepartures(v)
		for _, b := range bad {
			problems = append(problems, fmt.Sprintf("Cluster %s: entry %q of %s is not <clusterID>@<RFC 3339 time>: ignored", c.Name, b, v1alpha1.LeftClustersAnnotation))
		}
		since := JoinedAt(c)
		if ahead(since) {
			since = time.Time{} // refused below, where joins are read
		}
		for id, t := range d {
			switch {
			case ahead(t):
				problems = append(problems, fmt.Sprintf("Cluster %s: departure of %s at %s is ahead of this cluster's clock by more than %s: refused", c.Name, id, t.UTC().Format(time.RFC3339), MaxSkew))
			case t.Before(since):
				problems = append(problems, fmt.Sprintf("Cluster %s: departure of %s at %s was recorded by a member that joined at %s, after it: refused", c.Name, id, t.UTC().Format(time.RFC3339), since.UTC().Format(time.RFC3339)))
			default:
				all.Add(id, t)
			}
		}
	}
	join := func(c *v1alpha1.Cluster) {
		t := JoinedAt(c)
		if ahead(t) {
			problems = append(problems, fmt.Sprintf("Cluster %s: %s %s is ahead of this cluster's clock by more than %s: refused", c.Name, v1alpha1.JoinedAtAnnotation, t.UTC().Format(time.RFC3339), MaxSkew))
			return
		}
		if t.After(joined[c.Spec.ClusterID]) {
			joined[c.Spec.ClusterID] = t
		}
	}
	for i := range local {
		record(&local[i])
		join(&local[i])
	}
	for _, v := range views {
		for i := range v.Clusters {
			c := &v.Clusters[i]
			if c.Spec.ClusterID == v.ClusterID {
				record(c)
			}
			join(c)
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

// planDepartures keeps the local cluster's own list of departures equal to the ones in
// force, so that the list spreads with the local Cluster CR and entries cancelled by a
// later join are dropped.
func planDepartures(own *v1alpha1.Cluster, gone Departures) *Write {
	want := gone.Format()
	if own.Annotations[v1alpha1.LeftClustersAnnotation] == want {
		return nil
	}
	c := own.DeepCopy()
	if want == "" {
		delete(c.Annotations, v1alpha1.LeftClustersAnnotation)
		if len(c.Annotations) == 0 {
			c.Annotations = nil
		}
	} else {
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[v1alpha1.LeftClustersAnnotation] = want
	}
	return &Write{Op: OpUpdate, Object: c, Base: own, Describes: own.Spec.ClusterID}
}

// forget deletes the local Cluster CRs of the clusters drop selects (never the local
// cluster's own) with the reader Secrets they reference, when those are copies of that
// cluster's or were made by hand for it, and the leftover copies of those clusters'
// Secrets.
func forget(in Input, ownSecrets map[string]bool, drop func(types.UID) bool) []Write {
	var ws []Write
	clusters := append([]v1alpha1.Cluster(nil), in.Local.Clusters...)
	sort.Slice(clusters, func(i, j int) bool { return clusters[i].Name < clusters[j].Name })
	secrets := append([]corev1.Secret(nil), in.Local.Secrets...)
	sort.Slice(secrets, func(i, j int) bool { return secrets[i].Name < secrets[j].Name })
	byName := map[string]*corev1.Secret{}
	for i := range secrets {
		byName[secrets[i].Name] = &secrets[i]
	}
	deleted := map[string]bool{}
	deleteSecret := func(s *corev1.Secret, x types.UID) {
		if deleted[s.Name] || ownSecrets[s.Name] {
			return
		}
		deleted[s.Name] = true
		obj := &corev1.Secret{}
		obj.Namespace, obj.Name, obj.UID = s.Namespace, s.Name, s.UID
		ws = append(ws, Write{Op: OpDelete, Object: obj, Describes: x})
	}
	for _, c := range clusters {
		x := c.Spec.ClusterID
		if x == "" || x == in.LocalID || !drop(x) {
			continue
		}
		obj := &v1alpha1.Cluster{}
		obj.Name, obj.UID = c.Name, c.UID
		ws = append(ws, Write{Op: OpDelete, Object: obj, Describes: x})
		ref := c.Spec.AuthInfo.SecretRef
		if ref.Name == "" || (ref.Namespace != "" && ref.Namespace != in.Namespace) {
			continue
		}
		if s := byName[ref.Name]; s != nil {
			if mark := s.Annotations[v1alpha1.OwnershipAnnotation]; mark == "" || mark == string(x) {
				deleteSecret(s, x)
			}
		}
	}
	for i := range secrets {
		s := &secrets[i]
		if mark := types.UID(s.Annotations[v1alpha1.OwnershipAnnotation]); mark != "" && mark != in.LocalID && drop(mark) {
			deleteSecret(s, mark)
		}
	}
	return ws
}
