package peers

import (
	"bytes"
	"hash/maphash"
	"maps"
	"reflect"
	"slices"
	"sync"
	"unsafe"
	"weak"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// internMin is the shortest byte string the pool shares: shorter ones cost less than a
// lookup saves.
const internMin = 256

// bytePool shares one copy of the byte strings that recur across the peers' membership
// caches. Each of N peers serves a reader Secret and a Cluster of every member, and what
// they say of one member is the same bytes at every peer that relays it (its CA bundle;
// its reader kubeconfig too, held once with its Secret's data by mapPool): held once per
// peer, the group's N+1 copies in N caches grow as N² (#33). The pool holds its copies
// weakly: a copy is freed when no cache object holds it any more.
//
// The shared bytes must not be written to. The peers' caches hand out deep copies
// (controller-runtime's cache reader copies every object it returns), and their event
// handlers only compare.
type bytePool struct {
	seed maphash.Seed

	mu sync.Mutex
	m  map[uint64][]held
	// swept is the pool's size after its last sweep of freed copies.
	swept int
}

// held is a copy the pool holds: its first byte, weakly, and its length.
type held struct {
	first weak.Pointer[byte]
	n     int
}

func newBytePool() *bytePool {
	return &bytePool{seed: maphash.MakeSeed(), m: map[uint64][]held{}}
}

// share returns the pool's copy of b when it holds one, and otherwise makes b the
// pool's copy and returns it.
func (p *bytePool) share(b []byte) []byte {
	if p == nil || len(b) < internMin {
		return b
	}
	h := maphash.Bytes(p.seed, b)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.m[h] {
		if first := c.first.Value(); first != nil && c.n == len(b) {
			if shared := unsafe.Slice(first, c.n); bytes.Equal(shared, b) {
				return shared
			}
		}
	}
	b = b[:len(b):len(b)] // an append to the shared copy reallocates
	p.m[h] = append(p.m[h], held{first: weak.Make(&b[0]), n: len(b)})
	if n := len(p.m); n > 2*p.swept+1024 {
		p.sweep()
	}
	return b
}

// sweep drops the entries whose copies were freed. Called with mu held.
func (p *bytePool) sweep() {
	p.swept = sweepFreed(p.m, func(c held) bool { return c.first.Value() == nil })
}

// mapPool shares one copy of the small maps that recur across the peers' membership
// caches: the labels and annotations of a member's Cluster and reader Secret, and the
// reader Secret's data, which every peer that relays the member serves alike. A map of
// a few entries costs about 300 bytes however small its entries, and a Cluster or a
// reader Secret carries two or three: most of what the N+1 copies of each in N caches
// cost after their bytes are shared (bytePool) and their status dropped.
//
// Like bytePool, the pool holds its copies weakly: an entry is a weak pointer to the
// map's runtime object (a map value is a pointer to it; reflect's UnsafePointer of a
// map is the same pointer), freed once no cached object holds the map. The shared maps
// must not be written to, as bytePool's bytes: the caches hand out deep copies, and the
// membership reconciler, which reads them in place, writes maps of its own.
type mapPool[V any] struct {
	seed  maphash.Seed
	write func(h *maphash.Hash, v V)
	equal func(a, b V) bool

	mu    sync.Mutex
	m     map[uint64][]weak.Pointer[byte]
	swept int
}

func newStringMapPool() *mapPool[string] {
	return &mapPool[string]{seed: maphash.MakeSeed(), m: map[uint64][]weak.Pointer[byte]{},
		write: func(h *maphash.Hash, v string) { _, _ = h.WriteString(v) },
		equal: func(a, b string) bool { return a == b }}
}

// newBytesMapPool shares Secret data: one map of equal data holds one copy of its bytes,
// so the bytes need no pool of their own.
func newBytesMapPool() *mapPool[[]byte] {
	return &mapPool[[]byte]{seed: maphash.MakeSeed(), m: map[uint64][]weak.Pointer[byte]{},
		write: func(h *maphash.Hash, v []byte) { _, _ = h.Write(v) },
		equal: bytes.Equal}
}

// share returns the pool's copy of m when it holds an equal map, and otherwise makes m
// the pool's copy and returns it. Nil and empty maps are returned as they are.
func (p *mapPool[V]) share(m map[string]V) map[string]V {
	if p == nil || len(m) == 0 {
		return m
	}
	h := p.hash(m)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range p.m[h] {
		if obj := w.Value(); obj != nil {
			if shared := *(*map[string]V)(unsafe.Pointer(&obj)); p.same(shared, m) {
				return shared
			}
		}
	}
	p.m[h] = append(p.m[h], weak.Make((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&m)))))
	if n := len(p.m); n > 2*p.swept+1024 {
		p.sweep()
	}
	return m
}

// hash is a hash of m's entries in the order of their keys.
func (p *mapPool[V]) hash(m map[string]V) uint64 {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var h maphash.Hash
	h.SetSeed(p.seed)
	for _, k := range keys {
		_, _ = h.WriteString(k)
		_ = h.WriteByte(0)
		p.write(&h, m[k])
		_ = h.WriteByte(0)
	}
	return h.Sum64()
}

func (p *mapPool[V]) same(a, b map[string]V) bool {
	return maps.EqualFunc(a, b, p.equal)
}

// sweep drops the entries whose maps were freed. Called with mu held.
func (p *mapPool[V]) sweep() {
	p.swept = sweepFreed(p.m, func(w weak.Pointer[byte]) bool { return w.Value() == nil })
}

