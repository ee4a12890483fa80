package kube

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// Member is what a verb that works on one member of the group (leave, revoke) knows of
// the cluster of its context: its client, its cluster ID (the UID of its kube-system
// namespace), its Cluster CRs, and among them its own, local one (nil when the
// controller has not bootstrapped it yet).
type Member struct {
	Name     string // the context, for messages
	Client   client.Client
	ID       types.UID
	Clusters []v1alpha1.Cluster
	Own      *v1alpha1.Cluster
}

// ConnectMember reaches the cluster of t through f, each request bounded by timeout, and
// reads its ID and Cluster CRs. It fails with what to do when the API server does not
// answer, the registry's CRD is missing, or several Clusters claim to be the local one.
func ConnectMember(ctx context.Context, f Factory, t Target, opts ClientOptions, timeout time.Duration) (*Member, error) {
	name := t.Name
	cl, err := f.Client(t, opts)
	if err != nil {
		return nil, fmt.Errorf("context %s: %w", name, err)
	}
	cs, err := f.Kubernetes(t, opts)
	if err != nil {
		return nil, fmt.Errorf("context %s: %w", name, err)
	}
	m := &Member{Name: name, Client: cl}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ns, err := cs.CoreV1().Namespaces().Get(rctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("cannot reach the API server of context %s at %s: %w", name, t.Config.Host, err)
	}
	m.ID = ns.UID
	var list v1alpha1.ClusterList
	if err := cl.List(rctx, &list); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("the registry is not installed on context %s: the CRD clusters.%s is missing; run: kubectl registry install --context %s", name, v1alpha1.GroupVersion.Group, name)
		}
		return nil, fmt.Errorf("context %s: listing Clusters: %w", name, err)
	}
	m.Clusters = list.Items
	for i := range m.Clusters {
		if m.Clusters[i].Spec.ClusterID == m.ID {
			if m.Own != nil {
				return nil, fmt.Errorf("context %s has several Clusters claiming to be the local cluster (clusterID %s): %s and %s; delete all but one first", name, m.ID, m.Own.Name, m.Clusters[i].Name)
			}
			m.Own = &m.Clusters[i]
		}
	}
	return m, nil
}
