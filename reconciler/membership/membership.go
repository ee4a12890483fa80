// Package membership spreads the group's membership: it reads the local Cluster CRs and
// reader Secrets and the Ready peers' views, asks the pure planner (planner/members,
// where the rules are written down) what to write, verifies what did not come from the
// cluster it describes (the offered token must authenticate against the pinned server,
// which must answer as that cluster), and writes the copies, marked with the ID of the
// cluster they describe (the ownership annotation and label). Updates are merge patches,
// so they do not lose races with status writes. It also reads the departure notices the
// members keep of this cluster (notice.go) for the planner. It owns the membership
// copies (Cluster CRs and reader Secrets of other members); what to write is the
// planner's decision, the credentials are package credentials'.
package membership

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/credentials/issue"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
	"github.com/kubectl-registry/kubectl-registry/reconciler/peers"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner/members"
)

// resyncPeriod bounds how long a missed event can delay convergence.
const resyncPeriod = 5 * time.Minute

// Views are the peers the membership reads: peers.Manager, or a stand-in in tests.
type Views interface {
	// List returns every peer with its state; a Ready, synced one has a Reader.
	List() []peers.Peer
	// Subscribe registers ch to receive an event whenever a peer or its cache changes.
	Subscribe(ch chan<- event.GenericEvent)
}

// Reconciler writes the membership copies. It reconciles the whole membership at once
// (one work item): the group is small and events coalesce.
type Reconciler struct {
	Client    client.Client
	Identity  issue.Identity
	Peers     Views
	Namespace string
	Recorder  record.EventRecorder
	// Addresses decides which API servers a relayed token is verified against.
	Addresses kubeconfig.AddressPolicy
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Conflicts receives the clusters not learnt because their relays disagree, for the
	// local Cluster's condition; nil reports them only as events and logs.
	Conflicts *RelayConflicts
	// Keys holds this cluster's key pair, which opens the departure notice tokens the
	// members issued it; nil reads no notice.
	Keys *issue.Keys
	// ReadNotice reads a departure notice (peers.ReadNotice); nil means that.
	ReadNotice func(ctx context.Context, server string, ca []byte, token string, addresses kubeconfig.AddressPolicy, namespace, name string) (*corev1.ConfigMap, error)

	mu sync.Mutex
	// badRelays are relays whose token did not authenticate, until when they are skipped.
	badRelays map[string]time.Time
	// reported are the refusals reported as events, with when, so that a refusal seen
	// at every reconcile is reported again only after reportEvery.
	reported map[string]time.Time
	// notices are the departure notices last read, by member, with when (noticeEvery).
	notices map[types.UID]noticeRead
}

// noticeRead is the outcome of one read of a member's departure notice.
type noticeRead struct {
	at   time.Time
	view *members.View
}

// Times of the relay verification and the refusal reports. A relay whose cluster could
// not be reached is tried again sooner than one whose token was refused.
const (
	badRelayFor         = time.Minute
	unreachableRelayFor = 15 * time.Second
	reportEvery         = 10 * time.Minute
	// bootstrapPoll is how often the membership is read again while a peer is read with
	// its bootstrap credential, whose reads send no events: its own Cluster may record
	// its departure.
	bootstrapPoll = 10 * time.Second
	// noticeEvery is how often the departure notice of a member that is not Ready is
	// read (one GET of one object); noticeTimeout bounds that read.
	noticeEvery   = 15 * time.Second
	noticeTimeout = 5 * time.Second
)

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

var key = reconcile.Request{NamespacedName: types.NamespacedName{Name: "membership"}}

