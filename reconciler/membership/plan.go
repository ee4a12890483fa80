package membership

import (
	"fmt"
	"maps"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/bootstrap"
)

// View is what one Ready peer holds: its Cluster CRs and the Secrets of its registry
// namespace.
type View struct {
	Name      string
	ClusterID types.UID
	Clusters  []v1alpha1.Cluster
	Secrets   []corev1.Secret
}

// Input is everything Plan decides from.
type Input struct {
	// LocalID and LocalName identify the local cluster.
	LocalID   types.UID
	LocalName string
	// Namespace is the registry namespace.
	Namespace string
	// Local holds the local Cluster CRs and registry-namespace Secrets.
	Local struct {
		Clusters []v1alpha1.Cluster
		Secrets  []corev1.Secret
	}
	// Peers are the Ready peers' views.
	Peers []View
	// Unreachable are the IDs of peers that are known but not Ready.
	Unreachable []types.UID
}

// Op is a write.
type Op string

// The writes Plan asks for.
const (
	OpCreate Op = "create"
	OpUpdate Op = "update"
	// OpReplace deletes the object (guarded by its UID) and creates it again; for a
	// Secret whose type must change.
	OpReplace Op = "replace"
	// OpDelete deletes the object, guarded by its UID: a copy describing a cluster that
	// left the group, or, on a cluster that left, a copy describing another member.
	OpDelete Op = "delete"
)

// Write is one write of the plan. Object carries the resourceVersion of the local
// object it updates.
type Write struct {
	Op     Op
	Object client.Object
	// Base is, for OpUpdate, the local object as it was read. The update is a merge
	// patch from Base to Object: it changes only the fields the membership changed, so
	// it does not lose a race with a concurrent write of other fields (the status).
	Base      client.Object
	From      string
	Describes types.UID
}

// Result is the plan: the writes, and the copies not written with the reason.
type Result struct {
	Writes    []Write
	Conflicts []string
	// Departed are the departures in force the plan carried out (see InForce).
	Departed Departures
}

// notCopied are annotations that are local decisions, never copied between clusters.
var notCopied = []string{
	v1alpha1.ClusterDisabledAnnotation,
	corev1.LastAppliedConfigAnnotation,
}

