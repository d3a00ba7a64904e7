package redisstore_test

// Tests of budget.Shared on the Redis store: the script's window, floor,
// refunds and repairs, and how the budget carries on when Redis fails.
// Integration tests and benchmarks against a real Redis server are found
// by internal/redistest: skipped when none answers, failed under CI=true.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/backstop-llm/backstop/budget"
	"github.com/backstop-llm/backstop/internal/redistest"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/redisstore"
	"github.com/redis/go-redis/v9"
)

// newTestBudget returns a budget.Shared on the store under key through c,
// failing the test on a configuration error. A zero Timeout is made 10s, so
// that a loaded machine does not turn the tests' shared decisions into
// local ones.
func newTestBudget(t testing.TB, c redis.UniversalClient, key string, opts budget.SharedConfig) *budget.Shared {
	t.Helper()
	opts.Timeout = cmp.Or(opts.Timeout, sharedTestTimeout)
	s, err := budget.NewShared(store(t, c).Budget(key), opts)
	must(t, "budget.NewShared", err)
	return s
}

// grantAll withdraws until a refusal, returning the retries granted; it
// fails the test past limit withdrawals.
func grantAll(t testing.TB, ctx context.Context, b budget.Budget, limit int) int {
	t.Helper()
	for n := range limit {
		if err := b.Withdraw(ctx); err != nil {
			if !errors.Is(err, budget.ErrExhausted) {
				t.Fatalf("Withdraw: %v; want nil or ErrExhausted", err)
			}
			return n
		}
	}
	t.Fatalf("more than %d retries granted", limit)
	return limit
}

// recordFirsts records n failed first attempts.
func recordFirsts(ctx context.Context, b budget.Budget, n int) {
	for range n {
		b.Record(ctx, budget.Outcome{})
	}
}

// counts returns s.Counts, failing the test on an error.
func counts(t testing.TB, s *budget.Shared) (firsts, retries int64) {
	t.Helper()
	f, r, err := s.Counts(context.Background())
	if err != nil {
		t.Fatalf("Counts: %v", err)
	}
	return f, r
}

// budget.NewShared on a Redis store reports every problem of its options
// at once (the client's are redisstore.New's: see
// TestNewSharedInvalid); the defaults themselves are checked in budget's
// own tests.
func TestBudgetNewSharedInvalid(t *testing.T) {
	m := miniredis.RunT(t)
	good, _ := redistest.CountedClient(t, m.Addr())
	st := store(t, good)
	s, err := budget.NewShared(st.Budget("k"), budget.SharedConfig{})
	if err != nil || !s.Available() {
		t.Fatalf("New = %v, %v; want an available budget with the default configuration", s, err)
	}
	for _, tc := range []struct {
		name  string
		store budget.Store
		opts  budget.SharedConfig
		want  []string
	}{
		{"nil store", nil, budget.SharedConfig{}, []string{"store is nil", "redisstore.New"}},
		{"nil Shared's store", (*redisstore.Store)(nil).Budget("k"), budget.SharedConfig{}, []string{"store is nil"}},
		{"empty key", st.Budget(""), budget.SharedConfig{}, []string{"key is empty"}},
		{"bad ratio", st.Budget("k"), budget.SharedConfig{Ratio: budget.RatioConfig{Ratio: 2, Window: time.Millisecond}}, []string{"Ratio is 2", "Window is 1ms"}},
		{"negative Timeout", st.Budget("k"), budget.SharedConfig{Timeout: -1}, []string{"Timeout is -1ns", "0 means 50ms"}},
		{"negative FlushEvery", st.Budget("k"), budget.SharedConfig{FlushEvery: -time.Second}, []string{"FlushEvery is -1s", "0 means 1s"}},
		{"negative FlushAfter", st.Budget("k"), budget.SharedConfig{FlushAfter: -1}, []string{"FlushAfter is -1", "0 means 100"}},
		{"negative ProbeEvery", st.Budget("k"), budget.SharedConfig{ProbeEvery: -1}, []string{"ProbeEvery is -1ns", "0 means 1s"}},
		{"all at once", st.Budget(""), budget.SharedConfig{Timeout: -1, FlushAfter: -1, Ratio: budget.RatioConfig{Ratio: -1}},
			[]string{"key is empty", "Timeout is", "FlushAfter is", "Ratio is -1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := budget.NewShared(tc.store, tc.opts)
			if err == nil || s != nil {
				t.Fatalf("New = %v, %v; want an error", s, err)
			}
			saysAll(t, err, llm.ErrInvalidConfig, tc.want)
		})
	}
}

// Two replicas on one key spend one budget: 150 + 50 first attempts allow
// 10% of 200, 20 retries in all, however they are asked for. Two local
// budgets would have allowed 15 + 10 (the second one's floor).
func TestBudgetReplicasShareOneBudget(t *testing.T) {
	ctx := context.Background()
	m := miniredis.RunT(t)
	ca, _ := redistest.CountedClient(t, m.Addr())
	cb, _ := redistest.CountedClient(t, m.Addr())
	opts := budget.SharedConfig{FlushAfter: 1000, FlushEvery: time.Hour} // firsts go with the Withdraws
	a := newTestBudget(t, ca, "backstop:budget:c:t", opts)
	b := newTestBudget(t, cb, "backstop:budget:c:t", opts)
	recordFirsts(ctx, a, 150)
	recordFirsts(ctx, b, 50)
	if f, r := counts(t, a); f != 0 || r != 0 {
		t.Fatalf("before any Withdraw Redis counts %d firsts, %d retries; want nothing written yet", f, r)
	}
	granted := 0
	for range 30 {
		for _, s := range []*budget.Shared{a, b} {
			if s.Withdraw(ctx) == nil {
				granted++
			}
		}
	}
	if granted != 20 {
		t.Fatalf("two replicas granted %d retries; want 20 (10%% of 150+50)", granted)
	}
	if f, r := counts(t, b); f != 200 || r != 20 {
		t.Fatalf("Counts = %d firsts, %d retries; want 200, 20", f, r)
	}
}

