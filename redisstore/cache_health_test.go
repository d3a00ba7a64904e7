package redisstore

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/backstop-llm/backstop/cache"
	"github.com/backstop-llm/backstop/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// silentClient returns a client of a Redis that never answers (see
// redistest.SilentConn), counting the commands it sends, closed when the test ends.
// Once answer holds an address, new connections go there instead.
func silentClient(t *testing.T, answer *atomic.Pointer[string]) (*redis.Client, *redistest.Commands) {
	t.Helper()
	// An IP literal: the Dialer is used instead, and no name is looked up.
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true, MaxRetries: -1,
		Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
			if addr := answer.Load(); addr != nil {
				var d net.Dialer
				return d.DialContext(ctx, network, *addr)
			}
			return &redistest.SilentConn{}, nil
		}})
	h := &redistest.Commands{}
	c.AddHook(h)
	t.Cleanup(func() { _ = c.Close() })
	return c, h
}

// Found in review (issue 12, item 7): a Redis store had no back-off. With
// Redis paused every Get and Set paid the whole Timeout (p99 108ms with the
// 50ms default), where the shared breaker and budget stores leave Redis
// alone for ProbeEvery. Now it does too: after a failure Get and Set fail at
// once, without a round trip or an allocation, until one probe after
// ProbeEvery; OnError and the log say when Redis fails and when it answers
// again.
func TestCacheLeavesAFailedRedisAlone(t *testing.T) {
	m := miniredis.RunT(t)
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		const timeout = 50 * time.Millisecond
		var answer atomic.Pointer[string]
		c, sent := silentClient(t, &answer)
		var calls redistest.Errors
		var logs redistest.Log
		r := newRedis(t, c, CacheConfig{Timeout: timeout, OnError: calls.Add, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		start := time.Now()
		if _, _, err := r.Get(ctx, "q"); !errors.Is(err, cache.ErrUnavailable) || time.Since(start) != timeout {
			t.Fatalf("Get from a silent Redis = %v after %v; want cache.ErrUnavailable after the Timeout, %v", err, time.Since(start), timeout)
		}
		before := sent.N.Load()
		start = time.Now()
		for i := range 5 {
			_, ok, gerr := r.Get(ctx, "q")
			serr := r.Set(ctx, "q", cache.Entry{Value: []byte("a")}, 0)
			if ok || !errors.Is(gerr, cache.ErrUnavailable) || !errors.Is(serr, cache.ErrUnavailable) {
				t.Fatalf("call %d after the failure: Get %v, %v, Set %v; want cache.ErrUnavailable", i, ok, gerr, serr)
			}
		}
		if d, n := time.Since(start), sent.N.Load()-before; d != 0 || n != 0 {
			t.Fatalf("5 Gets and 5 Sets after a failure took %v (virtual) and sent %d commands; want none and none: Redis is left alone", d, n)
		}
		e := cache.Entry{Value: []byte("a"), Stored: time.Now()}
		if a := testing.AllocsPerRun(100, func() {
			_, _, _ = r.Get(ctx, "q")
			_ = r.Set(ctx, "q", e, 0)
		}); a != 0 {
			t.Errorf("Get and Set while Redis is left alone allocate %v times; want 0", a)
		}
		if errs := calls.Get(); len(errs) != 1 || !errors.Is(errs[0], cache.ErrUnavailable) || r.isAvailable() {
			t.Fatalf("OnError calls %v, Available %v; want one error matching cache.ErrUnavailable, false", errs, r.isAvailable())
		}

		// Redis answers again: after ProbeEvery, one call tries it.
		addr := m.Addr()
		answer.Store(&addr)
		time.Sleep(defaultCacheProbeEvery - time.Since(start) - time.Nanosecond)
		if err := r.Set(ctx, "q", e, 0); !errors.Is(err, cache.ErrUnavailable) || sent.N.Load() != before {
			t.Fatalf("Set just before ProbeEvery: %v; want cache.ErrUnavailable, no round trip", err)
		}
		time.Sleep(time.Nanosecond)
		if err := r.Set(ctx, "q", e, 0); err != nil {
			t.Fatalf("the probe, Redis answering: %v", err)
		}
		if got, ok, err := r.Get(ctx, "q"); !ok || err != nil || string(got.Value) != "a" {
			t.Fatalf("Get after the probe = %q, %v, %v; want a", got.Value, ok, err)
		}
		if errs := calls.Get(); len(errs) != 2 || errs[1] != nil || !r.isAvailable() {
			t.Fatalf("OnError calls %v, Available %v; want a second call with nil, true", errs, r.isAvailable())
		}
		got := logs.String()
		for _, want := range []string{
			`level=WARN msg="backstop: last-known-good store unavailable, serving without it" key=backstop:lastgood:`,
			`level=INFO msg="backstop: last-known-good store available again, using it" key=backstop:lastgood:`,
		} {
			if !strings.Contains(got, want) {
				t.Errorf("log:\n%s\nwant a record %s", got, want)
			}
		}
		if n := strings.Count(got, "level="); n != 2 {
			t.Errorf("%d log records; want 2:\n%s", n, got)
		}
	})
}

// A round trip the caller's own context ended says nothing about Redis:
// the store does not leave Redis alone after it.
func TestCacheCallerEndNotBlamedOnRedis(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var answer atomic.Pointer[string]
		c, sent := silentClient(t, &answer)
		r := newRedis(t, c, CacheConfig{Timeout: time.Minute})
		for i := range 3 {
			before := sent.N.Load()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
			_, _, err := r.Get(ctx, "q")
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, cache.ErrUnavailable) || sent.N.Load() == before || !r.isAvailable() {
				t.Fatalf("Get %d under a 10ms caller deadline: %v, Available %v; want the caller's error after a round trip, Redis still available", i, err, r.isAvailable())
			}
		}
	})
}
