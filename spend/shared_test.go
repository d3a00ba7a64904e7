package spend_test

// Tests of Shared's own logic on a Store in memory that the tests make
// fail, hang or answer again, in virtual time. Shared on Redis is tested
// in redisstore.

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/cost"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/spend"
)

// sharedFake is a spend.Store in memory for Shared's tests. With fail set
// every op returns it without changing anything; with hang set every op
// waits for its context to end instead.
type sharedFake struct {
	mu       sync.Mutex
	spent    map[string]cost.Money
	reserved map[string]cost.Money
	fail     error
	hang     bool
	ops      int // ops that reached the store, answered or not
}

func newSharedFake() *sharedFake {
	return &sharedFake{spent: map[string]cost.Money{}, reserved: map[string]cost.Money{}}
}

func fakeKey(key string, period int64) string { return key + "|" + time.Unix(period, 0).UTC().String() }

// enter counts an op and returns its failure, if any.
func (f *sharedFake) enter(ctx context.Context) error {
	f.mu.Lock()
	f.ops++
	fail, hang := f.fail, f.hang
	f.mu.Unlock()
	if hang {
		<-ctx.Done()
		return ctx.Err()
	}
	return fail
}

func (f *sharedFake) Reserve(ctx context.Context, key string, period int64, amount, limit cost.Money, ttl time.Duration) (bool, cost.Money, error) {
	if err := f.enter(ctx); err != nil {
		return false, 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	k := fakeKey(key, period)
	used := f.spent[k] + f.reserved[k]
	if used+amount > limit {
		return false, used, nil
	}
	f.reserved[k] += amount
	return true, used + amount, nil
}

func (f *sharedFake) Settle(ctx context.Context, key string, period int64, reserved, spent cost.Money, ttl time.Duration) error {
	if err := f.enter(ctx); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	k := fakeKey(key, period)
	f.reserved[k] = max(f.reserved[k]-reserved, 0)
	f.spent[k] += spent
	return nil
}

func (f *sharedFake) Used(ctx context.Context, key string, period int64) (cost.Money, cost.Money, error) {
	if err := f.enter(ctx); err != nil {
		return 0, 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	k := fakeKey(key, period)
	return f.spent[k], f.reserved[k], nil
}

func (f *sharedFake) set(fail error, hang bool) {
	f.mu.Lock()
	f.fail, f.hang = fail, hang
	f.mu.Unlock()
}

// held returns key's spent and reserved in period, as the store holds them.
func (f *sharedFake) held(key string, period int64) (spent, reserved cost.Money) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := fakeKey(key, period)
	return f.spent[k], f.reserved[k]
}

func (f *sharedFake) opCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ops
}

// newShared returns NewShared(store, cfg), failing the test on an error;
// a nil Logger is one that discards.
func newShared(t *testing.T, store spend.Store, cfg spend.SharedConfig) *spend.Shared {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s, err := spend.NewShared(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var errDown = errors.New("connection refused")

const (
	testPeriod = int64(1767225600)
	testTTL    = 24 * time.Hour
)

func TestNewSharedInvalid(t *testing.T) {
	if s, err := spend.NewShared(newSharedFake(), spend.SharedConfig{}); err != nil || !s.Available() {
		t.Fatalf("NewShared with defaults = %v, %v; want an available store", s, err)
	}
	_, err := spend.NewShared(nil, spend.SharedConfig{Timeout: -1, ProbeEvery: -time.Second, Replicas: -2})
	if !errors.Is(err, llm.ErrInvalidConfig) {
		t.Fatalf("err = %v; want one matching llm.ErrInvalidConfig", err)
	}
	for _, want := range []string{"store is nil", "redisstore.New", "Timeout is -1ns", "0 means 250ms",
		"ProbeEvery is -1s", "0 means 1s", "Replicas is -2", "0 means 1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v; want it to say %q", err, want)
		}
	}
}