func TestBudgetFloor(t *testing.T) {
	ctx := context.Background()
	m := miniredis.RunT(t)
	c, _ := redistest.CountedClient(t, m.Addr())
	t.Run("default floor, shared", func(t *testing.T) {
		a := newTestBudget(t, c, "floor", budget.SharedConfig{})
		b := newTestBudget(t, c, "floor", budget.SharedConfig{})
		if n := grantAll(t, ctx, a, 100) + grantAll(t, ctx, b, 100); n != 10 /* budget's default floor */ {
			t.Fatalf("two quiet replicas granted %d retries; want one floor, %d", n, 10 /* budget's default floor */)
		}
	})
	t.Run("no floor", func(t *testing.T) {
		s := newTestBudget(t, c, "nofloor", budget.SharedConfig{Ratio: budget.RatioConfig{MinRetries: -1}})
		if n := grantAll(t, ctx, s, 100); n != 0 {
			t.Fatalf("granted %d retries with no first attempts and no floor; want 0", n)
		}
		recordFirsts(ctx, s, 19)
		if n := grantAll(t, ctx, s, 100); n != 1 {
			t.Fatalf("granted %d retries after 19 first attempts at 10%%; want 1", n)
		}
	})
}

// The window rolls on the Redis server's clock, one bucket at a time, and
// the key expires two Windows after its last write.
func TestBudgetWindowRolls(t *testing.T) {
	ctx := context.Background()
	m, c, _ := pinnedRedis(t)
	const key = "roll"
	s := newTestBudget(t, c, key, budget.SharedConfig{Ratio: budget.RatioConfig{Window: 10 * time.Second}})
	recordFirsts(ctx, s, 100) // FlushAfter: written by the 100th
	if n := grantAll(t, ctx, s, 100); n != 10 {
		t.Fatalf("t0: granted %d; want 10", n)
	}
	m.SetTime(t0.Add(5 * time.Second))
	recordFirsts(ctx, s, 200)
	if n := grantAll(t, ctx, s, 100); n != 20 {
		t.Fatalf("t0+5s: granted %d; want 20 (10%% of 300, less the 10 already granted)", n)
	}
	m.SetTime(t0.Add(10 * time.Second)) // t0's bucket leaves the window
	if f, r := counts(t, s); f != 200 || r != 20 {
		t.Fatalf("t0+10s: Counts = %d, %d; want 200, 20", f, r)
	}
	if n := grantAll(t, ctx, s, 100); n != 0 {
		t.Fatalf("t0+10s: granted %d; want 0", n)
	}
	m.SetTime(t0.Add(15 * time.Second)) // everything has left
	if f, r := counts(t, s); f != 0 || r != 0 {
		t.Fatalf("t0+15s: Counts = %d, %d; want 0, 0", f, r)
	}
	if n := grantAll(t, ctx, s, 100); n != 10 {
		t.Fatalf("t0+15s: granted %d; want the floor, 10", n)
	}
	// Stale buckets were dropped by that write; only the current one is left.
	if fields, err := m.HKeys(key); err != nil || len(fields) != 1 || fields[0] != "r1800000015" {
		t.Fatalf("fields after the roll: %v, %v; want [r1800000015]", fields, err)
	}
	if ttl := m.TTL(key); ttl != 20*time.Second {
		t.Fatalf("TTL = %v; want two Windows, 20s", ttl)
	}
	m.FastForward(20 * time.Second)
	if m.Exists(key) {
		t.Fatal("the key outlived two Windows without a write")
	}
}

// Fields the script did not write, or from a clock more than a window
// ahead, are dropped rather than counted.
func TestBudgetDropsForeignFields(t *testing.T) {
	ctx := context.Background()
	m, c, _ := pinnedRedis(t)
	m.HSet("foreign", "x", "5", "fnope", "7", "r1800000099", "1000", "f1800000000", "12", "rzz", "3", "f1800000001", "x")
	s := newTestBudget(t, c, "foreign", budget.SharedConfig{Ratio: budget.RatioConfig{Window: 10 * time.Second}})
	if n := grantAll(t, ctx, s, 100); n != 10 {
		t.Fatalf("granted %d; want the floor, 10", n)
	}
	if f, r := counts(t, s); f != 12 || r != 10 {
		t.Fatalf("Counts = %d, %d; want 12, 10", f, r)
	}
	if fields, _ := m.HKeys("foreign"); len(fields) != 2 {
		t.Fatalf("fields %v; want the two the script writes", fields)
	}
}

