package bootstrap

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/credentials/issue"
	"github.com/kubectl-registry/kubectl-registry/reconciler/credentials/seal"
)

// Keys holds the local cluster's key pair (issue.Keys); the bootstrapper reads or makes
// it and reports on it.
type Keys = issue.Keys

// ensureKey returns the key pair kept in the Secret v1alpha1.ReaderKeySecretName of the
// readers namespace, making it when the Secret is missing. The Secret is read from the
// API server (the cache holds the registry namespace's Secrets only), and only until the
// key is known: a key is never replaced while the controller runs. A Secret that holds
// no valid key is an error for the admin to resolve (deleting it makes a new key; peers
// then seal to the new key once they read it from this cluster).
func (r *Reconciler) ensureKey(ctx context.Context) (*seal.Key, error) {
	if key := r.Keys.Get(); key != nil {
		return key, nil
	}
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	ns := v1alpha1.ReadersNamespace(r.Options.Namespace)
	ref := client.ObjectKey{Namespace: ns, Name: v1alpha1.ReaderKeySecretName}
	var s corev1.Secret
	err := reader.Get(ctx, ref, &s)
	if apierrors.IsNotFound(err) {
		// genErr, not err: the err of this function must carry the outcome of the re-read
		// below to the check after this block.
		key, genErr := seal.GenerateKey()
		if genErr != nil {
			return nil, genErr
		}
		s = corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: ns, Name: v1alpha1.ReaderKeySecretName,
				Labels: map[string]string{"app.kubernetes.io/part-of": "kubectl-registry"},
			},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{v1alpha1.PrivateKeyKey: key.Bytes()},
		}
		err = r.Client.Create(ctx, &s, client.FieldOwner(v1alpha1.FieldManager))
		if err == nil {
			logf.FromContext(ctx).Info("made the key pair of this cluster", "secret", ref.String(), "publicKey", key.PublicKey())
			r.Keys.Set(key)
			return key, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, apiError("creating the key Secret "+ref.String(), err)
		}
		// Made meanwhile (another replica): read it.
		err = reader.Get(ctx, ref, &s)
	}
	if err != nil {
		return nil, apiError("reading the key Secret "+ref.String(), err)
	}
	key, err := seal.ParsePrivateKey(s.Data[v1alpha1.PrivateKeyKey])
	if err != nil {
		return nil, fmt.Errorf("%w: Secret %s, data key %q (delete it to make a new key pair): %w", issue.ErrInvalidKeySecret, ref, v1alpha1.PrivateKeyKey, err)
	}
	r.Keys.Set(key)
	return key, nil
}

// advertiseKey writes the public key of key on the local Cluster, when it is not there.
func (r *Reconciler) advertiseKey(ctx context.Context, cluster *v1alpha1.Cluster, key *seal.Key) error {
	want := key.PublicKey()
	if cluster.Annotations[v1alpha1.ReaderPublicKeyAnnotation] == want {
		return nil
	}
	patched := cluster.DeepCopy()
	if patched.Annotations == nil {
		patched.Annotations = map[string]string{}
	}
	patched.Annotations[v1alpha1.ReaderPublicKeyAnnotation] = want
	if err := r.Client.Patch(ctx, patched, client.MergeFrom(cluster), client.FieldOwner(v1alpha1.FieldManager)); err != nil {
		return apiError("advertising the public key on the local Cluster "+cluster.Name, err)
	}
	logf.FromContext(ctx).Info("advertised the public key on the local Cluster", "publicKey", want)
	*cluster = *patched
	return nil
}