// SetupWithManager registers the reconciler.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	peerEvents := make(chan event.GenericEvent, 1024)
	r.Peers.Subscribe(peerEvents)
	one := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{key}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("membership").
		// A Cluster whose heartbeats only changed (the status reconciler refreshes every
		// Cluster's every --heartbeat-period) changes no plan.
		Watches(&v1alpha1.Cluster{}, one, builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool { return peers.Changed(e.ObjectOld, e.ObjectNew) },
		})).
		Watches(&corev1.Secret{}, one, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetNamespace() == r.Namespace
		}))).
		WatchesRawSource(source.Channel(peerEvents, one)).
		Complete(r)
}

// Reconcile reads every Ready peer and writes the copies the plan asks for: it reads
// the local Cluster CRs and Secrets and the peers' views (readViews) and the departure
// notices, plans (plan, which verifies the relays), reports what was refused, writes
// (carryOut), and says when to read again (requeue).
func (r *Reconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	log := logf.FromContext(ctx)
	in := members.Input{LocalID: r.Identity.ID, LocalName: r.Identity.Name, Namespace: r.Namespace}
	var clusters v1alpha1.ClusterList
	if err := r.Client.List(ctx, &clusters); err != nil {
		return reconcile.Result{}, err
	}
	in.Local.Clusters = clusters.Items
	var secrets corev1.SecretList
	if err := r.Client.List(ctx, &secrets, client.InNamespace(r.Namespace)); err != nil {
		return reconcile.Result{}, err
	}
	in.Local.Secrets = secrets.Items
	in.Peers, in.Unreachable = r.readViews(ctx, clusters.Items)

	in.Now = r.now()
	in.Notices = r.readNotices(ctx, clusters.Items, secrets.Items, in.Peers)
	plan, verified := r.plan(ctx, in)
	r.report(clusters.Items, plan.Refused)
	conflicts := make([]string, 0, len(plan.RelayConflicts))
	for _, c := range plan.RelayConflicts {
		conflicts = append(conflicts, c.Message())
		log.Info("cluster not learnt: the members that relay it disagree", "clusters", c.Names, "reason", c.Message())
	}
	r.Conflicts.Set(conflicts)
	firstErr := r.carryOut(ctx, clusters.Items, plan, verified)
	for _, c := range plan.Conflicts {
		log.Info("membership copy not written", "reason", c)
	}
	for _, c := range plan.Refused {
		log.Info("membership copy refused", "reason", c)
	}
	if firstErr != nil {
		return reconcile.Result{}, firstErr
	}
	return r.requeue(in.Peers), nil
}

// readViews reads the Cluster CRs and registry Secrets of every Ready peer; a peer not
// Ready, or whose read fails, is unreachable. A legacy peer (named so by this cluster's
// admin) is read with the reader Secret its Cluster names, not a credential of its
// own: its membership is not taken, as from a peer read with its bootstrap credential
// (it holds, for the other members, the credentials they issued it in the clear).
func (r *Reconciler) readViews(ctx context.Context, clusters []v1alpha1.Cluster) (views []members.View, unreachable []types.UID) {
	legacy := map[types.UID]bool{}
	for i := range clusters {
		if v1alpha1.IsLegacyPeer(&clusters[i]) {
			legacy[clusters[i].Spec.ClusterID] = true
		}
	}
	for _, p := range r.Peers.List() {
		rd := p.Reader()
		if rd == nil || !p.Ready {
			unreachable = append(unreachable, p.ClusterID)
			continue
		}
		view := members.View{Name: p.Name, ClusterID: p.ClusterID, Bootstrap: p.Bootstrap || legacy[p.ClusterID]}
		// The views are the peers' cached objects themselves, not copies: a member of N
		// peers holds about 4N² of them, and copying them all on every reconcile was most
		// of its peak memory at 100 peers. Nothing here writes them: members.Plan leaves
		// its input as it was and writes objects of its own (TestPlan checks both).
		var pc v1alpha1.ClusterList
		if err := rd.List(ctx, &pc, client.UnsafeDisableDeepCopy); err != nil {
			unreachable = append(unreachable, p.ClusterID)
			continue
		}
		var ps corev1.SecretList
		if err := rd.List(ctx, &ps, client.InNamespace(r.Namespace), client.UnsafeDisableDeepCopy); err != nil {
			unreachable = append(unreachable, p.ClusterID)
			continue
		}
		view.Clusters, view.Secrets = pc.Items, ps.Items
		views = append(views, view)
	}
	return views, unreachable
}

