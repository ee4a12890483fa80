package kubefake

import (
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	discoveryfake "k8s.io/client-go/discovery/fake"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// AddServed is Add for verbs that read through client-go alone (sync-diff): the
// cluster's dynamic client and clientset hold objs too, its discovery serves their kinds,
// the core kinds and the registry's, and every SubjectAccessReview is allowed.
func (f *Factory) AddServed(context string, objs ...client.Object) (*Cluster, error) {
	c := f.Add(context, objs...)
	var core []runtime.Object
	resources := map[schema.GroupVersion][]metav1.APIResource{}
	seen := map[schema.GroupVersionKind]bool{}
	serve := func(gvk schema.GroupVersionKind, namespaced bool) {
		if seen[gvk] {
			return
		}
		seen[gvk] = true
		plural, singular := metaResource(gvk)
		resources[gvk.GroupVersion()] = append(resources[gvk.GroupVersion()], metav1.APIResource{
			Name: plural, SingularName: singular, Kind: gvk.Kind, Namespaced: namespaced,
			Verbs: metav1.Verbs{"get", "list", "watch", "create", "update", "patch", "delete"},
		})
	}
	for _, k := range []string{"Namespace", "ConfigMap", "Secret"} {
		serve(schema.GroupVersionKind{Version: "v1", Kind: k}, k != "Namespace")
	}
	for _, k := range []string{"Cluster", "ClusterFeature", "ResourceSyncRule", "SyncPolicy"} {
		serve(v1alpha1.GroupVersion.WithKind(k), false)
	}
	scheme := c.Client.Scheme()
	for _, o := range objs {
		gvks, _, err := scheme.ObjectKinds(o)
		if err != nil {
			return nil, fmt.Errorf("kubefake: %w", err)
		}
		serve(gvks[0], o.GetNamespace() != "")
		if err := c.Dynamic.Tracker().Add(o.DeepCopyObject()); err != nil {
			return nil, fmt.Errorf("kubefake: %w", err)
		}
		if clientgoscheme.Scheme.Recognizes(gvks[0]) {
			core = append(core, o.DeepCopyObject())
		}
	}
	cs := k8sfake.NewClientset(core...)
	cs.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		sar.Status.Allowed = true
		return true, sar, nil
	})
	c.Kubernetes = cs
	fake := &k8stesting.Fake{}
	for gv, rs := range resources {
		fake.Resources = append(fake.Resources, &metav1.APIResourceList{GroupVersion: gv.String(), APIResources: rs})
	}
	c.Discovery = &discoveryfake.FakeDiscovery{Fake: fake}
	return c, nil
}

// metaResource returns the plural and singular resource names of a kind, as the API
// server derives them for CRDs.
func metaResource(gvk schema.GroupVersionKind) (plural, singular string) {
	p, s := meta.UnsafeGuessKindToResource(gvk)
	return p.Resource, s.Resource
}
