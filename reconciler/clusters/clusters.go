// Package clusters keeps the status of every Cluster CR of the local cluster: whether it
// is the local cluster or a peer, its state and message, its metadata, and the
// conditions LocalCluster, LocalConflict, ClusterMetadataSet, Ready, ClustersSynced and
// ReaderKeyReady.
// For peers it drives the peer connections (package peers) from the Cluster CR and its
// reader Secret, with the credential the membership planner chooses (members.Choose,
// opened with issue.Keys), and reports what the connection found. It owns the Clusters'
// status only: it writes no membership object and issues no credential.
package clusters

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/clustermeta"
	"github.com/kubectl-registry/kubectl-registry/reconciler/conditions"
	"github.com/kubectl-registry/kubectl-registry/reconciler/credentials"
	"github.com/kubectl-registry/kubectl-registry/reconciler/credentials/issue"
	"github.com/kubectl-registry/kubectl-registry/reconciler/membership"
	"github.com/kubectl-registry/kubectl-registry/reconciler/peers"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner/members"
	"github.com/kubectl-registry/kubectl-registry/reconciler/sizing"
)

// Defaults of the periods.
const (
	// DefaultHeartbeatPeriod is how often an unchanged condition's heartbeat is refreshed.
	DefaultHeartbeatPeriod = 5 * time.Minute
	// DefaultMetadataPeriod is how often the local cluster's metadata is recomputed.
	DefaultMetadataPeriod = 5 * time.Minute
)

// Reconciler keeps the status of Cluster CRs.
type Reconciler struct {
	Client    client.Client
	Identity  issue.Identity
	Peers     *peers.Manager
	Namespace string
	// Keys holds the local key pair, which opens the credentials peers sealed to this
	// cluster; nil (or not loaded yet) leaves sealed credentials unused.
	Keys *issue.Keys
	// PeerKeys receives the public key each Ready peer advertises on its own Cluster, as
	// the peer serves it: what the credentials this cluster issues it are sealed to.
	PeerKeys *credentials.PeerKeys
	// Relays holds the clusters the membership did not learn because their relays
	// disagree: the local Cluster's RelaysAgree condition. Nil leaves it out.
	Relays *membership.RelayConflicts
	// Sizing, when set, is what this controller runs under: the local Cluster's
	// WithinSizing condition compares it with the sizing for its number of peers.
	Sizing *sizing.Limits
	// ServerVersion returns the local API server's version.
	ServerVersion func(ctx context.Context) (string, error)
	Recorder      record.EventRecorder

	HeartbeatPeriod time.Duration
	MetadataPeriod  time.Duration
	// ControllerVersion is this controller's version, reported on the local Cluster's
	// status (buildinfo).
	ControllerVersion string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Metrics exports the Clusters' conditions; nil exports nothing.
	Metrics *Metrics

	mu sync.Mutex
	// rejected holds, per peer, the reader credential the peer issued to this cluster
	// (a hash of its kubeconfig) that the peer rejected: the shared reader Secret is used
	// instead until the peer issues another one.
	rejected map[string]string
	// unused holds, per peer, why the credential the peer issued to this cluster is not
	// used (a sealed one that does not open), as last logged: it is logged when it
	// changes, not at every reconcile.
	unused map[string]string
	// keyWaitFrom is when the first peer waited for the local key pair (keyPending).
	keyWaitFrom time.Time
	// chooser keeps, per peer, the credential chosen for its connection (connect).
	chooser members.Chooser
}

