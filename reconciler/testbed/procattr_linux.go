package testbed

import "syscall"

// sysProcAttr puts the child in its own process group (a terminal's Ctrl-C reaches the
// test binary, which stops the bed, not the child directly) and has the kernel kill it if
// the test binary dies without stopping it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