// While the store answers, every op is made on it: reservations are the
// store's, and a Settle releases and spends there.
func TestSharedUsesTheStoreWhileItAnswers(t *testing.T) {
	ctx := context.Background()
	f := newSharedFake()
	s := newShared(t, f, spend.SharedConfig{})
	ok, used, err := s.Reserve(ctx, "acme", testPeriod, 30, 100, testTTL)
	if !ok || used != 30 || err != nil {
		t.Fatalf("Reserve = %v, %v, %v; want true, 30, nil", ok, used, err)
	}
	if ok, used, _ := s.Reserve(ctx, "acme", testPeriod, 80, 100, testTTL); ok || used != 30 {
		t.Fatalf("Reserve over the limit = %v, %v; want false, 30", ok, used)
	}
	if err := s.Settle(ctx, "acme", testPeriod, 30, 12, testTTL); err != nil {
		t.Fatal(err)
	}
	if sp, res := f.held("acme", testPeriod); sp != 12 || res != 0 {
		t.Fatalf("store holds %v spent, %v reserved; want 12, 0", sp, res)
	}
	if sp, res, err := s.Used(ctx, "acme", testPeriod); sp != 12 || res != 0 || err != nil {
		t.Fatalf("Used = %v, %v, %v; want 12, 0, nil", sp, res, err)
	}
	if n := f.opCount(); n != 4 {
		t.Fatalf("%d ops reached the store; want 4: one round trip per op", n)
	}
	if err := s.Settle(ctx, "acme", testPeriod, 0, 0, testTTL); err != nil || f.opCount() != 4 {
		t.Fatalf("an empty Settle: %v, %d ops; want no round trip", err, f.opCount())
	}
}

// A store that does not answer costs an op the Timeout, and no more: then
// the ops decide locally, at once, until ProbeEvery has passed.
func TestSharedNeverWaitsLongerThanTheTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		f := newSharedFake()
		const timeout, probe = 50 * time.Millisecond, time.Second
		s := newShared(t, f, spend.SharedConfig{Timeout: timeout, ProbeEvery: probe})
		if ok, _, _ := s.Reserve(ctx, "acme", testPeriod, 10, 100, testTTL); !ok {
			t.Fatal("Reserve refused with the store up")
		}
		f.set(nil, true)
		timed := func(what string, op func(), want time.Duration) {
			t.Helper()
			start := time.Now()
			op()
			if d := time.Since(start); d != want {
				t.Fatalf("%s took %v; want %v", what, d, want)
			}
		}
		timed("Settle of a reservation made on the store, the store hanging",
			func() { _ = s.Settle(ctx, "acme", testPeriod, 10, 4, testTTL) }, timeout)
		timed("Reserve while the store is left alone", func() {
			if ok, _, _ := s.Reserve(ctx, "acme", testPeriod, 10, 100, testTTL); !ok {
				t.Error("local Reserve refused within the allowance")
			}
		}, 0)
		timed("Settle while the store is left alone", func() { _ = s.Settle(ctx, "acme", testPeriod, 10, 10, testTTL) }, 0)
		timed("Used while the store is left alone", func() {
			if _, _, err := s.Used(ctx, "acme", testPeriod); !errors.Is(err, spend.ErrSharedUnavailable) {
				t.Errorf("Used: %v; want ErrSharedUnavailable", err)
			}
		}, 0)
		time.Sleep(probe)
		// The probe writes the pending settlement, then reserves: both
		// within one Timeout.
		timed("Reserve probing a hanging store", func() {
			if ok, _, _ := s.Reserve(ctx, "acme", testPeriod, 10, 100, testTTL); !ok {
				t.Error("local Reserve refused within the allowance")
			}
		}, timeout)
		f.set(nil, false)
		time.Sleep(probe)
		timed("Reserve with the store back", func() { _, _, _ = s.Reserve(ctx, "acme", testPeriod, 1, 100, testTTL) }, 0)
		if !s.Available() {
			t.Fatal("not Available with the store back")
		}
	})
}