// objectPool shares one copy of the objects every peer relays alike: a member's Cluster
// (its status dropped) and reader Secret, and the stubs of the credentials issued to one
// member, each served by every peer of the group. Once their per-peer bookkeeping is
// cleared (relayed: its UID, resourceVersion, generation and creation time, which no
// decision reads of them) and their bytes and maps are the pools' copies, the N copies
// of such an object in N peers' caches are equal: one is kept, and each cache holds a
// pointer to it. Without it, each peer added three objects to every other peer's cache,
// the square of the group (#33).
//
// Entries are looked up by the object's namespace and name, then compared whole, so a
// peer can only share an object equal to one it serves itself; a peer holds one object of
// a name, so a name has at most one entry per peer. The pool holds its objects weakly,
// as the others, and its objects must not be written to: the caches hand out deep copies,
// the membership reconciler reads them in place without writing (TestPlan), and client-go
// transforms each object it receives once, before it is shared.
//
// The peers' REST mappings are pooled the same way (mapperPool), under a hash of their
// resource lists.
type objectPool[K comparable, T any] struct {
	equal func(a, b *T) bool

	mu    sync.Mutex
	m     map[K][]weak.Pointer[T]
	swept int
}

func newObjectPool[K comparable, T any](equal func(a, b *T) bool) *objectPool[K, T] {
	return &objectPool[K, T]{equal: equal, m: map[K][]weak.Pointer[T]{}}
}

// deepEqual is the equality of the objects the caches hold.
func deepEqual[T any](a, b *T) bool { return reflect.DeepEqual(a, b) }

// share returns the pool's object equal to o, found under key, when it holds one, and
// otherwise makes o the pool's object and returns it.
func (p *objectPool[K, T]) share(key K, o *T) *T {
	if p == nil || o == nil {
		return o
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range p.m[key] {
		if shared := w.Value(); shared != nil && p.equal(shared, o) {
			return shared
		}
	}
	p.m[key] = append(p.m[key], weak.Make(o))
	if n := len(p.m); n > 2*p.swept+1024 {
		p.sweep()
	}
	return o
}

// sweep drops the entries whose objects were freed. Called with mu held.
func (p *objectPool[K, T]) sweep() {
	p.swept = sweepFreed(p.m, func(w weak.Pointer[T]) bool { return w.Value() == nil })
}

// sweepFreed deletes from a pool's buckets the entries freed says were freed, and
// returns the number of buckets left.
func sweepFreed[K comparable, E any](m map[K][]E, freed func(E) bool) int {
	for h, es := range m {
		if live := slices.DeleteFunc(es, freed); len(live) == 0 {
			delete(m, h)
		} else {
			m[h] = live
		}
	}
	return len(m)
}

// pools are what the peers' membership caches share: the CA bundles' bytes, the maps
// of labels, annotations and Secret data, the objects every peer relays alike, and the
// peers' REST mappings. A nil *pools shares nothing.
type pools struct {
	bytes    *bytePool
	meta     *mapPool[string]
	data     *mapPool[[]byte]
	clusters *objectPool[string, v1alpha1.Cluster]
	secrets  *objectPool[string, corev1.Secret]
	// mappers are the peers' REST mappings (mapper.go).
	mappers *mapperPool
}

func newPools() *pools {
	return &pools{bytes: newBytePool(), meta: newStringMapPool(), data: newBytesMapPool(),
		clusters: newObjectPool[string](deepEqual[v1alpha1.Cluster]), secrets: newObjectPool[string](deepEqual[corev1.Secret]),
		mappers: newMapperPool()}
}

// shareCluster returns the pools' copy of a relayed Cluster, its bookkeeping cleared
// (relayed) and its bytes and maps shared already.
func (p *pools) shareCluster(c *v1alpha1.Cluster) *v1alpha1.Cluster {
	if p == nil {
		return c
	}
	relayed(&c.ObjectMeta)
	return p.clusters.share(c.Name, c)
}

// shareSecret returns the pools' copy of a relayed Secret, as shareCluster.
func (p *pools) shareSecret(s *corev1.Secret) *corev1.Secret {
	if p == nil {
		return s
	}
	relayed(&s.ObjectMeta)
	return p.secrets.share(s.Namespace+"/"+s.Name, s)
}

// relayed clears what each peer's API server writes of its own copy of an object: the
// UID, resourceVersion, generation and creation time. No decision reads them of a
// relayed object (the informers keep their resourceVersions apart, read before the
// transform); what it says of the member it describes is the same at every peer.
func relayed(o *metav1.ObjectMeta) {
	o.UID, o.ResourceVersion, o.Generation, o.CreationTimestamp = "", "", 0, metav1.Time{}
}

// mapperPool returns the pool of the peers' REST mappings (nil for nil pools).
func (p *pools) mapperPool() *mapperPool {
	if p == nil {
		return nil
	}
	return p.mappers
}

// shareMeta makes o's labels and annotations the pools' copies.
func (p *pools) shareMeta(o *metav1.ObjectMeta) {
	if p == nil {
		return
	}
	o.Labels = p.meta.share(o.Labels)
	o.Annotations = p.meta.share(o.Annotations)
}

// shareBytes returns the pools' copy of b (bytePool.share).
func (p *pools) shareBytes(b []byte) []byte {
	if p == nil {
		return b
	}
	return p.bytes.share(b)
}

// shareData returns the pools' copy of a Secret's data: equal data is one map, and so
// one copy of its bytes. It writes no map.
func (p *pools) shareData(data map[string][]byte) map[string][]byte {
	if p == nil {
		return data
	}
	return p.data.share(data)
}
