package peers

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// fakeLister serves the resource lists of served, counting the requests per group
// version; fail makes every request fail.
type fakeLister struct {
	served   map[string][]metav1.APIResource
	asked    map[string]int
	fail     error
	requests int
}

func (f *fakeLister) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	f.requests++
	f.asked[gv]++
	if f.fail != nil {
		return nil, f.fail
	}
	rs, ok := f.served[gv]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{}, gv)
	}
	return &metav1.APIResourceList{GroupVersion: gv, APIResources: rs}, nil
}

func newFakeLister() *fakeLister {
	return &fakeLister{asked: map[string]int{}, served: map[string][]metav1.APIResource{
		"v1": {
			{Name: "secrets", SingularName: "secret", Namespaced: true, Kind: "Secret"},
			{Name: "namespaces", SingularName: "namespace", Kind: "Namespace"},
		},
		"clusterregistry.k8s.cisco.com/v1alpha1": {
			{Name: "clusters", SingularName: "cluster", Kind: "Cluster"},
		},
		"apps/v1":      {{Name: "deployments", SingularName: "deployment", Namespaced: true, Kind: "Deployment"}},
		"apps/v1beta1": {{Name: "deployments", SingularName: "deployment", Namespaced: true, Kind: "Deployment"}},
	}}
}

// TestVersionMapper: a kind is mapped from its group version's resources alone, read once
// when first asked for; a kind missing is read again only after mapperRefresh (a CRD
// installed since then maps); a group version not served maps nothing; a failed read is
// an error and is not remembered.
func TestVersionMapper(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := newFakeLister()
	m := NewVersionMapper(l, func() time.Time { return now })

	mapping, err := m.RESTMapping(schema.GroupKind{Kind: "Secret"}, "v1")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := mapping.Resource, (schema.GroupVersionResource{Version: "v1", Resource: "secrets"}); got != want || mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		t.Errorf("Secret maps to %v (%s), want %v, namespaced", got, mapping.Scope.Name(), want)
	}
	mapping, err = m.RESTMapping(schema.GroupKind{Group: "clusterregistry.k8s.cisco.com", Kind: "Cluster"}, "v1alpha1")
	if err != nil {
		t.Fatal(err)
	}
	if mapping.Scope.Name() != meta.RESTScopeNameRoot || mapping.Resource.Resource != "clusters" {
		t.Errorf("Cluster maps to %v (%s), want clusters, cluster-scoped", mapping.Resource, mapping.Scope.Name())
	}
	for range 3 {
		if _, err := m.RESTMapping(schema.GroupKind{Kind: "Namespace"}, "v1"); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff(map[string]int{"v1": 1, "clusterregistry.k8s.cisco.com/v1alpha1": 1}, l.asked); diff != "" {
		t.Errorf("requests per group version (-want +got):\n%s", diff)
	}

	// A kind its group version does not serve: no new read within mapperRefresh.
	gk := schema.GroupKind{Group: "clusterregistry.k8s.cisco.com", Kind: "ClusterFeature"}
	if _, err := m.RESTMapping(gk, "v1alpha1"); !meta.IsNoMatchError(err) {
		t.Fatalf("an unserved kind: %v, want a no-match error", err)
	}
	if got := l.asked["clusterregistry.k8s.cisco.com/v1alpha1"]; got != 1 {
		t.Errorf("read %d times within %s, want 1", got, mapperRefresh)
	}
	// Its CRD installed, and the time passed: it maps.
	l.served["clusterregistry.k8s.cisco.com/v1alpha1"] = append(l.served["clusterregistry.k8s.cisco.com/v1alpha1"],
		metav1.APIResource{Name: "clusterfeatures", SingularName: "clusterfeature", Kind: "ClusterFeature"})
	now = now.Add(mapperRefresh)
	if _, err := m.RESTMapping(gk, "v1alpha1"); err != nil {
		t.Errorf("a kind served since: %v", err)
	}

	// A group version not served.
	if _, err := m.RESTMapping(schema.GroupKind{Group: "example.com", Kind: "Widget"}, "v1"); !meta.IsNoMatchError(err) {
		t.Errorf("an unserved group version: %v, want a no-match error", err)
	}

	// Two versions of a group: each maps its own; a resource without a version takes the
	// preferred one (the highest, as Kubernetes orders versions).
	for _, v := range []string{"v1beta1", "v1"} {
		mapping, err := m.RESTMapping(schema.GroupKind{Group: "apps", Kind: "Deployment"}, v)
		if err != nil || mapping.GroupVersionKind.Version != v {
			t.Errorf("Deployment %s: %v, %v", v, mapping, err)
		}
	}
	if gvk, err := m.KindFor(schema.GroupVersionResource{Group: "apps", Resource: "deployments"}); err != nil || gvk.Version != "v1" {
		t.Errorf("KindFor deployments = %v, %v, want apps/v1", gvk, err)
	}

	// A read that fails is an error, and is tried again next time.
	fail := newFakeLister()
	fail.fail = errors.New("connection refused")
	m = NewVersionMapper(fail, func() time.Time { return now })
	for range 2 {
		if _, err := m.RESTMapping(schema.GroupKind{Kind: "Secret"}, "v1"); err == nil || meta.IsNoMatchError(err) {
			t.Errorf("a failed read: %v, want the error", err)
		}
	}
	if fail.requests != 2 {
		t.Errorf("%d reads after two failed asks, want 2", fail.requests)
	}
}