func TestBudgetRefund(t *testing.T) {
	ctx := context.Background()
	m, c, _ := pinnedRedis(t)
	s := newTestBudget(t, c, "refund", budget.SharedConfig{Ratio: budget.RatioConfig{MinRetries: 3, Window: 10 * time.Second}})
	if n := grantAll(t, ctx, s, 10); n != 3 {
		t.Fatalf("granted %d; want 3", n)
	}
	s.Refund(ctx)
	if n := grantAll(t, ctx, s, 10); n != 1 {
		t.Fatalf("after a refund granted %d; want 1", n)
	}
	// A canceled call refunds too.
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	s.Refund(canceled)
	if _, r := counts(t, s); r != 2 {
		t.Fatalf("after a refund under a canceled context %d retries counted; want 2", r)
	}
	for range 5 { // more refunds than grants: no credit beyond zero
		s.Refund(ctx)
	}
	if _, r := counts(t, s); r != 0 {
		t.Fatalf("after extra refunds %d retries counted; want 0", r)
	}
	if n := grantAll(t, ctx, s, 10); n != 3 {
		t.Fatalf("after extra refunds granted %d; want 3, no more", n)
	}
	// A refund returns the retry to the newest bucket that granted one, so
	// that it leaves the window with the older grants, not after them.
	m.SetTime(t0.Add(5 * time.Second))
	s.Refund(ctx)
	if n := grantAll(t, ctx, s, 10); n != 1 {
		t.Fatalf("granted %d after a refund in a later bucket; want 1", n)
	}
	m.SetTime(t0.Add(10 * time.Second)) // t0's bucket leaves with its 3 grants less the refund
	if _, r := counts(t, s); r != 1 {
		t.Fatalf("after the roll %d retries counted; want 1 (granted at t0+5s)", r)
	}
	if n := grantAll(t, ctx, s, 10); n != 2 {
		t.Fatalf("after the roll granted %d; want 2, not an extra one from the refund", n)
	}
}

// First attempts are written in batches: once FlushAfter are waiting, or
// FlushEvery after the last write, or with a Withdraw; none is lost.
func TestBudgetFlushBatching(t *testing.T) {
	ctx := context.Background()
	m := miniredis.RunT(t)
	c, evals := redistest.CountedClient(t, m.Addr())
	s := newTestBudget(t, c, "batch", budget.SharedConfig{FlushAfter: 10, FlushEvery: time.Hour})
	recordFirsts(ctx, s, 9)
	if n := evals.Evals.Load(); n != 0 {
		t.Fatalf("9 first attempts made %d round trips; want 0", n)
	}
	recordFirsts(ctx, s, 1)
	if n := evals.Evals.Load(); n != 1 {
		t.Fatalf("the 10th first attempt made %d round trips; want 1", n)
	}
	s.Record(ctx, budget.Outcome{Retry: true})
	s.Record(ctx, budget.Outcome{Success: true, Retry: true})
	if n := evals.Evals.Load(); n != 1 {
		t.Fatalf("recording retries made round trips (%d in all); want none", n)
	}
	if f, _ := counts(t, s); f != 10 {
		t.Fatalf("Counts = %d firsts; want 10", f)
	}
	// FlushEvery: an attempt recorded an hour after the last write.
	evals.Evals.Store(0)
	s.Record(ctx, budget.Outcome{At: time.Now().Add(2 * time.Hour)})
	if n := evals.Evals.Load(); n != 1 {
		t.Fatalf("a first attempt after FlushEvery made %d round trips; want 1", n)
	}
	// A Withdraw carries the waiting ones in its own round trip.
	recordFirsts(ctx, s, 3)
	evals.Evals.Store(0)
	if err := s.Withdraw(ctx); err != nil {
		t.Fatal(err)
	}
	if n := evals.Evals.Load(); n != 1 {
		t.Fatalf("Withdraw made %d round trips; want 1", n)
	}
	// Flush writes whatever waits.
	recordFirsts(ctx, s, 5)
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if f, r := counts(t, s); f != 19 || r != 1 {
		t.Fatalf("Counts = %d, %d; want 19, 1", f, r)
	}

	// Concurrent Records: each batch carries at least FlushAfter.
	const goroutines, each, after = 8, 1000, 100
	s = newTestBudget(t, c, "batch-concurrent", budget.SharedConfig{FlushAfter: after, FlushEvery: time.Hour})
	evals.Evals.Store(0)
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() { recordFirsts(ctx, s, each) })
	}
	wg.Wait()
	if n := evals.Evals.Load(); n < 1 || n > goroutines*each/after {
		t.Fatalf("%d first attempts made %d round trips; want 1 to %d", goroutines*each, n, goroutines*each/after)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if f, _ := counts(t, s); f != goroutines*each {
		t.Fatalf("Counts = %d firsts; want all %d", f, goroutines*each)
	}
}

// The healthy Record path, between writes, does not allocate.
func TestBudgetRecordDoesNotAllocate(t *testing.T) {
	ctx := context.Background()
	m := miniredis.RunT(t)
	c, evals := redistest.CountedClient(t, m.Addr())
	s := newTestBudget(t, c, "allocs", budget.SharedConfig{FlushAfter: 1 << 30, FlushEvery: time.Hour})
	for _, o := range []budget.Outcome{{}, {Success: true}, {At: time.Now()}, {Retry: true}} {
		if a := testing.AllocsPerRun(1000, func() { s.Record(ctx, o) }); a != 0 {
			t.Errorf("Record(%+v) allocates %v times; want 0", o, a)
		}
	}
	if n := evals.Evals.Load(); n != 0 {
		t.Fatalf("%d round trips; want 0", n)
	}
}

