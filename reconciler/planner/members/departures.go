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

// Tally is what the members record of one cluster's departure, as this cluster reads
// them.
type Tally struct {
	// At is the time of the departure: the departing cluster's own record, or the
	// latest of the members' records that count.
	At time.Time
	// Self is set when the departing cluster recorded its own departure.
	Self bool
	// Records are the members (cluster IDs, sorted) whose own Cluster records the
	// departure after the cluster's last admission.
	Records []types.UID
	// Members is the number of members the majority is counted among.
	Members int
	// InForce is set when the departure takes effect: Self, or Records a strict
	// majority of Members.
	InForce bool
}

// Needed is how many more members must record the departure for it to take effect
// (0 when it is in force).
func (t Tally) Needed() int {
	if t.InForce {
		return 0
	}
	return max(Majority(t.Members)-len(t.Records), 0)
}

// Majority is the number of members a strict majority of n is.
func Majority(n int) int { return n/2 + 1 }

// Decision is what Decide found.
type Decision struct {
	// InForce are the departures that take effect.
	InForce Departures
	// Tallies are every departure some member records, in force or not, by cluster ID.
	Tallies map[types.UID]Tally
	// Admitted is the latest admission of each cluster a member recorded (a join that
	// brought it back after it left).
	Admitted Departures
	// Problems are the records refused or unreadable, for the reports.
	Problems []string
}

// Records returns what a member's own Cluster records: its departure records (the
// departures in force there and the ones its admin confirmed) and its admissions.
// Unreadable entries are returned apart.
func Records(c *v1alpha1.Cluster) (departures, admitted Departures, bad []string) {
	departures, admitted = Departures{}, Departures{}
	for _, k := range []string{v1alpha1.LeftClustersAnnotation, v1alpha1.ConfirmedDeparturesAnnotation, v1alpha1.AdmittedClustersAnnotation} {
		v, ok := c.Annotations[k]
		if !ok {
			continue
		}
		d, b := ParseDepartures(v)
		for _, e := range b {
			bad = append(bad, fmt.Sprintf("Cluster %s: entry %q of %s is not <clusterID>@<RFC 3339 time>: ignored", c.Name, e, k))
		}
		into := departures
		if k == v1alpha1.AdmittedClustersAnnotation {
			into = admitted
		}
		for id, t := range d {
			into.Add(id, t)
		}
	}
	return departures, admitted, bad
}

// Decided returns the departures in force as the controller of the cluster whose own
// Cluster is own decided them (its LeftClustersAnnotation): what the CLI and the
// other reconcilers of that cluster act on.
func Decided(own *v1alpha1.Cluster) Departures {
	if own == nil {
		return Departures{}
	}
	d, _ := ParseDepartures(own.Annotations[v1alpha1.LeftClustersAnnotation])
	return d
}

// OwnCluster returns the local cluster's own Cluster among clusters (the first by name
// whose clusterID is id), or nil.
func OwnCluster(clusters []v1alpha1.Cluster, id types.UID) *v1alpha1.Cluster {
	var own *v1alpha1.Cluster
	for i := range clusters {
		c := &clusters[i]
		if id != "" && c.Spec.ClusterID == id && (own == nil || c.Name < own.Name) {
			own = c
		}
	}
	return own
}

// InForce returns the departures in force (see Decide) and the problems found.
func InForce(now time.Time, localID types.UID, local []v1alpha1.Cluster, views ...View) (Departures, []string) {
	d := Decide(now, localID, local, views...)
	return d.InForce, d.Problems
}