// TestMapperPoolShares: the mappers of peers that serve the same resources share one set
// of mappings, which still map as each peer serves them; a peer that serves its
// resources otherwise (a hostile one) has mappings of its own, and the shared ones are
// left as they were; a mapper that reads one more group version has mappings of its own.
func TestMapperPoolShares(t *testing.T) {
	now := func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
	pool := newMapperPool()
	secret := schema.GroupKind{Kind: "Secret"}
	a, b := newVersionMapper(newFakeLister(), now, pool), newVersionMapper(newFakeLister(), now, pool)
	hostileLister := newFakeLister()
	hostileLister.served["v1"] = []metav1.APIResource{{Name: "configmaps", SingularName: "configmap", Namespaced: true, Kind: "Secret"}}
	hostile := newVersionMapper(hostileLister, now, pool)
	for _, m := range []*versionMapper{a, b, hostile} {
		if _, err := m.RESTMapping(secret, "v1"); err != nil {
			t.Fatal(err)
		}
	}
	if a.current != b.current {
		t.Error("two peers serving the same resources do not share their mappings")
	}
	if hostile.current == a.current {
		t.Error("a peer serving other resources shares the mappings of the others")
	}
	for _, tt := range []struct {
		m    *versionMapper
		want string
	}{{a, "secrets"}, {b, "secrets"}, {hostile, "configmaps"}} {
		if mapping, err := tt.m.RESTMapping(secret, "v1"); err != nil || mapping.Resource.Resource != tt.want {
			t.Errorf("Secret maps to %v (%v), want %s", mapping, err, tt.want)
		}
	}
	if _, err := a.RESTMapping(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "v1"); err != nil {
		t.Fatal(err)
	}
	if a.current == b.current {
		t.Error("a mapper that read one more group version still shares the mappings of one that did not")
	}
	if _, err := b.RESTMapping(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "v1"); err != nil {
		t.Fatal(err)
	}
	if a.current != b.current {
		t.Error("the mappers read the same group versions again but do not share their mappings")
	}
}

// TestMapperPoolFrees: the mapper pool holds its mappings weakly, like the others.
func TestMapperPoolFrees(t *testing.T) {
	pool := newMapperPool()
	gv := schema.GroupVersion{Group: "example.com", Version: "v1"}
	for i := range 3000 {
		pool.share(map[schema.GroupVersion]*metav1.APIResourceList{gv: {GroupVersion: gv.String(), APIResources: []metav1.APIResource{{Name: strconv.Itoa(i), Kind: "K"}}}})
	}
	if n := swept(&pool.objects.mu, pool.objects.sweep, func() int { return len(pool.objects.m) }); n > 10 {
		t.Errorf("the pool still holds %d entries of 3000 mappings nothing holds", n)
	}
}
