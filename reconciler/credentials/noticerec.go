package credentials

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/credentials/seal"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner/members"
)

// noticeDue reports whether the issued credential s must be issued again for its notice:
// the peer's ServiceAccount names a notice, s carries no notice token, and minting one
// did not fail lately.
func (r *Reconciler) noticeDue(s *corev1.Secret, noticeName string, now time.Time) bool {
	if noticeName == "" || len(s.Data[v1alpha1.SealedNoticeKey]) > 0 {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.noticeFailedAt.IsZero() || now.Sub(r.noticeFailedAt) >= bootstrapRecheck
}

// issueNotice mints a token of the notice ServiceAccount for peer p and seals it, with
// the name of p's notice, to p's key; nil when p's ServiceAccount names no notice.
func (r *Reconciler) issueNotice(ctx context.Context, p members.Reader, name string) ([]byte, error) {
	if name == "" {
		return nil, nil
	}
	tr, err := r.Tokens(r.Namespace).CreateToken(ctx, v1alpha1.NoticeName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(r.TokenLifetime / time.Second))},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, apiError(fmt.Sprintf("requesting a token of %s/%s for cluster %s", r.Namespace, v1alpha1.NoticeName, p.Name), err)
	}
	data, err := members.Notice{Token: tr.Status.Token, Name: name}.Marshal()
	if err != nil {
		return nil, err
	}
	sealed, err := seal.Seal(p.PublicKey, r.Identity.ID, p.ID, data)
	if err != nil {
		return nil, fmt.Errorf("sealing the departure notice token of cluster %s: %w", p.Name, err)
	}
	return sealed, nil
}

// ensureNoticeName gives the reader ServiceAccount sa (made before notices existed) the
// name of its peer's departure notice.
func (r *Reconciler) ensureNoticeName(ctx context.Context, sa *corev1.ServiceAccount) error {
	if sa == nil || sa.Annotations[v1alpha1.DepartureNoticeAnnotation] != "" {
		return nil
	}
	name, err := members.NewNoticeName()
	if err != nil {
		return err
	}
	base := sa.DeepCopy()
	if sa.Annotations == nil {
		sa.Annotations = map[string]string{}
	}
	sa.Annotations[v1alpha1.DepartureNoticeAnnotation] = name
	if err := r.Client.Patch(ctx, sa, client.MergeFrom(base), client.FieldOwner(v1alpha1.FieldManager)); err != nil {
		// Not named: no notice token is issued with a name the ServiceAccount does not keep.
		sa.Annotations = base.Annotations
		return apiError("naming the departure notice of "+sa.Namespace+"/"+sa.Name, err)
	}
	return nil
}

