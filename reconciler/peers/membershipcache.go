package peers

import (
	"context"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// membershipCache is a peer's membership cache, its Reader: a controller-runtime cache
// and the watch of one Secret (issuedWatch) read as one. The cache holds the peer's
// Clusters and, with a reader of its own, the Secrets of its registry namespace but the
// sealed credentials (a label selector); issued holds the credential the peer issued to
// this cluster (by name), which carries the label of those credentials: a cache takes
// one selection of a kind per namespace. Get and List of Secrets read both; every other
// kind, and the informers (GetInformer, the ClusterFeatures' watch), are the embedded
// cache's.
type membershipCache struct {
	cache.Cache
	// kinds are the kinds the embedded cache watches from the start.
	kinds []client.Object
	// issued watches only the Secret issued.key, with rc.
	issued *issuedWatch
	rc     rest.Interface
	// secrets is false while the embedded cache watches no Secrets (the bootstrap
	// credential may read only issued.key; watchSecrets sets it).
	secrets atomic.Bool
}

var _ cache.Cache = (*membershipCache)(nil)

// Get reads the credential issued to this cluster from issued, every other object from
// the embedded cache; another Secret is not found when the embedded cache holds none.
func (m *membershipCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	s, ok := obj.(*corev1.Secret)
	switch {
	case ok && key == m.issued.key:
		held := m.issued.get()
		if held == nil {
			return apierrors.NewNotFound(corev1.Resource("secrets"), key.Name)
		}
		*s = *held
		return nil
	case ok && !m.secrets.Load():
		return apierrors.NewNotFound(corev1.Resource("secrets"), key.Name)
	}
	return m.Cache.Get(ctx, key, obj, opts...)
}

// List lists Secrets from the embedded cache, when it holds them, and issued; every other
// kind from the embedded cache. The Secret issued holds is listed once, even when the
// embedded cache holds it too (a peer that ignores the selectors serves it there as well).
func (m *membershipCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	secrets, ok := list.(*corev1.SecretList)
	if !ok {
		return m.Cache.List(ctx, list, opts...)
	}
	if m.secrets.Load() {
		if err := m.Cache.List(ctx, secrets, opts...); err != nil {
			return err
		}
	} else {
		*secrets = corev1.SecretList{}
	}
	held := m.issued.get()
	if held == nil || !listed(held, opts) {
		return nil
	}
	for i := range secrets.Items {
		if secrets.Items[i].Namespace == held.Namespace && secrets.Items[i].Name == held.Name {
			return nil
		}
	}
	secrets.Items = append(secrets.Items, *held)
	return nil
}

// listed reports whether a List with opts lists s: its namespace, label and field
// selectors (metadata.name and metadata.namespace) match it.
func listed(s *corev1.Secret, opts []client.ListOption) bool {
	var lo client.ListOptions
	lo.ApplyOptions(opts)
	return (lo.Namespace == "" || lo.Namespace == s.Namespace) &&
		(lo.LabelSelector == nil || lo.LabelSelector.Matches(labels.Set(s.Labels))) &&
		(lo.FieldSelector == nil || lo.FieldSelector.Matches(fields.Set{"metadata.name": s.Name, "metadata.namespace": s.Namespace}))
}

// Start runs the embedded cache and issued until ctx is done.
func (m *membershipCache) Start(ctx context.Context) error {
	go m.issued.run(ctx, m.rc)
	return m.Cache.Start(ctx)
}

// WaitForCacheSync waits for the embedded cache and issued.
func (m *membershipCache) WaitForCacheSync(ctx context.Context) bool {
	return m.Cache.WaitForCacheSync(ctx) && m.issued.waitSynced(ctx)
}

// eachInformer calls f with the informer of every kind the embedded cache watches from
// the start.
func (m *membershipCache) eachInformer(ctx context.Context, f func(cache.Informer) error) error {
	for _, obj := range m.kinds {
		inf, err := m.Cache.GetInformer(ctx, obj)
		if err != nil {
			return err
		}
		if err := f(inf); err != nil {
			return err
		}
	}
	return nil
}