// carryOut writes the plan's writes, but those to verify that did not verify, and
// records a Cluster deleted for a departure as an event on the local Cluster. A failed
// write is logged and the others go on; the first failure is returned.
func (r *Reconciler) carryOut(ctx context.Context, clusters []v1alpha1.Cluster, plan members.Result, verified map[string]bool) error {
	log := logf.FromContext(ctx)
	var firstErr error
	for _, w := range plan.Writes {
		if w.Verify && !verified[w.RelayKey] {
			continue // verified in r.plan, or refused there
		}
		if err := r.write(ctx, w); err != nil {
			log.Error(err, "writing a membership copy", "kind", w.Object.GetObjectKind().GroupVersionKind().Kind, "name", w.Object.GetName(), "from", w.From)
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		log.Info("membership copy written", "op", w.Op, "kind", members.KindOf(w.Object), "name", client.ObjectKeyFromObject(w.Object).String(), "from", w.From, "describes", w.Describes)
		if _, isCluster := w.Object.(*v1alpha1.Cluster); isCluster && w.Op == members.OpDelete && r.Recorder != nil {
			if own := r.Identity.Own(clusters); own != nil {
				reason, msg := "ClusterLeft", fmt.Sprintf("cluster %s (clusterID %s) left the group: its Cluster and reader Secret copy were deleted here", w.Object.GetName(), w.Describes)
				if _, selfLeft := plan.Departed[r.Identity.ID]; selfLeft {
					reason, msg = "LeftGroup", fmt.Sprintf("this cluster left the group: its copy of cluster %s (clusterID %s) was deleted", w.Object.GetName(), w.Describes)
				}
				r.Recorder.Eventf(own, corev1.EventTypeNormal, reason, "%s", msg)
			}
		}
	}
	return firstErr
}

// requeue says when the membership is read again without an event: soon while a relay
// is skipped (its cluster unreachable), while a notice of a member not Ready is pending
// (read again, with no event to wake this reconciler), or while a peer is read with its
// bootstrap credential (whose reads send no events); else after resyncPeriod.
func (r *Reconciler) requeue(views []members.View) reconcile.Result {
	if len(r.skippedRelays()) > 0 {
		return reconcile.Result{RequeueAfter: unreachableRelayFor}
	}
	if r.noticesPending() {
		return reconcile.Result{RequeueAfter: noticeEvery}
	}
	for _, v := range views {
		if v.Bootstrap {
			return reconcile.Result{RequeueAfter: bootstrapPoll}
		}
	}
	return reconcile.Result{RequeueAfter: resyncPeriod}
}

// plan runs members.Plan until every reader Secret that did not come from the cluster it is for
// has authenticated against that cluster's server: a relay that fails is skipped (for
// badRelayFor) and the plan made again, so that a bad relay never hides a good one.
func (r *Reconciler) plan(ctx context.Context, in members.Input) (members.Result, map[string]bool) {
	verified := map[string]bool{}
	for range len(in.Peers) + 1 {
		in.BadRelays = r.skippedRelays()
		plan := members.Plan(in)
		again := false
		for _, w := range plan.Writes {
			if !w.Verify || verified[w.RelayKey] {
				continue
			}
			if err := r.verify(ctx, w); err != nil {
				reason, class := peers.Classify(err)
				skip := badRelayFor
				if reason == v1alpha1.ReasonClusterUnreachable {
					skip = unreachableRelayFor
				}
				logf.FromContext(ctx).Info("relayed reader Secret refused", "secret", w.Object.GetName(), "describes", w.Describes, "from", w.From, "class", class, "error", err.Error())
				r.mu.Lock()
				if r.badRelays == nil {
					r.badRelays = map[string]time.Time{}
				}
				r.badRelays[w.RelayKey] = r.now().Add(skip)
				r.mu.Unlock()
				plan.Refused = append(plan.Refused, fmt.Sprintf("reader Secret %s for cluster %s from peer %s refused: its token did not authenticate against that cluster's API server: %s", w.Credential.GetName(), w.Describes, w.From, class))
				again = true
				continue
			}
			verified[w.RelayKey] = true
		}
		if !again {
			return plan, verified
		}
		r.report(in.Local.Clusters, plan.Refused)
	}
	in.BadRelays = r.skippedRelays()
	return members.Plan(in), verified
}

// skippedRelays returns the relays to skip now.
func (r *Reconciler) skippedRelays() map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	out := map[string]bool{}
	for k, until := range r.badRelays {
		if now.After(until) {
			delete(r.badRelays, k)
			continue
		}
		out[k] = true
	}
	return out
}