// During an outage each of N replicas spends at most what remained of the
// limit, divided by Replicas: with Replicas = N the limit holds; with 0
// (one) they overshoot by (N-1) times what remained.
func TestSharedOutageBound(t *testing.T) {
	for _, tc := range []struct {
		replicas  int
		wantTotal cost.Money // spent by the 4 replicas during the outage
	}{
		{replicas: 4, wantTotal: 40},  // 4 x (100-60)/4: the limit holds
		{replicas: 0, wantTotal: 160}, // 4 x 40: over by 3 x 40
		{replicas: 1, wantTotal: 160},
	} {
		t.Run("Replicas="+string(rune('0'+tc.replicas)), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				f := newSharedFake()
				const limit = 100
				var replicas []*spend.Shared
				for range 4 {
					replicas = append(replicas, newShared(t, f, spend.SharedConfig{Replicas: tc.replicas}))
				}
				// 60 spent before the outage, seen by every replica.
				for i, r := range replicas {
					if ok, _, _ := r.Reserve(ctx, "acme", testPeriod, 15, limit, testTTL); !ok {
						t.Fatalf("replica %d: Reserve refused before the outage", i)
					}
					_ = r.Settle(ctx, "acme", testPeriod, 15, 15, testTTL)
				}
				for _, r := range replicas {
					if sp, _, _ := r.Used(ctx, "acme", testPeriod); sp != 60 {
						t.Fatalf("Used = %v; want 60", sp)
					}
				}
				f.set(errDown, false)
				var total cost.Money
				for i, r := range replicas {
					var mine cost.Money
					for n := 0; ; n++ {
						ok, _, err := r.Reserve(ctx, "acme", testPeriod, 3, limit, testTTL)
						if err != nil {
							t.Fatalf("Reserve during the outage: %v; want no error", err)
						}
						if !ok {
							break
						}
						_ = r.Settle(ctx, "acme", testPeriod, 3, 2, testTTL) // 1 released
						mine += 2
						if n > 1000 {
							t.Fatalf("replica %d: reservations without end during the outage", i)
						}
					}
					if want := tc.wantTotal / 4; mine < want-2 || mine > want {
						t.Fatalf("replica %d spent %v during the outage; want within 2 of its allowance, %v", i, mine, want)
					}
					total += mine
				}
				if total > tc.wantTotal {
					t.Fatalf("replicas spent %v during the outage; want at most %v", total, tc.wantTotal)
				}
				// Everything reaches the store once it answers.
				f.set(nil, false)
				time.Sleep(time.Second)
				for _, r := range replicas {
					if err := r.Flush(ctx); err != nil {
						t.Fatal(err)
					}
				}
				if sp, res := f.held("acme", testPeriod); sp != 60+total || res != 0 {
					t.Fatalf("store holds %v spent, %v reserved; want %v, 0", sp, res, 60+total)
				}
			})
		})
	}
}

// Spend made during an outage reaches the store exactly once, with the
// next op the store answers: both the settlement of a reservation made on
// the store before the outage and the spend of local reservations, one of
// them settled after the store came back.
func TestSharedOutageSpendReachesTheStoreOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		f := newSharedFake()
		s := newShared(t, f, spend.SharedConfig{})
		if ok, _, _ := s.Reserve(ctx, "acme", testPeriod, 20, 1000, testTTL); !ok {
			t.Fatal("Reserve refused")
		}
		f.set(errDown, false)
		_ = s.Settle(ctx, "acme", testPeriod, 20, 7, testTTL) // made on the store: kept
		for range 3 {
			if ok, _, _ := s.Reserve(ctx, "acme", testPeriod, 10, 1000, testTTL); !ok {
				t.Fatal("local Reserve refused")
			}
		}
		_ = s.Settle(ctx, "acme", testPeriod, 10, 5, testTTL)
		_ = s.Settle(ctx, "acme", testPeriod, 10, 0, testTTL) // a failed attempt
		if sp, res := f.held("acme", testPeriod); sp != 0 || res != 20 {
			t.Fatalf("store holds %v, %v during the outage; want 0, 20", sp, res)
		}
		if rel, sp := s.Pending(); rel != 20 || sp != 12 {
			t.Fatalf("Pending = %v, %v; want 20, 12", rel, sp)
		}
		f.set(nil, false)
		time.Sleep(time.Second)
		// The third local reservation is settled locally, the store back:
		// its spend reaches the store, and nothing is released there.
		_ = s.Settle(ctx, "acme", testPeriod, 10, 9, testTTL)
		if sp, res := f.held("acme", testPeriod); sp != 21 || res != 0 {
			t.Fatalf("store holds %v spent, %v reserved; want 7+5+9 = 21, 0", sp, res)
		}
		if rel, sp := s.Pending(); rel != 0 || sp != 0 {
			t.Fatalf("Pending = %v, %v after the write; want 0, 0", rel, sp)
		}
		for range 3 { // more ops write nothing again
			_, _, _ = s.Reserve(ctx, "acme", testPeriod, 1, 1000, testTTL)
			_ = s.Settle(ctx, "acme", testPeriod, 1, 1, testTTL)
		}
		if sp, res := f.held("acme", testPeriod); sp != 24 || res != 0 {
			t.Fatalf("store holds %v spent, %v reserved; want 24, 0: spend counted once", sp, res)
		}
	})
}

