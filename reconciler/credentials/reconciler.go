package credentials

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/credentials/issue"
	"github.com/kubectl-registry/kubectl-registry/reconciler/credentials/seal"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner/members"
)

// Reconciler issues, renews and revokes the per-peer reader identities of the local
// cluster.
type Reconciler struct {
	Client client.Client
	// APIReader reads the ServiceAccounts of the readers namespace from the API server,
	// not the cache: a revocation seen late would rotate the shared token twice.
	APIReader client.Reader
	Tokens    func(namespace string) issue.TokenMinter
	Identity  issue.Identity
	// Namespace is the registry namespace; the ServiceAccounts live in
	// v1alpha1.ReadersNamespace(Namespace).
	Namespace string
	// TokenLifetime is the lifetime asked for the tokens.
	TokenLifetime time.Duration
	// LegacyTokenLifetime is the lifetime asked for the tokens issued in the clear to
	// legacy peers, which their admin copies by hand; 0 means DefaultLegacyTokenLifetime.
	LegacyTokenLifetime time.Duration
	// Departed returns the clusters whose departure is in force, judged at now from the
	// local Cluster CRs (the manager gives members.Decided of the local cluster's own).
	Departed func(now time.Time, clusters []v1alpha1.Cluster) map[types.UID]bool
	Recorder record.EventRecorder
	// PeerKeys holds the keys the peers advertise, as read from them; a peer whose key
	// is not known yet, or that advertises none or a malformed one, is issued nothing.
	PeerKeys *PeerKeys
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu sync.Mutex
	// badKeys holds, per peer, the malformed (or missing: noKey) public key last
	// reported, so that it is logged once, not at every reconcile.
	badKeys map[types.UID]string
	// bootstrapRules are the rules last seen on (or written to) the bootstrap Role, at
	// bootstrapAt, so that an unchanged Role costs no request; it is read again after
	// bootstrapRecheck (an admin may have changed or deleted it).
	bootstrapRules []rbacv1.PolicyRule
	bootstrapAt    time.Time
	// legacySubjects are the subjects last seen on (or written to) the binding
	// v1alpha1.LegacyReaderRoleName, at legacyAt; read again after bootstrapRecheck.
	legacySubjects []rbacv1.Subject
	legacyAt       time.Time
	// noticeRules and noticeAt are to the notice Role what bootstrapRules and
	// bootstrapAt are to the bootstrap Role.
	noticeRules []rbacv1.PolicyRule
	noticeAt    time.Time
	// noticeFailedAt is when a notice token could last not be minted (an older install
	// without the notice ServiceAccount): credentials lacking one are not re-issued for
	// it until bootstrapRecheck later.
	noticeFailedAt time.Time
}

// DefaultLegacyTokenLifetime is the lifetime of the tokens issued in the clear to legacy
// peers: their admin copies the credential by hand, and the copy stays valid until its
// own expiry, half of it after the next renewal here.
const DefaultLegacyTokenLifetime = 30 * 24 * time.Hour

func (r *Reconciler) legacyLifetime() time.Duration {
	if r.LegacyTokenLifetime > 0 {
		return r.LegacyTokenLifetime
	}
	return DefaultLegacyTokenLifetime
}

// bootstrapRecheck is how long the rules last seen on the bootstrap Role are trusted.
const bootstrapRecheck = time.Minute

// noKey stands for "advertises no key" in badKeys.
const noKey = "\x00none"

// firstBadKey reports whether key is a malformed key of peer id not reported yet.
func (r *Reconciler) firstBadKey(id types.UID, key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.badKeys == nil {
		r.badKeys = map[types.UID]string{}
	}
	if r.badKeys[id] == key {
		return false
	}
	r.badKeys[id] = key
	return true
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

var key = reconcile.Request{NamespacedName: types.NamespacedName{Name: "credentials"}}

// SetupWithManager registers the reconciler: one work item for every change of a
// Cluster, a Secret of the registry namespace or a ServiceAccount of the readers
// namespace, and when a token is due.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	one := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{key}
	})
	readers := v1alpha1.ReadersNamespace(r.Namespace)
	b := ctrl.NewControllerManagedBy(mgr)
	if r.PeerKeys != nil {
		b = b.WatchesRawSource(source.Channel(r.PeerKeys.changed, one))
	}
	return b.
		Named("credentials").
		Watches(&v1alpha1.Cluster{}, one).
		Watches(&corev1.Secret{}, one, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetNamespace() == r.Namespace
		}))).
		Watches(&corev1.ServiceAccount{}, one, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetNamespace() == readers || o.GetNamespace() == r.Namespace && o.GetName() == v1alpha1.ReaderName
		}))).
		Complete(r)
}

