package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/llm"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// Fails the package if any test leaves a goroutine behind: a Memory
	// starts none.
	goleak.VerifyTestMain(m)
}

func newMemory(t testing.TB, maxEntries int, ttl time.Duration) *Memory {
	t.Helper()
	m, err := NewMemory(MemoryConfig{MaxEntries: maxEntries, TTL: ttl})
	if err != nil {
		t.Fatalf("NewMemory(MemoryConfig{MaxEntries: %d, TTL: %v}): %v", maxEntries, ttl, err)
	}
	return m
}

func mustSet(t testing.TB, s Store, key, value string, ttl time.Duration) {
	t.Helper()
	if err := s.Set(context.Background(), key, Entry{Value: []byte(value)}, ttl); err != nil {
		t.Fatalf("Set(%q): %v", key, err)
	}
}

// present reports whether key is served, and fails the test on an error.
func present(t testing.TB, s Store, key string) bool {
	t.Helper()
	_, ok, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return ok
}

func wantValue(t testing.TB, s Store, key, want string) {
	t.Helper()
	e, ok, err := s.Get(context.Background(), key)
	if err != nil || !ok {
		t.Fatalf("Get(%q) = ok %v, err %v; want the entry", key, ok, err)
	}
	if string(e.Value) != want {
		t.Fatalf("Get(%q) = %q; want %q", key, e.Value, want)
	}
}

// A zero Stored is set to the time of the Set; a Stored in the past plays no
// part in expiry.
func TestStored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := newMemory(t, 10, time.Hour)
		before := time.Now()
		mustSet(t, m, "zero", "v", 0)
		old := before.Add(-48 * time.Hour)
		if err := m.Set(ctx, "old", Entry{Value: []byte("v"), Stored: old}, 0); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		e, ok, err := m.Get(ctx, "zero")
		if err != nil || !ok || !e.Stored.Equal(before) {
			t.Fatalf("zero Stored: got %v (ok %v, err %v); want the time of the Set, %v", e.Stored, ok, err, before)
		}
		e, ok, err = m.Get(ctx, "old")
		if err != nil || !ok {
			t.Fatalf("an entry whose Stored is 48h old was not served 1m after its Set with a 1h ttl (ok %v, err %v)", ok, err)
		}
		if !e.Stored.Equal(old) {
			t.Fatalf("Stored = %v, want %v as given", e.Stored, old)
		}
	})
}

// An entry Set at t with ttl d is served until t+d-1ns and absent at t+d.
func TestExpiryBoundary(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = time.Hour
		m := newMemory(t, 10, ttl)
		mustSet(t, m, "q", "a", 0)
		time.Sleep(ttl - time.Nanosecond)
		wantValue(t, m, "q", "a")
		time.Sleep(time.Nanosecond)
		if present(t, m, "q") {
			t.Fatal("entry served at exactly its Set time + ttl")
		}
		if m.size() != 0 {
			t.Fatalf("Len = %d after reading the expired entry; want 0 (removed on read)", m.size())
		}
	})
}

// An expired entry is not removed until it is read: Len counts it.
func TestExpiredCountsUntilRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory(t, 10, time.Minute)
		mustSet(t, m, "a", "1", 0)
		mustSet(t, m, "b", "2", 0)
		time.Sleep(time.Hour)
		if m.size() != 2 {
			t.Fatalf("Len = %d; want 2 (expired entries stay until read)", m.size())
		}
		if present(t, m, "a") {
			t.Fatal("expired entry served")
		}
		if m.size() != 1 {
			t.Fatalf("Len = %d after reading one expired entry; want 1", m.size())
		}
	})
}

func TestPerSetTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory(t, 10, time.Hour) // the default
		mustSet(t, m, "short", "s", time.Minute)
		mustSet(t, m, "long", "l", 3*time.Hour)
		mustSet(t, m, "default", "d", 0)

		time.Sleep(time.Minute - time.Nanosecond)
		wantValue(t, m, "short", "s")
		time.Sleep(time.Nanosecond)
		if present(t, m, "short") {
			t.Fatal("per-Set ttl 1m: served at 1m")
		}
		wantValue(t, m, "default", "d")

		time.Sleep(time.Hour - time.Minute)
		if present(t, m, "default") {
			t.Fatal("ttl 0 (default 1h): served at 1h")
		}
		wantValue(t, m, "long", "l")

		time.Sleep(2*time.Hour - time.Nanosecond)
		wantValue(t, m, "long", "l")
		time.Sleep(time.Nanosecond)
		if present(t, m, "long") {
			t.Fatal("per-Set ttl 3h: served at 3h")
		}
	})
}

