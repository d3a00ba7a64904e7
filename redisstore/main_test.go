package redisstore_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them, but for
// go-redis's re-dial loop: after PoolSize failed dials (a test that stops
// Redis) a pool re-dials in the background once a second until it connects
// or sees the client closed; it belongs to the client, not to a store, and
// ends within a second of Close. The Redis clients, miniredis servers and
// listeners of the tests are all closed by their cleanups.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}