// Reconcile carries out Plan and renews the tokens that are due: it reads the Clusters
// and the reader ServiceAccounts, plans, and then, unless the local cluster left
// (leave), keeps the grants of the shared and legacy readers (ensureGrants) and the
// departure notices, revokes (revoke), creates the ServiceAccounts of new peers
// (createReaders) and issues or renews their credentials (issueAll).
func (r *Reconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	log := logf.FromContext(ctx)
	readers := v1alpha1.ReadersNamespace(r.Namespace)
	var clusters v1alpha1.ClusterList
	if err := r.Client.List(ctx, &clusters); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing Clusters: %w", err)
	}
	var sas corev1.ServiceAccountList
	if err := r.APIReader.List(ctx, &sas, client.InNamespace(readers), client.HasLabels{v1alpha1.ReaderForLabel}); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing the reader ServiceAccounts of %s: %w", readers, err)
	}
	now := r.now()
	plan := members.PlanReaders(members.ReadersInput{LocalID: r.Identity.ID, Clusters: clusters.Items, Departed: r.Departed(now, clusters.Items), ServiceAccounts: sas.Items})
	own := r.Identity.Own(clusters.Items)
	if plan.Left {
		return r.leave(ctx, own, sas.Items, now)
	}
	// A failure of the grants is retried, and does not stop the renewals below.
	firstErr := r.ensureGrants(ctx, own, append(append([]members.Reader(nil), plan.Keep...), plan.Create...))

	// The departure notices: made while the departing peer still holds a credential, kept
	// after it is revoked, so that a peer that was down learns its departure.
	noticeNext, err := r.ensureNotices(ctx, own, sas.Items)
	if err != nil {
		log.Error(err, "keeping the departure notices")
		firstErr = errors.Join(firstErr, err)
	}

	if err := r.revoke(ctx, own, plan); err != nil {
		return reconcile.Result{}, err
	}
	failed, err := r.createReaders(ctx, &plan, &sas)
	if err != nil {
		return reconcile.Result{}, err
	}
	firstErr = errors.Join(firstErr, failed)
	if len(plan.Keep) == 0 {
		return reconcile.Result{}, firstErr
	}

	server, ca, ok := r.advertised(ctx, own)
	if !ok {
		// The bootstrapper has not written the shared reader Secret yet: it holds the
		// server and CA peers reach this cluster at.
		return reconcile.Result{RequeueAfter: time.Second}, firstErr
	}
	next := now.Add(r.TokenLifetime / 2)
	if !noticeNext.IsZero() && noticeNext.Before(next) {
		next = noticeNext
	}
	next, err = r.issueAll(ctx, own, plan.Keep, sas.Items, server, ca, next)
	firstErr = errors.Join(firstErr, err)
	wait := next.Sub(r.now())
	if wait < time.Second {
		wait = time.Second
	}
	return reconcile.Result{RequeueAfter: wait}, firstErr
}

// leave carries out the local cluster's departure (Result.Left): it revokes the
// credentials in the clear it issued to legacy peers, keeps the departure notices it
// holds of peers it removed until their tokens expire, grants the shared reader
// nothing more, and deletes the Secrets of the tokens it issued.
func (r *Reconciler) leave(ctx context.Context, own *v1alpha1.Cluster, sas []corev1.ServiceAccount, now time.Time) (reconcile.Result, error) {
	var errs []error
	for i := range sas {
		if id := types.UID(sas[i].Annotations[v1alpha1.PeerClusterIDAnnotation]); id != "" {
			errs = append(errs, r.deleteLegacy(ctx, id))
		}
	}
	// The notices this cluster keeps of peers it removed go when their tokens expire.
	noticeNext, err := r.ensureNotices(ctx, own, sas)
	res := reconcile.Result{}
	if !noticeNext.IsZero() {
		res.RequeueAfter = max(noticeNext.Sub(now), time.Second)
	}
	return res, errors.Join(append(errs, err, r.ensureBootstrapRole(ctx, nil), r.deleteIssued(ctx))...)
}

// ensureGrants keeps what the shared and the legacy readers are granted for peers (those
// kept and created). The bootstrap credential may get the credentials of the peers that
// stay or come, and no longer those of the revoked ones. The legacy peers' readers may
// list namespaces and nodes, as the seed's controller does; a peer no longer named
// legacy loses that, and the credential it held in the clear is revoked. A failure is
// logged and recorded as an event, and returned.
func (r *Reconciler) ensureGrants(ctx context.Context, own *v1alpha1.Cluster, peers []members.Reader) error {
	log := logf.FromContext(ctx)
	var errs error
	if err := r.ensureBootstrapRole(ctx, members.BootstrapRules(peers)); err != nil {
		log.Error(err, "the shared reader cannot get the credentials issued to new peers until the bootstrap Role is written")
		r.event(own, corev1.EventTypeWarning, EventReasonBootstrapRoleFailed,
			"the shared reader cannot get the credentials this cluster issues until the Role %s/%s is written (re-apply the RBAC with kubectl registry install): %v", r.Namespace, v1alpha1.BootstrapRoleName, err)
		errs = err
	}
	if err := r.ensureLegacyBinding(ctx, members.LegacySubjects(v1alpha1.ReadersNamespace(r.Namespace), peers)); err != nil {
		log.Error(err, "the legacy peers' readers cannot be granted what the seed's controller reads until the binding is written")
		r.event(own, corev1.EventTypeWarning, EventReasonLegacyBindingFailed,
			"the legacy peers' readers cannot list namespaces and nodes until the ClusterRoleBinding %s is written (re-apply the RBAC with kubectl registry install): %v", v1alpha1.LegacyReaderRoleName, err)
		errs = errors.Join(errs, err)
	}
	return errs
}