// What an outage left for a key no one asks about again is written with
// another key's op, or by Flush.
func TestSharedPendingOfOtherKeysIsWritten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		f := newSharedFake()
		s := newShared(t, f, spend.SharedConfig{})
		for _, k := range []string{"a", "b", "c"} {
			_, _, _ = s.Reserve(ctx, k, testPeriod, 5, 100, testTTL)
		}
		f.set(errDown, false)
		for _, k := range []string{"a", "b", "c"} {
			_ = s.Settle(ctx, k, testPeriod, 5, 5, testTTL)
		}
		f.set(nil, false)
		time.Sleep(time.Second)
		_, _, _ = s.Reserve(ctx, "other", testPeriod, 1, 100, testTTL) // writes one of a, b, c
		if _, sp := s.Pending(); sp != 10 {
			t.Fatalf("pending spend %v after one op; want 10: one other key written", sp)
		}
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"a", "b", "c"} {
			if sp, res := f.held(k, testPeriod); sp != 5 || res != 0 {
				t.Fatalf("key %s: store holds %v, %v; want 5, 0", k, sp, res)
			}
		}
		f.set(errDown, false)
		_ = s.Settle(ctx, "a", testPeriod, 0, 1, testTTL)
		if err := s.Flush(ctx); !errors.Is(err, spend.ErrSharedUnavailable) || !strings.Contains(err.Error(), "connection refused") {
			t.Fatalf("Flush with the store down: %v; want ErrSharedUnavailable wrapping the cause", err)
		}
		if _, sp := s.Pending(); sp != 1 {
			t.Fatalf("pending %v after a failed Flush; want 1 kept", sp)
		}
	})
}

// OnError and the log say once when the store becomes unavailable, and
// once when it answers again, however many ops fail meanwhile.
func TestSharedReportsEachChangeOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		f := newSharedFake()
		var logs bytes.Buffer
		var calls []error
		s := newShared(t, f, spend.SharedConfig{ProbeEvery: time.Second,
			OnError: func(err error) { calls = append(calls, err) },
			Logger:  slog.New(slog.NewTextHandler(&logs, nil))})
		f.set(errDown, false)
		for range 5 { // two probes among them fail again
			_, _, _ = s.Reserve(ctx, "acme", testPeriod, 1, 100, testTTL)
			time.Sleep(600 * time.Millisecond)
		}
		if len(calls) != 1 || !errors.Is(calls[0], spend.ErrSharedUnavailable) || !strings.Contains(calls[0].Error(), "connection refused") {
			t.Fatalf("OnError calls %v; want one matching ErrSharedUnavailable and wrapping the cause", calls)
		}
		f.set(nil, false)
		time.Sleep(time.Second)
		for range 3 {
			_, _, _ = s.Reserve(ctx, "acme", testPeriod, 1, 100, testTTL)
		}
		if len(calls) != 2 || calls[1] != nil {
			t.Fatalf("OnError calls %v; want a second, nil, once the store answers", calls)
		}
		out := logs.String()
		if strings.Count(out, `msg="backstop: shared spend store unavailable`) != 1 || strings.Count(out, `msg="backstop: shared spend store available again`) != 1 {
			t.Fatalf("log:\n%s\nwant one record of each change", out)
		}
	})
}

