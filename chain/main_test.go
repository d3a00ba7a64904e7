package chain_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// quiet drops go-redis's own log lines (a refused dial per round trip
// while a test has Redis stopped); what a chain logs is tested separately.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// TestMain fails the package's tests if a goroutine outlives them. One of
// go-redis's is let be: after PoolSize failed dials (Redis stopped), a pool
// re-dials in the background once a second until it connects or sees,
// after its sleep, that the client was closed; it belongs to the client,
// not to a chain, and ends within a second of Close.
func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}
