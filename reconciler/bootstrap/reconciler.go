package bootstrap

import (
	"bytes"
	"context"
	"fmt"
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
	"github.com/kubectl-registry/kubectl-registry/reconciler/credentials/seal"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
)

// Reconciler keeps the local Cluster CR, the reader ServiceAccount and the reader
// kubeconfig Secret in place, and renews the reader token.
type Reconciler struct {
	Client client.Client
	// APIReader reads from the API server what the cache does not hold (the key Secret
	// of the readers namespace); nil means Client.
	APIReader client.Reader
	// Keys receives the local key pair; nil makes and advertises none (the peers then
	// issue this cluster no credential: it reads only their membership).
	Keys     *Keys
	Tokens   func(namespace string) TokenMinter
	Identity Identity
	Options  Options
	Recorder record.EventRecorder
	// Metrics records when the reader token is due for renewal; nil records nothing.
	Metrics *Metrics
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// SetupWithManager registers the reconciler. It runs once at start and again whenever
// the local Cluster CR or a Secret of the registry namespace changes, and when the token
// is due for renewal.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	kick := make(chan event.GenericEvent, 1)
	kick <- event.GenericEvent{Object: &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: r.Identity.Name}}}
	local := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: r.Identity.Name}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("bootstrap").
		For(&v1alpha1.Cluster{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetName() == r.Identity.Name
		}))).
		Watches(&corev1.Secret{}, local, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetNamespace() == r.Options.Namespace
		}))).
		Watches(&corev1.ServiceAccount{}, local, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetNamespace() == r.Options.Namespace && o.GetName() == v1alpha1.ReaderName
		}))).
		WatchesRawSource(source.Channel(kick, local)).
		Complete(r)
}

// Reconcile ensures the local Cluster CR, the reader ServiceAccount and Secret, and
// requeues itself for the next token renewal.
func (r *Reconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	log := logf.FromContext(ctx).WithValues("cluster", r.Identity.Name)
	// The key first, so that a new local Cluster advertises it from the start: peers
	// issue it credentials as soon as they read its Cluster.
	var key *seal.Key
	var keyErr error
	if r.Keys != nil {
		key, keyErr = r.ensureKey(ctx)
		if keyErr != nil {
			// Reported at once, for the local Cluster's ReaderKeyReady condition, even if
			// the rest fails.
			r.Keys.Report(keyErr)
		}
	}
	cluster, err := r.ensureCluster(ctx, key)
	if err != nil {
		return reconcile.Result{}, err
	}
	sa, err := r.ensureServiceAccount(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	if sa == nil {
		// The ServiceAccount exists but the cache has not seen it yet, so the UID its
		// tokens are bound to is unknown: look again shortly rather than re-issue.
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}
	renewAt, err := r.ensureSecret(ctx, cluster, sa.UID)
	if err != nil {
		if r.Recorder != nil {
			r.Recorder.Event(cluster, corev1.EventTypeWarning, "ReaderSecretFailed", err.Error())
		}
		return reconcile.Result{}, err
	}
	r.Metrics.observeRenewAfter(renewAt)
	if r.Keys != nil {
		// Reported last: a missing readers namespace (an older install) leaves the rest
		// working.
		err := keyErr
		if err == nil {
			err = r.advertiseKey(ctx, cluster, key)
			r.Keys.Report(err)
		}
		if err != nil {
			if r.Recorder != nil {
				r.Recorder.Event(cluster, corev1.EventTypeWarning, "KeyFailed", err.Error())
			}
			return reconcile.Result{}, err
		}
	}
	wait := renewAt.Sub(r.now())
	if wait < time.Second {
		wait = time.Second
	}
	log.V(1).Info("local cluster bootstrapped", "tokenRenewAfter", renewAt.UTC().Format(time.RFC3339))
	return reconcile.Result{RequeueAfter: wait}, nil
}

func (r *Reconciler) secretRef(c *v1alpha1.Cluster) types.NamespacedName {
	ref := types.NamespacedName{Namespace: c.Spec.AuthInfo.SecretRef.Namespace, Name: c.Spec.AuthInfo.SecretRef.Name}
	if ref.Namespace == "" {
		ref.Namespace = r.Options.Namespace
	}
	if ref.Name == "" {
		ref.Name = c.Name
	}
	return ref
}

// ensureCluster returns the local Cluster, creating it when missing (advertising key, when
// not nil).
func (r *Reconciler) ensureCluster(ctx context.Context, key *seal.Key) (*v1alpha1.Cluster, error) {
	o := r.Options
	var cluster v1alpha1.Cluster
	err := r.Client.Get(ctx, client.ObjectKey{Name: r.Identity.Name}, &cluster)
	if apierrors.IsNotFound(err) {
		cluster = v1alpha1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Name: r.Identity.Name},
			Spec: v1alpha1.ClusterSpec{
				ClusterID: r.Identity.ID,
				AuthInfo:  v1alpha1.AuthInfo{SecretRef: v1alpha1.NamespacedName{Name: r.Identity.Name, Namespace: o.Namespace}},
			},
		}
		if o.Endpoint != "" {
			cluster.Spec.KubernetesAPIEndpoints = endpointsWith(nil, o.NetworkName, o.Endpoint, o.EndpointCA)
		}
		if key != nil {
			cluster.Annotations = map[string]string{v1alpha1.ReaderPublicKeyAnnotation: key.PublicKey()}
		}
		if err := r.Client.Create(ctx, &cluster, client.FieldOwner(v1alpha1.FieldManager)); err != nil {
			return nil, apiError("creating the local Cluster "+r.Identity.Name, err)
		}
		logf.FromContext(ctx).Info("created the local Cluster", "cluster", cluster.Name, "clusterID", cluster.Spec.ClusterID)
		return &cluster, nil
	}
	if err != nil {
		return nil, apiError("reading the local Cluster "+r.Identity.Name, err)
	}
	if cluster.Spec.ClusterID != r.Identity.ID {
		return nil, fmt.Errorf("the Cluster named %s describes cluster %s, not this cluster (%s): choose another --cluster-name", cluster.Name, cluster.Spec.ClusterID, r.Identity.ID)
	}
	patched := cluster.DeepCopy()
	if patched.Spec.AuthInfo.SecretRef.Name == "" {
		patched.Spec.AuthInfo.SecretRef = v1alpha1.NamespacedName{Name: cluster.Name, Namespace: o.Namespace}
	}
	if o.Endpoint != "" {
		patched.Spec.KubernetesAPIEndpoints = endpointsWith(cluster.Spec.KubernetesAPIEndpoints, o.NetworkName, o.Endpoint, o.EndpointCA)
	}
	if !equalSpec(cluster.Spec, patched.Spec) {
		if err := r.Client.Patch(ctx, patched, client.MergeFrom(&cluster), client.FieldOwner(v1alpha1.FieldManager)); err != nil {
			return nil, apiError("updating the local Cluster "+cluster.Name, err)
		}
	}
	return patched, nil
}