// Plan computes the membership writes. It is pure and deterministic.
func Plan(in Input) Result {
	var res Result
	peers := append([]View(nil), in.Peers...)
	sort.Slice(peers, func(i, j int) bool { return peers[i].Name < peers[j].Name })
	ready := map[types.UID]bool{}
	for _, p := range peers {
		ready[p.ClusterID] = true
	}
	localClusters := map[string]*v1alpha1.Cluster{}
	known := map[types.UID]bool{}
	for i := range in.Local.Clusters {
		c := &in.Local.Clusters[i]
		localClusters[c.Name] = c
		known[c.Spec.ClusterID] = true
	}
	for _, id := range in.Unreachable {
		known[id] = true
	}
	localSecrets := map[string]*corev1.Secret{}
	for i := range in.Local.Secrets {
		localSecrets[in.Local.Secrets[i].Name] = &in.Local.Secrets[i]
	}
	// The reader Secrets of the local cluster's own Cluster CRs are never written from a peer.
	ownSecrets := map[string]bool{}
	for _, c := range in.Local.Clusters {
		if r := c.Spec.AuthInfo.SecretRef; c.Spec.ClusterID == in.LocalID && r.Name != "" && (r.Namespace == "" || r.Namespace == in.Namespace) {
			ownSecrets[r.Name] = true
		}
	}

	// Departures: a cluster that left is deleted and not learnt again; a local cluster
	// that left forgets the group.
	sets := [][]v1alpha1.Cluster{in.Local.Clusters}
	for _, p := range peers {
		sets = append(sets, p.Clusters)
	}
	gone, problems := InForce(sets...)
	res.Departed = gone
	res.Conflicts = append(res.Conflicts, problems...)
	if own := localClusters[in.LocalName]; own != nil && own.Spec.ClusterID == in.LocalID {
		if w := planDepartures(own, gone); w != nil {
			res.Writes = append(res.Writes, *w)
		}
	}
	if _, left := gone[in.LocalID]; left {
		res.Writes = append(res.Writes, forget(in, ownSecrets, func(types.UID) bool { return true })...)
		return res
	}
	res.Writes = append(res.Writes, forget(in, ownSecrets, func(x types.UID) bool { _, ok := gone[x]; return ok })...)

	type source struct {
		view      View
		cluster   v1alpha1.Cluster
		relayOnly bool
		own       bool // the view is the described cluster's own
	}
	// rank orders the sources of one name: a Ready cluster's own copy, then a copy of a
	// cluster learnt from a relay, then a relayed copy of a cluster that is not Ready.
	rank := func(s source) int {
		switch {
		case s.own:
			return 2
		case !s.relayOnly:
			return 1
		}
		return 0
	}
	chosen := map[string]source{}
	var names []string
	for _, view := range peers {
		if _, left := gone[view.ClusterID]; left {
			continue // a cluster that left teaches nothing
		}
		for _, c := range view.Clusters {
			x := c.Spec.ClusterID
			if x == "" || x == in.LocalID {
				continue // a peer's copy of the local cluster never overwrites ours
			}
			if _, left := gone[x]; left {
				continue
			}
			if c.Name == in.LocalName {
				res.Conflicts = append(res.Conflicts, fmt.Sprintf("peer %s has Cluster %s for cluster %s, but %s is the local cluster's name", view.Name, c.Name, x, c.Name))
				continue
			}
			src := source{view: view, cluster: c}
			switch {
			case ready[x]:
				if view.ClusterID != x {
					continue // X answers itself: only X's own copy counts
				}
				src.own = true
			case known[x]:
				src.relayOnly = true // X is known but unreachable: only newer tokens are relayed
			}
			prev, seen := chosen[c.Name]
			if seen {
				// The better source wins, then the relay with the later token, then the first
				// peer by name.
				r, p := rank(src), rank(prev)
				later := src.relayOnly && expiresAt(refSecret(src.view, &src.cluster, in.Namespace)).
					After(expiresAt(refSecret(prev.view, &prev.cluster, in.Namespace)))
				if r < p || r == p && !later {
					continue
				}
			}
			if !seen {
				names = append(names, c.Name)
			}
			chosen[c.Name] = src
		}
	}
	sort.Strings(names)

	for _, name := range names {
		src := chosen[name]
		x := src.cluster.Spec.ClusterID
		from := src.view.Name
		if w, conflict := planCluster(localClusters[name], &src.cluster, x, in.LocalID, src.relayOnly); conflict != "" {
			res.Conflicts = append(res.Conflicts, conflict)
			continue
		} else if w != nil {
			res.Writes = append(res.Writes, Write{Op: w.op, Object: w.obj, Base: w.base, From: from, Describes: x})
		}

		ref := src.cluster.Spec.AuthInfo.SecretRef
		peerSecret := refSecret(src.view, &src.cluster, in.Namespace)
		if peerSecret == nil {
			continue
		}
		if ownSecrets[ref.Name] {
			res.Conflicts = append(res.Conflicts, fmt.Sprintf("Secret %s/%s is the local cluster's reader Secret; not overwritten by cluster %s's", in.Namespace, ref.Name, x))
			continue
		}
		adoptable := false
		for _, c := range in.Local.Clusters {
			r := c.Spec.AuthInfo.SecretRef
			if c.Spec.ClusterID == x && r.Name == ref.Name && (r.Namespace == "" || r.Namespace == in.Namespace) {
				adoptable = true
			}
		}
		if w, conflict := planSecret(localSecrets[ref.Name], peerSecret, x, in.Namespace, adoptable, src.relayOnly); conflict != "" {
			res.Conflicts = append(res.Conflicts, conflict)
		} else if w != nil {
			res.Writes = append(res.Writes, Write{Op: w.op, Object: w.obj, Base: w.base, From: from, Describes: x})
		}
	}
	return res
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

// refSecret returns the Secret of view that c references in the registry namespace ns, or
// nil.
func refSecret(view View, c *v1alpha1.Cluster, ns string) *corev1.Secret {
	ref := c.Spec.AuthInfo.SecretRef
	if ref.Name == "" || (ref.Namespace != "" && ref.Namespace != ns) {
		return nil
	}
	for i := range view.Secrets {
		if view.Secrets[i].Name == ref.Name {
			return &view.Secrets[i]
		}
	}
	return nil
}

type write struct {
	op   Op
	obj  client.Object
	base client.Object // for OpUpdate: the local object as read
}

// copyMeta returns the labels and annotations a copy of src describing x carries, keeping
// the local decisions of the existing object (nil when there is none).
func copyMeta(src client.Object, existing map[string]string, x types.UID) (map[string]string, map[string]string) {
	labels := maps.Clone(src.GetLabels())
	if labels == nil {
		labels = map[string]string{}
	}
	labels[v1alpha1.OwnershipLabel] = string(x)
	annotations := maps.Clone(src.GetAnnotations())
	if annotations == nil {
		annotations = map[string]string{}
	}
	for _, k := range notCopied {
		delete(annotations, k)
		if v, ok := existing[k]; ok {
			annotations[k] = v
		}
	}
	annotations[v1alpha1.OwnershipAnnotation] = string(x)
	return labels, annotations
}

func sameMap(a, b map[string]string) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return maps.Equal(a, b)
}