// revoke carries out the revocations of plan: first the shared reader ServiceAccount
// is recreated (RotateShared: a departed cluster holds copies of its token), then each
// departed peer's ServiceAccount is deleted, with the Secret of its credential and its
// legacy credential.
func (r *Reconciler) revoke(ctx context.Context, own *v1alpha1.Cluster, plan members.Readers) error {
	log := logf.FromContext(ctx)
	readers := v1alpha1.ReadersNamespace(r.Namespace)
	if plan.RotateShared {
		shared := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: v1alpha1.ReaderName}}
		if err := r.Client.Delete(ctx, shared); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("recreating the shared reader ServiceAccount %s/%s: %w", r.Namespace, v1alpha1.ReaderName, err)
		}
		log.Info("shared reader ServiceAccount deleted to revoke its tokens; the bootstrapper creates it again", "serviceAccount", r.Namespace+"/"+v1alpha1.ReaderName)
		r.event(own, corev1.EventTypeNormal, EventReasonReaderRotated, "the shared reader ServiceAccount %s/%s was recreated: every token of it a departed cluster held is revoked", r.Namespace, v1alpha1.ReaderName)
	}
	for i := range plan.Revoke {
		sa := &plan.Revoke[i]
		uid := sa.UID
		if err := r.Client.Delete(ctx, sa, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("revoking the reader ServiceAccount %s/%s: %w", readers, sa.Name, err)
		}
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: v1alpha1.IssuedReaderSecretPrefix + sa.Labels[v1alpha1.ReaderForLabel]}}
		if err := r.Client.Delete(ctx, secret); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting the reader credential Secret %s/%s: %w", r.Namespace, secret.Name, err)
		}
		if id := types.UID(sa.Annotations[v1alpha1.PeerClusterIDAnnotation]); id != "" {
			if err := r.deleteLegacy(ctx, id); err != nil {
				return err
			}
		}
		log.Info("reader credential revoked", "serviceAccount", readers+"/"+sa.Name, "peer", sa.Annotations[v1alpha1.PeerClusterIDAnnotation])
		r.event(own, corev1.EventTypeNormal, EventReasonReaderRevoked, "the reader ServiceAccount %s/%s of cluster %s (clusterID %s) was deleted: its tokens are revoked",
			readers, sa.Name, sa.Annotations[v1alpha1.PeerClusterNameAnnotation], sa.Annotations[v1alpha1.PeerClusterIDAnnotation])
	}
	return nil
}

// createReaders creates the reader ServiceAccounts of the peers plan.Create, each named
// with a departure notice of its own, and moves each peer created to plan.Keep and its
// ServiceAccount to sas. failed joins the creations that failed (retried at the next
// reconcile); err stops the reconcile.
func (r *Reconciler) createReaders(ctx context.Context, plan *members.Readers, sas *corev1.ServiceAccountList) (failed, err error) {
	log := logf.FromContext(ctx)
	readers := v1alpha1.ReadersNamespace(r.Namespace)
	for _, p := range plan.Create {
		notice, err := members.NewNoticeName()
		if err != nil {
			return failed, err
		}
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{
			Namespace: readers,
			Name:      v1alpha1.ReaderServiceAccountName(p.ID),
			Labels:    map[string]string{"app.kubernetes.io/part-of": "kubectl-registry", v1alpha1.ReaderForLabel: v1alpha1.ReaderKey(p.ID)},
			Annotations: map[string]string{v1alpha1.PeerClusterIDAnnotation: string(p.ID), v1alpha1.PeerClusterNameAnnotation: p.Name,
				v1alpha1.DepartureNoticeAnnotation: notice},
		}}
		if err := r.Client.Create(ctx, sa, client.FieldOwner(v1alpha1.FieldManager)); err != nil {
			if apierrors.IsAlreadyExists(err) {
				continue // created since the list: the next reconcile issues its token
			}
			err = apiError(fmt.Sprintf("creating the reader ServiceAccount %s/%s for cluster %s", readers, sa.Name, p.Name), err)
			log.Error(err, "issuing a reader credential", "peer", p.ID)
			failed = errors.Join(failed, err)
			continue
		}
		log.Info("reader ServiceAccount created", "serviceAccount", readers+"/"+sa.Name, "peer", p.ID, "peerName", p.Name)
		sas.Items = append(sas.Items, *sa)
		plan.Keep = append(plan.Keep, p)
	}
	return failed, nil
}