// ensureNotices carries out members.PlanNotices: the notices of the peers whose departure the
// local cluster records, and the notice Role listing them. It returns when a notice
// expires next.
func (r *Reconciler) ensureNotices(ctx context.Context, own *v1alpha1.Cluster, sas []corev1.ServiceAccount) (time.Time, error) {
	if own == nil {
		return time.Time{}, nil
	}
	readers := v1alpha1.ReadersNamespace(r.Namespace)
	var notices corev1.ConfigMapList
	if err := r.APIReader.List(ctx, &notices, client.InNamespace(readers), client.HasLabels{v1alpha1.ReaderForLabel}); err != nil {
		return time.Time{}, apiError("listing the departure notices of "+readers, err)
	}
	recorded, _, _ := members.Records(own)
	delete(recorded, r.Identity.ID)
	in := members.NoticeInput{Records: recorded, ServiceAccounts: sas, Notices: notices.Items, Expiries: map[types.UID]time.Time{}, Now: r.now()}
	for id := range recorded {
		var s corev1.Secret
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: v1alpha1.IssuedReaderSecretName(id)}, &s); err != nil {
			continue
		}
		if len(s.Data[v1alpha1.SealedNoticeKey]) == 0 {
			continue
		}
		if t, err := time.Parse(time.RFC3339, s.Annotations[v1alpha1.TokenExpiresAtAnnotation]); err == nil {
			in.Expiries[id] = t
		}
	}
	plan := members.PlanNotices(in)
	log := logf.FromContext(ctx)
	byName := map[string]*corev1.ConfigMap{}
	for i := range notices.Items {
		byName[notices.Items[i].Name] = &notices.Items[i]
	}
	// The Role first lists the new notices, and last drops the deleted ones.
	if err := r.ensureNoticeRole(ctx, members.NoticeRules(plan.Names)); err != nil {
		return plan.Next, err
	}
	for i := range plan.Write {
		cm := &plan.Write[i]
		cm.Namespace = readers
		if existing := byName[cm.Name]; existing != nil {
			updated := existing.DeepCopy()
			updated.Labels, updated.Annotations, updated.Data = cm.Labels, cm.Annotations, cm.Data
			if err := r.Client.Update(ctx, updated, client.FieldOwner(v1alpha1.FieldManager)); err != nil {
				return plan.Next, apiError("updating the departure notice "+readers+"/"+cm.Name, err)
			}
			continue
		}
		if err := r.Client.Create(ctx, cm, client.FieldOwner(v1alpha1.FieldManager)); err != nil && !apierrors.IsAlreadyExists(err) {
			return plan.Next, apiError("creating the departure notice "+readers+"/"+cm.Name, err)
		}
		log.Info("departure notice written: the departing peer can read this cluster's record of its departure after its credentials are revoked",
			"notice", readers+"/"+cm.Name, "peer", cm.Annotations[v1alpha1.PeerClusterIDAnnotation], "until", cm.Annotations[v1alpha1.NoticeUntilAnnotation])
	}
	for i := range plan.Delete {
		cm := &plan.Delete[i]
		uid := cm.UID
		if err := r.Client.Delete(ctx, cm, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return plan.Next, apiError("deleting the departure notice "+readers+"/"+cm.Name, err)
		}
		log.Info("departure notice deleted", "notice", readers+"/"+cm.Name, "peer", cm.Annotations[v1alpha1.PeerClusterIDAnnotation])
	}
	return plan.Next, nil
}

// ensureNoticeRole makes rules the rules of the Role v1alpha1.NoticeName of the readers
// namespace, creating it when missing.
func (r *Reconciler) ensureNoticeRole(ctx context.Context, rules []rbacv1.PolicyRule) error {
	r.mu.Lock()
	same := !r.noticeAt.IsZero() && r.now().Sub(r.noticeAt) < bootstrapRecheck && equality.Semantic.DeepEqual(r.noticeRules, rules)
	r.mu.Unlock()
	if same {
		return nil
	}
	readers := v1alpha1.ReadersNamespace(r.Namespace)
	name := readers + "/" + v1alpha1.NoticeName
	var role rbacv1.Role
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: readers, Name: v1alpha1.NoticeName}, &role)
	switch {
	case apierrors.IsNotFound(err):
		role = rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: readers, Name: v1alpha1.NoticeName,
				Labels: map[string]string{"app.kubernetes.io/part-of": "kubectl-registry"}},
			Rules: rules,
		}
		if err := r.Client.Create(ctx, &role, client.FieldOwner(v1alpha1.FieldManager)); err != nil {
			return apiError("creating the notice Role "+name, err)
		}
	case err != nil:
		return apiError("reading the notice Role "+name, err)
	case !equality.Semantic.DeepEqual(role.Rules, rules):
		role.Rules = rules
		if err := r.Client.Update(ctx, &role, client.FieldOwner(v1alpha1.FieldManager)); err != nil {
			return apiError("updating the notice Role "+name, err)
		}
	}
	r.mu.Lock()
	r.noticeRules, r.noticeAt = rules, r.now()
	r.mu.Unlock()
	return nil
}
