package breaker_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them: the
// Redis clients, miniredis servers and listeners of the shared-state tests
// are all closed by their cleanups.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
