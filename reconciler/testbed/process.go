package testbed

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// processStopTimeout is how long a process gets to exit after SIGTERM before SIGKILL.
const processStopTimeout = 10 * time.Second

// process is a child process (kube-controller-manager) whose output goes to a log.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited and been reaped
	err  error         // Wait's result, valid once done is closed
}

func startProcess(path string, args []string, out io.Writer) (*process, error) {
	cmd := exec.Command(path, args...)
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", path, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exitErr returns how the process ended; call it after done is closed.
func (p *process) exitErr() error {
	if p.err == nil {
		return errors.New("exit status 0")
	}
	return p.err
}

// stop sends SIGTERM, then SIGKILL after processStopTimeout, and waits for the exit. A nil
// or already exited process is fine.
func (p *process) stop() error {
	if p == nil {
		return nil
	}
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signalling %s: %w", p.cmd.Path, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(processStopTimeout):
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("killing %s: %w", p.cmd.Path, err)
	}
	<-p.done
	return nil
}
