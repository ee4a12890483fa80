package membership

import (
	"context"
	"maps"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/credentials/seal"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
	"github.com/kubectl-registry/kubectl-registry/reconciler/peers"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner/members"
)

// readNotices reads, for every member this cluster has a Cluster of and does not read
// now (no view), the departure notice that member keeps of this cluster, with the notice
// token it sealed to this cluster (v1alpha1.SealedNoticeKey of the credential it issued,
// kept as received), from the server and CA pinned for it here: how a cluster whose
// credentials the members revoked while it was down learns that they removed it. Each
// member is read at most every noticeEvery; a notice that is missing, refused or not
// about this cluster counts as no record.
func (r *Reconciler) readNotices(ctx context.Context, clusters []v1alpha1.Cluster, secrets []corev1.Secret, views []members.View) []members.View {
	if r.Keys == nil {
		return nil
	}
	key := r.Keys.Get()
	if key == nil {
		return nil
	}
	read := r.ReadNotice
	if read == nil {
		read = peers.ReadNotice
	}
	viewed := map[types.UID]bool{}
	for _, v := range views {
		viewed[v.ClusterID] = true
	}
	byName := map[string]*corev1.Secret{}
	for i := range secrets {
		byName[secrets[i].Name] = &secrets[i]
	}
	log := logf.FromContext(ctx)
	now := r.now()
	pending := map[types.UID]noticeRead{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range clusters {
		c := &clusters[i]
		x := c.Spec.ClusterID
		if x == "" || x == r.Identity.ID || viewed[x] || c.Disabled() {
			continue
		}
		received := byName[v1alpha1.ReceivedReaderSecretName(x)]
		if received == nil || received.Annotations[v1alpha1.OwnershipAnnotation] != string(x) || len(received.Data[v1alpha1.SealedNoticeKey]) == 0 {
			continue
		}
		ref := c.Spec.AuthInfo.SecretRef
		pinnedSecret := byName[ref.Name]
		if ref.Name == "" || (ref.Namespace != "" && ref.Namespace != r.Namespace) || pinnedSecret == nil {
			continue
		}
		r.mu.Lock()
		last, seen := r.notices[x]
		r.mu.Unlock()
		if seen && now.Sub(last.at) < noticeEvery {
			pending[x] = last
			continue
		}
		// Each member is read on its own: one that does not answer holds up no other.
		wg.Go(func() {
			got := r.readNotice(ctx, c, key, received, pinnedSecret, read)
			got.at = now
			mu.Lock()
			pending[x] = got
			mu.Unlock()
		})
	}
	wg.Wait()
	var out []members.View
	for _, x := range slices.Sorted(maps.Keys(pending)) {
		if v := pending[x].view; v != nil {
			out = append(out, *v)
			log.V(1).Info("departure notice counted as the member's record", "cluster", v.Name)
		}
	}
	r.mu.Lock()
	r.notices = pending
	r.mu.Unlock()
	return out
}

// readNotice reads the departure notice member c keeps of this cluster, with the notice
// credential in received (sealed to key) and the server and CA of pinnedSecret.
func (r *Reconciler) readNotice(ctx context.Context, c *v1alpha1.Cluster, key *seal.Key, received, pinnedSecret *corev1.Secret,
	read func(ctx context.Context, server string, ca []byte, token string, addresses kubeconfig.AddressPolicy, namespace, name string) (*corev1.ConfigMap, error)) noticeRead {
	log := logf.FromContext(ctx)
	x := c.Spec.ClusterID
	pin, ok := kubeconfig.Read(pinnedSecret.Data[v1alpha1.KubeconfigKey])
	raw, err := key.Open(x, r.Identity.ID, received.Data[v1alpha1.SealedNoticeKey])
	var notice members.Notice
	if err == nil {
		notice, err = members.ParseNotice(raw)
	}
	switch {
	case !ok || pin.Server == "":
		log.V(1).Info("departure notice not read: no server pinned for the member", "cluster", c.Name)
		return noticeRead{}
	case err != nil:
		log.Info("departure notice not read: its credential does not open", "cluster", c.Name, "error", err.Error())
		return noticeRead{}
	}
	rctx, cancel := context.WithTimeout(ctx, noticeTimeout)
	defer cancel()
	cm, err := read(rctx, pin.Server, pin.CAData, notice.Token, r.Addresses, v1alpha1.ReadersNamespace(r.Namespace), notice.Name)
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsForbidden(err):
		log.V(1).Info("no departure notice of this cluster on the member", "cluster", c.Name)
		return noticeRead{}
	case err != nil:
		_, class := peers.Classify(err)
		log.V(1).Info("departure notice not read", "cluster", c.Name, "class", class, "error", err.Error())
		return noticeRead{}
	}
	v, err := members.NoticeView(c.Name, x, r.Identity.ID, cm)
	if err != nil {
		log.Info("departure notice refused", "cluster", c.Name, "error", err.Error())
		return noticeRead{}
	}
	log.Info("departure notice read: the member records this cluster's departure", "cluster", c.Name, "record", cm.Data[v1alpha1.DepartureKey])
	return noticeRead{view: &v}
}

// noticesPending reports whether a member's notice was read (or tried) at the last
// reconcile: it is read again after noticeEvery.
func (r *Reconciler) noticesPending() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.notices) > 0
}