// Decide judges the departures at now, by this cluster's clock, from the records of
// the members: the local cluster's own Cluster CR and each peer's own Cluster CR in
// its view (read over this cluster's connection to that peer, pinned server and CA,
// its cluster ID checked; a view read with the bootstrap credential counts too). A
// local copy of a member's Cluster, or a peer's copy of a third member's, is never a
// record: the member that relayed it could have written it.
//
// The rule:
//   - A departure of X takes effect when X's own Cluster records it (X left by
//     itself), or when a strict majority of the members record it. The members are
//     the clusters this cluster has a Cluster CR of (itself included), but those that
//     left by themselves; a cluster disabled here is a member whose records do not
//     count. So one member alone can neither remove another (it is one record) nor
//     keep one in (its record is not needed).
//   - A record X@T counts only if T is not ahead of now by more than MaxSkew, and T is
//     after the latest admission of X: an admission (AdmittedClustersAnnotation) is
//     recorded by a member's admin's join on that member, never by X itself (X's own
//     admissions of X are refused), and cancels every earlier record of X's departure.
//     A date X writes (the old joined-at) cancels nothing.
//   - A cluster that left by itself teaches nothing: its records of others do not
//     count.
//
// A zero now judges nothing ahead.
func Decide(now time.Time, localID types.UID, local []v1alpha1.Cluster, views ...View) Decision {
	dec := Decision{InForce: Departures{}, Tallies: map[types.UID]Tally{}, Admitted: Departures{}}
	ahead := func(t time.Time) bool { return !now.IsZero() && t.After(now.Add(MaxSkew)) }
	members, disabled := membersOf(localID, local)
	own := ownClusters(localID, local, views)
	records := dec.readRecords(own, disabled, ahead)
	dec.tally(records, members)
	if c := own[localID]; c != nil {
		dec.holdDecided(c, ahead)
	}
	slices.Sort(dec.Problems)
	dec.Problems = slices.Compact(dec.Problems)
	return dec
}

// membersOf returns the members a majority is counted among: the clusters this
// cluster has a Cluster CR of, itself included; and those of them disabled here, whose
// records do not count.
func membersOf(localID types.UID, local []v1alpha1.Cluster) (members, disabled map[types.UID]bool) {
	members, disabled = map[types.UID]bool{}, map[types.UID]bool{}
	if localID != "" {
		members[localID] = true
	}
	for i := range local {
		c := &local[i]
		if c.Spec.ClusterID == "" {
			continue
		}
		members[c.Spec.ClusterID] = true
		if c.Disabled() && c.Spec.ClusterID != localID {
			disabled[c.Spec.ClusterID] = true
		}
	}
	return members, disabled
}

// ownClusters returns each member's own Cluster, as this cluster reads it: the local
// cluster's among the local Cluster CRs, each peer's in its own view (the first by name
// that describes the peer); never a copy of a member another relays.
func ownClusters(localID types.UID, local []v1alpha1.Cluster, views []View) map[types.UID]*v1alpha1.Cluster {
	own := map[types.UID]*v1alpha1.Cluster{}
	if c := OwnCluster(local, localID); c != nil {
		own[localID] = c
	}
	for _, v := range views {
		if v.ClusterID == "" || v.ClusterID == localID {
			continue
		}
		for i := range v.Clusters {
			c := &v.Clusters[i]
			if c.Spec.ClusterID == v.ClusterID && (own[v.ClusterID] == nil || c.Name < own[v.ClusterID].Name) {
				own[v.ClusterID] = c
			}
		}
	}
	return own
}

// readRecords reads the records of the members' own Clusters (but those of members
// disabled here): the admissions into dec.Admitted, and returns the departure records,
// by departing cluster then member, without those cancelled by a later admission.
// Records and admissions dated ahead, and a cluster's admission of itself, are refused
// (dec.Problems).
func (dec *Decision) readRecords(own map[types.UID]*v1alpha1.Cluster, disabled map[types.UID]bool, ahead func(time.Time) bool) map[types.UID]map[types.UID]time.Time {
	records := map[types.UID]map[types.UID]time.Time{} // departing cluster -> member -> time
	for _, m := range slices.Sorted(maps.Keys(own)) {
		c := own[m]
		if disabled[m] {
			continue
		}
		deps, adms, bad := Records(c)
		dec.Problems = append(dec.Problems, bad...)
		for id, t := range adms {
			switch {
			case id == m:
				dec.Problems = append(dec.Problems, fmt.Sprintf("Cluster %s: an admission of cluster %s recorded on its own Cluster: refused (a cluster that left is brought back by a member's join)", c.Name, id))
			case ahead(t):
				dec.Problems = append(dec.Problems, fmt.Sprintf("Cluster %s: admission of %s at %s is ahead of this cluster's clock by more than %s: refused", c.Name, id, t.UTC().Format(time.RFC3339), MaxSkew))
			default:
				dec.Admitted.Add(id, t)
			}
		}
		for id, t := range deps {
			if ahead(t) {
				dec.Problems = append(dec.Problems, fmt.Sprintf("Cluster %s: departure of %s at %s is ahead of this cluster's clock by more than %s: refused", c.Name, id, t.UTC().Format(time.RFC3339), MaxSkew))
				continue
			}
			if records[id] == nil {
				records[id] = map[types.UID]time.Time{}
			}
			records[id][m] = t
		}
	}
	// Records dated at or before the latest admission are cancelled.
	for id, byMember := range records {
		for m, t := range byMember {
			if adm, ok := dec.Admitted[id]; ok && !t.After(adm) {
				delete(byMember, m)
			}
		}
		if len(byMember) == 0 {
			delete(records, id)
		}
	}
	return records
}

