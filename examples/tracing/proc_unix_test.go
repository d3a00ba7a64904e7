//go:build unix && !linux

package main

import "syscall"

// processGroup starts Jaeger in a process group of its own, so that it is
// stopped with everything it starts.
func processGroup() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
