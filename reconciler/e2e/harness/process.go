package harness

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Kill sends SIGKILL, as a crash or the OOM killer does, and waits for the process to
// exit. Nothing is cleaned up: with --leader-elect the Lease stays held until it expires.
// Killing a stopped controller is a no-op.
func (c *Controller) Kill(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return
	}
	c.stopped = true
	_ = c.cmd.Process.Kill()
	select {
	case err := <-c.done:
		t.Logf("controller of %s killed: %v", c.name, err)
	case <-time.After(20 * time.Second):
		t.Errorf("controller of %s did not exit within 20s of SIGKILL", c.name)
	}
}

// Running reports whether the process is still alive: not stopped, killed or exited by
// itself (say after losing its leader election).
func (c *Controller) Running() bool {
	return c.cmd.Process.Signal(syscall.Signal(0)) == nil
}

// Pid returns the process ID.
func (c *Controller) Pid() int { return c.cmd.Process.Pid }

// LogContains reports whether the controller's log so far contains s.
func (c *Controller) LogContains(s string) bool {
	b, err := os.ReadFile(c.log.Name())
	return err == nil && strings.Contains(string(b), s)
}

// LogTail returns the last lines of the controller's log.
func (c *Controller) LogTail(lines int) string { return tail(c.log.Name(), lines) }