// miniredisOutside returns do, which stops ("close") or starts again
// ("restart") m from a goroutine outside any synctest bubble: the listener
// and connection goroutines miniredis starts must not be a bubble's (they
// block on the network, and would outlive it). It ends with the test.
func miniredisOutside(t *testing.T, m *miniredis.Miniredis) (do func(t *testing.T, op string)) {
	ops := make(chan string)
	acks := make(chan error)
	go func() {
		for op := range ops {
			switch op {
			case "close":
				m.Close()
				acks <- nil
			case "restart":
				acks <- m.Restart()
			}
		}
	}()
	t.Cleanup(func() { close(ops) })
	return func(t *testing.T, op string) {
		t.Helper()
		ops <- op
		if err := <-acks; err != nil {
			t.Fatalf("%s miniredis: %v", op, err)
		}
	}
}

// When Redis goes away, decisions are local at once, Redis is left alone
// for ProbeEvery, OnError and the log say so once, and the Local budget
// knows this replica's traffic; when Redis is back, shared decisions resume.
func TestBudgetRedisDownAndBack(t *testing.T) {
	m := miniredis.RunT(t)
	redisDo := miniredisOutside(t, m)
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, evals := redistest.CountedClient(t, m.Addr()) // closed by t's cleanup, in the bubble
		var logs redistest.Log
		var calls redistest.Errors
		local, err := budget.NewRatio(budget.RatioConfig{})
		if err != nil {
			t.Fatal(err)
		}
		const probeEvery = time.Hour
		s := newTestBudget(t, c, "down", budget.SharedConfig{
			Local: local, ProbeEvery: probeEvery, OnError: calls.Add,
			Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		})
		recordFirsts(ctx, s, 300) // written in three batches, and known to Local
		if f, _ := counts(t, s); f != 300 {
			t.Fatalf("Counts = %d firsts; want 300", f)
		}
		if n := grantAll(t, ctx, s, 100); n != 30 {
			t.Fatalf("shared: granted %d; want 30", n)
		}

		redisDo(t, "close")
		evals.Evals.Store(0)
		// Local knows the 300 first attempts and nothing of the shared grants.
		if n := grantAll(t, ctx, s, 100); n != 30 {
			t.Fatalf("Redis down: Local granted %d; want 30 (10%% of the replica's own 300)", n)
		}
		if n := evals.Evals.Load(); n != 1 {
			t.Fatalf("Redis down: %d round trips tried; want 1, then none for ProbeEvery", n)
		}
		recordFirsts(ctx, s, 250) // counted, not written: Redis is left alone
		s.Refund(ctx)             // goes to Local
		if n := grantAll(t, ctx, s, 100); n != 1+25 {
			t.Fatalf("Redis down: granted %d after 250 more first attempts and a refund; want 26", n)
		}
		if n := evals.Evals.Load(); n != 1 {
			t.Fatalf("Redis down: %d round trips tried; want still 1", n)
		}
		wantDown(t, s.Available(), &calls, budget.ErrSharedUnavailable)
		if got := logs.String(); strings.Count(got, "level=WARN") != 1 ||
			!strings.Contains(got, `msg="backstop: shared budget unavailable, using local state" key=down`) {
			t.Fatalf("log:\n%s\nwant one Warn record saying the shared budget is unavailable", got)
		}
		if _, _, err := s.Counts(ctx); !errors.Is(err, budget.ErrSharedUnavailable) {
			t.Fatalf("Counts with Redis down: %v; want ErrSharedUnavailable", err)
		}

		redisDo(t, "restart")
		time.Sleep(probeEvery) // ProbeEvery has passed
		if err := s.Withdraw(ctx); err != nil {
			t.Fatalf("Redis back: %v", err)
		}
		if !s.Available() {
			t.Fatal("not Available() after Redis answered again")
		}
		// The probe carried the 250 first attempts counted meanwhile.
		if f, r := counts(t, s); f != 550 || r != 31 {
			t.Fatalf("Redis back: Counts = %d, %d; want 550, 31", f, r)
		}
		if errs := calls.Get(); len(errs) != 2 || errs[1] != nil {
			t.Fatalf("OnError calls: %v; want a second one with nil", errs)
		}
		if got := logs.String(); strings.Count(got, "level=INFO") != 1 ||
			!strings.Contains(got, `msg="backstop: shared budget available again, using shared state" key=down`) {
			t.Fatalf("log:\n%s\nwant one Info record saying the shared budget is back", got)
		}
	})
}

