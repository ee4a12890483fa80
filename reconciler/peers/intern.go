package peers

import (
	"bytes"
	"hash/maphash"
	"sync"
	"unsafe"
	"weak"
)

// internMin is the shortest byte string the pool shares: shorter ones cost less than a
// lookup saves.
const internMin = 256

// bytePool shares one copy of the byte strings that recur across the peers' membership
// caches. Each of N peers serves a reader Secret and a Cluster of every member, and what
// they say of one member is the same bytes at every peer that relays it (its reader
// kubeconfig, its CA bundle): held once per peer, the group's N+1 copies in N caches
// grow as N² (#33). The pool holds its copies weakly: a copy is freed when no cache
// object holds it any more.
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
	for h, cs := range p.m {
		live := cs[:0]
		for _, c := range cs {
			if c.first.Value() != nil {
				live = append(live, c)
			}
		}
		if len(live) == 0 {
			delete(p.m, h)
		} else {
			p.m[h] = live
		}
	}
	p.swept = len(p.m)
}