// verify checks that the token of a reader Secret w writes authenticates against the
// server its kubeconfig names, and that the server is cluster w.Describes.
func (r *Reconciler) verify(ctx context.Context, w members.Write) error {
	s := w.Credential
	if s == nil {
		return fmt.Errorf("no reader Secret to verify %s %s with", members.KindOf(w.Object), w.Object.GetName())
	}
	return peers.Authenticate(ctx, s.Data[v1alpha1.KubeconfigKey], r.Addresses, w.Describes)
}

// report records each refusal as a Warning event on the local cluster's own Cluster,
// at most once per reportEvery for the same message.
func (r *Reconciler) report(clusters []v1alpha1.Cluster, refused []string) {
	if r.Recorder == nil || len(refused) == 0 {
		return
	}
	own := r.Identity.Own(clusters)
	if own == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reported == nil {
		r.reported = map[string]time.Time{}
	}
	now := r.now()
	for k, at := range r.reported {
		if now.Sub(at) > reportEvery {
			delete(r.reported, k)
		}
	}
	for _, msg := range refused {
		if _, done := r.reported[msg]; done {
			continue
		}
		r.reported[msg] = now
		r.Recorder.Eventf(own, corev1.EventTypeWarning, v1alpha1.EventReasonMembershipRefused, "%s", msg)
	}
}

func (r *Reconciler) write(ctx context.Context, w members.Write) error {
	opts := client.FieldOwner(v1alpha1.FieldManager)
	switch w.Op {
	case members.OpCreate:
		err := r.Client.Create(ctx, w.Object, opts)
		if apierrors.IsAlreadyExists(err) {
			return nil // the next reconcile sees it and updates it if needed
		}
		return err
	case members.OpUpdate:
		if w.Base == nil {
			return fmt.Errorf("update of %s %s without the object it changes", members.KindOf(w.Object), w.Object.GetName())
		}
		// A merge patch of what the membership changed, without a resourceVersion
		// precondition: a status written since the read does not make it conflict.
		return r.Client.Patch(ctx, w.Object, client.MergeFrom(w.Base), opts)
	case members.OpDelete:
		uid := w.Object.GetUID()
		err := r.Client.Delete(ctx, w.Object, client.Preconditions{UID: &uid})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil // gone already, or replaced since: the next reconcile decides again
		}
		return err
	case members.OpReplace:
		// A Secret's type is immutable: delete the old one (guarded by its UID) and
		// create the copy.
		old := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: w.Object.GetNamespace(), Name: w.Object.GetName()}}
		uid := w.Object.GetUID()
		if err := r.Client.Delete(ctx, old, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		w.Object.SetUID("")
		w.Object.SetResourceVersion("")
		return r.Client.Create(ctx, w.Object, opts)
	}
	return fmt.Errorf("unknown op %q", w.Op)
}
