package manager

import (
	"context"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// TestRunRidesOutLostLease cuts the leader off its API server for longer than the renew
// deadline: Run must not return; it stops its reconcilers, campaigns again and, once the
// API server answers, leads again with new reconcilers. On cancel it releases the Lease.
func TestRunRidesOutLostLease(t *testing.T) {
	cfg := startAPIServer(t)
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := t.Context()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.DefaultNamespace},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	host, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, host.Host)
	viaProxy := rest.CopyConfig(cfg)
	viaProxy.Host = "https://" + p.addr

	log := &lockedLog{}
	opts := DefaultOptions()
	opts.MetricsBindAddress, opts.HealthProbeBindAddress = DisabledBindAddress, DisabledBindAddress
	opts.LeaderElection = true
	opts.ClusterName = "east"
	opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = 3*time.Second, 2*time.Second, 500*time.Millisecond
	opts.Logger = funcr.New(func(prefix, args string) { log.add(prefix + " " + args) }, funcr.Options{})

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Run(runCtx, viaProxy, opts) }()

	waitLog := func(what string, n int) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for log.count(what) < n {
			select {
			case err := <-done:
				t.Fatalf("Run returned %v while waiting for %q; log:\n%s", err, what, log.String())
			case <-time.After(100 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %d× %q within 60s; log:\n%s", n, what, log.String())
			}
		}
	}
	leases := cs.CoordinationV1().Leases(v1alpha1.DefaultNamespace)
	deadline := time.Now().Add(60 * time.Second)
	for {
		l, err := leases.Get(ctx, DefaultLeaderElectionID, metav1.GetOptions{})
		if err == nil && ptr.Deref(l.Spec.HolderIdentity, "") != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Run did not take the Lease within 60s; log:\n%s", log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	waitLog("leading: starting the reconcilers", 1)

	p.cut()
	waitLog("lost the leader election Lease", 1)
	time.Sleep(2 * time.Second) // longer than the lease: it stays cut off for a while
	p.heal(t)
	waitLog("leading: starting the reconcilers", 2)

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run returned %v after cancel, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30s of cancel")
	}
	lease, err := leases.Get(ctx, DefaultLeaderElectionID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ptr.Deref(lease.Spec.HolderIdentity, ""); got != "" {
		t.Errorf("the Lease is still held by %q after Run returned", got)
	}
}

// lockedLog collects log lines for a test.
type lockedLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *lockedLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, s)
}

func (l *lockedLog) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// tcpProxy forwards a loopback port to target; cut closes the listener and every
// connection (the API server is unreachable), heal listens on the same port again.
type tcpProxy struct {
	addr, target string
	mu           sync.Mutex
	ln           net.Listener
	conns        map[net.Conn]bool
}

func startProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{addr: ln.Addr().String(), target: target, conns: map[net.Conn]bool{}}
	p.serve(ln)
	t.Cleanup(p.cut)
	return p
}

func (p *tcpProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			down, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				down.Close()
				continue
			}
			p.mu.Lock()
			p.conns[down], p.conns[up] = true, true
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, down); up.Close() }()
			go func() { _, _ = io.Copy(down, up); down.Close() }()
		}
	}()
}

func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

func (p *tcpProxy) heal(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	p.serve(ln)
}
