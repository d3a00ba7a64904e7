package redisstore_test

// Tests of the money budgets' store on Redis (redisstore.Store.Spend), on
// the real Redis internal/redistest finds (skipped when none answers,
// failed under CI=true), and of spend.Shared around it when Redis goes
// down (miniredis).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/backstop-llm/backstop/cost"
	"github.com/backstop-llm/backstop/internal/redistest"
	"github.com/backstop-llm/backstop/redisstore"
	"github.com/backstop-llm/backstop/spend"
)

const spendPeriod = int64(1767225600) // 2026-01-01T00:00:00Z

// newSpendShared returns a spend.Shared on st, failing the test on a
// configuration error; a zero Timeout is made 10s, so that a loaded
// machine does not turn a test's round trip into a local decision.
func newSpendShared(t testing.TB, st spend.Store, cfg spend.SharedConfig) *spend.Shared {
	t.Helper()
	if cfg.Timeout == 0 {
		cfg.Timeout = sharedTestTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s, err := spend.NewShared(st, cfg)
	must(t, "spend.NewShared", err)
	return s
}

func TestSpendNilStore(t *testing.T) {
	if st := (*redisstore.Store)(nil).Spend("x"); st != nil {
		t.Fatalf("Spend of a nil Store = %v; want nil", st)
	}
}

// One hash per budget key and period, "<name>:<key>:<period>", holding
// spent and reserved: Reserve grants while spent + reserved + amount <=
// limit, Settle releases (never below 0) and spends, and every write sets
// the TTL.
func TestSpendReserveSettleUsed(t *testing.T) {
	ctx := context.Background()
	c := redistest.Client(t)
	name := redistest.Prefix(t) + "spend"
	st := store(t, c).Spend(name)
	key := name + ":acme:" + fmt.Sprint(spendPeriod)
	const ttl = time.Hour

	for i, want := range []struct {
		amount cost.Money
		ok     bool
		used   cost.Money
	}{{60, true, 60}, {40, true, 100}, {1, false, 100}} {
		ok, used, err := st.Reserve(ctx, "acme", spendPeriod, want.amount, 100, ttl)
		if err != nil || ok != want.ok || used != want.used {
			t.Fatalf("Reserve #%d of %v = %v, %v, %v; want %v, %v, nil", i, want.amount, ok, used, err, want.ok, want.used)
		}
	}
	must(t, "Settle", st.Settle(ctx, "acme", spendPeriod, 60, 25, ttl))
	if got := c.HGetAll(ctx, key).Val(); got["spent"] != "25" || got["reserved"] != "40" || len(got) != 2 {
		t.Fatalf("hash %q = %v; want spent 25, reserved 40", key, got)
	}
	if d := c.PTTL(ctx, key).Val(); d <= 0 || d > ttl {
		t.Fatalf("PTTL = %v; want within (0, %v]", d, ttl)
	}
	must(t, "Settle", st.Settle(ctx, "acme", spendPeriod, 1000, 40, ttl)) // more released than held
	spent, reserved, err := st.Used(ctx, "acme", spendPeriod)
	if err != nil || spent != 65 || reserved != 0 {
		t.Fatalf("Used = %v, %v, %v; want 65, 0, nil: reserved never below 0", spent, reserved, err)
	}
	if ok, used, _ := st.Reserve(ctx, "acme", spendPeriod, 35, 100, ttl); !ok || used != 100 {
		t.Fatalf("Reserve of the last 35 = %v, %v; want true, 100", ok, used)
	}
	if spent, reserved, err := st.Used(ctx, "acme", spendPeriod+3600); spent != 0 || reserved != 0 || err != nil {
		t.Fatalf("Used of another period = %v, %v, %v; want 0, 0, nil", spent, reserved, err)
	}
}

// '%' and ':' in a budget key are escaped, so that no two keys share a
// hash; the ttl is rounded up to a millisecond, 0 meaning 32 days.
func TestSpendKeyLayout(t *testing.T) {
	ctx := context.Background()
	c := redistest.Client(t)
	name := redistest.Prefix(t) + "spend"
	st := store(t, c).Spend(name)
	for _, k := range []string{"a:b", "a%3Ab", "a"} {
		if ok, _, err := st.Reserve(ctx, k, spendPeriod, 7, 7, 0); !ok || err != nil {
			t.Fatalf("Reserve under %q = %v, %v; want a grant: the keys are apart", k, ok, err)
		}
	}
	for _, key := range []string{name + ":a%3Ab:1767225600", name + ":a%253Ab:1767225600", name + ":a:1767225600"} {
		if got := c.HGet(ctx, key, "reserved").Val(); got != "7" {
			t.Fatalf("%q reserved = %q; want 7", key, got)
		}
		if d := c.PTTL(ctx, key).Val(); d <= 31*24*time.Hour || d > 32*24*time.Hour {
			t.Fatalf("%q PTTL = %v with ttl 0; want 32 days", key, d)
		}
	}
	must(t, "Settle", st.Settle(ctx, "a", spendPeriod, 7, 7, 1500*time.Microsecond))
	if d := c.PTTL(ctx, name+":a:1767225600").Val(); d != 2*time.Millisecond && d != time.Millisecond {
		t.Fatalf("PTTL after a ttl of 1.5ms = %v; want 2ms, rounded up", d)
	}
}

// A refused Reserve writes nothing but gives a key written without a TTL
// one: nothing lingers.
func TestSpendRefusalGivesAKeyWithoutTTLOne(t *testing.T) {
	ctx := context.Background()
	c := redistest.Client(t)
	name := redistest.Prefix(t) + "spend"
	key := name + ":acme:" + fmt.Sprint(spendPeriod)
	must(t, "HSET", c.HSet(ctx, key, "spent", 90).Err())
	ok, used, err := store(t, c).Spend(name).Reserve(ctx, "acme", spendPeriod, 20, 100, time.Hour)
	if ok || used != 90 || err != nil {
		t.Fatalf("Reserve = %v, %v, %v; want false, 90, nil", ok, used, err)
	}
	if d := c.PTTL(ctx, key).Val(); d <= 0 || d > time.Hour {
		t.Fatalf("PTTL = %v; want within (0, 1h]", d)
	}
	if got := c.HGetAll(ctx, key).Val(); len(got) != 1 || got["spent"] != "90" {
		t.Fatalf("hash = %v; want spent 90 alone: a refusal writes nothing", got)
	}
}

// A value of another type under a key, or a field that is not a whole
// number, is repaired by the next Reserve or Settle, which goes on, and
// the Shared around the store logs each repair; Used reads such a key as
// empty.
func TestSpendRepairsForeignValues(t *testing.T) {
	ctx := context.Background()
	c := redistest.Client(t)
	name := redistest.Prefix(t) + "spend"
	key := name + ":acme:" + fmt.Sprint(spendPeriod)
	var logs redistest.Log
	s := newSpendShared(t, store(t, c).Spend(name), spend.SharedConfig{Logger: slog.New(slog.NewTextHandler(&logs, nil))})

	must(t, "SET", c.Set(ctx, key, "not a hash", 0).Err())
	if spent, reserved, err := s.Used(ctx, "acme", spendPeriod); spent != 0 || reserved != 0 || err != nil {
		t.Fatalf("Used of a string = %v, %v, %v; want 0, 0, nil", spent, reserved, err)
	}
	if ok, used, err := s.Reserve(ctx, "acme", spendPeriod, 10, 100, time.Hour); !ok || used != 10 || err != nil {
		t.Fatalf("Reserve over a string = %v, %v, %v; want true, 10, nil", ok, used, err)
	}
	must(t, "HSET", c.HSet(ctx, key, "spent", "1.5").Err())
	must(t, "Settle", s.Settle(ctx, "acme", spendPeriod, 10, 3, time.Hour))
	if got := c.HGetAll(ctx, key).Val(); got["spent"] != "3" || got["reserved"] != "0" {
		t.Fatalf("hash = %v; want spent 3 (the foreign 1.5 taken as 0), reserved 0", got)
	}
	out := logs.String()
	if strings.Count(out, "the key held a string") != 1 || strings.Count(out, "the key held a hash field") != 1 ||
		!strings.Contains(out, "key="+key) || !s.Available() {
		t.Fatalf("log:\n%s\nwant one record of each repair naming the key, and the store available", out)
	}
}

// Four replicas (a client each) and 200 concurrent reservations of 7 on a
// limit of 500: exactly 71 are granted, and Redis holds what they
// reserved. Each attempt is 2 round trips: Reserve and Settle.
func TestSpendConcurrentReservationsHoldTheLimit(t *testing.T) {
	ctx := context.Background()
	name := redistest.Prefix(t) + "spend"
	addr := redistest.Addr(t)
	var replicas []*spend.Shared
	var trips []*redistest.RoundTrips
	for range 4 {
		c, rt := redistest.CountedClient(t, addr)
		replicas = append(replicas, newSpendShared(t, store(t, c).Spend(name), spend.SharedConfig{Replicas: 4}))
		trips = append(trips, rt)
	}
	var granted atomic.Int64
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			r := replicas[i%4]
			ok, _, err := r.Reserve(ctx, "acme", spendPeriod, 7, 500, time.Hour)
			if err != nil {
				t.Errorf("Reserve: %v", err)
			}
			if ok {
				granted.Add(1)
				if err := r.Settle(ctx, "acme", spendPeriod, 7, 7, time.Hour); err != nil {
					t.Errorf("Settle: %v", err)
				}
			}
		})
	}
	wg.Wait()
	if g := granted.Load(); g != 71 {
		t.Fatalf("%d reservations of 7 granted on a limit of 500; want 71", g)
	}
	spent, reserved, err := replicas[0].Used(ctx, "acme", spendPeriod)
	if err != nil || spent != 71*7 || reserved != 0 {
		t.Fatalf("Used = %v, %v, %v; want %d, 0", spent, reserved, err, 71*7)
	}
	var evals int64
	for _, rt := range trips {
		evals += rt.Evals.Load()
	}
	if want := int64(200 + 71); evals != want {
		t.Fatalf("%d script round trips; want %d: one per Reserve, one per Settle", evals, want)
	}
	for i, r := range replicas {
		if !r.Available() {
			t.Fatalf("replica %d fell back to local decisions", i)
		}
	}
}