// A caller's own deadline ending a round trip says nothing about the
// store: the decision is local, and the store stays available.
func TestSharedCallerDeadlineIsNotBlamedOnTheStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newSharedFake()
		var calls []error
		s := newShared(t, f, spend.SharedConfig{OnError: func(err error) { calls = append(calls, err) }})
		f.set(nil, true)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		if ok, _, err := s.Reserve(ctx, "acme", testPeriod, 1, 100, testTTL); !ok || err != nil {
			t.Fatalf("Reserve = %v, %v; want a local grant", ok, err)
		}
		if !s.Available() || len(calls) != 0 {
			t.Fatalf("Available %v, OnError %v; want the store still available", s.Available(), calls)
		}
	})
}

// Many calls reserve and settle while the store goes down and comes back:
// once everything is written, the store holds every settled spend exactly
// once and no reservation. Run with -race.
func TestSharedConcurrentFlappingStoreLosesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		f := newSharedFake()
		s := newShared(t, f, spend.SharedConfig{ProbeEvery: 100 * time.Millisecond})
		var mu sync.Mutex
		var settled cost.Money
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(g), 1))
				for range 50 {
					amount := cost.Money(1 + rng.IntN(20))
					ok, _, _ := s.Reserve(ctx, "acme", testPeriod, amount, 1<<40, testTTL)
					time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
					if !ok {
						continue
					}
					got := cost.Money(rng.IntN(int(amount) + 1))
					_ = s.Settle(ctx, "acme", testPeriod, amount, got, testTTL)
					mu.Lock()
					settled += got
					mu.Unlock()
				}
			})
		}
		wg.Go(func() {
			for i := range 20 {
				f.set([]error{nil, errDown}[i%2], false)
				time.Sleep(40 * time.Millisecond)
			}
			f.set(nil, false)
		})
		wg.Wait()
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if sp, res := f.held("acme", testPeriod); sp != settled || res != 0 {
			t.Fatalf("store holds %v spent, %v reserved; want %v, 0", sp, res, settled)
		}
	})
}

// flappingStore answers every other op and fails the others, as a store
// whose round trips succeed and time out by turns under a burst. With slow
// set, the ops it fails are applied all the same, after the Timeout (the
// round trip timed out, then Redis ran it).
type flappingStore struct {
	*sharedFake
	slow   bool
	mu     sync.Mutex
	n      int
	steady bool // every op answers
}

// turn reports whether this op is one that fails.
func (f *flappingStore) turn() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	return f.n%2 == 0 && !f.steady
}

func (f *flappingStore) Reserve(ctx context.Context, key string, period int64, amount, limit cost.Money, ttl time.Duration) (bool, cost.Money, error) {
	if f.turn() {
		if !f.slow {
			return false, 0, errDown
		}
		<-ctx.Done()
		_, _, _ = f.sharedFake.Reserve(context.Background(), key, period, amount, limit, ttl)
		return false, 0, ctx.Err()
	}
	return f.sharedFake.Reserve(ctx, key, period, amount, limit, ttl)
}

func (f *flappingStore) Settle(ctx context.Context, key string, period int64, reserved, spent cost.Money, ttl time.Duration) error {
	if f.turn() {
		if !f.slow {
			return errDown
		}
		<-ctx.Done()
		_ = f.sharedFake.Settle(context.Background(), key, period, reserved, spent, ttl)
		return ctx.Err()
	}
	return f.sharedFake.Settle(ctx, key, period, reserved, spent, ttl)
}

