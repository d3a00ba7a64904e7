//go:build linux

package redisstore_test

import (
	"os"
	"syscall"
	"testing"
)

// captureStderr points the process's standard error (file descriptor 2,
// which a logger made with os.Stderr writes to) at a file until the
// returned function is called, or the test ends, and returns what was
// written to it.
func captureStderr(t *testing.T) func() string {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	saved, err := syscall.Dup(2)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Dup3(int(f.Fd()), 2, 0); err != nil {
		t.Fatal(err)
	}
	done := false
	restore := func() {
		if !done {
			done = true
			_ = syscall.Dup3(saved, 2, 0)
			_ = syscall.Close(saved)
		}
	}
	t.Cleanup(restore)
	return func() string {
		restore()
		b, err := os.ReadFile(f.Name())
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
}
