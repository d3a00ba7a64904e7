//go:build !linux

package redisstore_test

import "testing"

// captureStderr does not capture standard error outside Linux: what is
// written there is not checked.
func captureStderr(t *testing.T) func() string {
	t.Log("standard error is captured on Linux only")
	return func() string { return "" }
}