// Of many calls seeing Redis down at once, each decides locally and the
// transition is reported once; after ProbeEvery exactly one call probes.
func TestBudgetDownConcurrently(t *testing.T) {
	m := miniredis.RunT(t)
	redisDo := miniredisOutside(t, m)
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, evals := redistest.CountedClient(t, m.Addr())
		var calls redistest.Errors
		local, _ := budget.NewRatio(budget.RatioConfig{MinRetries: 1 << 20})
		const probeEvery = time.Hour
		s := newTestBudget(t, c, "down-concurrent", budget.SharedConfig{Local: local, ProbeEvery: probeEvery,
			OnError: calls.Add, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		redisDo(t, "close")
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for range 50 {
					if err := s.Withdraw(ctx); err != nil {
						t.Errorf("Withdraw: %v; want the Local budget's grant", err)
					}
					s.Record(ctx, budget.Outcome{})
				}
			})
		}
		wg.Wait()
		if errs := calls.Get(); len(errs) != 1 {
			t.Fatalf("OnError called %d times: %v; want once", len(errs), errs)
		}
		if n := evals.Evals.Load(); n < 1 || n > 16 {
			t.Fatalf("%d round trips tried; want at most one per goroutine in flight when Redis went away", n)
		}
		evals.Evals.Store(0)
		time.Sleep(probeEvery)
		for range 16 {
			wg.Go(func() {
				for range 10 {
					_ = s.Withdraw(ctx)
				}
			})
		}
		wg.Wait()
		if n := evals.Evals.Load(); n != 1 {
			t.Fatalf("after ProbeEvery %d round trips tried; want one probe", n)
		}
		// So many failed dials at once start the pool's re-dial loop, which
		// sees the client closed only after its next second's sleep: close
		// it now and let that pass, or the bubble ends with it asleep.
		_ = c.Close()
		time.Sleep(2 * time.Second)
	})
}