// issueAll issues or renews the credentials of the peers kept (their ServiceAccounts
// among sas), for server and ca, where peers reach this cluster: a credential in the
// clear to a legacy peer (ensureLegacyToken), and a sealed one to every peer that
// advertises a valid key (issueSealed). It returns next moved earlier to the first
// renewal due, and the failures joined.
func (r *Reconciler) issueAll(ctx context.Context, own *v1alpha1.Cluster, keep []members.Reader, sas []corev1.ServiceAccount, server string, ca []byte, next time.Time) (time.Time, error) {
	log := logf.FromContext(ctx)
	var errs error
	byKey := map[string]*corev1.ServiceAccount{}
	for i := range sas {
		byKey[sas[i].Labels[v1alpha1.ReaderForLabel]] = &sas[i]
	}
	for _, p := range keep {
		if err := r.ensureNoticeName(ctx, byKey[v1alpha1.ReaderKey(p.ID)]); err != nil {
			log.Error(err, "naming a peer's departure notice", "peer", p.ID)
			errs = errors.Join(errs, err)
		}
	}
	for _, p := range keep {
		sa := byKey[v1alpha1.ReaderKey(p.ID)]
		if p.Legacy {
			// Named a legacy member by this cluster's admin: a credential in the clear,
			// whatever key it advertises (the seed's controller advertises none).
			renewAt, err := r.ensureLegacyToken(ctx, own, p, sa, server, ca)
			if err != nil {
				log.Error(err, "issuing a reader credential in the clear to a legacy peer", "peer", p.ID)
				errs = errors.Join(errs, err)
			} else if renewAt.Before(next) {
				next = renewAt
			}
		}
		renewAt, issued, err := r.issueSealed(ctx, own, p, sa, server, ca)
		errs = errors.Join(errs, err)
		if issued && renewAt.Before(next) {
			next = renewAt
		}
	}
	return next, errs
}

// issueSealed issues or renews the sealed credential of peer p once its own Cluster
// has been read (PeerKeys), and returns when it is due (issued). A peer that advertises
// no key, or one no credential can be sealed to, is issued nothing, and a credential in
// the clear an earlier version issued it is deleted (dropClear): a malformed or missing
// key is not an error to retry (the peer's Cluster says so, and its next key triggers
// a reconcile), and it is logged once.
func (r *Reconciler) issueSealed(ctx context.Context, own *v1alpha1.Cluster, p members.Reader, sa *corev1.ServiceAccount, server string, ca []byte) (renewAt time.Time, issued bool, err error) {
	log := logf.FromContext(ctx)
	key, known := r.PeerKeys.Get(p.ID)
	if !known {
		// Its own Cluster has not been read yet: the read triggers a reconcile.
		log.V(1).Info("not issuing a reader credential yet: the peer's own Cluster has not been read", "peer", p.ID, "peerName", p.Name)
		return time.Time{}, false, nil
	}
	p.PublicKey = key
	if p.PublicKey == "" {
		// Nothing is issued in clear: every reader of this registry namespace could
		// read it. The peer's Cluster says so (ReaderKeyReady False, NoReaderKey),
		// and the peer's key, once advertised, triggers a reconcile.
		if !p.Legacy && r.firstBadKey(p.ID, noKey) {
			log.Info("not issuing a reader credential: the peer advertises no public key to seal it to", "peer", p.ID, "peerName", p.Name, "annotation", v1alpha1.ReaderPublicKeyAnnotation)
		}
		return time.Time{}, false, r.dropClear(ctx, p)
	}
	if _, err := seal.ParsePublicKey(p.PublicKey); err != nil {
		// Nothing is issued to a key no credential can be sealed to. Not an error
		// to retry: the peer's Cluster says so (ReaderKeyReady False,
		// ReaderKeyInvalid), and the peer's next key triggers a reconcile.
		if r.firstBadKey(p.ID, p.PublicKey) {
			log.Info("not issuing a reader credential: the peer advertises a public key no credential can be sealed to",
				"peer", p.ID, "peerName", p.Name, "annotation", v1alpha1.ReaderPublicKeyAnnotation, "error", err.Error())
		}
		return time.Time{}, false, r.dropClear(ctx, p)
	}
	renewAt, err = r.ensureToken(ctx, own, p, sa, server, ca)
	if err != nil {
		log.Error(err, "issuing a reader credential", "peer", p.ID)
		return time.Time{}, false, err
	}
	return renewAt, true, nil
}