// Redis down: spend.Shared decides locally at once, without an error,
// within its outage allowance; once Redis answers again, what was spent
// meanwhile is written, once.
func TestSpendRedisDownAndBack(t *testing.T) {
	ctx := context.Background()
	m := miniredis.RunT(t)
	c, _ := redistest.CountedClient(t, m.Addr())
	var calls redistest.Errors
	s := newSpendShared(t, store(t, c).Spend("spend"), spend.SharedConfig{Timeout: time.Second, ProbeEvery: time.Millisecond,
		Replicas: 2, OnError: calls.Add})
	if ok, _, _ := s.Reserve(ctx, "acme", spendPeriod, 40, 100, time.Hour); !ok {
		t.Fatal("Reserve refused")
	}
	m.Close()
	must(t, "Settle", s.Settle(ctx, "acme", spendPeriod, 40, 30, time.Hour))
	// Allowance: (100 - 40 seen) / 2 = 30, less the 30 - 40 pending (none).
	var local cost.Money
	for {
		ok, _, err := s.Reserve(ctx, "acme", spendPeriod, 10, 100, time.Hour)
		if err != nil {
			t.Fatalf("Reserve with Redis down: %v; want no error", err)
		}
		if !ok {
			break
		}
		local += 10
		must(t, "Settle", s.Settle(ctx, "acme", spendPeriod, 10, 10, time.Hour))
	}
	if local != 30 || s.Available() {
		t.Fatalf("spent %v locally, Available %v; want the allowance, 30, and false", local, s.Available())
	}
	if errs := calls.Get(); len(errs) != 1 || !errors.Is(errs[0], spend.ErrSharedUnavailable) {
		t.Fatalf("OnError calls %v; want one matching ErrSharedUnavailable", errs)
	}
	must(t, "Restart", m.Restart())
	time.Sleep(2 * time.Millisecond) // ProbeEvery; miniredis runs in real time
	spent, reserved, err := s.Used(ctx, "acme", spendPeriod)
	if err != nil || spent != 60 || reserved != 0 {
		t.Fatalf("Used after Redis came back = %v, %v, %v; want 30 + 30, 0", spent, reserved, err)
	}
	if rel, sp := s.Pending(); rel != 0 || sp != 0 || !s.Available() {
		t.Fatalf("Pending = %v, %v, Available %v; want 0, 0, true", rel, sp, s.Available())
	}
}