// A store that answers and fails by turns (a burst on a healthy Redis)
// holds the outage bound: whatever the number of turns, each replica
// decides locally, over the period, at most its one allowance, (limit -
// u) / Replicas, u what it saw when it first decided locally; so 4
// replicas that saw 60 of 100 spend at most the limit plus 4 x 40/4.
// Before, each turn drew the allowance afresh.
func TestSharedFlappingStoreHoldsTheOutageBound(t *testing.T) {
	for _, slow := range []bool{false, true} {
		name := "failing"
		if slow {
			name = "slow"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				f := &flappingStore{sharedFake: newSharedFake(), slow: slow}
				const limit, before = 100, 60
				// 60 spent before, seen by every replica.
				f.spent[fakeKey("acme", testPeriod)] = before
				var replicas []*spend.Shared
				for range 4 {
					r := newShared(t, f, spend.SharedConfig{Replicas: 4, ProbeEvery: 100 * time.Millisecond})
					if sp, _, _ := r.Used(ctx, "acme", testPeriod); sp != before {
						t.Fatalf("Used = %v; want %v", sp, before)
					}
					replicas = append(replicas, r)
				}
				var total cost.Money
				for range 400 {
					for _, r := range replicas {
						if ok, _, _ := r.Reserve(ctx, "acme", testPeriod, 3, limit, testTTL); ok {
							_ = r.Settle(ctx, "acme", testPeriod, 3, 3, testTTL)
							total += 3
						}
					}
					time.Sleep(101 * time.Millisecond)
				}
				if bound := cost.Money(limit + 4*(limit-before)/4); before+total > bound {
					t.Fatalf("spent %d in all; want at most %d: the limit plus one allowance a replica", before+total, bound)
				}
				f.mu.Lock()
				f.steady = true // every op answers from now
				f.mu.Unlock()
				time.Sleep(time.Second)
				for _, r := range replicas {
					if err := r.Flush(ctx); err != nil {
						t.Fatal(err)
					}
				}
				sp, _ := f.held("acme", testPeriod)
				if sp < before+total || (!slow && sp != before+total) {
					t.Fatalf("store holds %d spent; want %d (more only for a slow store)", sp, before+total)
				}
			})
		})
	}
}

// countingStore is a sharedFake that counts the replicas, as redisstore's
// spend store does: the ids that reserved with ReserveAs (on any key, in
// this fake).
type countingStore struct {
	*sharedFake
	ids map[string]bool
}

func (c *countingStore) ReserveAs(ctx context.Context, id, key string, period int64, amount, limit cost.Money, ttl time.Duration) (bool, cost.Money, int, error) {
	ok, used, err := c.Reserve(ctx, key, period, amount, limit, ttl)
	if err != nil {
		return ok, used, 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ids[id] = true
	return ok, used, len(c.ids), nil
}

// With the default Replicas (0), a Shared on a ReplicaStore divides its
// outage allowance by the replicas the store counted: 4 replicas that saw
// 60 of 100 spend 40 in all during an outage, not 4 x 40.
func TestSharedDefaultReplicasAreCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		f := &countingStore{sharedFake: newSharedFake(), ids: map[string]bool{}}
		const limit = 100
		var replicas []*spend.Shared
		for range 4 {
			replicas = append(replicas, newShared(t, f, spend.SharedConfig{}))
		}
		for range 2 { // the second round counts all 4
			for _, r := range replicas {
				if ok, _, _ := r.Reserve(ctx, "acme", testPeriod, 15, limit, testTTL); !ok {
					t.Fatal("Reserve refused before the outage")
				}
				_ = r.Settle(ctx, "acme", testPeriod, 15, 15/2, testTTL)
			}
			time.Sleep(time.Second)
		}
		for _, r := range replicas {
			if sp, _, _ := r.Used(ctx, "acme", testPeriod); sp != 56 {
				t.Fatalf("Used = %v; want 56", sp)
			}
		}
		f.set(errDown, false)
		var total cost.Money
		for _, r := range replicas {
			for n := 0; n < 1000; n++ {
				ok, _, _ := r.Reserve(ctx, "acme", testPeriod, 1, limit, testTTL)
				if !ok {
					break
				}
				_ = r.Settle(ctx, "acme", testPeriod, 1, 1, testTTL)
				total++
			}
		}
		if want := cost.Money(4 * ((limit - 56) / 4)); total != want {
			t.Fatalf("replicas spent %d during the outage; want %d: (100-56)/4 each", total, want)
		}
	})
}