// deleteIssued deletes the Secrets holding the tokens this cluster issued to its peers.
func (r *Reconciler) deleteIssued(ctx context.Context) error {
	var secrets corev1.SecretList
	if err := r.Client.List(ctx, &secrets, client.InNamespace(r.Namespace), client.HasLabels{v1alpha1.ReaderForLabel}); err != nil {
		return fmt.Errorf("listing the reader credential Secrets of %s: %w", r.Namespace, err)
	}
	for i := range secrets.Items {
		s := &secrets.Items[i]
		if s.Annotations[v1alpha1.OwnershipAnnotation] != "" {
			continue // a copy of another cluster's: not ours
		}
		uid := s.UID
		if err := r.Client.Delete(ctx, s, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting the reader credential Secret %s/%s: %w", r.Namespace, s.Name, err)
		}
		logf.FromContext(ctx).Info("this cluster left the group: reader credential Secret deleted", "secret", r.Namespace+"/"+s.Name)
	}
	return nil
}

// dropClear deletes the credential issued to peer p when it is in clear (an earlier
// version issued one so to a peer without a key): every reader of the registry namespace
// can read it, and nothing sealed replaces it while p advertises no valid key.
func (r *Reconciler) dropClear(ctx context.Context, p members.Reader) error {
	var s corev1.Secret
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: v1alpha1.IssuedReaderSecretName(p.ID)}, &s)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return apiError("reading the reader credential Secret "+r.Namespace+"/"+v1alpha1.IssuedReaderSecretName(p.ID), err)
	}
	if s.Annotations[v1alpha1.OwnershipAnnotation] != "" || len(s.Data[v1alpha1.KubeconfigKey]) == 0 {
		return nil // a copy, not ours; or sealed
	}
	uid := s.UID
	if err := r.Client.Delete(ctx, &s, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return apiError("deleting the reader credential in clear "+r.Namespace+"/"+s.Name, err)
	}
	logf.FromContext(ctx).Info("reader credential in clear deleted: the peer advertises no key to seal it to", "secret", r.Namespace+"/"+s.Name, "peer", p.ID, "peerName", p.Name)
	return nil
}

// advertised returns the server and CA of the local shared reader Secret: what peers
// reach this cluster at.
func (r *Reconciler) advertised(ctx context.Context, own *v1alpha1.Cluster) (string, []byte, bool) {
	if own == nil {
		return "", nil, false
	}
	ref := own.Spec.AuthInfo.SecretRef
	if ref.Name == "" || (ref.Namespace != "" && ref.Namespace != r.Namespace) {
		return "", nil, false
	}
	var s corev1.Secret
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: ref.Name}, &s); err != nil {
		return "", nil, false
	}
	rd, ok := kubeconfig.Read(s.Data[v1alpha1.KubeconfigKey])
	if !ok || rd.Server == "" {
		return "", nil, false
	}
	return rd.Server, rd.CAData, true
}

// ensureToken keeps the Secret with peer p's token valid and returns when it is due: a
// Secret not due (Due, and its notice token not due) is left alone; otherwise a new
// credential is issued and sealed (sealedCredential) and written (writeIssued).
func (r *Reconciler) ensureToken(ctx context.Context, own *v1alpha1.Cluster, p members.Reader, sa *corev1.ServiceAccount, server string, ca []byte) (time.Time, error) {
	name := v1alpha1.IssuedReaderSecretName(p.ID)
	var existing corev1.Secret
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: name}, &existing)
	found := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return time.Time{}, apiError("reading the reader credential Secret "+r.Namespace+"/"+name, err)
	}
	now := r.now()
	noticeName := sa.Annotations[v1alpha1.DepartureNoticeAnnotation]
	if found && !members.TokenDue(&existing, sa.UID, seal.Fingerprint(p.PublicKey), now) && !r.noticeDue(&existing, noticeName, now) {
		renewAt, _ := time.Parse(time.RFC3339, existing.Annotations[v1alpha1.TokenRenewAfterAnnotation])
		return renewAt, nil
	}
	desired, renewAt, err := r.sealedCredential(ctx, p, sa, server, ca, noticeName, now)
	if err != nil {
		return time.Time{}, err
	}
	if raced, err := r.writeIssued(ctx, &existing, found, &desired); err != nil {
		return time.Time{}, err
	} else if raced {
		return now.Add(time.Second), nil // the cache has not seen our last write yet
	}
	annotations := desired.Annotations
	logf.FromContext(ctx).Info("issued a reader credential", "peer", p.ID, "peerName", p.Name, "serviceAccount", sa.Namespace+"/"+sa.Name,
		"sealedTo", annotations[v1alpha1.SealedToAnnotation],
		"expires", annotations[v1alpha1.TokenExpiresAtAnnotation], "renewAfter", renewAt.UTC().Format(time.RFC3339))
	if !found {
		r.event(own, corev1.EventTypeNormal, EventReasonReaderIssued, "reader ServiceAccount %s/%s issued to cluster %s (clusterID %s)", sa.Namespace, sa.Name, p.Name, p.ID)
	}
	return renewAt, nil
}