// tally counts the records of each departure into dec.Tallies, and puts those in force
// in dec.InForce: a cluster that left by itself is in force, and is neither a member
// nor a record; any other departure is in force once a strict majority of the members
// record it.
func (dec *Decision) tally(records map[types.UID]map[types.UID]time.Time, members map[types.UID]bool) {
	selfLeft := map[types.UID]bool{}
	for id, byMember := range records {
		if t, ok := byMember[id]; ok {
			selfLeft[id] = true
			dec.Tallies[id] = Tally{At: t, Self: true, InForce: true}
		}
	}
	n := 0
	for m := range members {
		if !selfLeft[m] {
			n++
		}
	}
	for id, byMember := range records {
		if selfLeft[id] {
			tl := dec.Tallies[id]
			tl.Members = n
			for m := range byMember {
				if !selfLeft[m] {
					tl.Records = append(tl.Records, m)
				}
			}
			slices.Sort(tl.Records)
			dec.Tallies[id] = tl
			dec.InForce[id] = tl.At
			continue
		}
		tl := Tally{Members: n}
		for m, t := range byMember {
			if selfLeft[m] {
				continue
			}
			tl.Records = append(tl.Records, m)
			if t.After(tl.At) {
				tl.At = t
			}
		}
		if len(tl.Records) == 0 {
			continue
		}
		slices.Sort(tl.Records)
		tl.InForce = len(tl.Records) >= Majority(n)
		dec.Tallies[id] = tl
		if tl.InForce {
			dec.InForce[id] = tl.At
		}
	}
}

// holdDecided keeps in force the departures this cluster's controller decided (the
// LeftClustersAnnotation of own, the local cluster's own Cluster) until an admission
// cancels them, even when the records that made them are no longer all read (the
// departed cluster's own Cluster, a member not Ready now).
func (dec *Decision) holdDecided(own *v1alpha1.Cluster, ahead func(time.Time) bool) {
	for id, t := range Decided(own) {
		if _, in := dec.InForce[id]; in || ahead(t) {
			continue
		}
		if adm, ok := dec.Admitted[id]; ok && !t.After(adm) {
			continue
		}
		tl := dec.Tallies[id]
		tl.InForce = true
		if tl.At.IsZero() {
			tl.At = t
		}
		dec.Tallies[id] = tl
		dec.InForce[id] = tl.At
	}
}

// planDepartures keeps the local cluster's own records: LeftClustersAnnotation equal to
// the departures in force (an entry the cluster already had keeps its time), and
// ConfirmedDeparturesAnnotation holding the departures its admin recorded that are not
// in force yet and not cancelled by a later admission. A record in force moves from
// the second to the first; a cancelled one goes.
func planDepartures(own *v1alpha1.Cluster, dec Decision) *Write {
	mine, _, _ := Records(own)
	left, confirmed := Departures{}, Departures{}
	for id, t := range dec.InForce {
		if at, ok := mine[id]; ok {
			t = at
		}
		left[id] = t
	}
	for id, t := range mine {
		if _, in := left[id]; in {
			continue
		}
		if adm, ok := dec.Admitted[id]; ok && !t.After(adm) {
			continue
		}
		confirmed[id] = t
	}
	c := own.DeepCopy()
	set := func(k string, d Departures) {
		if len(d) == 0 {
			delete(c.Annotations, k)
			return
		}
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[k] = d.Format()
	}
	set(v1alpha1.LeftClustersAnnotation, left)
	set(v1alpha1.ConfirmedDeparturesAnnotation, confirmed)
	if len(c.Annotations) == 0 {
		c.Annotations = nil
	}
	if sameMap(c.Annotations, own.Annotations) {
		return nil
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