// Setting a key again restarts its time to live.
func TestSetRestartsTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory(t, 10, time.Hour)
		mustSet(t, m, "q", "old", 0)
		time.Sleep(50 * time.Minute)
		mustSet(t, m, "q", "new", 0)
		time.Sleep(50 * time.Minute)
		wantValue(t, m, "q", "new")
		time.Sleep(10 * time.Minute)
		if present(t, m, "q") {
			t.Fatal("served 1h after the second Set")
		}
	})
}

func TestDefaultTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory(t, 0, 0)
		mustSet(t, m, "q", "a", 0)
		time.Sleep(defaultTTL - time.Nanosecond)
		wantValue(t, m, "q", "a")
		time.Sleep(time.Nanosecond)
		if present(t, m, "q") {
			t.Fatalf("served at the default TTL (%v)", defaultTTL)
		}
	})
}

func TestDefaultMaxEntries(t *testing.T) {
	m := newMemory(t, 0, 0)
	for i := range defaultMaxEntries + 5 {
		mustSet(t, m, fmt.Sprint(i), "v", 0)
	}
	if m.size() != defaultMaxEntries {
		t.Fatalf("Len = %d, want DefaultMaxEntries (%d)", m.size(), defaultMaxEntries)
	}
	for i := range 5 {
		if present(t, m, fmt.Sprint(i)) {
			t.Fatalf("entry %d, among the 5 least recently used, was not evicted", i)
		}
	}
	if !present(t, m, fmt.Sprint(defaultMaxEntries+4)) {
		t.Fatal("the newest entry was evicted")
	}
}

func TestLRUEviction(t *testing.T) {
	m := newMemory(t, 3, time.Hour)
	mustSet(t, m, "a", "1", 0)
	mustSet(t, m, "b", "2", 0)
	mustSet(t, m, "c", "3", 0) // oldest to newest: a b c
	wantValue(t, m, "a", "1")  // b c a
	mustSet(t, m, "d", "4", 0) // evicts b: c a d
	if m.size() != 3 {
		t.Fatalf("Len = %d, want 3", m.size())
	}
	if present(t, m, "b") {
		t.Fatal("b was the least recently used (a was read after it) and should have been evicted")
	}
	mustSet(t, m, "a", "1'", 0) // a Set refreshes too: c d a
	mustSet(t, m, "e", "5", 0)  // evicts c: d a e
	if present(t, m, "c") {
		t.Fatal("c should have been evicted")
	}
	wantValue(t, m, "d", "4")  // a e d
	wantValue(t, m, "a", "1'") // e d a
	wantValue(t, m, "e", "5")  // d a e
	mustSet(t, m, "f", "6", 0) // evicts d: a e f
	if present(t, m, "d") {
		t.Fatal("d should have been evicted")
	}
	for _, k := range []string{"a", "e", "f"} {
		if !present(t, m, k) {
			t.Fatalf("%s evicted; want only d evicted", k)
		}
	}
}

func TestNewMemoryInvalid(t *testing.T) {
	for _, tc := range []struct {
		max   int
		ttl   time.Duration
		names []string
	}{
		{-1, 0, []string{"MaxEntries is -1"}},
		{0, -time.Second, []string{"TTL is -1s"}},
		{-5, -time.Minute, []string{"MaxEntries is -5", "TTL is -1m0s"}},
	} {
		m, err := NewMemory(MemoryConfig{MaxEntries: tc.max, TTL: tc.ttl})
		if m != nil || !errors.Is(err, llm.ErrInvalidConfig) {
			t.Fatalf("NewMemory(MemoryConfig{MaxEntries: %d, TTL: %v}) = %v, %v; want nil and llm.ErrInvalidConfig", tc.max, tc.ttl, m, err)
		}
		for _, name := range tc.names {
			if !strings.Contains(err.Error(), name) {
				t.Errorf("NewMemory(MemoryConfig{MaxEntries: %d, TTL: %v}): error %q does not say %q", tc.max, tc.ttl, err, name)
			}
		}
		if !strings.Contains(err.Error(), "must not be negative") {
			t.Errorf("error %q does not say what to change", err)
		}
	}
	for _, tc := range []struct {
		max int
		ttl time.Duration
	}{{0, 0}, {1, time.Nanosecond}, {1 << 20, 365 * 24 * time.Hour}} {
		if _, err := NewMemory(MemoryConfig{MaxEntries: tc.max, TTL: tc.ttl}); err != nil {
			t.Fatalf("NewMemory(MemoryConfig{MaxEntries: %d, TTL: %v}): %v", tc.max, tc.ttl, err)
		}
	}
}

func TestSetNegativeTTL(t *testing.T) {
	m := newMemory(t, 10, time.Hour)
	err := m.Set(context.Background(), "q", Entry{Value: []byte("a")}, -time.Second)
	if !errors.Is(err, ErrInvalidTTL) || !strings.Contains(err.Error(), "ttl is -1s") {
		t.Fatalf("Set with ttl -1s = %v; want ErrInvalidTTL naming the ttl", err)
	}
	if present(t, m, "q") || m.size() != 0 {
		t.Fatal("Set with a negative ttl stored the entry")
	}
}