// KeyWait is how long peers wait for the local key pair to load before they are read
// with their shared reader Secrets all the same (keyPending): the bootstrapper loads it
// within a second of the start, and reports an error when it cannot.
const KeyWait = 30 * time.Second

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// SetupWithManager registers the reconciler: it runs for a Cluster when the Cluster
// changes, when a Secret of the registry namespace changes (a reader kubeconfig), when a
// peer connection changes state or a peer's registry objects change, and periodically.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.HeartbeatPeriod <= 0 {
		r.HeartbeatPeriod = DefaultHeartbeatPeriod
	}
	if r.MetadataPeriod <= 0 {
		r.MetadataPeriod = DefaultMetadataPeriod
	}
	// Every peer event asks for every Cluster, and each reconcile reads the peers anew:
	// an event that comes while another waits to be handled asks for nothing more, and is
	// dropped (the peers manager never blocks on a full channel). With room for more, a
	// first sync at 100 peers listed and queued the 101 Clusters once per event.
	peerEvents := make(chan event.GenericEvent, 1)
	r.Peers.Subscribe(peerEvents)
	all := handler.EnqueueRequestsFromMapFunc(r.allClusters)
	b := ctrl.NewControllerManagedBy(mgr)
	if r.Keys != nil {
		// The local key pair's state changed: the local Cluster's ReaderKeyReady, and
		// every peer's connection, which may now open the credential the peer issued
		// (until then it reads with the bootstrap credential, only the membership).
		b = b.WatchesRawSource(source.Channel(r.Keys.Changes(), all))
	}
	if r.Relays != nil {
		b = b.WatchesRawSource(source.Channel(r.Relays.Changes(), handler.EnqueueRequestsFromMapFunc(r.localClusters)))
	}
	return b.
		Named("cluster-status").
		For(&v1alpha1.Cluster{}).
		Watches(&corev1.Secret{}, all, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetNamespace() == r.Namespace
		}))).
		// A peer's state or view of the group changed: every Cluster's ClustersSynced and
		// the local Cluster's summary may change.
		WatchesRawSource(source.Channel(peerEvents, all, source.WithBufferSize[client.Object, reconcile.Request](1))).
		WithOptions(controller.Options{MaxConcurrentReconciles: 2}).
		Complete(r)
}

// localClusters returns the local Cluster (by ID) to reconcile.
func (r *Reconciler) localClusters(ctx context.Context, _ client.Object) []reconcile.Request {
	var list v1alpha1.ClusterList
	if err := r.Client.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil { // read only
		return nil
	}
	var reqs []reconcile.Request
	for _, c := range list.Items {
		if c.Spec.ClusterID == r.Identity.ID {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: c.Name}})
		}
	}
	return reqs
}

func (r *Reconciler) allClusters(ctx context.Context, _ client.Object) []reconcile.Request {
	var list v1alpha1.ClusterList
	if err := r.Client.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil { // read only
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, c := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: c.Name}})
	}
	return reqs
}

