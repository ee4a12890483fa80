package testbed

import (
	"bufio"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// echoServer accepts connections on loopback and echoes lines back until closed.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// roundTrip writes a line on c and reads it back.
func roundTrip(c net.Conn, r *bufio.Reader, line string) error {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return err
	}
	got, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if got != line+"\n" {
		return errors.New("echo mismatch: " + got)
	}
	return nil
}

func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, bufio.NewReader(c)
}

func TestProxyCutAndHeal(t *testing.T) {
	p, err := newProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.close)
	addr := p.addr

	live, liveR := dial(t, addr)
	if err := roundTrip(live, liveR, "before"); err != nil {
		t.Fatalf("through proxy: %v", err)
	}

	if err := p.cut(); err != nil {
		t.Fatalf("cut: %v", err)
	}
	if err := p.cut(); err != nil {
		t.Fatalf("second cut: %v", err)
	}
	if !p.isCut() {
		t.Error("isCut() = false after cut")
	}
	// The live connection is closed by the proxy.
	_ = live.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := liveR.ReadByte(); err == nil {
		t.Error("read on a cut connection succeeded")
	} else {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Errorf("read on a cut connection hung until the deadline instead of failing: %v", err)
		}
	}
	// New connections are refused.
	start := time.Now()
	if c, err := net.DialTimeout("tcp", addr, 2*time.Second); err == nil {
		_ = c.Close()
		t.Error("dial after cut succeeded")
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial after cut: got %v, want connection refused", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("dial after cut took %s, want it to fail fast", d)
	}

	if err := p.heal(); err != nil {
		t.Fatalf("heal: %v", err)
	}
	if err := p.heal(); err != nil {
		t.Fatalf("second heal: %v", err)
	}
	if p.addr != addr {
		t.Errorf("address changed across heal: %s -> %s", addr, p.addr)
	}
	c, r := dial(t, addr)
	if err := roundTrip(c, r, "after"); err != nil {
		t.Fatalf("through healed proxy: %v", err)
	}

	p.close()
	if err := p.heal(); !errors.Is(err, errProxyClosed) {
		t.Errorf("heal after close: got %v, want %v", err, errProxyClosed)
	}
}