// sealedCredential issues a token of p's reader ServiceAccount sa for server and ca,
// seals its kubeconfig to p's public key (only p can open it: the other peers' readers,
// and every holder of the bootstrap credential, may read the Secret), with the notice
// token sealed beside it, and returns the Secret that holds them and when it is due.
// A key that cannot be sealed to gets no token: it is checked before one is minted.
func (r *Reconciler) sealedCredential(ctx context.Context, p members.Reader, sa *corev1.ServiceAccount, server string, ca []byte, noticeName string, now time.Time) (corev1.Secret, time.Time, error) {
	if _, err := seal.ParsePublicKey(p.PublicKey); err != nil {
		return corev1.Secret{}, time.Time{}, fmt.Errorf("cluster %s advertises a public key (%s on its Cluster) no credential can be sealed to: %w", p.Name, v1alpha1.ReaderPublicKeyAnnotation, err)
	}
	issued, err := issue.IssueReader(ctx, r.Tokens(sa.Namespace), sa.Name, sa.UID, r.TokenLifetime, now, r.Identity.Name, server, ca)
	if err != nil {
		return corev1.Secret{}, time.Time{}, apiError("requesting a token of "+sa.Namespace+"/"+sa.Name+" for cluster "+p.Name, err)
	}
	renewAt, data := issued.RenewAt, issued.Kubeconfig
	annotations := issued.Annotations
	annotations[v1alpha1.PeerClusterIDAnnotation] = string(p.ID)
	annotations[v1alpha1.PeerClusterNameAnnotation] = p.Name
	sealed, err := seal.Seal(p.PublicKey, r.Identity.ID, p.ID, data)
	if err != nil {
		return corev1.Secret{}, time.Time{}, fmt.Errorf("sealing the reader credential of cluster %s to the public key on its Cluster (%s): %w", p.Name, v1alpha1.ReaderPublicKeyAnnotation, err)
	}
	secretData := map[string][]byte{v1alpha1.SealedKubeconfigKey: sealed}
	annotations[v1alpha1.SealedToAnnotation] = seal.Fingerprint(p.PublicKey)
	// The notice token, sealed with the notice's name: what p reads its departure with
	// once the reader above is revoked. A failure issues the reader without it.
	if sealedNotice, err := r.issueNotice(ctx, p, noticeName); err != nil {
		logf.FromContext(ctx).Error(err, "issuing the departure notice token; the reader credential is issued without it", "peer", p.ID)
		r.mu.Lock()
		r.noticeFailedAt = now
		r.mu.Unlock()
	} else if sealedNotice != nil {
		secretData[v1alpha1.SealedNoticeKey] = sealedNotice
	}
	return corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   r.Namespace,
			Name:        v1alpha1.IssuedReaderSecretName(p.ID),
			Labels:      map[string]string{"app.kubernetes.io/part-of": "kubectl-registry", v1alpha1.ReaderForLabel: v1alpha1.ReaderKey(p.ID)},
			Annotations: annotations,
		},
		Type: v1alpha1.SecretTypeClusterRegistry,
		Data: secretData,
	}, renewAt, nil
}

// writeIssued writes the issued credential desired over existing (found: it exists):
// created, replaced when of another type (a Secret's type cannot change), else updated.
// raced says it was created meanwhile (the cache has not seen our last write yet).
func (r *Reconciler) writeIssued(ctx context.Context, existing *corev1.Secret, found bool, desired *corev1.Secret) (raced bool, err error) {
	name := desired.Name
	switch {
	case !found:
		if err := r.Client.Create(ctx, desired, client.FieldOwner(v1alpha1.FieldManager)); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return true, nil
			}
			return false, apiError("creating the reader credential Secret "+r.Namespace+"/"+name, err)
		}
	case existing.Type != desired.Type:
		uid := existing.UID
		if err := r.Client.Delete(ctx, existing, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return false, apiError("replacing the Secret "+r.Namespace+"/"+name, err)
		}
		if err := r.Client.Create(ctx, desired, client.FieldOwner(v1alpha1.FieldManager)); err != nil {
			return false, apiError("creating the reader credential Secret "+r.Namespace+"/"+name, err)
		}
	default:
		updated := existing.DeepCopy()
		updated.Labels, updated.Annotations, updated.Data, updated.StringData = desired.Labels, desired.Annotations, desired.Data, nil
		if err := r.Client.Update(ctx, updated, client.FieldOwner(v1alpha1.FieldManager)); err != nil {
			return false, apiError("updating the reader credential Secret "+r.Namespace+"/"+name, err)
		}
	}
	return false, nil
}