func equalSpec(a, b v1alpha1.ClusterSpec) bool {
	if a.ClusterID != b.ClusterID || a.AuthInfo != b.AuthInfo || len(a.KubernetesAPIEndpoints) != len(b.KubernetesAPIEndpoints) {
		return false
	}
	for i := range a.KubernetesAPIEndpoints {
		x, y := a.KubernetesAPIEndpoints[i], b.KubernetesAPIEndpoints[i]
		if x.ClientNetwork != y.ClientNetwork || x.ServerAddress != y.ServerAddress || !bytes.Equal(x.CABundle, y.CABundle) {
			return false
		}
	}
	return true
}

// ensureServiceAccount returns the reader ServiceAccount, creating it when missing; it
// returns nil, nil when the ServiceAccount exists but the cache has not seen it yet.
func (r *Reconciler) ensureServiceAccount(ctx context.Context) (*corev1.ServiceAccount, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: r.Options.Namespace, Name: v1alpha1.ReaderName}}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(sa), sa)
	if apierrors.IsNotFound(err) {
		sa.Labels = map[string]string{"app.kubernetes.io/part-of": "kubectl-registry"}
		err = r.Client.Create(ctx, sa, client.FieldOwner(v1alpha1.FieldManager))
		if apierrors.IsAlreadyExists(err) {
			// Created by an earlier reconcile, not in the cache yet: its UID is unknown.
			return nil, nil
		}
	}
	if err != nil {
		return nil, apiError("ensuring the reader ServiceAccount "+r.Options.Namespace+"/"+v1alpha1.ReaderName, err)
	}
	return sa, nil
}

