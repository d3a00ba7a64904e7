//go:build linux

package main

import "syscall"

// processGroup starts Jaeger in a process group of its own, so that it is
// stopped with everything it starts, and has the kernel kill it should the
// test binary die first (a -timeout panic, a SIGKILL).
func processGroup() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
