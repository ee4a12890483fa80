package membership

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
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
	// Now is the time departures, joins and token expiries are judged against: this
	// cluster's clock, never a member's.
	Now time.Time
	// BadRelays are relayed reader Secrets (by RelayKey) whose token failed to
	// authenticate against the pinned server of the cluster they are for: not chosen.
	BadRelays map[string]bool
}

// MaxTokenLifetime caps how far ahead the expiry a relayed reader token states about
// itself may be: a relay claiming more is refused (a member forging a far-future token
// to win the choice between relays).
const MaxTokenLifetime = 7 * 24 * time.Hour

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
	// Verify is set on a write that did not come from the cluster it describes (a relayed
	// reader Secret, or a cluster learnt from a peer, its Cluster and its Secret): the
	// reconciler writes it only after the token of Credential, the reader Secret offered,
	// has authenticated against its server and that server is cluster Describes.
	// RelayKey names Credential in Input.BadRelays when it does not.
	Verify     bool
	Credential *corev1.Secret
	RelayKey   string
}

// Result is the plan: the writes, and the copies not written with the reason.
type Result struct {
	Writes    []Write
	Conflicts []string
	// Refused are what peers offered that this cluster does not trust: a relayed Secret
	// for another server or CA than the pinned ones or with a token dated too far ahead,
	// departures and joins dated ahead of this cluster's clock. The controller reports
	// them as events.
	Refused []string
	// Departed are the departures in force the plan carried out (see InForce).
	Departed Departures
}

// notCopied are annotations that are local decisions, never copied between clusters.
var notCopied = []string{
	v1alpha1.ClusterDisabledAnnotation,
	corev1.LastAppliedConfigAnnotation,
}

