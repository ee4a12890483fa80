package peers

import (
	"encoding/json"
	"fmt"
	"hash/maphash"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/restmapper"
)

// mapperRefresh is how long a group version's resources, once read, are taken as they
// are before a kind missing from them makes the mapper read them again (a CRD installed
// on the peer since).
const mapperRefresh = 10 * time.Second

// ResourceLister reads the resources a server serves in one group version
// (GET /api/v1 or /apis/GROUP/VERSION); client-go's discovery client is one.
type ResourceLister interface {
	ServerResourcesForGroupVersion(groupVersion string) (*metav1.APIResourceList, error)
}

// versionMapper is the REST mapper of one peer connection: it reads the resources of a
// group version only when a kind of it is first asked for, one request each, and holds
// those only. controller-runtime's mapper and client-go's discovery mapper read every
// group the server serves on their first use (with aggregated discovery, in one
// answer), about 1 MiB of mappings per peer with a bare kube-apiserver's groups, and a
// connection held three of them (the health check's client, the membership cache and
// the engine's views); a member reads 2 to 4 group versions of each peer.
//
// The peers of a group mostly serve the same resources (the same Kubernetes version, the
// registry's CRDs): the mappings of equal resource lists are one, shared by every peer's
// mapper through a mapperPool, rather than about 75 KB per peer (#33).
type versionMapper struct {
	list ResourceLister
	now  func() time.Time
	pool *mapperPool

	mu   sync.Mutex
	read map[schema.GroupVersion]time.Time
	// current are the mappings of the group versions read; shared, never written.
	current *mappings
}

// mappings are the REST mappings of the resource lists of some group versions, as one or
// more peers serve them. Shared by the mappers of those peers: never written.
type mappings struct {
	lists  map[schema.GroupVersion]*metav1.APIResourceList
	mapper meta.RESTMapper
}

// newMappings are the mappings of lists.
func newMappings(lists map[schema.GroupVersion]*metav1.APIResourceList) *mappings {
	return &mappings{lists: lists, mapper: restmapper.NewDiscoveryRESTMapper(groupResources(lists))}
}

// NewVersionMapper returns a REST mapper that reads the group versions it is asked for
// through list, as they are asked for. Safe for concurrent use.
func NewVersionMapper(list ResourceLister, now func() time.Time) meta.RESTMapper {
	return newVersionMapper(list, now, nil)
}

// newVersionMapper is NewVersionMapper sharing its mappings through pool (nil: none).
func newVersionMapper(list ResourceLister, now func() time.Time, pool *mapperPool) *versionMapper {
	return &versionMapper{list: list, now: now, pool: pool, read: map[schema.GroupVersion]time.Time{},
		current: &mappings{lists: map[schema.GroupVersion]*metav1.APIResourceList{}, mapper: meta.MultiRESTMapper{}}}
}

// ensure reads the resources of each of gvs not read yet, or read before mapperRefresh
// when again is set (the kind asked for was missing). A group version the server does
// not serve maps no kind.
func (m *versionMapper) ensure(again bool, gvs ...schema.GroupVersion) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var lists map[schema.GroupVersion]*metav1.APIResourceList // a copy, once one is read
	for _, gv := range gvs {
		if gv.Version == "" {
			continue
		}
		at, ok := m.read[gv]
		if ok && (!again || m.now().Sub(at) < mapperRefresh) {
			continue
		}
		l, err := m.list.ServerResourcesForGroupVersion(gv.String())
		switch {
		case apierrors.IsNotFound(err):
			l = &metav1.APIResourceList{GroupVersion: gv.String()}
		case err != nil:
			return fmt.Errorf("reading the resources of %s: %w", gv, err)
		}
		if lists == nil {
			lists = maps.Clone(m.current.lists)
		}
		lists[gv], m.read[gv] = l, m.now()
	}
	if lists != nil {
		m.current = m.pool.share(lists)
	}
	return nil
}

// groupResources are the group versions of lists, as discovery gives them.
func groupResources(lists map[schema.GroupVersion]*metav1.APIResourceList) []*restmapper.APIGroupResources {
	byGroup := map[string]*restmapper.APIGroupResources{}
	var out []*restmapper.APIGroupResources
	for gv, l := range lists {
		g, ok := byGroup[gv.Group]
		if !ok {
			g = &restmapper.APIGroupResources{Group: metav1.APIGroup{Name: gv.Group}, VersionedResources: map[string][]metav1.APIResource{}}
			byGroup[gv.Group] = g
			out = append(out, g)
		}
		g.Group.Versions = append(g.Group.Versions, metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: gv.Version})
		if g.Group.PreferredVersion.Version == "" || version.CompareKubeAwareVersionStrings(gv.Version, g.Group.PreferredVersion.Version) > 0 {
			g.Group.PreferredVersion = metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: gv.Version}
		}
		g.VersionedResources[gv.Version] = l.APIResources
	}
	return out
}