// Reconcile computes and writes the status of one Cluster.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var cluster v1alpha1.Cluster
	if err := r.Client.Get(ctx, req.NamespacedName, &cluster); err != nil {
		if apierrors.IsNotFound(err) {
			r.Peers.Remove(req.Name)
			r.forget(req.Name)
			r.Metrics.forget(req.Name)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	// Every Cluster, read only (the cache's objects, not copies): what the status of this
	// one compares with. At 100 peers, copies of the 101 Clusters on each of their
	// reconciles were a tenth of the member's CPU during its first sync.
	var all v1alpha1.ClusterList
	if err := r.Client.List(ctx, &all, client.UnsafeDisableDeepCopy); err != nil {
		return reconcile.Result{}, err
	}

	status := cluster.Status.DeepCopy()
	var requeue time.Duration
	if cluster.Spec.ClusterID == r.Identity.ID {
		r.Peers.Remove(cluster.Name)
		requeue = r.localStatus(ctx, &cluster, all.Items, status)
	} else {
		requeue = r.peerStatus(ctx, &cluster, all.Items, status)
	}

	r.Metrics.observe(cluster.Name, status.Conditions)
	if !apiequality.Semantic.DeepEqual(&cluster.Status, status) {
		before := cluster.DeepCopy()
		cluster.Status = *status
		if err := r.Client.Status().Patch(ctx, &cluster, client.MergeFrom(before), client.FieldOwner(v1alpha1.FieldManager)); err != nil {
			if apierrors.IsNotFound(err) {
				return reconcile.Result{}, nil
			}
			return reconcile.Result{}, fmt.Errorf("writing the status of Cluster %s: %w", cluster.Name, err)
		}
		if before.Status.State != status.State && r.Recorder != nil {
			kind := corev1.EventTypeNormal
			if status.State != v1alpha1.ClusterStateReady {
				kind = corev1.EventTypeWarning
			}
			r.Recorder.Eventf(&cluster, kind, "State"+string(status.State), "%s", status.Message)
		}
	}
	return reconcile.Result{RequeueAfter: requeue}, nil
}

func (r *Reconciler) set(status *v1alpha1.ClusterStatus, cond v1alpha1.ClusterCondition) {
	status.Conditions = conditions.Set(status.Conditions, cond, r.now(), r.HeartbeatPeriod)
}

// clusterIDs returns the sorted IDs of clusters.
func clusterIDs(clusters []v1alpha1.Cluster) []string {
	ids := make([]string, 0, len(clusters))
	seen := map[types.UID]bool{}
	for _, c := range clusters {
		if !seen[c.Spec.ClusterID] {
			seen[c.Spec.ClusterID] = true
			ids = append(ids, string(c.Spec.ClusterID))
		}
	}
	sort.Strings(ids)
	return ids
}

// viewOf returns the cluster IDs the peer knows, or false when it is not readable.
func viewOf(ctx context.Context, p peers.Peer) ([]string, bool) {
	rd := p.Reader()
	if rd == nil || !p.Ready {
		return nil, false
	}
	var list v1alpha1.ClusterList
	if err := rd.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil { // read only
		return nil, false
	}
	return clusterIDs(list.Items), true
}

func sameView(a, b []string) bool {
	return strings.Join(a, ",") == strings.Join(b, ",")
}

func (r *Reconciler) localStatus(ctx context.Context, cluster *v1alpha1.Cluster, all []v1alpha1.Cluster, status *v1alpha1.ClusterStatus) time.Duration {
	status.Type = v1alpha1.ClusterTypeLocal
	r.set(status, conditions.New(v1alpha1.ClusterConditionLocalCluster, true, v1alpha1.ReasonLocalClusterFound, "this Cluster describes the cluster it is stored in"))

	var claimants []string
	for _, c := range all {
		if c.Spec.ClusterID == r.Identity.ID {
			claimants = append(claimants, c.Name)
		}
	}
	sort.Strings(claimants)
	conflict := len(claimants) > 1
	conflictMsg := ""
	if conflict {
		conflictMsg = fmt.Sprintf("Clusters %s all claim the local cluster ID %s; delete all but one", strings.Join(claimants, ", "), r.Identity.ID)
		r.set(status, conditions.New(v1alpha1.ClusterConditionLocalConflict, true, v1alpha1.ReasonLocalIDConflict, conflictMsg))
	} else {
		r.set(status, conditions.New(v1alpha1.ClusterConditionLocalConflict, false, v1alpha1.ReasonNoConflict, ""))
	}

	if meta, err := r.metadata(ctx); err != nil {
		r.set(status, conditions.New(v1alpha1.ClusterConditionMetadataSet, false, v1alpha1.ReasonMetadataFailed, err.Error()))
	} else {
		status.ClusterMetadata = meta
		r.set(status, conditions.New(v1alpha1.ClusterConditionMetadataSet, true, v1alpha1.ReasonMetadataCollected, ""))
	}
	r.set(status, conditions.New(v1alpha1.ClusterConditionReady, true, v1alpha1.ReasonClusterReachable, "the local API server answers"))
	if r.Keys != nil {
		if c, ok := issue.KeyCondition(r.Keys.State(), r.Namespace); ok {
			r.set(status, c)
		}
	}
	if c, ok := r.Relays.Condition(); ok {
		r.set(status, c)
	}
	if r.Sizing != nil {
		r.set(status, sizing.Check(r.Sizing.For(sizing.Peers(all, r.Identity.ID))))
	}

	// ClustersSynced: every Ready peer knows the same clusters as this cluster.
	mine := clusterIDs(all)
	var behind []string
	for _, p := range r.Peers.List() {
		if view, ok := viewOf(ctx, p); ok && !sameView(mine, view) {
			behind = append(behind, p.Name)
		}
	}
	if len(behind) == 0 {
		r.set(status, conditions.New(v1alpha1.ClusterConditionClustersSynced, true, v1alpha1.ReasonClustersInSync, "every reachable peer knows the same clusters"))
	} else {
		r.set(status, conditions.New(v1alpha1.ClusterConditionClustersSynced, false, v1alpha1.ReasonClustersOutOfSync,
			"peers that know other clusters than this one: "+strings.Join(behind, ", ")))
	}

	status.ControllerVersion = r.ControllerVersion
	status.State, status.Message = v1alpha1.ClusterStateReady, ""
	if conflict {
		status.State, status.Message = v1alpha1.ClusterStateFailed, conflictMsg
	}
	return r.MetadataPeriod
}

func (r *Reconciler) metadata(ctx context.Context) (v1alpha1.ClusterMetadata, error) {
	var nodes corev1.NodeList
	if err := r.Client.List(ctx, &nodes); err != nil {
		return v1alpha1.ClusterMetadata{}, fmt.Errorf("listing nodes: %w", err)
	}
	version := ""
	if r.ServerVersion != nil {
		v, err := r.ServerVersion(ctx)
		if err != nil {
			return v1alpha1.ClusterMetadata{}, fmt.Errorf("reading the API server version: %w", err)
		}
		version = v
	}
	return clustermeta.Detect(nodes.Items, version), nil
}

// peerStatus writes the status of a Cluster that describes a peer: not Ready while it
// is disabled here or its reader Secret is missing or unusable (readerSecret);
// otherwise the connection's state with the credential it uses (connect), the peer's
// own report of itself (ownReport) and whether it knows the same clusters.
func (r *Reconciler) peerStatus(ctx context.Context, cluster *v1alpha1.Cluster, all []v1alpha1.Cluster, status *v1alpha1.ClusterStatus) time.Duration {
	status.Type = v1alpha1.ClusterTypePeer
	status.Conditions = conditions.Remove(status.Conditions, v1alpha1.ClusterConditionLocalConflict)
	r.set(status, conditions.New(v1alpha1.ClusterConditionLocalCluster, false, v1alpha1.ReasonPeerCluster, "this Cluster describes a peer"))

	if cluster.Disabled() {
		return r.peerNotReady(cluster, status, notReady{v1alpha1.ClusterStateDisabled, v1alpha1.ReasonClusterDisabled,
			"disabled by the annotation " + v1alpha1.ClusterDisabledAnnotation})
	}
	secret, problem := r.readerSecret(ctx, cluster)
	if problem != nil {
		return r.peerNotReady(cluster, status, *problem)
	}
	if r.keyPending(ctx, cluster) {
		// The peer sealed a credential to this cluster's key pair, which the bootstrapper
		// is still loading: connecting now would connect with the bootstrap credential,
		// and again once the key is in (a second connection and set of watches per peer
		// at every restart). Keys.Changes reconciles every Cluster once it reports.
		msg := "waiting for this cluster's key pair to open the reader credential the peer issued to this cluster"
		status.State, status.Message = "", msg
		r.set(status, v1alpha1.ClusterCondition{Type: v1alpha1.ClusterConditionReady, Status: corev1.ConditionUnknown, Reason: v1alpha1.ReasonClusterNotConnected, Message: msg})
		return time.Second // and at the latest once KeyWait is over
	}
	p, legacy := r.connect(ctx, cluster, secret, status)
	switch {
	case p.State == "":
		status.State, status.Message = "", p.Message
		r.set(status, v1alpha1.ClusterCondition{Type: v1alpha1.ClusterConditionReady, Status: corev1.ConditionUnknown, Reason: p.Reason, Message: p.Message})
	default:
		status.State, status.Message = p.State, ""
		if p.State != v1alpha1.ClusterStateReady {
			status.Message = p.Message
		}
		r.set(status, conditions.New(v1alpha1.ClusterConditionReady, p.Ready, p.Reason, p.Message))
	}
	r.ownReport(ctx, cluster, p, legacy, status)

	mine := clusterIDs(all)
	if view, ok := viewOf(ctx, p); ok {
		if sameView(mine, view) {
			r.set(status, conditions.New(v1alpha1.ClusterConditionClustersSynced, true, v1alpha1.ReasonClustersInSync, "the peer knows the same clusters as this cluster"))
		} else {
			r.set(status, conditions.New(v1alpha1.ClusterConditionClustersSynced, false, v1alpha1.ReasonClustersOutOfSync,
				fmt.Sprintf("the peer knows %d clusters, this cluster %d", len(view), len(mine))))
		}
	} else {
		r.set(status, conditions.New(v1alpha1.ClusterConditionClustersSynced, false, v1alpha1.ReasonClusterNotConnected, "the peer is not connected yet"))
	}
	return r.HeartbeatPeriod
}

// notReady is why a peer is not connected: its Cluster's state, the Ready condition's
// reason, and the message of both.
type notReady struct {
	state  v1alpha1.ClusterState
	reason string
	msg    string
}

// peerNotReady disconnects the peer and writes why in status; the peer is looked at
// again after HeartbeatPeriod.
func (r *Reconciler) peerNotReady(cluster *v1alpha1.Cluster, status *v1alpha1.ClusterStatus, why notReady) time.Duration {
	r.Peers.Remove(cluster.Name)
	status.State, status.Message = why.state, why.msg
	status.Conditions = conditions.Remove(status.Conditions, v1alpha1.ClusterConditionReaderCredentialReady)
	r.set(status, conditions.New(v1alpha1.ClusterConditionReady, false, why.reason, why.msg))
	r.set(status, conditions.New(v1alpha1.ClusterConditionClustersSynced, false, v1alpha1.ReasonClusterNotConnected, "not connected to the peer"))
	return r.HeartbeatPeriod
}

// readerSecret returns the reader Secret the peer's Cluster references, or why it is
// not usable: not named, outside the registry namespace, missing or unreadable, of
// another type, or without a kubeconfig.
func (r *Reconciler) readerSecret(ctx context.Context, cluster *v1alpha1.Cluster) (*corev1.Secret, *notReady) {
	ref := cluster.Spec.AuthInfo.SecretRef
	if ref.Name == "" {
		return nil, &notReady{v1alpha1.ClusterStateMissingAuthInfo, v1alpha1.ReasonMissingAuthInfo, "spec.authInfo.secretRef.name is not set"}
	}
	ns := ref.Namespace
	if ns == "" {
		ns = r.Namespace
	}
	if ns != r.Namespace {
		return nil, &notReady{v1alpha1.ClusterStateInvalidAuthInfo, v1alpha1.ReasonInvalidAuthInfo,
			fmt.Sprintf("spec.authInfo.secretRef must be in the registry namespace %s, not %s", r.Namespace, ns)}
	}
	var secret corev1.Secret
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &notReady{v1alpha1.ClusterStateMissingAuthInfo, v1alpha1.ReasonMissingAuthInfo,
				fmt.Sprintf("Secret %s/%s not found", ns, ref.Name)}
		}
		logf.FromContext(ctx).Error(err, "reading the reader Secret", "secret", ns+"/"+ref.Name)
		return nil, &notReady{v1alpha1.ClusterStateFailed, v1alpha1.ReasonMissingAuthInfo, fmt.Sprintf("reading Secret %s/%s: %v", ns, ref.Name, err)}
	}
	if secret.Type != v1alpha1.SecretTypeClusterRegistry {
		return nil, &notReady{v1alpha1.ClusterStateInvalidAuthInfo, v1alpha1.ReasonInvalidAuthInfo,
			fmt.Sprintf("Secret %s/%s has type %q, want %q", ns, ref.Name, secret.Type, v1alpha1.SecretTypeClusterRegistry)}
	}
	if len(secret.Data[v1alpha1.KubeconfigKey]) == 0 {
		return nil, &notReady{v1alpha1.ClusterStateInvalidAuthInfo, v1alpha1.ReasonInvalidAuthInfo,
			fmt.Sprintf("Secret %s/%s has no %q key", ns, ref.Name, v1alpha1.KubeconfigKey)}
	}
	return &secret, nil
}

