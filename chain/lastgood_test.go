package chain_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/backstop-llm/backstop/cache"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/redisstore"
	"github.com/backstop-llm/backstop/retry"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// silentConn is a connection to a Redis that reads every command and never
// answers: a Read waits for the read deadline and times out. It starts no
// goroutine, and inside a synctest bubble a Read is durably blocked (a
// sleep), so the store's Timeout passes in virtual time; a loopback
// socket's deadline would be real time.
type silentConn struct {
	mu sync.Mutex
	rd time.Time
}

func (c *silentConn) Read([]byte) (int, error) {
	c.mu.Lock()
	d := c.rd
	c.mu.Unlock()
	if d.IsZero() {
		d = time.Now().Add(time.Hour) // go-redis always sets one; never hang a test
	}
	time.Sleep(time.Until(d))
	return 0, &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
}
func (c *silentConn) Write(p []byte) (int, error) { return len(p), nil }
func (c *silentConn) Close() error                { return nil }
func (c *silentConn) LocalAddr() net.Addr         { return &net.TCPAddr{} }
func (c *silentConn) RemoteAddr() net.Addr        { return &net.TCPAddr{} }
func (c *silentConn) SetDeadline(t time.Time) error {
	return c.SetReadDeadline(t)
}
func (c *silentConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rd = t
	return nil
}
func (c *silentConn) SetWriteDeadline(time.Time) error { return nil }

// silentRedis returns a client of a Redis that never answers (see
// silentConn), closed when the test ends.
func silentRedis(t *testing.T) *redis.Client {
	t.Helper()
	// An IP literal: the Dialer is used instead, and no name is looked up.
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true, MaxRetries: -1,
		Dialer: func(context.Context, string, string) (net.Conn, error) { return &silentConn{}, nil }})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Found in review (issue 12, item 7): remembering a served answer in a
// remote store was a write on the call's path: with Redis paused, every
// served call waited for the store's Timeout before it returned. The
// answer is now written behind the call.
func TestLastGoodRememberAddsNoLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 50 * time.Millisecond
		store, err := redisstore.NewCache(silentRedis(t), redisstore.CacheOptions{Timeout: timeout, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		c, err := chain.New("support").
			Primary(chain.Target{Name: "primary", Provider: &flaky{name: "anthropic"}, Model: "claude"}).
			OrDegrade(chain.LastGood(store)).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			start := time.Now()
			res, err := c.Call(context.Background(), ask)
			if err != nil || res.Served.Target != "primary" {
				t.Fatalf("call %d: served by %q, err %v; want the primary", i, res.Served.Target, err)
			}
			if d := time.Since(start); d != 0 {
				t.Fatalf("call %d, the provider answering at once: the call took %v of virtual time; want none (remembering must not wait on the store)", i, d)
			}
		}
		// Flush waits for the writes: the first one's Timeout (the others
		// fail at once, Redis being left alone), and says none landed.
		start := time.Now()
		err = c.Flush(context.Background())
		if d := time.Since(start); d != timeout || !errors.Is(err, cache.ErrUnavailable) || !strings.Contains(err.Error(), "3 answers were not remembered") {
			t.Fatalf("Flush = %v after %v; want, after the first write's Timeout (%v), an error matching cache.ErrUnavailable counting 3 answers", err, d, timeout)
		}
	})
}

// Flush waits for the answers written behind the calls: after it, the
// answer is in Redis, and the chain serves it when every model fails.
func TestLastGoodFlushWritesToRedis(t *testing.T) {
	m := miniredis.RunT(t)
	synctest.Test(t, func(t *testing.T) {
		client := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = client.Close() })
		store, err := redisstore.NewCache(client, redisstore.CacheOptions{Timeout: sharedTestTimeout})
		if err != nil {
			t.Fatal(err)
		}
		p := &flaky{name: "anthropic"}
		c, err := chain.New("support").
			Primary(chain.Target{Name: "primary", Provider: p, Model: "claude", Retry: retry.Policy{MaxAttempts: 1}}).
			OrDegrade(chain.LastGood(store)).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Call(context.Background(), ask); err != nil {
			t.Fatal(err)
		}
		if err := c.Flush(context.Background()); err != nil {
			t.Fatalf("Flush: %v", err)
		}
		if keys := m.Keys(); len(keys) != 1 || !strings.HasPrefix(keys[0], redisstore.DefaultCachePrefix) {
			t.Fatalf("keys in Redis after Flush: %q; want the remembered answer", keys)
		}
		p.mode.Store(overloaded)
		res, err := c.Call(context.Background(), ask)
		if err != nil || !res.Degraded || res.Text != "ok from anthropic" {
			t.Fatalf("with the primary failing: %+v, %v; want the remembered answer", res, err)
		}
		if err := c.Flush(context.Background()); err != nil {
			t.Fatalf("a second Flush, nothing pending: %v", err)
		}
	})
}

