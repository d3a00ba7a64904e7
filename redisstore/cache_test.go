package redisstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/backstop-llm/backstop/cache"
	"github.com/backstop-llm/backstop/internal/cachetest"
	"github.com/backstop-llm/backstop/internal/redistest"
	"github.com/backstop-llm/backstop/llm"
)

// newRedisClient returns a client of addr that honours its contexts'
// deadlines, closed when the test ends. Its ReadTimeout and WriteTimeout
// stay at go-redis's defaults (seconds): a store call that ends sooner does
// so because of the store's Timeout.
func newRedisClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// newRedis returns a store on c, failing the test on a configuration
// error. A nil opts.Logger discards the store's records.
func newRedis(t testing.TB, c redis.UniversalClient, opts CacheConfig) *Cache {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	r, err := NewCache(c, opts)
	if err != nil {
		t.Fatalf("NewCache(%+v): %v", opts, err)
	}
	return r
}

// testTimeout is the store's Timeout in tests that are not about it: long
// enough for a machine busy with the race detector and other packages.
const testTimeout = 5 * time.Second

// newMiniRedis returns a store on an in-process miniredis server, closed
// (with the client) when the test ends. A zero opts.Timeout is testTimeout.
func newMiniRedis(t testing.TB, opts CacheConfig) (*Cache, *miniredis.Miniredis) {
	t.Helper()
	if opts.Timeout == 0 {
		opts.Timeout = testTimeout
	}
	m := miniredis.RunT(t)
	return newRedis(t, newRedisClient(t, m.Addr()), opts), m
}

func TestNewCacheDefaults(t *testing.T) {
	r := newRedis(t, newRedisClient(t, miniredis.RunT(t).Addr()), CacheConfig{})
	if r.prefix != defaultCachePrefix || r.ttl != defaultCacheTTL || r.timeout != defaultCacheTimeout {
		t.Fatalf("defaults: prefix %q ttl %v timeout %v; want %q %v %v", r.prefix, r.ttl, r.timeout, defaultCachePrefix, defaultCacheTTL, defaultCacheTimeout)
	}
	r, _ = newMiniRedis(t, CacheConfig{Prefix: "p:", TTL: time.Minute, Timeout: time.Second})
	if r.prefix != "p:" || r.ttl != time.Minute || r.timeout != time.Second {
		t.Fatalf("options not kept: prefix %q ttl %v timeout %v", r.prefix, r.ttl, r.timeout)
	}
}