// ReserveAs records its replica in the key's hash and counts the replicas
// seen there within the last minute, granted or refused: a replica not
// seen for longer is deleted and not counted; Reserve counts nothing.
func TestSpendReserveAsCountsReplicas(t *testing.T) {
	ctx := context.Background()
	c := redistest.Client(t)
	name := redistest.Prefix(t) + "spend"
	key := name + ":acme:" + fmt.Sprint(spendPeriod)
	st := store(t, c).Spend(name).(spend.ReplicaStore)
	now, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	must(t, "HSET", c.HSet(ctx, key, "r:gone", now.Add(-61*time.Second).UnixMilli(), "r:junk", "x").Err())
	for i, want := range []int{1, 2, 2, 3} {
		id := []string{"a", "b", "a", "c"}[i]
		ok, _, n, err := st.ReserveAs(ctx, id, "acme", spendPeriod, 10, 100, time.Hour)
		if !ok || n != want || err != nil {
			t.Fatalf("ReserveAs(%q) = %v, %d, %v; want true, %d replicas, nil", id, ok, n, err, want)
		}
	}
	ok, _, n, err := st.ReserveAs(ctx, "d", "acme", spendPeriod, 90, 100, time.Hour)
	if ok || n != 4 || err != nil {
		t.Fatalf("refused ReserveAs = %v, %d, %v; want false, 4 replicas, nil", ok, n, err)
	}
	if ok, _, err := st.Reserve(ctx, "acme", spendPeriod, 10, 100, time.Hour); !ok || err != nil {
		t.Fatalf("Reserve = %v, %v; want true, nil", ok, err)
	}
	h := c.HGetAll(ctx, key).Val()
	if len(h) != 5 || h["reserved"] != "50" || h["r:gone"] != "" || h["r:junk"] != "" || h["r:d"] == "" {
		t.Fatalf("hash = %v; want reserved 50 and the fields of replicas a, b, c and d", h)
	}
	// A refusal on a key that did not exist records its replica, and
	// gives the key a TTL.
	other := name + ":new:" + fmt.Sprint(spendPeriod)
	if ok, _, n, _ := st.ReserveAs(ctx, "a", "new", spendPeriod, 200, 100, time.Hour); ok || n != 1 {
		t.Fatalf("ReserveAs over the limit = %v, %d; want false, 1", ok, n)
	}
	if d := c.PTTL(ctx, other).Val(); d <= 0 || d > time.Hour {
		t.Fatalf("PTTL = %v; want within (0, 1h]", d)
	}
}