// blockingStore is a cache.Store whose Set waits until released, recording
// the keys it was given, how many Sets ran at once, and what their
// contexts held when they started.
type blockingStore struct {
	started, release chan struct{}
	mu               sync.Mutex
	keys             []string
	active, most     int
	ctxs             []seenCtx
}

// seenCtx is what a Set's context held when it started.
type seenCtx struct {
	err      error
	value    any
	deadline time.Duration // from the Set's start; 0 for none
}

func (s *blockingStore) Get(context.Context, string) (cache.Entry, bool, error) {
	return cache.Entry{}, false, nil
}
func (s *blockingStore) Set(ctx context.Context, key string, _ cache.Entry, _ time.Duration) error {
	s.mu.Lock()
	s.active++
	s.most = max(s.most, s.active)
	s.keys = append(s.keys, key)
	seen := seenCtx{err: ctx.Err(), value: ctx.Value(ctxKey{})}
	if dl, ok := ctx.Deadline(); ok {
		seen.deadline = time.Until(dl)
	}
	s.ctxs = append(s.ctxs, seen)
	first := len(s.keys) == 1
	s.mu.Unlock()
	if first {
		close(s.started)
	}
	<-s.release
	s.mu.Lock()
	s.active--
	s.mu.Unlock()
	return nil
}

type ctxKey struct{}

// A store that is not in-process gets one writer per chain, in call order,
// with the call's values but not its cancellation; at most LastGoodQueue
// answers wait, the rest are dropped and counted; Flush bounded by its
// context says what is still waiting, and the writer is gone once the
// queue is empty (the bubble would not end otherwise).
func TestLastGoodWriteBehindQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &blockingStore{started: make(chan struct{}), release: make(chan struct{})}
		c, err := chain.New("support").
			Primary(chain.Target{Name: "primary", Provider: &flaky{name: "anthropic"}, Model: "claude"}).
			OrDegrade(chain.LastGood(store, chain.WithKey(func(_ string, req llm.Request) string { return req.Messages[0].Content }))).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		call := func(i int) {
			t.Helper()
			ctx, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, i))
			defer cancel() // the call's context ends with the call
			if _, err := c.Call(ctx, llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: fmt.Sprint(i)}}}); err != nil {
				t.Fatal(err)
			}
		}
		call(0)
		<-store.started // the writer holds answer 0
		const extra = 43
		for i := 1; i <= chain.LastGoodQueue+extra; i++ {
			call(i)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err = c.Flush(ctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), fmt.Sprintf("%d answers were still waiting", chain.LastGoodQueue)) ||
			!strings.Contains(err.Error(), fmt.Sprintf("%d answers were not remembered", extra)) {
			t.Fatalf("Flush with the store stuck = %v; want DeadlineExceeded, %d waiting and %d dropped", err, chain.LastGoodQueue, extra)
		}
		close(store.release)
		if err := c.Flush(context.Background()); err != nil {
			t.Fatalf("Flush once the store answers: %v", err)
		}
		store.mu.Lock()
		defer store.mu.Unlock()
		if len(store.keys) != chain.LastGoodQueue+1 || store.most != 1 {
			t.Fatalf("the store got %d Sets, at most %d at once; want %d, one at a time", len(store.keys), store.most, chain.LastGoodQueue+1)
		}
		for i, k := range store.keys {
			if k != fmt.Sprint(i) {
				t.Fatalf("Set %d was of answer %q; want the answers in call order", i, k)
			}
			if got := store.ctxs[i]; got.err != nil || got.value != i || got.deadline != chain.DefaultDegradeTimeout {
				t.Fatalf("Set %d: ctx err %v, value %v, deadline in %v; want live, the call's value, bounded by DefaultDegradeTimeout", i, got.err, got.value, got.deadline)
			}
		}
	})
}

// The in-process store is written on the calling goroutine: the answer is
// there when the call returns, with no goroutine started.
func TestLastGoodMemoryIsSynchronous(t *testing.T) {
	store, err := cache.NewMemory(10, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c, err := chain.New("support").
		Primary(chain.Target{Name: "primary", Provider: &flaky{name: "anthropic"}, Model: "claude"}).
		OrDegrade(chain.LastGood(store, chain.WithKey(func(string, llm.Request) string { return "k" }))).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(context.Background(), ask); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := store.Get(context.Background(), "k"); !ok {
		t.Fatal("the answer is not in the Memory store when the call returns")
	}
	goleak.VerifyNone(t, goleak.IgnoreCurrent())
}
