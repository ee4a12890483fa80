package engine

import "sync"

// passes runs at most one pass per key at a time, and no more passes than the requests
// need: a request made while a pass of its key has not begun (begin) is served by that
// pass, and any number made after it began by one more pass once it ends. A refresh
// asks every scope the rules need for a pass (enqueueScope); a member that starts among
// many peers makes many refreshes before the scopes' informers sync, and each would
// otherwise queue every object again.
type passes[K comparable] struct {
	mu      sync.Mutex
	running map[K]*passState
}

type passState struct {
	// begun is set once the pass has begun: a request after it needs another pass.
	begun bool
	// again is set by such a request, waiting by a request before it: one more pass is
	// needed if this one ends without beginning (its scope never synced).
	again, waiting bool
}

// run runs pass for k unless a pass of k that has not begun serves the request. pass
// calls begin just before it reads what it acts on; a pass that ends without calling it
// serves no request made while it ran, and one more pass follows. run returns once the
// pass it started, and every pass asked for meanwhile, have ended; a request served by
// another pass returns at once.
func (p *passes[K]) run(k K, pass func(begin func())) {
	p.mu.Lock()
	if st, ok := p.running[k]; ok {
		if st.begun {
			st.again = true
		} else {
			st.waiting = true
		}
		p.mu.Unlock()
		return
	}
	if p.running == nil {
		p.running = map[K]*passState{}
	}
	st := &passState{}
	p.running[k] = st
	p.mu.Unlock()
	begin := func() {
		p.mu.Lock()
		st.begun = true
		p.mu.Unlock()
	}
	for {
		pass(begin)
		p.mu.Lock()
		if !st.again && (st.begun || !st.waiting) {
			delete(p.running, k)
			p.mu.Unlock()
			return
		}
		st.begun, st.again, st.waiting = false, false, false
		p.mu.Unlock()
	}
}