func TestContextDone(t *testing.T) {
	m := newMemory(t, 10, time.Hour)
	mustSet(t, m, "q", "a", 0)

	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	for _, tc := range []struct {
		ctx  context.Context
		want error
	}{{canceled, context.Canceled}, {expired, context.DeadlineExceeded}} {
		e, ok, err := m.Get(tc.ctx, "q")
		if !errors.Is(err, tc.want) || ok || e.Value != nil {
			t.Fatalf("Get with a done ctx = %q, %v, %v; want nothing and %v", e.Value, ok, err, tc.want)
		}
		if err := m.Set(tc.ctx, "other", Entry{Value: []byte("b")}, 0); !errors.Is(err, tc.want) {
			t.Fatalf("Set with a done ctx = %v; want %v", err, tc.want)
		}
		if present(t, m, "other") {
			t.Fatal("Set with a done ctx stored the entry")
		}
	}
	wantValue(t, m, "q", "a") // untouched
}

// removeExpired must not remove an entry Set after the Get that found the
// key expired: the fresh answer would be lost.
func TestRemoveExpiredKeepsNewerEntry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory(t, 10, time.Minute)
		mustSet(t, m, "q", "old", 0)
		time.Sleep(time.Hour)
		stale, ok := m.lru.Get("q") // what Get sees before it removes
		if !ok || time.Now().Before(stale.expires) {
			t.Fatal("setup: want the expired entry")
		}
		mustSet(t, m, "q", "fresh", 0) // a concurrent Set lands here
		m.removeExpired("q", stale.seq)
		wantValue(t, m, "q", "fresh")

		cur, _ := m.lru.Peek("q")
		time.Sleep(time.Hour)
		m.removeExpired("q", cur.seq)
		if m.size() != 0 {
			t.Fatal("removeExpired left the entry it was asked to remove")
		}
	})
}

// 100 goroutines mix Gets and Sets over a key space larger than the cache,
// with ttls short enough that entries expire while others read them. Run
// with -race. Every served value must be one that was Set under its key,
// and the cache never holds more than maxEntries.
func TestConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			goroutines = 100
			ops        = 300
			keys       = 64
			maxEntries = 32
		)
		ctx := context.Background()
		m := newMemory(t, maxEntries, 50*time.Millisecond)
		var hits, misses atomic.Int64
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(g), 1))
				for i := range ops {
					k := fmt.Sprint("k", r.IntN(keys))
					switch r.IntN(4) {
					case 0:
						v := []byte(fmt.Sprintf("%s/%d/%d", k, g, i))
						ttl := time.Duration(r.IntN(100)) * time.Millisecond // 0: the default
						if err := m.Set(ctx, k, Entry{Value: v}, ttl); err != nil {
							t.Errorf("Set: %v", err)
							return
						}
						copy(v, "XXXX") // must not reach the cache
					case 1:
						time.Sleep(time.Duration(r.IntN(20)) * time.Millisecond)
					default:
						e, ok, err := m.Get(ctx, k)
						if err != nil {
							t.Errorf("Get: %v", err)
							return
						}
						if !ok {
							misses.Add(1)
							continue
						}
						hits.Add(1)
						if !bytes.HasPrefix(e.Value, []byte(k+"/")) {
							t.Errorf("Get(%q) = %q, a value not Set under that key", k, e.Value)
							return
						}
						e.Value[0] = 'X' // the caller's copy
					}
					if n := m.size(); n > maxEntries {
						t.Errorf("Len = %d > maxEntries %d", n, maxEntries)
						return
					}
				}
			})
		}
		wg.Wait()
		if hits.Load() == 0 || misses.Load() == 0 {
			t.Fatalf("hits %d, misses %d: the test did not exercise both paths", hits.Load(), misses.Load())
		}
	})
}

// A Memory starts no goroutine: checked while the Memory is alive and in
// use, not only at the end of the package (TestMain).
func TestNoGoroutine(t *testing.T) {
	m := newMemory(t, 10, time.Minute)
	mustSet(t, m, "q", "a", 0)
	wantValue(t, m, "q", "a")
	goleak.VerifyNone(t)
	runtime.KeepAlive(m)
}

// A Memory built inside a synctest bubble lets the bubble end. golang-lru's
// expirable cache would not: its goroutine, waiting on a ticker forever,
// outlives the bubble's main goroutine, and synctest.Test panics ("deadlock:
// main bubble goroutine has exited but blocked goroutines remain").
func TestBubbleEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemory(t, 10, time.Minute)
		mustSet(t, m, "q", "a", 0)
		time.Sleep(2 * time.Minute)
		if present(t, m, "q") {
			t.Fatal("served after its ttl")
		}
		synctest.Wait() // every goroutine of the bubble is idle: there is none besides this one
	})
}