func (m *versionMapper) mapper() meta.RESTMapper {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.current.mapper
}

// mapperPool shares the mappings of equal resource lists among the peers' mappers. Like
// the membership caches' pools (intern.go), it holds them weakly: mappings are freed
// once no mapper holds them. What a peer serves is its own input: it can only share
// mappings equal to its own lists (looked up by a hash with a random seed, then compared
// whole), and a mapper reads a group version only when a kind of it is asked for.
type mapperPool struct {
	seed    maphash.Seed
	objects *objectPool[uint64, mappings]
}

func newMapperPool() *mapperPool {
	return &mapperPool{seed: maphash.MakeSeed(), objects: newObjectPool[uint64](func(a, b *mappings) bool { return reflect.DeepEqual(a.lists, b.lists) })}
}

// share returns the pool's mappings of lists when it holds equal ones, and otherwise
// makes the mappings of lists the pool's and returns them. A nil pool shares nothing.
func (p *mapperPool) share(lists map[schema.GroupVersion]*metav1.APIResourceList) *mappings {
	if p == nil {
		return newMappings(lists)
	}
	h, ok := p.hash(lists)
	if !ok {
		return newMappings(lists)
	}
	return p.objects.share(h, newMappings(lists))
}

// hash is a hash of lists, in the order of their group versions; false if a list cannot
// be encoded to be hashed.
func (p *mapperPool) hash(lists map[schema.GroupVersion]*metav1.APIResourceList) (uint64, bool) {
	gvs := slices.SortedFunc(maps.Keys(lists), func(a, b schema.GroupVersion) int { return strings.Compare(a.String(), b.String()) })
	var h maphash.Hash
	h.SetSeed(p.seed)
	for _, gv := range gvs {
		b, err := json.Marshal(lists[gv])
		if err != nil {
			return 0, false
		}
		_, _ = h.WriteString(gv.String())
		_ = h.WriteByte(0)
		_, _ = h.Write(b)
		_ = h.WriteByte(0)
	}
	return h.Sum64(), true
}

// lookup asks the mapping of the group versions gvs, reading them first, and once more
// when what is asked is missing.
func lookup[T any](m *versionMapper, gvs []schema.GroupVersion, ask func(meta.RESTMapper) (T, error)) (T, error) {
	if err := m.ensure(false, gvs...); err != nil {
		var zero T
		return zero, err
	}
	res, err := ask(m.mapper())
	if meta.IsNoMatchError(err) {
		if err := m.ensure(true, gvs...); err != nil {
			var zero T
			return zero, err
		}
		res, err = ask(m.mapper())
	}
	return res, err
}

func groupVersions(group string, versions []string) []schema.GroupVersion {
	gvs := make([]schema.GroupVersion, 0, len(versions))
	for _, v := range versions {
		gvs = append(gvs, schema.GroupVersion{Group: group, Version: v})
	}
	return gvs
}

// RESTMapping implements meta.RESTMapper. A kind asked without a version maps only to
// the versions of its group read already.
func (m *versionMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	return lookup(m, groupVersions(gk.Group, versions), func(d meta.RESTMapper) (*meta.RESTMapping, error) {
		return d.RESTMapping(gk, versions...)
	})
}

// RESTMappings implements meta.RESTMapper.
func (m *versionMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	return lookup(m, groupVersions(gk.Group, versions), func(d meta.RESTMapper) ([]*meta.RESTMapping, error) {
		return d.RESTMappings(gk, versions...)
	})
}

// KindFor implements meta.RESTMapper.
func (m *versionMapper) KindFor(resource schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	return lookup(m, []schema.GroupVersion{resource.GroupVersion()}, func(d meta.RESTMapper) (schema.GroupVersionKind, error) {
		return d.KindFor(resource)
	})
}

// KindsFor implements meta.RESTMapper.
func (m *versionMapper) KindsFor(resource schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	return lookup(m, []schema.GroupVersion{resource.GroupVersion()}, func(d meta.RESTMapper) ([]schema.GroupVersionKind, error) {
		return d.KindsFor(resource)
	})
}

// ResourceFor implements meta.RESTMapper.
func (m *versionMapper) ResourceFor(input schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	return lookup(m, []schema.GroupVersion{input.GroupVersion()}, func(d meta.RESTMapper) (schema.GroupVersionResource, error) {
		return d.ResourceFor(input)
	})
}

// ResourcesFor implements meta.RESTMapper.
func (m *versionMapper) ResourcesFor(input schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	return lookup(m, []schema.GroupVersion{input.GroupVersion()}, func(d meta.RESTMapper) ([]schema.GroupVersionResource, error) {
		return d.ResourcesFor(input)
	})
}

// ResourceSingularizer implements meta.RESTMapper, from the group versions read.
func (m *versionMapper) ResourceSingularizer(resource string) (string, error) {
	return m.mapper().ResourceSingularizer(resource)
}