// keyPending reports whether the peer has issued this cluster a sealed credential while
// the local key pair is not loaded yet and the bootstrapper has not reported on it, for
// at most KeyWait (once it reports an error, or after that, the peer is read with its
// shared reader Secret, as connect says).
func (r *Reconciler) keyPending(ctx context.Context, cluster *v1alpha1.Cluster) bool {
	if r.Keys == nil || r.Keys.Get() != nil || r.Keys.State().Reported || v1alpha1.IsLegacyPeer(cluster) {
		return false
	}
	now := r.now()
	r.mu.Lock()
	if r.keyWaitFrom.IsZero() {
		r.keyWaitFrom = now
	}
	waited := now.Sub(r.keyWaitFrom)
	r.mu.Unlock()
	if waited >= KeyWait {
		return false
	}
	var received corev1.Secret
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: v1alpha1.ReceivedReaderSecretName(cluster.Spec.ClusterID)}, &received)
	return err == nil && received.Annotations[v1alpha1.OwnershipAnnotation] == string(cluster.Spec.ClusterID) &&
		len(received.Data[v1alpha1.SealedKubeconfigKey]) > 0
}

// connect connects to the peer with the credential it issued to this cluster, when it
// has one (members.Choose): the peer's audit log then names this cluster, and leaving
// revokes it (see package credentials). A credential the peer rejects (it revoked it)
// gives way to the shared reader Secret, which a token renewal or the seed's manual
// swap can replace, until the peer issues this cluster another one. A legacy peer
// (named so by this cluster's admin: the seed's controller, which issues no credential
// of its own) is read with the reader Secret its Cluster names, which is then a reader
// credential, not a bootstrap one. It writes the ReaderCredentialReady condition.
func (r *Reconciler) connect(ctx context.Context, cluster *v1alpha1.Cluster, secret *corev1.Secret, status *v1alpha1.ClusterStatus) (p peers.Peer, legacy bool) {
	log := logf.FromContext(ctx)
	conn := secret
	var received corev1.Secret
	unused, why := "", credentials.NotIssued
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: v1alpha1.ReceivedReaderSecretName(cluster.Spec.ClusterID)}, &received)
	switch {
	case err != nil:
	case r.isRejected(cluster.Name, &received):
		why = credentials.Rejected
	default:
		why = credentials.Expired // unless Choose takes it, below
		var err error
		// The key before its opener: a key changed in between makes an answer kept for
		// the old key, never asked for again.
		key := r.Keys.Get()
		if conn, err = r.chooser.Choose(cluster.Name, secret, &received, cluster.Spec.ClusterID, r.now(), key, r.Keys.Opener(r.Identity.ID)); err != nil {
			unused = err.Error()
		}
		if received.Annotations[v1alpha1.OwnershipAnnotation] != string(cluster.Spec.ClusterID) || len(received.Data[v1alpha1.SealedKubeconfigKey]) == 0 {
			why = credentials.NotIssued // not a credential of the peer's
		}
	}
	if r.unusedChanged(cluster.Name, unused) && unused != "" {
		log.Info("the reader credential the peer issued to this cluster is not used: using its shared reader Secret", "cluster", cluster.Name, "secret", received.Name, "reason", unused)
	}
	legacy = v1alpha1.IsLegacyPeer(cluster)
	p = r.Peers.Ensure(cluster, conn, conn == secret && !legacy)
	if conn != secret && p.State == v1alpha1.ClusterStateInvalidAuthInfo {
		log.Info("the peer rejected the reader credential it issued to this cluster: using its shared reader Secret", "cluster", cluster.Name, "secret", received.Name, "reason", p.Reason)
		r.reject(cluster.Name, &received)
		p = r.Peers.Ensure(cluster, secret, !legacy)
		conn, why = secret, credentials.Rejected
	}
	r.set(status, credentials.ReaderCredentialCondition(conn != secret, legacy, why, unused))
	return p, legacy
}