// spend.Shared on Redis counts the replicas: with the default Replicas,
// each of 4 replicas that reserved on the key spends at most a quarter of
// what remained while Redis is down.
func TestSpendSharedCountsReplicas(t *testing.T) {
	ctx := context.Background()
	c := redistest.Client(t)
	name := redistest.Prefix(t) + "spend"
	var down atomic.Bool
	var shared []*spend.Shared
	for range 4 {
		shared = append(shared, newSpendShared(t, store(t, c).Spend(name), spend.SharedConfig{Available: func() bool { return !down.Load() }}))
	}
	for i := len(shared) - 1; i >= 0; i-- { // the last, shared[0], counts 4
		if ok, _, err := shared[i].Reserve(ctx, "acme", spendPeriod, 15, 100, time.Hour); !ok || err != nil {
			t.Fatalf("Reserve = %v, %v", ok, err)
		}
	}
	down.Store(true)
	var n cost.Money
	for n < 100 {
		if ok, _, _ := shared[0].Reserve(ctx, "acme", spendPeriod, 1, 100, time.Hour); !ok {
			break
		}
		n++
	}
	if want := cost.Money((100 - 60) / 4); n != want {
		t.Fatalf("reserved %d during the outage; want %d: a quarter of the 40 that remained", n, want)
	}
}