func planCluster(existing, src *v1alpha1.Cluster, x, localID types.UID, relayOnly bool) (*write, string) {
	if existing != nil {
		mark := existing.Annotations[v1alpha1.OwnershipAnnotation]
		switch {
		case existing.Spec.ClusterID == localID:
			return nil, fmt.Sprintf("Cluster %s is the local cluster's; not overwritten by cluster %s's", existing.Name, x)
		case mark == "" && existing.Spec.ClusterID != x:
			return nil, fmt.Sprintf("Cluster %s was created locally for cluster %s; a peer has it for cluster %s: not overwritten", existing.Name, existing.Spec.ClusterID, x)
		case mark != "" && mark != string(x):
			return nil, fmt.Sprintf("Cluster %s is a copy of cluster %s's; a peer has it for cluster %s: not overwritten", existing.Name, mark, x)
		}
	}
	if relayOnly {
		return nil, "" // X is not Ready: its Cluster is left as it is
	}
	var existingAnnotations map[string]string
	if existing != nil {
		existingAnnotations = existing.Annotations
	}
	labels, annotations := copyMeta(src, existingAnnotations, x)
	if existing == nil {
		c := &v1alpha1.Cluster{}
		c.Name = src.Name
		c.Labels, c.Annotations = labels, annotations
		c.Spec = *src.Spec.DeepCopy()
		return &write{op: OpCreate, obj: c}, ""
	}
	if apiequality.Semantic.DeepEqual(existing.Spec, src.Spec) && sameMap(existing.Labels, labels) && sameMap(existing.Annotations, annotations) {
		return nil, ""
	}
	c := existing.DeepCopy()
	c.Labels, c.Annotations = labels, annotations
	c.Spec = *src.Spec.DeepCopy()
	return &write{op: OpUpdate, obj: c, base: existing}, ""
}

func expiresAt(s *corev1.Secret) time.Time {
	if s == nil {
		return time.Time{}
	}
	t, _ := time.Parse(time.RFC3339, s.Annotations[bootstrap.ExpiresAtAnnotation])
	// Tokens issued within one second expire in the same second: the issue time, with
	// nanoseconds, tells them apart.
	if issued, err := time.Parse(time.RFC3339Nano, s.Annotations[bootstrap.IssuedAtAnnotation]); err == nil && !t.IsZero() {
		return t.Truncate(time.Second).Add(time.Duration(issued.Nanosecond()))
	}
	return t
}

func planSecret(existing, src *corev1.Secret, x types.UID, ns string, adoptable, relayOnly bool) (*write, string) {
	if existing != nil {
		mark := existing.Annotations[v1alpha1.OwnershipAnnotation]
		switch {
		case mark == "" && !adoptable:
			return nil, fmt.Sprintf("Secret %s/%s was created locally; cluster %s's reader Secret of that name is not copied", ns, existing.Name, x)
		case mark != "" && mark != string(x):
			return nil, fmt.Sprintf("Secret %s/%s is a copy of cluster %s's; not overwritten by cluster %s's", ns, existing.Name, mark, x)
		}
		if relayOnly && !expiresAt(src).After(expiresAt(existing)) {
			return nil, ""
		}
	}
	var existingAnnotations map[string]string
	if existing != nil {
		existingAnnotations = existing.Annotations
	}
	labels, annotations := copyMeta(src, existingAnnotations, x)
	desired := &corev1.Secret{}
	desired.Namespace, desired.Name = ns, src.Name
	desired.Labels, desired.Annotations = labels, annotations
	desired.Type = src.Type
	desired.Data = maps.Clone(src.Data)
	if existing == nil {
		return &write{op: OpCreate, obj: desired}, ""
	}
	if existing.Type == src.Type && apiequality.Semantic.DeepEqual(existing.Data, src.Data) &&
		sameMap(existing.Labels, labels) && sameMap(existing.Annotations, annotations) {
		return nil, ""
	}
	if existing.Type != src.Type {
		desired.UID = existing.UID
		return &write{op: OpReplace, obj: desired}, ""
	}
	s := existing.DeepCopy()
	s.Labels, s.Annotations, s.Data, s.StringData = labels, annotations, maps.Clone(src.Data), nil
	return &write{op: OpUpdate, obj: s, base: existing}, ""
}