// ownReport takes the peer's own report of itself, from its own Cluster as the peer
// serves it while it is Ready: its metadata and controller version, and the public key
// it advertises (PeerKeys, for the credential this cluster issues it; its condition
// ReaderKeyReady here).
func (r *Reconciler) ownReport(ctx context.Context, cluster *v1alpha1.Cluster, p peers.Peer, legacy bool, status *v1alpha1.ClusterStatus) {
	rd := p.Reader()
	if rd == nil || !p.Ready {
		return
	}
	var own v1alpha1.Cluster
	if err := rd.Get(ctx, client.ObjectKey{Name: cluster.Name}, &own); err != nil || own.Spec.ClusterID != cluster.Spec.ClusterID || own.Status.Type != v1alpha1.ClusterTypeLocal {
		return
	}
	status.ClusterMetadata = *own.Status.ClusterMetadata.DeepCopy()
	status.ControllerVersion = own.Status.ControllerVersion
	if r.PeerKeys == nil {
		return
	}
	key := own.Annotations[v1alpha1.ReaderPublicKeyAnnotation]
	r.PeerKeys.Set(cluster.Spec.ClusterID, key)
	if legacy {
		held := r.heldByLegacyPeer(ctx, rd)
		r.Metrics.legacyExpiry(cluster.Name, held.Expires)
		r.set(status, credentials.LegacyPeerCondition(v1alpha1.ReadersNamespace(r.Namespace), v1alpha1.LegacyReaderSecretName(cluster.Spec.ClusterID), held, r.now()))
	} else {
		r.set(status, credentials.PeerKeyCondition(key))
	}
}

