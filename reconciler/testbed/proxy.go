package testbed

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"
)

const (
	proxyDialTimeout = 5 * time.Second
	// proxyRelistenTimeout bounds how long Heal retries when the port is briefly busy.
	proxyRelistenTimeout = 5 * time.Second
)

// errProxyClosed is returned by heal after close.
var errProxyClosed = errors.New("proxy closed")

// proxy forwards TCP connections from a fixed loopback port to target. cut closes the
// listener and every connection, heal listens on the same port again.
type proxy struct {
	target string // host:port of the API server
	addr   string // 127.0.0.1:port of the proxy, fixed for its life

	mu     sync.Mutex
	ln     net.Listener          // nil while cut
	conns  map[net.Conn]struct{} // both sides of every live proxied connection
	closed bool

	wg sync.WaitGroup
}

// newProxy listens on a free loopback port and forwards to target.
func newProxy(target string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy: listening: %w", err)
	}
	p := &proxy{target: target, addr: ln.Addr().String(), conns: map[net.Conn]struct{}{}}
	p.mu.Lock()
	p.serveLocked(ln)
	p.mu.Unlock()
	return p, nil
}

func (p *proxy) url() string { return "https://" + p.addr }

func (p *proxy) serveLocked(ln net.Listener) {
	p.ln = ln
	p.wg.Go(func() { p.accept(ln) })
}

func (p *proxy) accept(ln net.Listener) {
	for {
		down, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return // closed by cut or close
		}
		if !p.track(ln, down) {
			_ = down.Close()
			continue
		}
		p.wg.Go(func() { p.forward(ln, down) })
	}
}

// track registers c as belonging to listener ln; it fails when ln was cut meanwhile.
func (p *proxy) track(ln net.Listener, c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != ln {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

func (p *proxy) forward(ln net.Listener, down net.Conn) {
	defer p.untrack(down)
	up, err := net.DialTimeout("tcp", p.target, proxyDialTimeout)
	if err != nil {
		return
	}
	if !p.track(ln, up) {
		_ = up.Close()
		return
	}
	defer p.untrack(up)

	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(up, down)
	go pipe(down, up)
	<-done
	// Either side ending ends the connection: close both so the other copy returns.
	_ = up.Close()
	_ = down.Close()
	<-done
}

// cut closes the listener and every proxied connection. Cutting twice is a no-op.
func (p *proxy) cut() error {
	p.mu.Lock()
	ln, conns := p.ln, p.conns
	p.ln, p.conns = nil, map[net.Conn]struct{}{}
	p.mu.Unlock()

	var err error
	if ln != nil {
		if cerr := ln.Close(); cerr != nil && !errors.Is(cerr, net.ErrClosed) {
			err = fmt.Errorf("closing listener: %w", cerr)
		}
	}
	for c := range conns {
		_ = c.Close()
	}
	return err
}

// heal listens on the proxy's port again. Healing an uncut proxy is a no-op.
func (p *proxy) heal() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errProxyClosed
	}
	if p.ln != nil {
		return nil
	}
	deadline := time.Now().Add(proxyRelistenTimeout)
	for {
		ln, err := net.Listen("tcp", p.addr)
		if err == nil {
			p.serveLocked(ln)
			return nil
		}
		if !errors.Is(err, syscall.EADDRINUSE) || time.Now().After(deadline) {
			return fmt.Errorf("listening on %s again: %w", p.addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (p *proxy) isCut() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ln == nil
}

// close cuts the proxy for good and waits for its goroutines.
func (p *proxy) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	_ = p.cut()
	p.wg.Wait()
}
