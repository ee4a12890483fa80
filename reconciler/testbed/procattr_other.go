//go:build !linux

package testbed

import "syscall"

// sysProcAttr returns nil: only Linux has the parent-death signal the Linux version uses.
func sysProcAttr() *syscall.SysProcAttr { return nil }
