package members

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// View is what one Ready peer holds: its Cluster CRs and the Secrets of its registry
// namespace.
type View struct {
	Name      string
	ClusterID types.UID
	Clusters  []v1alpha1.Cluster
	Secrets   []corev1.Secret
	// Bootstrap is set when the peer is read with its bootstrap credential (its shared
	// reader Secret: it has not issued this cluster a reader of its own yet): Secrets
	// then hold at most the credential it issued to this cluster. Such a view is used
	// only to take that credential; the peer counts as not Ready for everything else
	// (its Clusters are not learnt from, nor its departures; a relay may renew its
	// token).
	Bootstrap bool
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
	// Notices are the departure notices read from members that are not Ready (see
	// NoticeView): each that member's record of this cluster's departure, read with the
	// notice token it issued this cluster. They count in Decide only.
	Notices []View
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

// Object is a membership object (a Cluster or a Secret): the method set of
// controller-runtime's client.Object, written with apimachinery's interfaces so that the
// planner links no controller runtime. A client.Object is an Object and the other way
// round.
type Object interface {
	metav1.Object
	runtime.Object
}

// Write is one write of the plan. Object carries the resourceVersion of the local
// object it updates.
type Write struct {
	Op     Op
	Object Object
	// Base is, for OpUpdate, the local object as it was read. The update is a merge
	// patch from Base to Object: it changes only the fields the membership changed, so
	// it does not lose a race with a concurrent write of other fields (the status).
	Base      Object
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

// KindOf is the kind of a membership object (a Cluster or a Secret), for messages.
func KindOf(o Object) string {
	switch o.(type) {
	case *v1alpha1.Cluster:
		return "Cluster"
	case *corev1.Secret:
		return "Secret"
	}
	return fmt.Sprintf("%T", o)
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
	// Departed are the departures in force the plan carried out (see Decide).
	Departed Departures
	// Tallies are every departure a member records, in force or waiting for more
	// members to record it (see Decide).
	Tallies map[types.UID]Tally
	// RelayConflicts are the clusters learnt only through relays that disagree about
	// where and who they are: not learnt (see Plan).
	RelayConflicts []RelayConflict
}

// notCopied are annotations that are local decisions, never copied between clusters.
var notCopied = []string{
	v1alpha1.ClusterDisabledAnnotation,
	v1alpha1.LegacyPeerAnnotation,
	v1alpha1.PinnedServerAnnotation,
	corev1.LastAppliedConfigAnnotation,
}

// RelayKey identifies a relayed reader Secret: the peer it came from and its content.
func RelayKey(peer string, s *corev1.Secret) string {
	h := sha256.Sum256(s.Data[v1alpha1.KubeconfigKey])
	return peer + "/" + s.Name + "/" + hex.EncodeToString(h[:8])
}

// Plan computes the membership writes. It is pure and deterministic. It decides, in
// order: the departures (a cluster that left the group is forgotten; a local cluster
// that left forgets the group: departures), the source of each member's copy
// (chooseSources), which members learnt from relays are held back (holdBack), the
// writes of each member's Cluster and reader Secret (planMember), and the credentials
// peers issued this cluster (planReceived).
func Plan(in Input) Result {
	s := newPlanState(in)
	if left := s.departures(); left {
		return s.res
	}
	chosen, names, offers := s.chooseSources()
	names = s.holdBack(chosen, names, offers)
	for _, name := range names {
		s.planMember(name, chosen[name])
	}
	ws, conflicts := planReceived(in, s.all, s.localSecrets, s.gone, s.disabled)
	s.res.Writes = append(s.res.Writes, ws...)
	s.res.Conflicts = append(s.res.Conflicts, conflicts...)
	return s.res
}

// planState is what Plan knows while it plans: the input, its views and local objects
// indexed, the departures in force, and the result so far.
type planState struct {
	in Input
	// all are the views, sorted by name; peers those read with a reader of their own:
	// the only ones membership is taken from.
	all, peers []View
	// ready are the peers' cluster IDs; known the clusters a local Cluster CR describes
	// or that are members not reachable.
	ready, known map[types.UID]bool
	// disabled clusters are quarantined: nothing about them is taken from other members.
	disabled map[types.UID]bool
	// since is when this cluster first had a Cluster CR of each member, by its own API
	// server's clock: which peer a new member is learnt from is decided by it, not by
	// names a member chooses.
	since         map[types.UID]time.Time
	localClusters map[string]*v1alpha1.Cluster
	localSecrets  map[string]*corev1.Secret
	// ownSecrets are the reader Secrets of the local cluster's own Cluster CRs: never
	// written from a peer.
	ownSecrets map[string]bool
	// gone are the departures in force.
	gone Departures
	res  Result
	// kc reads each reader kubeconfig of the plan once.
	kc kubeconfigs
}

// newPlanState indexes the input: the views (sorted, the peers among them), and the
// local Cluster CRs and Secrets.
func newPlanState(in Input) *planState {
	s := &planState{
		in:            in,
		kc:            kubeconfigs{},
		all:           append([]View(nil), in.Peers...),
		ready:         map[types.UID]bool{},
		known:         map[types.UID]bool{},
		disabled:      map[types.UID]bool{},
		since:         map[types.UID]time.Time{},
		localClusters: map[string]*v1alpha1.Cluster{},
		localSecrets:  map[string]*corev1.Secret{},
		ownSecrets:    map[string]bool{},
	}
	sort.Slice(s.all, func(i, j int) bool { return s.all[i].Name < s.all[j].Name })
	for _, v := range s.all {
		if !v.Bootstrap {
			s.peers = append(s.peers, v)
		}
	}
	for _, p := range s.peers {
		s.ready[p.ClusterID] = true
	}
	for i := range in.Local.Clusters {
		c := &in.Local.Clusters[i]
		s.localClusters[c.Name] = c
		s.known[c.Spec.ClusterID] = true
		if c.Disabled() {
			s.disabled[c.Spec.ClusterID] = true
		}
		if t := c.CreationTimestamp.Time; !t.IsZero() && (s.since[c.Spec.ClusterID].IsZero() || t.Before(s.since[c.Spec.ClusterID])) {
			s.since[c.Spec.ClusterID] = t
		}
	}
	for _, id := range in.Unreachable {
		s.known[id] = true
	}
	for i := range in.Local.Secrets {
		s.localSecrets[in.Local.Secrets[i].Name] = &in.Local.Secrets[i]
	}
	for _, c := range in.Local.Clusters {
		if r := c.Spec.AuthInfo.SecretRef; c.Spec.ClusterID == in.LocalID && r.Name != "" && (r.Namespace == "" || r.Namespace == in.Namespace) {
			s.ownSecrets[r.Name] = true
		}
	}
	return s
}

// senior reports whether a's cluster has been a member here longer than b's (the
// earlier first Cluster CR, one known before one not known; then the lower cluster ID).
func (s *planState) senior(a, b View) bool {
	ta, tb := s.since[a.ClusterID], s.since[b.ClusterID]
	switch {
	case ta.IsZero() != tb.IsZero():
		return !ta.IsZero()
	case !ta.Equal(tb):
		return ta.Before(tb)
	}
	return a.ClusterID < b.ClusterID
}

// departures carries out the departures: a cluster that left is deleted and not learnt
// again; a local cluster that left forgets the group, and then nothing else is planned
// (left). The records are read from every view, those read with the bootstrap
// credential too: a member's own Cluster, served by its own API server. A member's
// departure notice is its record too: how a cluster whose credentials the members
// revoked while it was down learns its departure.
func (s *planState) departures() (left bool) {
	in := s.in
	dec := Decide(in.Now, in.LocalID, in.Local.Clusters, append(s.all, in.Notices...)...)
	s.gone = dec.InForce
	s.res.Departed = s.gone
	s.res.Tallies = dec.Tallies
	s.res.Refused = append(s.res.Refused, dec.Problems...)
	if own := s.localClusters[in.LocalName]; own != nil && own.Spec.ClusterID == in.LocalID {
		if w := planDepartures(own, dec); w != nil {
			s.res.Writes = append(s.res.Writes, *w)
		}
	}
	if _, left := s.gone[in.LocalID]; left {
		s.res.Writes = append(s.res.Writes, forget(in, s.ownSecrets, func(types.UID) bool { return true })...)
		return true
	}
	s.res.Writes = append(s.res.Writes, forget(in, s.ownSecrets, func(x types.UID) bool { _, ok := s.gone[x]; return ok })...)
	return false
}

// source is a peer's copy of a member's Cluster CR that Plan may take.
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
func (src source) rank() int {
	switch {
	case src.own:
		return 2
	case !src.relayOnly:
		return 1
	}
	return 0
}

// better reports whether a wins over b, both of the same rank: for relays the token
// that states the later expiry (then issue time), then the senior peer; for a cluster
// learnt from peers the senior peer.
func (s *planState) better(a, b source) bool {
	if a.relayOnly {
		if !a.exp.Equal(b.exp) {
			return a.exp.After(b.exp)
		}
		if !a.iat.Equal(b.iat) {
			return a.iat.After(b.iat)
		}
		if ia, ib := issuedAt(a.secret), issuedAt(b.secret); !ia.Equal(ib) {
			return ia.After(ib)
		}
	}
	return s.senior(a.view, b.view)
}

// chooseSources picks, for each name of a Cluster CR the peers offer, the copy Plan
// takes (the best by rank, then better), and returns the names sorted; offers are what
// the peers relay of clusters not known here (first contact), by name, every relay of
// them whichever is chosen.
func (s *planState) chooseSources() (chosen map[string]source, names []string, offers map[string][]Offer) {
	chosen, offers = map[string]source{}, map[string][]Offer{}
	for _, view := range s.peers {
		if _, left := s.gone[view.ClusterID]; left {
			continue // a cluster that left teaches nothing
		}
		for _, c := range view.Clusters {
			src, ok := s.sourceOf(view, c, offers)
			if !ok {
				continue
			}
			prev, seen := chosen[c.Name]
			if seen {
				r, p := src.rank(), prev.rank()
				if r < p || r == p && !s.better(src, prev) {
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
	return chosen, names, offers
}

// sourceOf decides whether the copy c that view offers may be taken, and as what: X's
// own copy while X is a Ready peer (a copy of X from another is then ignored), a relay
// of a newer token while X is known but not Ready, or a first contact (recorded in
// offers). Nothing is taken of the local cluster, of a cluster that left or is
// disabled here (but from itself), or under the local cluster's name.
func (s *planState) sourceOf(view View, c v1alpha1.Cluster, offers map[string][]Offer) (source, bool) {
	in := s.in
	x := c.Spec.ClusterID
	if x == "" || x == in.LocalID {
		return source{}, false // a peer's copy of the local cluster never overwrites ours
	}
	if _, left := s.gone[x]; left {
		return source{}, false
	}
	if s.disabled[x] && view.ClusterID != x {
		return source{}, false // quarantined: nothing about X is taken from others, not even a newer token
	}
	if c.Name == in.LocalName {
		s.res.Conflicts = append(s.res.Conflicts, fmt.Sprintf("peer %s has Cluster %s for cluster %s, but %s is the local cluster's name", view.Name, c.Name, x, c.Name))
		return source{}, false
	}
	offered := refSecret(view, &c, in.Namespace)
	src := source{view: view, cluster: c, secret: offered}
	switch {
	case s.ready[x]:
		if view.ClusterID != x {
			return source{}, false // X answers itself: only X's own copy counts
		}
		src.own = true
	case s.known[x]:
		src.relayOnly = true // X is known but unreachable: only newer tokens are relayed
		// Only the Secret the local Cluster of X references is renewed by a relay.
		if local := s.localClusters[c.Name]; local != nil && local.Spec.ClusterID == x {
			src.secret = refSecret(view, local, in.Namespace)
		}
	}
	if !src.own && !src.relayOnly {
		// First contact: every relay of it is compared, whichever is chosen, and
		// whether or not it verifies: a relay that fails (perhaps only for now) must
		// not leave another, maybe forged, alone.
		offers[c.Name] = append(offers[c.Name], offerOf(view, &c, offered))
	}
	if src.secret != nil && !s.trustSecret(&src) {
		return source{}, false
	}
	if src.relayOnly && src.secret == nil {
		return source{}, false // a relay brings only a newer token
	}
	return src, true
}

// trustSecret decides whether the reader Secret src offers is taken: a relayed one only
// if its token did not fail to authenticate against X's server, is fresh and dated
// within MaxSkew (checkRelay); any only for the server and CA pinned for X (pinned,
// which renders it for them). It reports a refused relay in Refused and a refused own
// Secret in Conflicts, and fills in src's RelayKey and token times.
func (s *planState) trustSecret(src *source) bool {
	x := src.cluster.Spec.ClusterID
	src.key = RelayKey(src.view.Name, src.secret)
	if !src.own && s.in.BadRelays[src.key] {
		return false // its token did not authenticate against X's server
	}
	problem := ""
	if !src.own {
		problem = s.kc.checkRelay(src.secret, s.in.Now, src.relayOnly)
	}
	if problem == "" {
		src.secret, problem = s.kc.pinned(s.localSecrets[src.secret.Name], src.secret, src.cluster.Name)
	}
	switch {
	case problem != "" && src.own:
		s.res.Conflicts = append(s.res.Conflicts, fmt.Sprintf("reader Secret %s of cluster %s not copied: %s", src.secret.Name, x, problem))
		return false
	case problem != "":
		s.res.Refused = append(s.res.Refused, fmt.Sprintf("reader Secret %s for cluster %s relayed by peer %s refused: %s", src.secret.Name, x, src.view.Name, problem))
		return false
	}
	src.exp, src.iat = s.kc.tokenTimes(src.secret)
	return true
}

// holdBack returns the names of the chosen copies to write, without the clusters
// learnt only through relays that are not to be learnt yet. A cluster learnt only
// through relays is learnt when they all agree (and the chosen one verifies); relays
// that disagree are never settled by seniority, nor by one of them failing to verify:
// nothing is learnt and the conflict is reported. Relays are compared only once every
// member this cluster last saw Ready has been read: at a restart, or while one is not
// read yet, a hostile relay read first would otherwise be the only one.
func (s *planState) holdBack(chosen map[string]source, names []string, offers map[string][]Offer) []string {
	relayed, covered := relayConflicts(offers)
	s.res.RelayConflicts = relayed
	for _, rc := range relayed {
		s.res.Refused = append(s.res.Refused, rc.Message())
	}
	names = slices.DeleteFunc(names, func(n string) bool { return covered[n] })
	if waiting := unread(s.in, s.ready, s.gone, s.disabled); len(waiting) > 0 {
		names = slices.DeleteFunc(names, func(n string) bool {
			src := chosen[n]
			if src.own || src.relayOnly {
				return false
			}
			s.res.Conflicts = append(s.res.Conflicts, fmt.Sprintf("Cluster %s (cluster %s) offered by peer %s not learnt yet: waiting to read what member(s) %s relay of it", n, src.cluster.Spec.ClusterID, src.view.Name, strings.Join(waiting, ", ")))
			return true
		})
	}
	return names
}

// planMember plans the writes of one member's copy chosen from src: its Cluster CR,
// then its reader Secret. A copy not from the member itself is written only once its
// reader Secret authenticated against its server (Write.Verify); a member offered
// without a reader Secret is not learnt.
func (s *planState) planMember(name string, src source) {
	in := s.in
	x := src.cluster.Spec.ClusterID
	from := src.view.Name
	if w, conflict := planCluster(s.localClusters[name], &src.cluster, s.kc.advertisedServer(src.view, &src.cluster, in.Namespace), x, in.LocalID, src.relayOnly); conflict != "" {
		s.res.Conflicts = append(s.res.Conflicts, conflict)
		return
	} else if w != nil {
		wr := Write{Op: w.op, Object: w.obj, Base: w.base, From: from, Describes: x}
		if !src.own {
			// A member learnt from another: only once its reader Secret authenticates
			// against its server as that cluster, or any member could plant Clusters.
			if src.secret == nil {
				s.res.Conflicts = append(s.res.Conflicts, fmt.Sprintf("Cluster %s (cluster %s) offered by peer %s has no reader Secret there: not learnt", name, x, from))
				return
			}
			wr.Verify, wr.Credential, wr.RelayKey = true, src.secret, src.key
		}
		s.res.Writes = append(s.res.Writes, wr)
	}
	if src.secret != nil {
		s.planMemberSecret(src)
	}
}

// planMemberSecret plans the write of the reader Secret of the member src describes:
// never over the local cluster's own reader Secret; a local Secret without the
// ownership mark is adopted only when a local Cluster CR of the member references it.
func (s *planState) planMemberSecret(src source) {
	in := s.in
	x := src.cluster.Spec.ClusterID
	peerSecret := src.secret
	ref := corev1.SecretReference{Name: peerSecret.Name}
	if s.ownSecrets[ref.Name] {
		s.res.Conflicts = append(s.res.Conflicts, fmt.Sprintf("Secret %s/%s is the local cluster's reader Secret; not overwritten by cluster %s's", in.Namespace, ref.Name, x))
		return
	}
	adoptable := false
	for _, c := range in.Local.Clusters {
		r := c.Spec.AuthInfo.SecretRef
		if c.Spec.ClusterID == x && r.Name == ref.Name && (r.Namespace == "" || r.Namespace == in.Namespace) {
			adoptable = true
		}
	}
	if w, conflict := s.kc.planSecret(s.localSecrets[ref.Name], peerSecret, x, in.Namespace, adoptable, src.relayOnly); conflict != "" {
		s.res.Conflicts = append(s.res.Conflicts, conflict)
	} else if w != nil {
		wr := Write{Op: w.op, Object: w.obj, Base: w.base, From: src.view.Name, Describes: x}
		if !src.own {
			wr.Verify, wr.Credential, wr.RelayKey = true, peerSecret, src.key
		}
		s.res.Writes = append(s.res.Writes, wr)
	}
}