// heldByLegacyPeer reads, through a legacy peer's reader rd, the credential of this
// cluster the peer holds (credentials.HeldByLegacyPeer).
func (r *Reconciler) heldByLegacyPeer(ctx context.Context, rd client.Reader) credentials.LegacyHeld {
	var list v1alpha1.ClusterList
	if err := rd.List(ctx, &list); err != nil {
		return credentials.LegacyHeld{Problem: fmt.Sprintf("the peer's Clusters cannot be read: %v", err)}
	}
	return credentials.HeldByLegacyPeer(list.Items, r.Identity.ID, func(namespace, name string) (*corev1.Secret, error) {
		var s corev1.Secret
		if err := rd.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &s); err != nil {
			return nil, err
		}
		return &s, nil
	})
}

func credentialHash(s *corev1.Secret) string {
	h := sha256.Sum256(append(append([]byte(nil), s.Data[v1alpha1.KubeconfigKey]...), s.Data[v1alpha1.SealedKubeconfigKey]...))
	return hex.EncodeToString(h[:])
}

// isRejected reports whether the peer name rejected the credential s holds.
func (r *Reconciler) isRejected(name string, s *corev1.Secret) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	h, ok := r.rejected[name]
	if ok && h != credentialHash(s) {
		delete(r.rejected, name) // a new credential: try it
		return false
	}
	return ok
}

// unusedChanged records why the credential peer name issued to this cluster is not used
// ("" when it is used, or there is none) and reports whether that changed.
func (r *Reconciler) unusedChanged(name, reason string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.unused[name] == reason {
		return false
	}
	if reason == "" {
		delete(r.unused, name)
		return true
	}
	if r.unused == nil {
		r.unused = map[string]string{}
	}
	r.unused[name] = reason
	return true
}

// forget drops why the credential of peer name, whose Cluster is gone, was not used, and
// the credential chosen for it.
func (r *Reconciler) forget(name string) {
	r.chooser.Forget(name)
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.unused, name)
}

func (r *Reconciler) reject(name string, s *corev1.Secret) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rejected == nil {
		r.rejected = map[string]string{}
	}
	r.rejected[name] = credentialHash(s)
}