// ensureSecret keeps the reader kubeconfig Secret valid and returns when its token is
// due for renewal.
func (r *Reconciler) ensureSecret(ctx context.Context, cluster *v1alpha1.Cluster, saUID types.UID) (time.Time, error) {
	ref := r.secretRef(cluster)
	server, ca, err := r.Options.desiredServer(cluster)
	if err != nil {
		return time.Time{}, err
	}
	var existing corev1.Secret
	err = r.Client.Get(ctx, ref, &existing)
	found := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return time.Time{}, apiError("reading the reader Secret "+ref.String(), err)
	}
	if found {
		if renewAt, ok := r.current(&existing, server, ca, saUID); ok {
			return renewAt, nil
		}
	}

	now := r.now()
	issued, err := issue.IssueReader(ctx, r.Tokens(r.Options.Namespace), v1alpha1.ReaderName, saUID, r.Options.TokenLifetime, now, cluster.Name, server, ca)
	if err != nil {
		return time.Time{}, apiError("requesting a reader token for "+r.Options.Namespace+"/"+v1alpha1.ReaderName, err)
	}
	renewAt, data := issued.RenewAt, issued.Kubeconfig

	desired := corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   ref.Namespace,
			Name:        ref.Name,
			Labels:      map[string]string{"app.kubernetes.io/part-of": "kubectl-registry"},
			Annotations: issued.Annotations,
		},
		Type: v1alpha1.SecretTypeClusterRegistry,
		Data: map[string][]byte{v1alpha1.KubeconfigKey: data},
	}
	if raced, err := r.writeSecret(ctx, &existing, found, &desired); err != nil {
		return time.Time{}, err
	} else if raced {
		// The cache has not seen our last write yet: look again shortly.
		return r.now().Add(time.Second), nil
	}
	logf.FromContext(ctx).Info("issued a reader token", "secret", ref.String(), "server", server,
		"expires", issued.Annotations[v1alpha1.TokenExpiresAtAnnotation], "renewAfter", renewAt.UTC().Format(time.RFC3339))
	if r.Recorder != nil {
		r.Recorder.Eventf(cluster, corev1.EventTypeNormal, "ReaderTokenIssued", "reader token in Secret %s renewed; expires %s", ref, issued.Annotations[v1alpha1.TokenExpiresAtAnnotation])
	}
	return renewAt, nil
}

// writeSecret writes the shared reader Secret desired over existing (found: it exists):
// created; replaced when of another type (the type of a Secret is immutable); else
// updated, its other labels and annotations kept and the ownership mark of a copy
// dropped (the local cluster's own Secret is never a copy). raced says it was created
// meanwhile.
func (r *Reconciler) writeSecret(ctx context.Context, existing *corev1.Secret, found bool, desired *corev1.Secret) (raced bool, err error) {
	ref := client.ObjectKeyFromObject(desired)
	switch {
	case !found:
		if err := r.Client.Create(ctx, desired, client.FieldOwner(v1alpha1.FieldManager)); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return true, nil
			}
			return false, apiError("creating the reader Secret "+ref.String(), err)
		}
	case existing.Type != desired.Type:
		// The type of a Secret is immutable: replace it.
		if err := r.Client.Delete(ctx, existing, client.Preconditions{UID: &existing.UID}); err != nil && !apierrors.IsNotFound(err) {
			return false, apiError("replacing the reader Secret "+ref.String()+" of type "+string(existing.Type), err)
		}
		if err := r.Client.Create(ctx, desired, client.FieldOwner(v1alpha1.FieldManager)); err != nil {
			return false, apiError("creating the reader Secret "+ref.String(), err)
		}
	default:
		updated := existing.DeepCopy()
		if updated.Annotations == nil {
			updated.Annotations = map[string]string{}
		}
		for k, v := range desired.Annotations {
			updated.Annotations[k] = v
		}
		if updated.Labels == nil {
			updated.Labels = map[string]string{}
		}
		for k, v := range desired.Labels {
			updated.Labels[k] = v
		}
		delete(updated.Annotations, v1alpha1.OwnershipAnnotation)
		delete(updated.Labels, v1alpha1.OwnershipLabel)
		updated.Data = desired.Data
		updated.StringData = nil
		if err := r.Client.Update(ctx, updated, client.FieldOwner(v1alpha1.FieldManager)); err != nil {
			return false, apiError("updating the reader Secret "+ref.String(), err)
		}
	}
	return false, nil
}

// current reports whether the existing Secret needs no new token, and when to renew it.
func (r *Reconciler) current(s *corev1.Secret, server string, ca []byte, saUID types.UID) (time.Time, bool) {
	if s.Type != v1alpha1.SecretTypeClusterRegistry || s.Annotations[v1alpha1.OwnershipAnnotation] != "" ||
		s.Annotations[v1alpha1.TokenServiceAccountUIDAnnotation] != string(saUID) {
		return time.Time{}, false
	}
	renewAt, err := time.Parse(time.RFC3339, s.Annotations[v1alpha1.TokenRenewAfterAnnotation])
	if err != nil || !r.now().Before(renewAt) {
		return time.Time{}, false
	}
	cfg, err := kubeconfig.Parse(s.Data[v1alpha1.KubeconfigKey])
	if err != nil || cfg.Host != server || !bytes.Equal(cfg.CAData, ca) {
		return time.Time{}, false
	}
	return renewAt, true
}