func TestNewCacheInvalid(t *testing.T) {
	m := miniredis.RunT(t)
	good := newRedisClient(t, m.Addr())
	noCtx, noCtxCluster, noCtxRing := redistest.UnboundedClients(t, m.Addr())

	for _, tc := range []struct {
		name   string
		client redis.UniversalClient
		opts   CacheConfig
		want   []string // in the message
	}{
		{"nil client", nil, CacheConfig{}, []string{"client is nil"}},
		{"typed nil client", (*redis.Client)(nil), CacheConfig{}, []string{"nil *redis.Client"}},
		{"typed nil cluster", (*redis.ClusterClient)(nil), CacheConfig{}, []string{"nil *redis.ClusterClient"}},
		{"typed nil ring", (*redis.Ring)(nil), CacheConfig{}, []string{"nil *redis.Ring"}},
		{"no context timeouts", noCtx, CacheConfig{}, []string{"ContextTimeoutEnabled is false", "set ContextTimeoutEnabled: true"}},
		{"cluster without context timeouts", noCtxCluster, CacheConfig{}, []string{"ContextTimeoutEnabled is false"}},
		{"ring without context timeouts", noCtxRing, CacheConfig{}, []string{"ContextTimeoutEnabled is false"}},
		{"negative TTL", good, CacheConfig{TTL: -time.Second}, []string{"TTL is -1s", "0 means 24h0m0s"}},
		{"negative Timeout", good, CacheConfig{Timeout: -1}, []string{"Timeout is -1ns", "0 means 50ms"}},
		{"negative ProbeEvery", good, CacheConfig{ProbeEvery: -time.Second}, []string{"ProbeEvery is -1s", "0 means 1s"}},
		{"all at once", nil, CacheConfig{TTL: -1, Timeout: -1, ProbeEvery: -1}, []string{"client is nil", "TTL is", "Timeout is", "ProbeEvery is"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewCache(tc.client, tc.opts)
			if r != nil || !errors.Is(err, llm.ErrInvalidConfig) {
				t.Fatalf("NewCache = %v, %v; want nil and an error matching llm.ErrInvalidConfig", r, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// A store on a client NewCache cannot inspect is accepted.
func TestNewCacheOtherClient(t *testing.T) {
	m := miniredis.RunT(t)
	type wrapped struct{ redis.UniversalClient }
	r := newRedis(t, wrapped{newRedisClient(t, m.Addr())}, CacheConfig{Timeout: testTimeout})
	cachetest.MustSet(t, r, "q", "a", 0)
	cachetest.WantValue(t, r, "q", "a")
}

func TestCacheGetSet(t *testing.T) {
	ctx := context.Background()
	r, m := newMiniRedis(t, CacheConfig{})
	cachetest.Store(t, r)

	// A zero Stored is the time of the Set.
	before := time.Now()
	cachetest.MustSet(t, r, "q2", "b", 0)
	after := time.Now()
	e, _, _ := r.Get(ctx, "q2")
	if e.Stored.Before(before.Round(0)) || e.Stored.After(after) {
		t.Fatalf("Stored = %v; want the time of the Set, in [%v, %v]", e.Stored, before, after)
	}

	// Stored times far from now survive: before 1970, and past 2262 (the
	// end of int64 Unix nanoseconds).
	for _, st := range []time.Time{
		time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(1960, 5, 5, 5, 5, 5, 999999999, time.UTC),
		time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		if err := r.Set(ctx, "old", cache.Entry{Value: []byte("x"), Stored: st}, 0); err != nil {
			t.Fatal(err)
		}
		if e, _, _ := r.Get(ctx, "old"); !e.Stored.Equal(st) {
			t.Fatalf("Stored %v came back as %v", st, e.Stored)
		}
	}

	// Empty and binary values.
	for _, v := range [][]byte{nil, {}, {0, 1, 0xff, '\r', '\n'}, bytes.Repeat([]byte("z"), 1<<20)} {
		if err := r.Set(ctx, "bin", cache.Entry{Value: v}, 0); err != nil {
			t.Fatal(err)
		}
		if e, ok, err := r.Get(ctx, "bin"); !ok || err != nil || !bytes.Equal(e.Value, v) {
			t.Fatalf("Get of a %d-byte value = %d bytes, %v, %v", len(v), len(e.Value), ok, err)
		}
	}

	// The stored format: version 1, Unix seconds, nanoseconds, the value.
	if err := r.Set(ctx, "fmt", cache.Entry{Value: []byte("v"), Stored: time.Unix(0x0102030405, 0x0a0b0c0d)}, 0); err != nil {
		t.Fatal(err)
	}
	raw, err := m.Get(defaultCachePrefix + "fmt")
	if err != nil {
		t.Fatal(err)
	}
	if want := "\x01\x00\x00\x00\x01\x02\x03\x04\x05\x0a\x0b\x0c\x0dv"; raw != want {
		t.Fatalf("stored %q; want %q", raw, want)
	}
}

func TestCachePrefix(t *testing.T) {
	ctx := context.Background()
	m := miniredis.RunT(t)
	c := newRedisClient(t, m.Addr())
	def := newRedis(t, c, CacheConfig{Timeout: testTimeout})
	a := newRedis(t, c, CacheConfig{Prefix: "svc-a:", Timeout: testTimeout})
	a2 := newRedis(t, c, CacheConfig{Prefix: "svc-a:", Timeout: testTimeout})
	b := newRedis(t, c, CacheConfig{Prefix: "svc-b:", Timeout: testTimeout})

	cachetest.MustSet(t, def, "q", "default", 0)
	cachetest.MustSet(t, a, "q", "from a", 0)
	if got, want := strings.Join(m.Keys(), " "), "backstop:lastgood:q svc-a:q"; got != want {
		t.Fatalf("keys %q; want %q", got, want)
	}
	cachetest.WantValue(t, def, "q", "default")
	cachetest.WantValue(t, a2, "q", "from a") // same prefix: shared, as replicas share
	if _, ok, err := b.Get(ctx, "q"); ok || err != nil {
		t.Fatalf("another prefix sees the entry: ok %v, err %v", ok, err)
	}
	// Keys that only differ in a way a prefix could hide stay apart.
	cachetest.MustSet(t, b, "x:q", "bx", 0)
	if cachetest.Present(t, a, "x:q") {
		t.Fatal("svc-a:x:q is served though only svc-b:x:q was set")
	}
}

func TestCacheTTL(t *testing.T) {
	ctx := context.Background()
	r, m := newMiniRedis(t, CacheConfig{Prefix: "p:", TTL: time.Hour})
	cachetest.MustSet(t, r, "default", "d", 0)
	cachetest.MustSet(t, r, "short", "s", time.Minute)
	cachetest.MustSet(t, r, "sub-ms", "u", time.Microsecond)
	cachetest.MustSet(t, r, "odd", "o", 1500*time.Microsecond)
	for key, want := range map[string]time.Duration{
		"p:default": time.Hour,
		"p:short":   time.Minute,
		"p:sub-ms":  time.Millisecond,     // rounded up, never 0
		"p:odd":     2 * time.Millisecond, // rounded up to a whole millisecond
	} {
		if got := m.TTL(key); got != want {
			t.Errorf("TTL of %s = %v; want %v", key, got, want)
		}
	}

	m.FastForward(time.Minute - time.Millisecond)
	cachetest.WantValue(t, r, "short", "s")
	m.FastForward(time.Millisecond)
	if cachetest.Present(t, r, "short") {
		t.Fatal("an entry is served at the end of its ttl")
	}
	cachetest.WantValue(t, r, "default", "d")
	m.FastForward(time.Hour)
	if cachetest.Present(t, r, "default") {
		t.Fatal("an entry is served after the store's TTL")
	}

	// A Set restarts the clock.
	cachetest.MustSet(t, r, "again", "1", time.Minute)
	m.FastForward(50 * time.Second)
	cachetest.MustSet(t, r, "again", "2", time.Minute)
	m.FastForward(50 * time.Second)
	cachetest.WantValue(t, r, "again", "2")

	// A negative ttl stores nothing.
	err := r.Set(ctx, "neg", cache.Entry{Value: []byte("n")}, -time.Second)
	if !errors.Is(err, cache.ErrInvalidTTL) || !strings.Contains(err.Error(), "0 means the store's default, 1h0m0s") {
		t.Fatalf("Set with a negative ttl: %v; want cache.ErrInvalidTTL naming the default", err)
	}
	if cachetest.Present(t, r, "neg") {
		t.Fatal("a Set with a negative ttl stored the entry")
	}
	// Every key the store wrote expires.
	for _, k := range m.Keys() {
		if m.TTL(k) <= 0 {
			t.Errorf("key %s has no TTL", k)
		}
	}
}

func TestCacheMalformed(t *testing.T) {
	ctx := context.Background()
	r, m := newMiniRedis(t, CacheConfig{Prefix: "p:"})
	for name, raw := range map[string]string{
		"empty":          "",
		"short":          "\x01\x00\x00",
		"header only -1": "\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00",
		"version 0":      "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00value",
		"version 2":      "\x02\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00value",
		"plain text":     `{"text":"written by another program"}`,
		"nanos too big":  "\x01\x00\x00\x00\x00\x00\x00\x00\x00\x3b\x9a\xca\x00value", // 1e9
	} {
		if err := m.Set("p:"+name, raw); err != nil {
			t.Fatal(err)
		}
		e, ok, err := r.Get(ctx, name)
		if ok || e.Value != nil || !errors.Is(err, cache.ErrMalformed) || errors.Is(err, cache.ErrUnavailable) {
			t.Errorf("Get of %s = %+v, %v, %v; want an error matching cache.ErrMalformed", name, e, ok, err)
		}
	}
	// The shortest well-formed value: the header alone.
	if err := m.Set("p:header", "\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"); err != nil {
		t.Fatal(err)
	}
	if e, ok, err := r.Get(ctx, "header"); !ok || err != nil || len(e.Value) != 0 || !e.Stored.Equal(time.Unix(0, 0)) {
		t.Fatalf("Get of a bare header = %+v, %v, %v", e, ok, err)
	}
	// A key of another type.
	if _, err := m.Lpush("p:list", "x"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := r.Get(ctx, "list"); ok || !errors.Is(err, cache.ErrMalformed) {
		t.Fatalf("Get of a list = %v, %v; want an error matching cache.ErrMalformed", ok, err)
	}
	// Set replaces it all the same.
	cachetest.MustSet(t, r, "list", "fixed", 0)
	cachetest.WantValue(t, r, "list", "fixed")
}

// An error reply from the server makes the store unavailable, not broken.
// (ProbeEvery 1ns: every call tries Redis.)
func TestCacheErrorReply(t *testing.T) {
	ctx := context.Background()
	r, m := newMiniRedis(t, CacheConfig{ProbeEvery: time.Nanosecond})
	cachetest.MustSet(t, r, "q", "a", 0) // connected
	m.SetError("ERR injected failure")
	if _, ok, err := r.Get(ctx, "q"); ok || !errors.Is(err, cache.ErrUnavailable) || !strings.Contains(err.Error(), "injected failure") {
		t.Fatalf("Get = %v, %v; want cache.ErrUnavailable with the server's error", ok, err)
	}
	if err := r.Set(ctx, "q", cache.Entry{Value: []byte("a")}, 0); !errors.Is(err, cache.ErrUnavailable) {
		t.Fatalf("Set = %v; want cache.ErrUnavailable", err)
	}
	m.SetError("")
	cachetest.MustSet(t, r, "q", "a", 0)
	cachetest.WantValue(t, r, "q", "a")
}

// checkUnavailable fails the test unless err matches cache.ErrUnavailable and not
// the caller's context errors, and the call took less than limit: far less
// than the client's own timeouts (seconds), so it was the store's Timeout
// (or a refused connection) that ended it.
func checkUnavailable(t *testing.T, op string, err error, took, limit time.Duration) {
	t.Helper()
	if !errors.Is(err, cache.ErrUnavailable) {
		t.Errorf("%s = %v; want an error matching cache.ErrUnavailable", op, err)
	}
	if errors.Is(err, context.Canceled) {
		t.Errorf("%s = %v; the caller's context was not canceled", op, err)
	}
	if took > limit {
		t.Errorf("%s took %v; want the store's Timeout to end it well within %v", op, took, limit)
	}
}

// A Redis that is down (here: closed) costs a call no more than the
// Timeout, and makes Get and Set report cache.ErrUnavailable.
func TestCacheDown(t *testing.T) {
	ctx := context.Background()
	r, m := newMiniRedis(t, CacheConfig{Timeout: 50 * time.Millisecond})
	cachetest.MustSet(t, r, "q", "a", 0) // connected once
	m.Close()
	for range 3 {
		start := time.Now()
		_, ok, err := r.Get(ctx, "q")
		checkUnavailable(t, "Get with Redis down", err, time.Since(start), 2*time.Second)
		if ok {
			t.Fatal("Get with Redis down reported an entry")
		}
		start = time.Now()
		err = r.Set(ctx, "q", cache.Entry{Value: []byte("b")}, 0)
		checkUnavailable(t, "Set with Redis down", err, time.Since(start), 2*time.Second)
	}
	// Back up: the client reconnects on its own (the store holds no state
	// of its own; a longer Timeout keeps a busy machine from failing this).
	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	cachetest.WantValue(t, newRedis(t, r.client, CacheConfig{Timeout: testTimeout}), "q", "a")
}

// A Redis that accepts connections and never answers costs a call the
// Timeout, not the client's ReadTimeout (3s). (ProbeEvery 1ns: every call
// tries Redis; TestRedisLeavesAFailedRedisAlone shows the back-off.)
func TestCacheHangs(t *testing.T) {
	ctx := context.Background()
	r := newRedis(t, newRedisClient(t, redistest.Silent(t)), CacheConfig{Timeout: 50 * time.Millisecond, ProbeEvery: time.Nanosecond})
	for range 3 {
		start := time.Now()
		_, ok, err := r.Get(ctx, "q")
		checkUnavailable(t, "Get with Redis hanging", err, time.Since(start), 2*time.Second)
		if ok || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "within the store's Timeout (50ms)") {
			t.Fatalf("Get with Redis hanging = %v, %v; want a timeout naming the Timeout", ok, err)
		}
		start = time.Now()
		err = r.Set(ctx, "q", cache.Entry{Value: []byte("b")}, 0)
		checkUnavailable(t, "Set with Redis hanging", err, time.Since(start), 2*time.Second)
	}
}

func TestCacheContext(t *testing.T) {
	r, m := newMiniRedis(t, CacheConfig{})
	cachetest.MustSet(t, r, "q", "a", 0)

	// Already done: Redis is not asked.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	n := m.CommandCount()
	if _, ok, err := r.Get(ctx, "q"); ok || !errors.Is(err, context.Canceled) || errors.Is(err, cache.ErrUnavailable) {
		t.Fatalf("Get with a canceled ctx = %v, %v; want context.Canceled", ok, err)
	}
	if err := r.Set(ctx, "q", cache.Entry{Value: []byte("b")}, 0); !errors.Is(err, context.Canceled) || errors.Is(err, cache.ErrUnavailable) {
		t.Fatalf("Set with a canceled ctx = %v; want context.Canceled", err)
	}
	if err := r.Set(ctx, "q", cache.Entry{Value: []byte("b")}, -1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Set with a canceled ctx and a negative ttl = %v; want context.Canceled first", err)
	}
	if m.CommandCount() != n {
		t.Fatal("a call with a done ctx reached Redis")
	}
	cachetest.WantValue(t, r, "q", "a")

	// The caller's deadline, shorter than the Timeout, ends a call to a
	// Redis that hangs: the error is the caller's, not cache.ErrUnavailable.
	slow := newRedis(t, newRedisClient(t, redistest.Silent(t)), CacheConfig{Timeout: time.Minute})
	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, ok, err := slow.Get(ctx, "q"); ok || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, cache.ErrUnavailable) {
		t.Fatalf("Get past the caller's deadline = %v, %v; want the caller's context.DeadlineExceeded", ok, err)
	}
	if err := slow.Set(ctx, "q", cache.Entry{Value: []byte("b")}, 0); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, cache.ErrUnavailable) {
		t.Fatalf("Set past the caller's deadline = %v; want the caller's context.DeadlineExceeded", err)
	}

	// Canceled while Redis is asked: go-redis bounds a read by deadlines
	// only, so the call ends at the Timeout, with the caller's error.
	hung := newRedis(t, newRedisClient(t, redistest.Silent(t)), CacheConfig{Timeout: 100 * time.Millisecond})
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(10*time.Millisecond, cancel)
	if _, _, err := hung.Get(ctx, "q"); !errors.Is(err, context.Canceled) || errors.Is(err, cache.ErrUnavailable) {
		t.Fatalf("Get canceled midway = %v; want context.Canceled", err)
	}
}

func TestCacheConcurrent(t *testing.T) {
	ctx := context.Background()
	r, _ := newMiniRedis(t, CacheConfig{Timeout: testTimeout})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				key := fmt.Sprint("k", i%5)
				want := fmt.Sprint("g", g, "-", i)
				if err := r.Set(ctx, key, cache.Entry{Value: []byte(want)}, 0); err != nil {
					t.Error(err)
					return
				}
				e, ok, err := r.Get(ctx, key)
				if err != nil || !ok || !strings.HasPrefix(string(e.Value), "g") {
					t.Errorf("Get(%s) = %q, %v, %v", key, e.Value, ok, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func FuzzDecodeCache(f *testing.F) {
	f.Add([]byte{})
	f.Add(encodeCache(cache.Entry{Value: []byte("v"), Stored: time.Unix(1, 2)}))
	f.Add(encodeCache(cache.Entry{Stored: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)}))
	f.Add([]byte("\x01\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := decodeCache(bytes.Clone(b))
		if err != nil {
			return
		}
		// A value it accepts encodes back to the same bytes.
		if got := encodeCache(e); !bytes.Equal(got, b) {
			t.Fatalf("decode then encode: %x; want %x", got, b)
		}
	})
}

// The core checks against a real Redis server (see internal/redistest).
func TestCacheIntegration(t *testing.T) {
	ctx := context.Background()
	c := redistest.Client(t)
	prefix := redistest.Prefix(t)
	r := newRedis(t, c, CacheConfig{Prefix: prefix, TTL: time.Hour, Timeout: testTimeout})

	// Get, Set, miss, replace.
	if _, ok, err := r.Get(ctx, "absent"); ok || err != nil {
		t.Fatalf("Get of an absent key = %v, %v", ok, err)
	}
	stored := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	if err := r.Set(ctx, "q", cache.Entry{Value: []byte(`{"text":"a1"}`), Stored: stored}, 0); err != nil {
		t.Fatal(err)
	}
	e, ok, err := r.Get(ctx, "q")
	if err != nil || !ok || string(e.Value) != `{"text":"a1"}` || !e.Stored.Equal(stored) {
		t.Fatalf("Get = %q stored %v, %v, %v; want the entry as Set", e.Value, e.Stored, ok, err)
	}
	cachetest.MustSet(t, r, "q", "a2", 0)
	cachetest.WantValue(t, r, "q", "a2")

	// Prefix and TTL, as Redis sees them.
	if n, err := c.Exists(ctx, prefix+"q").Result(); err != nil || n != 1 {
		t.Fatalf("EXISTS %sq = %d, %v; want the key under the prefix", prefix, n, err)
	}
	if d, err := c.PTTL(ctx, prefix+"q").Result(); err != nil || d <= 59*time.Minute || d > time.Hour {
		t.Fatalf("PTTL = %v, %v; want about the store's TTL (1h)", d, err)
	}
	cachetest.MustSet(t, r, "short", "s", time.Minute)
	if d, err := c.PTTL(ctx, prefix+"short").Result(); err != nil || d <= 59*time.Second || d > time.Minute {
		t.Fatalf("PTTL = %v, %v; want about the Set's ttl (1m)", d, err)
	}
	other := newRedis(t, c, CacheConfig{Prefix: prefix + "other:", Timeout: testTimeout})
	if cachetest.Present(t, other, "q") {
		t.Fatal("another prefix sees the entry")
	}

	// Expiry, on the server's clock.
	cachetest.MustSet(t, r, "expiring", "x", 20*time.Millisecond)
	deadline := time.Now().Add(5 * time.Second)
	for cachetest.Present(t, r, "expiring") {
		if time.Now().After(deadline) {
			t.Fatal("an entry Set with ttl 20ms is still served after 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := r.Set(ctx, "neg", cache.Entry{Value: []byte("n")}, -1); !errors.Is(err, cache.ErrInvalidTTL) {
		t.Fatalf("Set with a negative ttl = %v; want cache.ErrInvalidTTL", err)
	}

	// Copies.
	v := []byte("original")
	if err := r.Set(ctx, "copy", cache.Entry{Value: v}, 0); err != nil {
		t.Fatal(err)
	}
	copy(v, "CHANGED!")
	e, _, _ = r.Get(ctx, "copy")
	copy(e.Value, "CHANGED!")
	cachetest.WantValue(t, r, "copy", "original")

	// Malformed values.
	if err := c.Set(ctx, prefix+"bad", "not ours", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := r.Get(ctx, "bad"); ok || !errors.Is(err, cache.ErrMalformed) {
		t.Fatalf("Get of a malformed value = %v, %v; want cache.ErrMalformed", ok, err)
	}
	if err := c.RPush(ctx, prefix+"list", "x").Err(); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := r.Get(ctx, "list"); ok || !errors.Is(err, cache.ErrMalformed) {
		t.Fatalf("Get of a list = %v, %v; want cache.ErrMalformed", ok, err)
	}

	// A canceled context.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := r.Get(cctx, "q"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get with a canceled ctx = %v", err)
	}

	// Every key the store wrote expires.
	keys, err := c.Keys(ctx, prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if k == prefix+"list" || k == prefix+"bad" {
			continue
		}
		if d, err := c.PTTL(ctx, k).Result(); err != nil || d <= 0 {
			t.Errorf("key %s: PTTL %v, %v; want a TTL", k, d, err)
		}
	}
}

// A client of a real Redis whose server is gone: Get and Set report
// cache.ErrUnavailable at once.
func TestCacheIntegrationDown(t *testing.T) {
	redistest.Addr(t) // a real Redis setting, like the other integration tests
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	r := newRedis(t, newRedisClient(t, addr), CacheConfig{})
	start := time.Now()
	_, _, err = r.Get(context.Background(), "q")
	checkUnavailable(t, "Get with nothing listening", err, time.Since(start), 2*time.Second)
	start = time.Now()
	err = r.Set(context.Background(), "q", cache.Entry{Value: []byte("a")}, 0)
	checkUnavailable(t, "Set with nothing listening", err, time.Since(start), 2*time.Second)
}

func BenchmarkCacheGetSet(b *testing.B) {
	ctx := context.Background()
	c := redistest.Client(b)
	prefix := redistest.Prefix(b)
	r := newRedis(b, c, CacheConfig{Prefix: prefix, TTL: time.Minute, Timeout: time.Second})
	keys := make([]string, 100)
	for i := range keys {
		keys[i] = cache.Key("bench", fmt.Sprint(i))
		if err := r.Set(ctx, keys[i], cache.Entry{Value: benchValue}, 0); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("get/serial", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, ok, err := r.Get(ctx, keys[i%len(keys)]); !ok || err != nil {
				b.Fatal(ok, err)
			}
			i++
		}
	})
	b.Run("set/serial", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if err := r.Set(ctx, keys[i%len(keys)], cache.Entry{Value: benchValue}, 0); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("miss/serial", func(b *testing.B) {
		b.ReportAllocs()
		key := cache.Key("absent")
		for b.Loop() {
			if _, ok, err := r.Get(ctx, key); ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
	b.Run("get/parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				if _, ok, err := r.Get(ctx, keys[i%len(keys)]); !ok || err != nil {
					panic(fmt.Sprint(ok, err))
				}
				i++
			}
		})
	})
}

// A round trip cut by the caller's own deadline, shorter than the Timeout,
// is the caller's: its error is the context's, not cache.ErrUnavailable, however
// the socket's read deadline and the context's timer race. Real time: a
// silent socket cannot be waited on in a synctest bubble.
func TestCacheCallerDeadlineIsTheCallers(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: redistest.Silent(t), ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	r, err := NewCache(c, CacheConfig{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		_, _, err := r.Get(ctx, "k")
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, cache.ErrUnavailable) {
			t.Fatalf("Get #%d under a 10ms caller deadline (Timeout 1m) = %v; want the caller's DeadlineExceeded, not cache.ErrUnavailable", i, err)
		}
	}
}

// benchValue is the size of a typical remembered answer: a small JSON
// document.
var benchValue = []byte(`{"text":"` + strings.Repeat("a", 500) + `"}`)