// ensureBootstrapRole makes the rules of the Role v1alpha1.BootstrapRoleName rules
// (none: the Role grants nothing), creating it when missing.
func (r *Reconciler) ensureBootstrapRole(ctx context.Context, rules []rbacv1.PolicyRule) error {
	r.mu.Lock()
	same := !r.bootstrapAt.IsZero() && r.now().Sub(r.bootstrapAt) < bootstrapRecheck && equality.Semantic.DeepEqual(r.bootstrapRules, rules)
	r.mu.Unlock()
	if same {
		return nil
	}
	name := r.Namespace + "/" + v1alpha1.BootstrapRoleName
	var role rbacv1.Role
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: v1alpha1.BootstrapRoleName}, &role)
	switch {
	case apierrors.IsNotFound(err):
		role = rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: v1alpha1.BootstrapRoleName,
				Labels: map[string]string{"app.kubernetes.io/part-of": "kubectl-registry"}},
			Rules: rules,
		}
		if err := r.Client.Create(ctx, &role, client.FieldOwner(v1alpha1.FieldManager)); err != nil && !apierrors.IsAlreadyExists(err) {
			return apiError("creating the bootstrap Role "+name, err)
		} else if err != nil {
			return fmt.Errorf("creating the bootstrap Role %s: it was created meanwhile; deciding again", name)
		}
	case err != nil:
		return apiError("reading the bootstrap Role "+name, err)
	case !equality.Semantic.DeepEqual(role.Rules, rules):
		role.Rules = rules
		if err := r.Client.Update(ctx, &role, client.FieldOwner(v1alpha1.FieldManager)); err != nil {
			return apiError("updating the bootstrap Role "+name, err)
		}
	default:
		r.remember(rules)
		return nil
	}
	var names []string
	for _, rule := range rules {
		names = append(names, rule.ResourceNames...)
	}
	logf.FromContext(ctx).Info("bootstrap Role updated: the shared reader may get these issued credentials, by name", "role", name, "secrets", names)
	r.remember(rules)
	return nil
}

func (r *Reconciler) remember(rules []rbacv1.PolicyRule) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bootstrapRules, r.bootstrapAt = rules, r.now()
}

func (r *Reconciler) event(own *v1alpha1.Cluster, typ, reason, format string, args ...any) {
	if r.Recorder == nil || own == nil {
		return
	}
	r.Recorder.Eventf(own, typ, reason, format, args...)
}

func apiError(what string, err error) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%s: %w (is the registry installed with its readers namespace? run kubectl registry install)", what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// ensureLegacyToken keeps the credential in the clear issued to legacy peer p, in the
// Secret v1alpha1.LegacyReaderSecretName(p) of the readers namespace (which no peer can
// read: this cluster's admin copies it to the peer), and returns when it is due.
func (r *Reconciler) ensureLegacyToken(ctx context.Context, own *v1alpha1.Cluster, p members.Reader, sa *corev1.ServiceAccount, server string, ca []byte) (time.Time, error) {
	if sa == nil {
		return r.now().Add(time.Second), nil // created by this reconcile: not listed yet
	}
	readers := v1alpha1.ReadersNamespace(r.Namespace)
	name := v1alpha1.LegacyReaderSecretName(p.ID)
	var existing corev1.Secret
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: readers, Name: name}, &existing)
	found := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return time.Time{}, apiError("reading the legacy reader credential Secret "+readers+"/"+name, err)
	}
	now := r.now()
	if found && !members.LegacyTokenDue(&existing, sa.UID, now) {
		renewAt, _ := time.Parse(time.RFC3339, existing.Annotations[v1alpha1.TokenRenewAfterAnnotation])
		return renewAt, nil
	}
	issued, err := issue.IssueReader(ctx, r.Tokens(sa.Namespace), sa.Name, sa.UID, r.legacyLifetime(), now, r.Identity.Name, server, ca)
	if err != nil {
		return time.Time{}, apiError("requesting a token of "+sa.Namespace+"/"+sa.Name+" for legacy peer "+p.Name, err)
	}
	annotations := issued.Annotations
	annotations[v1alpha1.PeerClusterIDAnnotation] = string(p.ID)
	annotations[v1alpha1.PeerClusterNameAnnotation] = p.Name
	desired := corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   readers,
			Name:        name,
			Labels:      map[string]string{"app.kubernetes.io/part-of": "kubectl-registry", v1alpha1.ReaderForLabel: v1alpha1.ReaderKey(p.ID)},
			Annotations: annotations,
		},
		Type: v1alpha1.SecretTypeClusterRegistry,
		Data: map[string][]byte{v1alpha1.KubeconfigKey: issued.Kubeconfig},
	}
	switch {
	case !found:
		if err := r.Client.Create(ctx, &desired, client.FieldOwner(v1alpha1.FieldManager)); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return now.Add(time.Second), nil
			}
			return time.Time{}, apiError("creating the legacy reader credential Secret "+readers+"/"+name, err)
		}
	case existing.Type != desired.Type:
		uid := existing.UID
		if err := r.Client.Delete(ctx, &existing, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return time.Time{}, apiError("replacing the Secret "+readers+"/"+name, err)
		}
		if err := r.Client.Create(ctx, &desired, client.FieldOwner(v1alpha1.FieldManager)); err != nil {
			return time.Time{}, apiError("creating the legacy reader credential Secret "+readers+"/"+name, err)
		}
	default:
		updated := existing.DeepCopy()
		updated.Labels, updated.Annotations, updated.Data, updated.StringData = desired.Labels, desired.Annotations, desired.Data, nil
		if err := r.Client.Update(ctx, updated, client.FieldOwner(v1alpha1.FieldManager)); err != nil {
			return time.Time{}, apiError("updating the legacy reader credential Secret "+readers+"/"+name, err)
		}
	}
	logf.FromContext(ctx).Info("issued a reader credential in the clear to a legacy peer", "peer", p.ID, "peerName", p.Name,
		"serviceAccount", sa.Namespace+"/"+sa.Name, "secret", readers+"/"+name,
		"expires", annotations[v1alpha1.TokenExpiresAtAnnotation], "renewAfter", issued.RenewAt.UTC().Format(time.RFC3339))
	if !found {
		r.event(own, corev1.EventTypeNormal, EventReasonReaderIssued, "reader ServiceAccount %s/%s issued in the clear to legacy peer %s (clusterID %s): Secret %s/%s",
			sa.Namespace, sa.Name, p.Name, p.ID, readers, name)
	}
	return issued.RenewAt, nil
}