// RelayKey identifies a relayed reader Secret: the peer it came from and its content.
func RelayKey(peer string, s *corev1.Secret) string {
	h := sha256.Sum256(s.Data[v1alpha1.KubeconfigKey])
	return peer + "/" + s.Name + "/" + hex.EncodeToString(h[:8])
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
	// disabled clusters are quarantined: nothing about them is taken from other members.
	disabled := map[types.UID]bool{}
	// since is when this cluster first had a Cluster CR of each member, by its own API
	// server's clock: which peer a new member is learnt from is decided by it, not by
	// names a member chooses.
	since := map[types.UID]time.Time{}
	for i := range in.Local.Clusters {
		c := &in.Local.Clusters[i]
		localClusters[c.Name] = c
		known[c.Spec.ClusterID] = true
		if Disabled(c) {
			disabled[c.Spec.ClusterID] = true
		}
		if t := c.CreationTimestamp.Time; !t.IsZero() && (since[c.Spec.ClusterID].IsZero() || t.Before(since[c.Spec.ClusterID])) {
			since[c.Spec.ClusterID] = t
		}
	}
	senior := func(a, b View) bool {
		ta, tb := since[a.ClusterID], since[b.ClusterID]
		switch {
		case ta.IsZero() != tb.IsZero():
			return !ta.IsZero()
		case !ta.Equal(tb):
			return ta.Before(tb)
		}
		return a.ClusterID < b.ClusterID
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
	gone, problems := InForce(in.Now, in.Local.Clusters, peers...)
	res.Departed = gone
	res.Refused = append(res.Refused, problems...)
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
		own       bool           // the view is the described cluster's own
		secret    *corev1.Secret // offered, rendered for the pinned server and CA
		key       string         // RelayKey of the Secret as offered
		exp, iat  time.Time      // what the token states
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
	// better reports whether a wins over b, both of the same rank: for relays the token
	// that states the later expiry (then issue time), then the senior peer; for a
	// cluster learnt from peers the senior peer.
	better := func(a, b source) bool {
		if a.relayOnly {
			if !a.exp.Equal(b.exp) {
				return a.exp.After(b.exp)
			}
			if !a.iat.Equal(b.iat) {
				return a.iat.After(b.iat)
			}
			if ia, ib := issuedNanos(a.secret), issuedNanos(b.secret); ia != ib {
				return ia > ib
			}
		}
		return senior(a.view, b.view)
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
			if disabled[x] && view.ClusterID != x {
				continue // quarantined: nothing about X is taken from others, not even a newer token
			}
			if c.Name == in.LocalName {
				res.Conflicts = append(res.Conflicts, fmt.Sprintf("peer %s has Cluster %s for cluster %s, but %s is the local cluster's name", view.Name, c.Name, x, c.Name))
				continue
			}
			src := source{view: view, cluster: c, secret: refSecret(view, &c, in.Namespace)}
			switch {
			case ready[x]:
				if view.ClusterID != x {
					continue // X answers itself: only X's own copy counts
				}
				src.own = true
			case known[x]:
				src.relayOnly = true // X is known but unreachable: only newer tokens are relayed
				// Only the Secret the local Cluster of X references is renewed by a relay.
				if local := localClusters[c.Name]; local != nil && local.Spec.ClusterID == x {
					src.secret = refSecret(view, local, in.Namespace)
				}
			}
			if src.secret != nil {
				src.key = RelayKey(view.Name, src.secret)
				if !src.own && in.BadRelays[src.key] {
					continue // its token did not authenticate against X's server
				}
				problem := ""
				if !src.own {
					problem = checkRelay(src.secret, in.Now, src.relayOnly)
				}
				if problem == "" {
					src.secret, problem = pinned(localSecrets[src.secret.Name], src.secret, c.Name)
				}
				switch {
				case problem != "" && src.own:
					res.Conflicts = append(res.Conflicts, fmt.Sprintf("reader Secret %s of cluster %s not copied: %s", src.secret.Name, x, problem))
					continue
				case problem != "":
					res.Refused = append(res.Refused, fmt.Sprintf("reader Secret %s for cluster %s relayed by peer %s refused: %s", src.secret.Name, x, view.Name, problem))
					continue
				}
				src.exp, src.iat = tokenTimes(src.secret)
			}
			if src.relayOnly && src.secret == nil {
				continue // a relay brings only a newer token
			}
			prev, seen := chosen[c.Name]
			if seen {
				r, p := rank(src), rank(prev)
				if r < p || r == p && !better(src, prev) {
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
			wr := Write{Op: w.op, Object: w.obj, Base: w.base, From: from, Describes: x}
			if !src.own {
				// A member learnt from another: only once its reader Secret authenticates
				// against its server as that cluster, or any member could plant Clusters.
				if src.secret == nil {
					res.Conflicts = append(res.Conflicts, fmt.Sprintf("Cluster %s (cluster %s) offered by peer %s has no reader Secret there: not learnt", name, x, from))
					continue
				}
				wr.Verify, wr.Credential, wr.RelayKey = true, src.secret, src.key
			}
			res.Writes = append(res.Writes, wr)
		}

		peerSecret := src.secret
		if peerSecret == nil {
			continue
		}
		ref := corev1.SecretReference{Name: peerSecret.Name}
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
			wr := Write{Op: w.op, Object: w.obj, Base: w.base, From: from, Describes: x}
			if !src.own {
				wr.Verify, wr.Credential, wr.RelayKey = true, peerSecret, src.key
			}
			res.Writes = append(res.Writes, wr)
		}
	}
	ws, conflicts := planReceived(in, peers, localSecrets, gone, disabled)
	res.Writes = append(res.Writes, ws...)
	res.Conflicts = append(res.Conflicts, conflicts...)
	return res
}

// planReceived keeps, for every Ready peer X, the reader credential X issued to this
// cluster (see package credentials): taken from X itself only, its token rendered for
// the server and CA pinned for X (those of the local reader Secret of X), written as
// v1alpha1.ReceivedReaderSecretName(X) with X's ownership mark, so that it is deleted with
// X's other copies when X leaves.
func planReceived(in Input, peers []View, localSecrets map[string]*corev1.Secret, gone Departures, disabled map[types.UID]bool) ([]Write, []string) {
	var ws []Write
	var conflicts []string
	for _, view := range peers {
		x := view.ClusterID
		if _, left := gone[x]; left || disabled[x] || x == "" || x == in.LocalID {
			continue
		}
		issued := issuedFor(view, in.LocalID)
		if issued == nil {
			continue
		}
		var local *v1alpha1.Cluster
		for i := range in.Local.Clusters {
			c := &in.Local.Clusters[i]
			if c.Spec.ClusterID == x && (local == nil || c.Name < local.Name) {
				local = c
			}
		}
		if local == nil {
			continue // not known here yet: its Cluster comes first
		}
		ref := local.Spec.AuthInfo.SecretRef
		if ref.Name == "" || (ref.Namespace != "" && ref.Namespace != in.Namespace) || localSecrets[ref.Name] == nil {
			continue // no server and CA pinned for X yet
		}
		src, problem := pinned(localSecrets[ref.Name], issued, local.Name)
		if problem == "" {
			if r, ok := kubeconfig.Read(src.Data[v1alpha1.KubeconfigKey]); !ok || r.Token == "" {
				problem = "it holds no token"
			}
		}
		name := v1alpha1.ReceivedReaderSecretName(x)
		if problem != "" {
			conflicts = append(conflicts, fmt.Sprintf("reader credential %s issued by cluster %s not copied: %s", issued.Name, x, problem))
			continue
		}
		existing := localSecrets[name]
		if existing != nil && existing.Annotations[v1alpha1.OwnershipAnnotation] != string(x) {
			conflicts = append(conflicts, fmt.Sprintf("Secret %s/%s is not a copy of cluster %s's; its reader credential is not written over it", in.Namespace, name, x))
			continue
		}
		desired := &corev1.Secret{}
		desired.Namespace, desired.Name, desired.Type = in.Namespace, name, v1alpha1.SecretTypeClusterRegistry
		desired.Labels = map[string]string{
			"app.kubernetes.io/part-of": "kubectl-registry",
			v1alpha1.ReaderFromLabel:    v1alpha1.ReaderKey(x),
			v1alpha1.OwnershipLabel:     string(x),
		}
		desired.Annotations = map[string]string{v1alpha1.OwnershipAnnotation: string(x)}
		for _, k := range []string{v1alpha1.TokenExpiresAtAnnotation, v1alpha1.TokenIssuedAtAnnotation} {
			if v, ok := issued.Annotations[k]; ok {
				desired.Annotations[k] = v
			}
		}
		desired.Data = map[string][]byte{v1alpha1.KubeconfigKey: src.Data[v1alpha1.KubeconfigKey]}
		switch {
		case existing == nil:
			ws = append(ws, Write{Op: OpCreate, Object: desired, From: view.Name, Describes: x})
		case existing.Type != desired.Type:
			desired.UID = existing.UID
			ws = append(ws, Write{Op: OpReplace, Object: desired, From: view.Name, Describes: x})
		case !apiequality.Semantic.DeepEqual(existing.Data, desired.Data) || !sameMap(existing.Labels, desired.Labels) || !sameMap(existing.Annotations, desired.Annotations):
			s := existing.DeepCopy()
			s.Labels, s.Annotations, s.Data, s.StringData = desired.Labels, desired.Annotations, desired.Data, nil
			ws = append(ws, Write{Op: OpUpdate, Object: s, Base: existing, From: view.Name, Describes: x})
		}
	}
	return ws, conflicts
}

// issuedFor returns the reader credential the view's cluster issued to cluster id: its
// own Secret (no ownership mark) of that name and label, or nil.
func issuedFor(view View, id types.UID) *corev1.Secret {
	name := v1alpha1.IssuedReaderSecretName(id)
	for i := range view.Secrets {
		s := &view.Secrets[i]
		if s.Name == name && s.Labels[v1alpha1.ReaderForLabel] == v1alpha1.ReaderKey(id) &&
			s.Annotations[v1alpha1.OwnershipAnnotation] == "" && s.Type == v1alpha1.SecretTypeClusterRegistry {
			return s
		}
	}
	return nil
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

// newer reports whether the token of src is newer than the token of existing: it states a
// later expiry, or the same and a later issue. Two tokens issued in the same second (a
// token for a recreated ServiceAccount right after one for the old) state the same
// times; the issue time the bootstrapper annotates, with nanoseconds, then tells them
// apart. That annotation is written by a member and could lie, but a relayed token is
// written only after it has authenticated against the pinned server, so a lie gains
// nothing.
func newer(src, existing *corev1.Secret) bool {
	se, si := tokenTimes(src)
	ee, ei := tokenTimes(existing)
	switch {
	case !se.Equal(ee):
		return se.After(ee)
	case !si.Equal(ei):
		return si.After(ei)
	}
	return issuedNanos(src) > issuedNanos(existing)
}

// issuedNanos is the sub-second part of the issue time annotated on a reader Secret, or
// -1.
func issuedNanos(s *corev1.Secret) int {
	if s == nil {
		return -1
	}
	t, err := time.Parse(time.RFC3339Nano, s.Annotations[v1alpha1.TokenIssuedAtAnnotation])
	if err != nil {
		return -1
	}
	return t.Nanosecond()
}

// tokenTimes returns what the token of a reader Secret states of its expiry and issue.
func tokenTimes(s *corev1.Secret) (exp, iat time.Time) {
	r, ok := kubeconfig.Read(s.Data[v1alpha1.KubeconfigKey])
	if !ok {
		return time.Time{}, time.Time{}
	}
	exp, iat, _ = kubeconfig.TokenTimes(r.Token)
	return exp, iat
}

// checkRelay returns why a reader Secret offered by a peer other than the cluster it is
// for is refused, or "": its kubeconfig must be one the controller accepts, and its
// token must state an expiry no further ahead than MaxTokenLifetime; a renewal (renewal)
// must state one, or it cannot be newer.
func checkRelay(s *corev1.Secret, now time.Time, renewal bool) string {
	r, ok := kubeconfig.Read(s.Data[v1alpha1.KubeconfigKey])
	if !ok {
		return "its kubeconfig is not one the controller accepts"
	}
	exp, _, ok := kubeconfig.TokenTimes(r.Token)
	switch {
	case !ok && renewal:
		return "its token states no expiry"
	case !ok:
		return ""
	case !now.IsZero() && exp.After(now.Add(MaxTokenLifetime)):
		return fmt.Sprintf("its token claims to expire at %s, more than %s ahead", exp.Format(time.RFC3339), MaxTokenLifetime)
	}
	return ""
}

// pinned returns src as it may replace the local reader Secret existing: the API server
// address and CA a cluster is reached at are pinned by the first reader Secret this
// cluster had for it (written by join, possibly with an address its admin chose, or
// learnt), and only a join run here (or deleting the local Secret) changes them. An
// offered Secret brings only its token: when it names another server or CA, its token is
// rendered into a kubeconfig for the pinned ones (named name). problem says why src
// cannot be used at all.
func pinned(existing, src *corev1.Secret, name string) (_ *corev1.Secret, problem string) {
	got, ok := kubeconfig.Read(src.Data[v1alpha1.KubeconfigKey])
	if !ok {
		return src, "its kubeconfig is not one the controller accepts"
	}
	if existing == nil {
		return src, ""
	}
	pin, ok := kubeconfig.Read(existing.Data[v1alpha1.KubeconfigKey])
	if !ok || got.Server == pin.Server && bytes.Equal(got.CAData, pin.CAData) {
		return src, "" // nothing usable is pinned, or the same server and CA
	}
	if got.Token == "" {
		return src, "it names another API server or CA than the pinned ones and holds no token to use with them"
	}
	data, err := kubeconfig.Render(kubeconfig.Reader{ClusterName: name, Server: pin.Server, CAData: pin.CAData, Token: got.Token})
	if err != nil {
		return src, fmt.Sprintf("rendering its token for the pinned server: %v", err)
	}
	out := src.DeepCopy()
	out.Data = maps.Clone(src.Data)
	out.Data[v1alpha1.KubeconfigKey] = data
	return out, ""
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
		if relayOnly {
			if !newer(src, existing) {
				return nil, ""
			}
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
