// Package redistest gives integration tests a real Redis server: Addr finds
// one (or skips the test, or fails it under CI), Client connects to it, and
// Prefix gives each test a key namespace of its own.
//
// The server is the one at $BACKSTOP_REDIS_ADDR (host:port), or at
// 127.0.0.1:6379 when that is unset. .ci/run installs and starts one, and
// sets CI=true, so that under CI a missing server fails the tests instead
// of skipping them. To run the integration tests locally:
//
//	apt-get install -y redis-server && redis-server --bind 127.0.0.1 --port 6379 --daemonize yes
//
// Tests share the server, possibly from several packages at once, so they
// never flush it: each test writes under its own Prefix, and the keys under
// it are deleted when the test ends.
package redistest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// EnvAddr names the environment variable that holds the server's
	// host:port.
	EnvAddr = "BACKSTOP_REDIS_ADDR"
	// DefaultAddr is the server's address when EnvAddr is unset or empty.
	DefaultAddr = "127.0.0.1:6379"
	// pingTimeout bounds Addr's check that the server answers.
	pingTimeout = time.Second
)

// Addr returns the address of a Redis server that answered a PING within a
// second. When none does, it fails the test if the environment variable CI
// is "true" and skips it otherwise, saying how to start a server.
func Addr(t testing.TB) string {
	t.Helper()
	addr := os.Getenv(EnvAddr)
	if addr == "" {
		addr = DefaultAddr
	}
	c := newClient(addr, -1) // one PING: a refused connection is an answer
	ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
	err := c.Ping(ctx).Err()
	cancel()
	_ = c.Close()
	if err == nil {
		return addr
	}
	msg := fmt.Sprintf("redistest: no Redis answers at %s (%v); start one with "+
		"`apt-get install -y redis-server && redis-server --bind 127.0.0.1 --port 6379 --daemonize yes`, "+
		"or set %s to the host:port of one", addr, err, EnvAddr)
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: the integration tests need it)", msg)
		return ""
	}
	t.Skipf("%s", msg)
	return ""
}

// Client returns a client of the server Addr finds (skipping or failing the
// test as Addr does), closed when the test ends. Its options bound every
// command by its context (ContextTimeoutEnabled), as the stores in this
// module require. Write only under a Prefix.
func Client(t testing.TB) *redis.Client {
	t.Helper()
	c := newClient(Addr(t), 0)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Prefix returns a key prefix no other test uses, even in another process:
// "backstop-test:" followed by the test's name and a random number. When the
// test ends, the keys under it are deleted (on a fresh connection, in case
// the test closed its own). It skips or fails the test as Addr does.
func Prefix(t testing.TB) string {
	t.Helper()
	addr := Addr(t)
	prefix := fmt.Sprintf("backstop-test:%s:%016x:", sanitize(t.Name()), rand.Uint64())
	t.Cleanup(func() {
		c := newClient(addr, 0)
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Errorf("redistest: listing the keys under %q: %v", prefix, err)
			return
		}
		for len(keys) > 0 {
			n := min(len(keys), 1000)
			if err := c.Del(ctx, keys[:n]...).Err(); err != nil {
				t.Errorf("redistest: deleting the keys under %q: %v", prefix, err)
				return
			}
			keys = keys[n:]
		}
	})
	return prefix
}

// newClient returns a client that gives up on a dead server quickly and
// honours its contexts' deadlines. maxRetries is go-redis's MaxRetries: 0
// for its default, -1 for none.
func newClient(addr string, maxRetries int) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:                  addr,
		MaxRetries:            maxRetries,
		DialTimeout:           pingTimeout,
		DialerRetries:         1,
		ContextTimeoutEnabled: true,
	})
}

// sanitize keeps a test's name readable in a key and free of the
// characters that SCAN's MATCH pattern treats specially.
func sanitize(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9', r == '/', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, name)
}