// deleteLegacy deletes the credential in the clear issued to peer id, if any.
func (r *Reconciler) deleteLegacy(ctx context.Context, id types.UID) error {
	readers := v1alpha1.ReadersNamespace(r.Namespace)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: readers, Name: v1alpha1.LegacyReaderSecretName(id)}}
	if err := r.Client.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
		return apiError("deleting the legacy reader credential Secret "+readers+"/"+s.Name, err)
	}
	return nil
}

// ensureLegacyBinding makes subjects the subjects of the ClusterRoleBinding
// v1alpha1.LegacyReaderRoleName. A subject it removes was a legacy peer's reader: its
// credential in the clear is deleted and its ServiceAccount too, which revokes every
// token of it (the peer is issued a new reader, sealed when it advertises a key).
func (r *Reconciler) ensureLegacyBinding(ctx context.Context, subjects []rbacv1.Subject) error {
	r.mu.Lock()
	same := !r.legacyAt.IsZero() && r.now().Sub(r.legacyAt) < bootstrapRecheck && equality.Semantic.DeepEqual(r.legacySubjects, subjects)
	r.mu.Unlock()
	if same {
		return nil
	}
	var crb rbacv1.ClusterRoleBinding
	if err := r.APIReader.Get(ctx, client.ObjectKey{Name: v1alpha1.LegacyReaderRoleName}, &crb); err != nil {
		if apierrors.IsNotFound(err) && len(subjects) == 0 {
			r.rememberLegacy(subjects) // an older install: nothing to grant
			return nil
		}
		return apiError("reading the ClusterRoleBinding "+v1alpha1.LegacyReaderRoleName, err)
	}
	if equality.Semantic.DeepEqual(crb.Subjects, subjects) || len(crb.Subjects) == 0 && len(subjects) == 0 {
		r.rememberLegacy(subjects)
		return nil
	}
	keep := map[string]bool{}
	for _, s := range subjects {
		keep[s.Namespace+"/"+s.Name] = true
	}
	readers := v1alpha1.ReadersNamespace(r.Namespace)
	log := logf.FromContext(ctx)
	for _, s := range crb.Subjects {
		if keep[s.Namespace+"/"+s.Name] || s.Kind != rbacv1.ServiceAccountKind || s.Namespace != readers || !strings.HasPrefix(s.Name, v1alpha1.ReaderServiceAccountPrefix) {
			continue
		}
		// No longer a legacy peer: revoke what it held in the clear.
		key := strings.TrimPrefix(s.Name, v1alpha1.ReaderServiceAccountPrefix)
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: readers, Name: v1alpha1.IssuedReaderSecretPrefix + key}}
		if err := r.Client.Delete(ctx, secret); err != nil && !apierrors.IsNotFound(err) {
			return apiError("deleting the legacy reader credential Secret "+readers+"/"+secret.Name, err)
		}
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: readers, Name: s.Name}}
		if err := r.Client.Delete(ctx, sa); err != nil && !apierrors.IsNotFound(err) {
			return apiError("revoking the reader ServiceAccount "+readers+"/"+s.Name, err)
		}
		log.Info("no longer a legacy peer: its credential in the clear is revoked", "serviceAccount", readers+"/"+s.Name)
	}
	crb.Subjects = subjects
	if err := r.Client.Update(ctx, &crb, client.FieldOwner(v1alpha1.FieldManager)); err != nil {
		return apiError("updating the ClusterRoleBinding "+v1alpha1.LegacyReaderRoleName, err)
	}
	log.Info("legacy reader binding updated", "clusterRoleBinding", v1alpha1.LegacyReaderRoleName, "subjects", len(subjects))
	r.rememberLegacy(subjects)
	return nil
}

func (r *Reconciler) rememberLegacy(subjects []rbacv1.Subject) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.legacySubjects, r.legacyAt = subjects, r.now()
}
