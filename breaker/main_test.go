package breaker_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them. (The
// tests of Shared on Redis are redisstore's.)
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