// A Redis that accepts connections and never answers costs a call the
// Timeout, not the client's ReadTimeout.
func TestBudgetSlowRedis(t *testing.T) {
	ctx := context.Background()
	addr := redistest.Silent(t)
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true,
		ReadTimeout: time.Minute, WriteTimeout: time.Minute, DialTimeout: time.Minute})
	t.Cleanup(func() { _ = c.Close() })
	var calls redistest.Errors
	local, _ := budget.NewRatio(budget.RatioConfig{MinRetries: 2})
	s := newTestBudget(t, c, "slow", budget.SharedConfig{Local: local, Timeout: 50 * time.Millisecond,
		OnError: calls.Add, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	start := time.Now()
	n := grantAll(t, ctx, s, 10)
	// Not a timing assertion: without the Timeout this would hang for the
	// client's ReadTimeout, a minute.
	if elapsed := time.Since(start); elapsed > 20*time.Second {
		t.Fatalf("Withdraw against a silent Redis took %v", elapsed)
	}
	if n != 2 {
		t.Fatalf("granted %d; want Local's 2", n)
	}
	errs := calls.Get()
	if len(errs) != 1 || !errors.Is(errs[0], budget.ErrSharedUnavailable) || !strings.Contains(errs[0].Error(), "within the Timeout (50ms)") {
		t.Fatalf("OnError calls: %v; want one saying Redis did not answer within the Timeout", errs)
	}
}

// A Redis that answers with an error is unavailable too.
func TestBudgetRedisError(t *testing.T) {
	ctx := context.Background()
	m := miniredis.RunT(t)
	c, _ := redistest.CountedClient(t, m.Addr())
	m.SetError("LOADING Redis is loading the dataset in memory")
	var calls redistest.Errors
	local, _ := budget.NewRatio(budget.RatioConfig{MinRetries: 4})
	s := newTestBudget(t, c, "loading", budget.SharedConfig{Local: local, OnError: calls.Add,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if n := grantAll(t, ctx, s, 10); n != 4 {
		t.Fatalf("granted %d; want Local's 4", n)
	}
	if errs := calls.Get(); len(errs) != 1 || !strings.Contains(errs[0].Error(), "LOADING") {
		t.Fatalf("OnError calls: %v; want one with Redis's LOADING error", errs)
	}
}

// Found in review (issue 12, item 6): a value of another type on a budget's
// key (a string SET there) made every round trip fail WRONGTYPE: one Warn,
// then the budget decided locally for good. The key is the budget's: the
// script deletes such a value and goes on, and each repair is logged.
func TestBudgetWrongTypeKeyIsRepaired(t *testing.T) {
	ctx := context.Background()
	m := miniredis.RunT(t)
	c, _ := redistest.CountedClient(t, m.Addr())
	var calls redistest.Errors
	var logs redistest.Log
	local, _ := budget.NewRatio(budget.RatioConfig{MinRetries: 4})
	s := newTestBudget(t, c, "wrongtype", budget.SharedConfig{Local: local, OnError: calls.Add,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	for round := 1; round <= 2; round++ {
		m.Del("wrongtype")
		if err := m.Set("wrongtype", "x"); err != nil {
			t.Fatal(err)
		}
		if n := grantAll(t, ctx, s, 100); n != 10 {
			t.Fatalf("round %d: granted %d past a string on the key; want the shared floor, 10", round, n)
		}
		if _, r := counts(t, s); r != 10 {
			t.Fatalf("round %d: the shared window counts %d retries; want 10", round, r)
		}
		if typ, ttl := m.Type("wrongtype"), m.TTL("wrongtype"); typ != "hash" || ttl <= 0 {
			t.Fatalf("round %d: the key is a %s with TTL %v; want a hash that expires", round, typ, ttl)
		}
		if got := strings.Count(logs.String(), "level=WARN"); got != round || !strings.Contains(logs.String(), "held a string") {
			t.Fatalf("round %d: log:\n%s\nwant %d Warn records naming the repair", round, logs.String(), round)
		}
	}
	if errs := calls.Get(); len(errs) != 0 || !s.Available() {
		t.Fatalf("OnError calls %v, Available %v; want none, true: Redis answered every round trip", errs, s.Available())
	}
}

// Found in review (issue 12, item 6): every key backstop writes must
// expire. The script set the key's TTL only when it changed something, so
// a key written without one (by hand, by another program) kept none while
// calls only read it: here every withdrawal is refused, and nothing else
// is written.
func TestBudgetKeyWithoutTTLGetsOne(t *testing.T) {
	ctx := context.Background()
	m, c, _ := pinnedRedis(t)
	const window = 10 * time.Second
	epoch := t0.UnixMicro() / int64(window/10/time.Microsecond)
	m.HSet("nottl", fmt.Sprint("r", epoch), "1000")
	s := newTestBudget(t, c, "nottl", budget.SharedConfig{Ratio: budget.RatioConfig{Window: window}})
	if err := s.Withdraw(ctx); !errors.Is(err, budget.ErrExhausted) {
		t.Fatalf("Withdraw = %v; want budget.ErrExhausted (1000 retries in the window)", err)
	}
	if ttl := m.TTL("nottl"); ttl <= 0 || ttl > 2*window {
		t.Fatalf("TTL of the key after a round trip = %v; want at most two windows (%v)", ttl, 2*window)
	}
}

// A call whose context has ended decides locally without asking Redis, and
// says nothing about Redis's health.
func TestBudgetCallerCanceled(t *testing.T) {
	m := miniredis.RunT(t)
	c, evals := redistest.CountedClient(t, m.Addr())
	var calls redistest.Errors
	local, _ := budget.NewRatio(budget.RatioConfig{MinRetries: 1})
	s := newTestBudget(t, c, "canceled", budget.SharedConfig{Local: local, OnError: calls.Add})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Withdraw(ctx); err != nil {
		t.Fatalf("Withdraw: %v; want Local's grant", err)
	}
	if err := s.Withdraw(ctx); !errors.Is(err, budget.ErrExhausted) {
		t.Fatalf("Withdraw: %v; want Local's refusal", err)
	}
	if n := evals.Evals.Load(); n != 0 || !s.Available() || len(calls.Get()) != 0 {
		t.Fatalf("%d round trips, Available %v, OnError %v; want none, true, none", n, s.Available(), calls.Get())
	}
	// A Record under a canceled context still writes its batch.
	s2 := newTestBudget(t, c, "canceled", budget.SharedConfig{FlushAfter: 2})
	recordFirsts(ctx, s2, 2)
	if f, _ := counts(t, s2); f != 2 {
		t.Fatalf("Counts = %d firsts; want 2 written under a canceled context", f)
	}
	if err := s2.Flush(ctx); err != nil {
		t.Fatalf("Flush with nothing waiting: %v", err)
	}
	s2.Record(ctx, budget.Outcome{})
	if err := s2.Flush(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Flush under a canceled context: %v; want context.Canceled", err)
	}
}

// Concurrent replicas never grant more than the shared allowance.
func TestBudgetConcurrentWithdraws(t *testing.T) {
	ctx := context.Background()
	m := miniredis.RunT(t)
	c, _ := redistest.CountedClient(t, m.Addr())
	const floor = 37
	var granted atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		s := newTestBudget(t, c, "concurrent", budget.SharedConfig{Ratio: budget.RatioConfig{MinRetries: floor}})
		for range 8 {
			wg.Go(func() {
				for range 20 {
					if s.Withdraw(ctx) == nil {
						granted.Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	if n := granted.Load(); n != floor {
		t.Fatalf("32 goroutines on 4 replicas granted %d; want exactly %d", n, floor)
	}
}

// Records alone find Redis back: once ProbeEvery has passed, the next batch
// is the probe, and it carries the first attempts counted meanwhile.
func TestBudgetRecoversThroughRecord(t *testing.T) {
	ctx := context.Background()
	m := miniredis.RunT(t)
	c, evals := redistest.CountedClient(t, m.Addr())
	var calls redistest.Errors
	s := newTestBudget(t, c, "record-probe", budget.SharedConfig{FlushAfter: 10, ProbeEvery: time.Hour,
		OnError: calls.Add, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	m.Close()
	recordFirsts(ctx, s, 10) // the 10th tries Redis and fails
	recordFirsts(ctx, s, 25) // left alone
	if n := evals.Evals.Load(); n != 1 || s.Available() {
		t.Fatalf("%d round trips, Available %v; want 1, false", n, s.Available())
	}
	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	recordFirsts(ctx, s, 5) // ProbeEvery has not passed: still left alone
	if n := evals.Evals.Load(); n != 1 {
		t.Fatalf("%d round trips before ProbeEvery; want 1", n)
	}
	s.Record(ctx, budget.Outcome{At: time.Now().Add(2 * time.Hour)})
	if !s.Available() {
		t.Fatal("a Record after ProbeEvery did not find Redis back")
	}
	if f, _ := counts(t, s); f != 31 {
		t.Fatalf("Counts = %d firsts; want the 31 counted while Redis was away (the first 10 were lost)", f)
	}
	if errs := calls.Get(); len(errs) != 2 || errs[1] != nil {
		t.Fatalf("OnError calls %v; want an error, then nil", errs)
	}
}

// The repairs on a real Redis (its Lua, not miniredis's): a string on the
// key is replaced by the budget's hash, and a hash without a TTL gets one
// from a call that writes nothing else.
func TestBudgetRepairsOnARealRedis(t *testing.T) {
	ctx := context.Background()
	c := redistest.Client(t)
	key := redistest.Prefix(t) + "budget"
	var logs redistest.Log
	s := newTestBudget(t, c, key, budget.SharedConfig{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err := c.Set(ctx, key, "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Withdraw(ctx); err != nil {
		t.Fatalf("Withdraw over a string: %v", err)
	}
	if typ := c.Type(ctx, key).Val(); typ != "hash" || !strings.Contains(logs.String(), "the key held a string") {
		t.Fatalf("the key is a %s; log:\n%s\nwant a hash, and a repair record", typ, logs.String())
	}
	if err := c.Persist(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Counts(ctx); err != nil { // writes nothing but the TTL
		t.Fatal(err)
	}
	if d := c.PTTL(ctx, key).Val(); d <= 0 {
		t.Fatalf("PTTL after a round trip on a key without one = %v; want a TTL", d)
	}
	if !s.Available() {
		t.Fatal("Redis marked unavailable by a repair")
	}
}

// Found in review: on a real Redis (Lua 5.1's tonumber accepts "nan"), a foreign
// field whose epoch parses as NaN passes both window comparisons, so it is
// counted and never deleted, contrary to "fields it did not write are
// deleted, not counted": here it exhausts the budget for as long as the
// key lives, and every write refreshes the key's TTL.
func TestBudgetNaNFieldsAreForeign(t *testing.T) {
	ctx := context.Background()
	c := redistest.Client(t)
	key := redistest.Prefix(t) + "budget"
	if err := c.HSet(ctx, key, "rnan", "1000").Err(); err != nil {
		t.Fatal(err)
	}
	s := newTestBudget(t, c, key, budget.SharedConfig{})
	if n := grantAll(t, ctx, s, 100); n != 10 {
		t.Errorf("granted %d; want the floor, 10 (the foreign field not counted)", n)
	}
	if ok, _ := c.HExists(ctx, key, "rnan").Result(); ok {
		t.Errorf("the foreign field rnan is still in %s after the script's writes", key)
	}
}

// stormReplica is one replica's share of a storm against a failing primary:
// calls first attempts, each followed by up to maxRetries retries, each
// asked of b first. It returns the retries b granted.
func stormReplica(ctx context.Context, b budget.Budget, calls, maxRetries int) (retries int) {
	for range calls {
		b.Record(ctx, budget.Outcome{}) // the first attempt failed
		for range maxRetries {
			if b.Withdraw(ctx) != nil {
				break // the chain moves on to the next target
			}
			retries++
			b.Record(ctx, budget.Outcome{Retry: true}) // and the retry failed too
		}
	}
	return retries
}

// replicaStorm runs one stormReplica per budget, all at once, and returns the
// retries granted in all.
func replicaStorm(budgets []budget.Budget, calls, maxRetries int) int {
	ctx := context.Background()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total int
		start = make(chan struct{})
	)
	for _, b := range budgets {
		wg.Go(func() {
			<-start
			n := stormReplica(ctx, b, calls, maxRetries)
			mu.Lock()
			total += n
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	return total
}

// TestShared40ReplicasShareOneBudget is issue 8's headline: 40 replicas of
// a service, each with its own Redis client, storm one failing primary
// within one window (a minute; the default 10%, floor of 10). On one budget.Shared
// key they send no more retries than one budget allows, max(10, 10% of all
// first attempts); with a local budget.Ratio each, every replica spends a budget of
// its own. Sharing takes away the 40 floors: while the per-replica traffic
// is low (fewer than 100 calls per window, when the floor is above 10% of
// it) that is 20 to 40 times fewer retries; when it is high, 10% of each
// replica's traffic adds up to 10% of all of it either way.
func TestBudget40ReplicasShareOneBudget(t *testing.T) {
	const replicas = 40
	cfg := budget.RatioConfig{Window: time.Minute} // 10%, a floor of 10; the run fits in one window
	prefix := redistest.Prefix(t)
	for _, tc := range []struct {
		name       string
		calls      int // per replica
		maxRetries int // per call
		minFactor  float64
	}{
		// 80 first attempts: one budget is its floor, 10; 40 floors are 400.
		{"idle: 2 calls per replica, 5 retries each", 2, 5, 40},
		// 200 first attempts: one budget allows 20; 40 floors are 400.
		{"quiet: 5 calls per replica, 2 retries each", 5, 2, 20},
		// 8000 first attempts: one budget allows 800; so do 40 budgets of 20.
		{"busy: 200 calls per replica, 2 retries each", 200, 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := prefix + fmt.Sprintf("budget:%d", tc.calls)
			firsts := replicas * tc.calls
			oneBudget := max(10 /* budget's default floor */, firsts/10)
			perReplica := min(tc.calls*tc.maxRetries, max(10 /* budget's default floor */, tc.calls/10))

			var fellBack sync.Once
			onError := func(err error) {
				fellBack.Do(func() { t.Errorf("a replica fell back to its local budget: %v", err) })
			}
			shared := make([]*budget.Shared, replicas)
			budgets := make([]budget.Budget, replicas)
			for i := range shared {
				// Each replica its own client and pool, as in its own
				// process. The Timeout is generous so that a loaded test
				// machine measures the shared budget, not the fallback.
				shared[i] = newTestBudget(t, redistest.Client(t), key,
					budget.SharedConfig{Ratio: cfg, Timeout: 5 * time.Second, OnError: onError})
				budgets[i] = shared[i]
			}
			sharedRetries := replicaStorm(budgets, tc.calls, tc.maxRetries)

			for i := range budgets {
				budgets[i] = orPanic(budget.NewRatio(cfg))
			}
			localRetries := replicaStorm(budgets, tc.calls, tc.maxRetries)

			for _, s := range shared {
				if err := s.Flush(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			f, r := counts(t, shared[0])
			t.Logf("%d replicas x %d calls = %d first attempts, up to %d retries each: "+
				"shared budget granted %d retries (one budget allows %d; load on the primary %.2fx), "+
				"40 local budgets granted %d (%d each; load %.2fx): %.1fx as many",
				replicas, tc.calls, firsts, tc.maxRetries,
				sharedRetries, oneBudget, float64(firsts+sharedRetries)/float64(firsts),
				localRetries, perReplica, float64(firsts+localRetries)/float64(firsts),
				float64(localRetries)/float64(sharedRetries))

			if f != int64(firsts) || r != int64(sharedRetries) {
				t.Errorf("Redis counts %d first attempts and %d retries; want %d and %d", f, r, firsts, sharedRetries)
			}
			if sharedRetries > oneBudget || sharedRetries < 10 /* budget's default floor */ {
				t.Errorf("the shared budget granted %d retries; want from the floor, %d, to one budget's allowance, %d",
					sharedRetries, 10 /* budget's default floor */, oneBudget)
			}
			if localRetries != replicas*perReplica {
				t.Errorf("the local budgets granted %d retries; want %d x %d", localRetries, replicas, perReplica)
			}
			if got := float64(localRetries) / float64(sharedRetries); got < tc.minFactor {
				t.Errorf("local budgets granted %.1fx the shared budget's retries; want at least %vx", got, tc.minFactor)
			}
		})
	}
}

// orPanic returns b, panicking on err.
func orPanic[B any](b B, err error) B {
	if err != nil {
		panic(err)
	}
	return b
}

// benchShared returns a budget.Shared budget on a fresh key of the real server
// whose window does not roll during a benchmark; with plenty set, every
// Withdraw is granted, otherwise every Withdraw is refused. Its Timeout is
// a second, so that a loaded machine measures Redis, not the fallback.
func benchShared(b *testing.B, plenty bool) *budget.Shared {
	b.Helper()
	c := budget.RatioConfig{Window: 24 * time.Hour, MinRetries: -1}
	if plenty {
		c.Ratio, c.MinRetries = 1, math.MaxInt32
	}
	s, err := budget.NewShared(store(b, redistest.Client(b)).Budget(redistest.Prefix(b)+"bench"), budget.SharedConfig{Ratio: c, Timeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if !s.Available() {
			b.Error("the shared budget fell back to its local budget during the benchmark")
		}
	})
	return s
}

// BenchmarkSharedWithdraw measures one Withdraw: a round trip to the real
// server running the script, granted (a write) or refused (no write), next
// to the local budget.Ratio's.
func BenchmarkBudgetWithdraw(b *testing.B) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		granted bool
	}{{"granted", true}, {"refused", false}} {
		for _, kind := range []string{"shared", "local"} {
			newBudget := func(b *testing.B) budget.Budget {
				if kind == "shared" {
					return benchShared(b, tc.granted)
				}
				return benchRatio(b, tc.granted)
			}
			b.Run(kind+"/"+tc.name+"/serial", func(b *testing.B) {
				bu := newBudget(b)
				b.ReportAllocs()
				for b.Loop() {
					if (bu.Withdraw(ctx) == nil) != tc.granted {
						b.Fatal("unexpected outcome")
					}
				}
			})
			b.Run(kind+"/"+tc.name+"/parallel", func(b *testing.B) {
				bu := newBudget(b)
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if (bu.Withdraw(ctx) == nil) != tc.granted {
							panic("unexpected outcome")
						}
					}
				})
			})
		}
	}
}

// BenchmarkSharedRecord measures Record of a first attempt with the default
// batching (a round trip per 100 first attempts, or per second), next to
// the local budget.Ratio's.
func BenchmarkBudgetRecord(b *testing.B) {
	ctx := context.Background()
	for _, kind := range []string{"shared", "local"} {
		newBudget := func(b *testing.B) budget.Budget {
			if kind == "shared" {
				return benchShared(b, false)
			}
			return benchRatio(b, false)
		}
		b.Run(kind+"/serial", func(b *testing.B) {
			bu := newBudget(b)
			b.ReportAllocs()
			for b.Loop() {
				bu.Record(ctx, budget.Outcome{})
			}
		})
		b.Run(kind+"/parallel", func(b *testing.B) {
			bu := newBudget(b)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					bu.Record(ctx, budget.Outcome{})
				}
			})
		})
	}
}

// benchRatio returns a local Ratio whose window does not roll during a
// benchmark; with plenty set, every Withdraw is granted, otherwise every
// Withdraw is refused: benchShared's local counterpart.
func benchRatio(b *testing.B, plenty bool) *budget.Ratio {
	b.Helper()
	c := budget.RatioConfig{Window: 24 * time.Hour, MinRetries: -1}
	if plenty {
		c.Ratio, c.MinRetries = 1, math.MaxInt32
	}
	r, err := budget.NewRatio(c)
	if err != nil {
		b.Fatal(err)
	}
	return r
}
