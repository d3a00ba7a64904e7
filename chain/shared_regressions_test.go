package chain_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/budget"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/internal/redistest"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/retry"
	"github.com/redis/go-redis/v9"
)

// Found in review: one failed write (a Redis blip at the moment the probe succeeds)
// loses the withdrawal of an Open publication. Once Redis answers again the
// stale publication is read by every replica, the prober included (its
// breaker is closed, so OpenElsewhere holds it), and nobody probes: the
// whole fleet skips a healthy target until the publication expires
// (2 x OpenFor after the opening).
func TestSharedLostWithdrawalIsToldAgain(t *testing.T) {
	m := miniredis.RunT(t)
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, m.Addr(), fleetOptions{n: 2, shared: &chain.SharedOptions{ProbeEvery: time.Millisecond},
			primary: chain.Target{Retry: retry.Policy{MaxAttempts: 1},
				Breaker: breaker.Settings{ConsecutiveFailures: 1, OpenFor: 10 * time.Second}}})
		f.primary.mode.Store(overloaded)
		f.call(t, 0) // replica 0 opens its breaker and publishes it
		if res := f.call(t, 1); !errors.Is(skipped(res), breaker.ErrOpenElsewhere) {
			t.Fatalf("setup: replica 1 did not skip the primary:\n%s", path(res))
		}

		f.primary.mode.Store(healthy)
		time.Sleep(10*time.Second + time.Millisecond)
		m.SetError("LOADING Redis is loading the dataset in memory") // a blip
		if res := f.call(t, 0); res.Served.Target != "primary" {
			t.Fatalf("setup: the probe was not served by the primary:\n%s", path(res))
		}
		m.SetError("") // Redis answers again
		time.Sleep(2 * time.Millisecond)

		for i := range 2 {
			if res := f.call(t, i); res.Served.Target != "primary" {
				t.Errorf("replica %d, Redis answering again, the primary healthy and every breaker closed: served by %q\n%s",
					i, res.Served.Target, path(res))
			}
		}
	})
}

// readGate is a go-redis hook that, once armed, holds the answer of the
// next read of the shared breakers (the read script has 1 argument after
// its key) until released.
type readGate struct {
	armed           atomic.Bool
	loaded, release chan struct{}
}

func (h *readGate) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *readGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if n := cmd.Name(); (n == "evalsha" || n == "eval") && len(cmd.Args()) == 5 && h.armed.CompareAndSwap(true, false) {
			close(h.loaded)
			<-h.release
		}
		return err
	}
}
func (h *readGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// Found in review: a read that Redis answered before the probe's withdrawal landed,
// applied after the probe closed the breaker, holds this replica's own
// healthy target open "elsewhere" on its own stale publication; with
// Refresh, every call until the next read skips it (2de8cc2 fixed only a
// read made before the probe started).
func TestSharedProberIgnoresAReadRacingItsProbe(t *testing.T) {
	m := miniredis.RunT(t)
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, m.Addr(), fleetOptions{n: 1, shared: &chain.SharedOptions{Refresh: time.Second},
			primary: chain.Target{Retry: retry.Policy{MaxAttempts: 1},
				Breaker: breaker.Settings{ConsecutiveFailures: 1, OpenFor: 2 * time.Second}}})
		f.primary.mode.Store(overloaded)
		f.call(t, 0) // opens, publishes
		f.primary.mode.Store(healthy)
		time.Sleep(2*time.Second + time.Millisecond) // OpenFor and Refresh have passed

		h := &readGate{loaded: make(chan struct{}), release: make(chan struct{})}
		f.clients[0].AddHook(h)
		h.armed.Store(true)
		var x *chain.Result
		var wg sync.WaitGroup
		wg.Go(func() { x, _ = f.replicas[0].Call(context.Background(), ask) }) // reads the publication, held
		<-h.loaded
		if res := f.call(t, 0); res.Served.Target != "primary" { // the probe: closes, withdraws
			t.Fatalf("setup: the probe was not served by the primary:\n%s", path(res))
		}
		close(h.release)
		wg.Wait()
		if x == nil || x.Served.Target != "primary" {
			t.Errorf("the call whose read raced the probe: served by %q\n%s", x.Served.Target, path(x))
		}
		if res := f.call(t, 0); res.Served.Target != "primary" {
			t.Errorf("the next call, after the probe closed the breaker and withdrew the publication: served by %q\n%s",
				res.Served.Target, path(res))
		}
	})
}

// Found in review: each store (the breakers hash and every target's budget)
// had a Health of its own, so a Redis that accepts connections and never
// answers cost one call a Timeout per store it touched: here the read and
// the primary's retry decision. The budgets now ask the breaker state's
// Available first: one round trip tried, one Timeout, one log record.
// Real time: a silent socket is not durably blocking.
func TestSharedSilentRedisCostsOneRoundTripPerCall(t *testing.T) {
	addr := redistest.Silent(t)
	client := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	trips := &redistest.RoundTrips{}
	client.AddHook(trips)
	var log redistest.Log
	primary, fallback := &flaky{name: "anthropic"}, &flaky{name: "openai"}
	primary.mode.Store(overloaded)
	c, err := chain.New("support").
		Shared(sharedStore(t, client), chain.SharedOptions{ProbeEvery: time.Hour, Logger: slog.New(slog.NewTextHandler(&log, nil))}).
		Primary(chain.Target{Name: "primary", Provider: primary, Model: "m",
			Retry: retry.Policy{MaxAttempts: 2, Base: time.Millisecond, Cap: time.Millisecond}}).
		OrProvider(chain.Target{Name: "fallback", Provider: fallback, Model: "f"}).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Call(context.Background(), ask)
	if err != nil || res.Served.Target != "fallback" || primary.n.Load() != 2 {
		t.Fatalf("served by %q after %d primary requests, err %v; want the fallback after a retry\n%s",
			res.Served.Target, primary.n.Load(), err, path(res))
	}
	if n := trips.Evals.Load(); n != 1 {
		t.Fatalf("the call tried %d round trips on a silent Redis; want 1 (the read): the retry's budget must decide locally", n)
	}
	if got := strings.Count(log.String(), "level=WARN"); got != 1 {
		t.Fatalf("%d Warn records; want 1:\n%s", got, log.String())
	}
}

// Found in review: the budget key is "<Prefix>:<chain>:<target>:budget" with no
// escaping, so chain "eu:support" target "primary" and chain "eu" target
// "support:primary" share one budget: one chain's retries exhaust the
// other's.
func TestSharedBudgetKeysDoNotCollideAcrossChains(t *testing.T) {
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	opts := chain.SharedOptions{Budget: budget.RatioConfig{Ratio: 0.01, MinRetries: 2}, Timeout: sharedTestTimeout}
	build := func(name, target string, p *flaky) *chain.Chain {
		ch, err := chain.New(name).Shared(sharedStore(t, c), opts).
			Primary(chain.Target{Name: target, Provider: p, Model: "m",
				Retry:   retry.Policy{MaxAttempts: 2, Base: time.Millisecond, Cap: time.Millisecond},
				Breaker: breaker.Settings{Disabled: true}}).
			OrProvider(chain.Target{Name: "fallback", Provider: &flaky{name: "openai"}, Model: "gpt"}).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		return ch
	}
	pa, pb := &flaky{name: "anthropic"}, &flaky{name: "anthropic"}
	pa.mode.Store(overloaded)
	pb.mode.Store(overloaded)
	a := build("eu:support", "primary", pa)
	b := build("eu", "support:primary", pb)
	for range 3 {
		if _, err := a.Call(context.Background(), ask); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Call(context.Background(), ask); err != nil {
		t.Fatal(err)
	}
	if got := pb.n.Load(); got != 2 {
		t.Errorf("chain %q's primary got %d requests; want 2 (its first retry, from a budget of its own); keys: %q",
			"eu", got, m.Keys())
	}
}

// Found in review: a gate read from Redis is applied for as long as the publisher
// (or any writer of the hash, up to 366 days) asked, not capped by this
// replica's own MaxGate ("the longest a Retry-After closes the target's
// gate").
func TestSharedRemoteGateCappedByMaxGate(t *testing.T) {
	m := miniredis.RunT(t)
	synctest.Test(t, func(t *testing.T) {
		c := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = c.Close() })
		p := &flaky{name: "anthropic"}
		build := func(maxGate time.Duration) *chain.Chain {
			ch, err := chain.New("support").Shared(sharedStore(t, c), chain.SharedOptions{Timeout: sharedTestTimeout}).
				Primary(chain.Target{Name: "primary", Provider: p, Model: "claude",
					Breaker: breaker.Settings{MaxGate: maxGate}}).
				OrProvider(chain.Target{Name: "fallback", Provider: &flaky{name: "openai"}, Model: "gpt"}).
				Build()
			if err != nil {
				t.Fatal(err)
			}
			return ch
		}
		const maxGate = 10 * time.Second
		a, b := build(0), build(maxGate)
		p.mode.Store(rateLimited) // Retry-After 120s
		if _, err := a.Call(context.Background(), ask); err != nil {
			t.Fatal(err)
		}
		res, err := b.Call(context.Background(), ask)
		if err != nil {
			t.Fatal(err)
		}
		for _, at := range res.Attempts {
			if at.Target == "primary" && errors.Is(at.Err, breaker.ErrGateClosedElsewhere) {
				d, perr := time.ParseDuration(strings.TrimPrefix(at.Reason, "closed by another replica's Retry-After for "))
				if perr != nil || d > maxGate {
					t.Errorf("replica with MaxGate %v: primary %q; want the gate closed at most %v", maxGate, at.Reason, maxGate)
				}
				return
			}
		}
		t.Fatalf("setup: replica b did not skip the primary on the gate:\n%s", path(res))
	})
}

// Found in review: SharedOptions.Budget is validated only through the budgets it
// makes; when every target has its own Budget, an invalid one is accepted
// silently.
func TestSharedBudgetConfigValidatedAtBuild(t *testing.T) {
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	_, err := chain.New("c").Shared(sharedStore(t, c), chain.SharedOptions{Budget: budget.RatioConfig{Ratio: 5}}).
		Primary(chain.Target{Name: "p", Provider: &flaky{name: "anthropic"}, Model: "m", Budget: budget.Unlimited()}).
		Build()
	if err == nil || !strings.Contains(err.Error(), "Ratio") {
		t.Errorf("Build with SharedOptions.Budget.Ratio 5 = %v; want an error naming Ratio", err)
	}
}

// Found in review: the same lost withdrawal on a chain with one target: once Redis
// answers again, calls fail (ExhaustedError, "open on another replica")
// against a healthy target that no replica's breaker holds open, contrary
// to "No call fails because of Redis".
func TestSharedLostWithdrawalSingleTargetChain(t *testing.T) {
	m := miniredis.RunT(t)
	synctest.Test(t, func(t *testing.T) {
		p := &flaky{name: "anthropic"}
		var replicas []*chain.Chain
		for range 2 {
			c := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
			t.Cleanup(func() { _ = c.Close() })
			ch, err := chain.New("solo").Shared(sharedStore(t, c), chain.SharedOptions{ProbeEvery: time.Millisecond, Timeout: sharedTestTimeout, Logger: slog.New(slog.DiscardHandler)}).
				Primary(chain.Target{Name: "primary", Provider: p, Model: "claude", Retry: retry.Policy{MaxAttempts: 1},
					Breaker: breaker.Settings{ConsecutiveFailures: 1, OpenFor: 10 * time.Second}}).
				Build()
			if err != nil {
				t.Fatal(err)
			}
			replicas = append(replicas, ch)
		}
		p.mode.Store(overloaded)
		_, _ = replicas[0].Call(context.Background(), ask) // opens, publishes
		p.mode.Store(healthy)
		time.Sleep(10*time.Second + time.Millisecond)
		m.SetError("LOADING Redis is loading the dataset in memory")
		if _, err := replicas[0].Call(context.Background(), ask); err != nil {
			t.Fatalf("setup: the probe failed: %v", err)
		}
		m.SetError("")
		time.Sleep(2 * time.Millisecond)
		for i, r := range replicas {
			if _, err := r.Call(context.Background(), ask); err != nil {
				t.Errorf("replica %d, Redis answering again, the target healthy: %v", i, err)
			}
		}
	})
}

// gated fails its first request, overloaded, once released.
type gated struct {
	once             sync.Once
	started, release chan struct{}
}

func (g *gated) Name() string { return "anthropic" }
func (g *gated) Complete(context.Context, llm.Request) (*llm.Response, error) {
	g.once.Do(func() { close(g.started) })
	<-g.release
	return nil, &llm.Error{Provider: "anthropic", Status: 529, Kind: llm.KindOverloaded, Message: "overloaded"}
}

// Found in review: a retry refused because another replica's publication arrived
// during the attempt is recorded as a plain ErrOpen "circuit breaker open"
// (chain.go's `if !t.breaker.Closed()`), not ErrOpenElsewhere / "open on
// another replica" as docs/replicas.md says a skip on another replica's
// word is.
func TestSharedRetrySkipOnRemoteOpenIsLabelled(t *testing.T) {
	m := miniredis.RunT(t)
	synctest.Test(t, func(t *testing.T) {
		build := func(p llm.Provider, br breaker.Settings) *chain.Chain {
			c := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = c.Close() })
			ch, err := chain.New("support").Shared(sharedStore(t, c), chain.SharedOptions{Timeout: sharedTestTimeout}).
				Primary(chain.Target{Name: "primary", Provider: p, Model: "claude", Breaker: br,
					Retry: retry.Policy{MaxAttempts: 2, Base: time.Millisecond, Cap: time.Millisecond}}).
				OrProvider(chain.Target{Name: "fallback", Provider: &flaky{name: "openai"}, Model: "gpt"}).
				Build()
			if err != nil {
				t.Fatal(err)
			}
			return ch
		}
		g := &gated{started: make(chan struct{}), release: make(chan struct{})}
		bad := &flaky{name: "anthropic"}
		bad.mode.Store(overloaded)
		r0 := build(bad, breaker.Settings{ConsecutiveFailures: 1})
		r1 := build(g, breaker.Settings{})
		var a *chain.Result
		var wg sync.WaitGroup
		wg.Go(func() { a, _ = r1.Call(context.Background(), ask) })
		<-g.started
		_, _ = r0.Call(context.Background(), ask) // r0 opens, publishes
		if res, _ := r1.Call(context.Background(), ask); !errors.Is(skipped(res), breaker.ErrOpenElsewhere) {
			t.Fatalf("setup: r1 did not learn of r0's opening:\n%s", path(res))
		}
		close(g.release)
		wg.Wait()
		for _, at := range a.Attempts {
			if at.Target == "primary" && at.N == 2 {
				if !errors.Is(at.Err, breaker.ErrOpenElsewhere) {
					t.Errorf("the refused retry: err %v; want ErrOpenElsewhere\n%s", at.Err, path(a))
				}
				return
			}
		}
		t.Fatalf("setup: no refused retry on the primary:\n%s", path(a))
	})
}

// keepRedisTime sets miniredis's clock (its TIME, which the scripts read)
// to the bubble's, so that what Redis holds counts down as the test sleeps.
func keepRedisTime(m *miniredis.Miniredis) { m.SetTime(time.Now()) }

// Found in review (issue 12, item 6): a publication read from Redis was
// re-applied from "now" on every read, capped per read only, so the cap was
// no cap. An open-until 300 days ahead, on a key with no TTL, kept a healthy
// target skipped far past 2 x the reader's OpenFor.
func TestSharedRemoteOpenCappedByReadersOpenFor(t *testing.T) {
	m := miniredis.RunT(t)
	synctest.Test(t, func(t *testing.T) {
		const openFor = 10 * time.Second
		f := newFleet(t, m.Addr(), fleetOptions{n: 1, shared: &chain.SharedOptions{},
			primary: chain.Target{Retry: retry.Policy{MaxAttempts: 1}, Breaker: breaker.Settings{OpenFor: openFor}}})
		keepRedisTime(m)
		m.HSet("backstop:support:breakers", "o:primary", strconv.FormatInt(time.Now().Add(300*24*time.Hour).UnixMilli(), 10))
		call := func() *chain.Result {
			t.Helper()
			keepRedisTime(m)
			return f.call(t, 0)
		}
		start := time.Now()
		if res := call(); !errors.Is(skipped(res), breaker.ErrOpenElsewhere) {
			t.Fatalf("setup: the replica did not skip the primary on the publication:\n%s", path(res))
		}
		// Every call reads the same publication again: it holds the target
		// no longer than 2 x OpenFor from when it was first read.
		for time.Since(start) < 2*openFor-time.Second {
			time.Sleep(time.Second)
			if res := call(); !errors.Is(skipped(res), breaker.ErrOpenElsewhere) {
				t.Fatalf("%v after the first read: the primary was not skipped:\n%s", time.Since(start), path(res))
			}
		}
		time.Sleep(start.Add(2 * openFor).Sub(time.Now()))
		for range 3 {
			if res := call(); res.Served.Target != "primary" {
				t.Fatalf("2 x OpenFor (%v) after the replica first read a 300-day publication: served by %q; want the healthy primary\n%s",
					2*openFor, res.Served.Target, path(res))
			}
		}
		if f.primary.n.Load() != 3 {
			t.Fatalf("the primary got %d requests; want 3", f.primary.n.Load())
		}
	})
}

// Found in review (issue 12, item 6): another replica's 10s gate closed a
// target for a replica whose MaxGate is 1s, because each read re-closed it
// for min(what is left, MaxGate) from now. A later closure (a new 429) is
// applied afresh, capped again.
func TestSharedRemoteGateNotExtendedByRereading(t *testing.T) {
	m := miniredis.RunT(t)
	synctest.Test(t, func(t *testing.T) {
		p := &flaky{name: "anthropic"}
		build := func(maxGate time.Duration) *chain.Chain {
			c := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = c.Close() })
			ch, err := chain.New("support").Shared(sharedStore(t, c), chain.SharedOptions{Timeout: sharedTestTimeout}).
				Primary(chain.Target{Name: "primary", Provider: p, Model: "claude",
					Retry: retry.Policy{MaxAttempts: 1}, Breaker: breaker.Settings{MaxGate: maxGate}}).
				OrProvider(chain.Target{Name: "fallback", Provider: &flaky{name: "openai"}, Model: "gpt"}).
				Build()
			if err != nil {
				t.Fatal(err)
			}
			return ch
		}
		const maxGate = time.Second
		a, b := build(0), build(maxGate)
		call := func(c *chain.Chain) *chain.Result {
			t.Helper()
			keepRedisTime(m)
			res, err := c.Call(context.Background(), ask)
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		gated := func(res *chain.Result) bool { return errors.Is(skipped(res), breaker.ErrGateClosedElsewhere) }

		p.mode.Store(rateLimited) // Retry-After 120s: a closes its gate and publishes it
		call(a)
		p.mode.Store(healthy)
		if res := call(b); !gated(res) {
			t.Fatalf("setup: b did not skip the primary on a's gate:\n%s", path(res))
		}
		time.Sleep(maxGate / 2)
		if res := call(b); !gated(res) {
			t.Fatalf("b within its MaxGate: the primary was not skipped:\n%s", path(res))
		}
		time.Sleep(maxGate / 2)
		for range 3 {
			if res := call(b); res.Served.Target != "primary" {
				t.Fatalf("b, MaxGate %v after it first read a's 120s gate: served by %q; want the primary\n%s",
					maxGate, res.Served.Target, path(res))
			}
		}

		// A new 429, once a's own gate has opened: it ends later than the
		// first by more than a round trip can blur, so b closes again, for
		// its MaxGate.
		time.Sleep(2 * time.Minute)
		p.mode.Store(rateLimited)
		call(a)
		p.mode.Store(healthy)
		if res := call(b); !gated(res) {
			t.Fatalf("b after a's second 429: the primary was not skipped:\n%s", path(res))
		}
		time.Sleep(maxGate)
		if res := call(b); res.Served.Target != "primary" {
			t.Fatalf("b, MaxGate after a's second 429: served by %q; want the primary\n%s", res.Served.Target, path(res))
		}
	})
}

// Found in review (issue 12, item 6): a value of another type on the
// breakers key (a string SET there) made every round trip fail WRONGTYPE:
// one Warn, then sharing stayed off for good. The key is backstop's: the
// scripts delete such a value and go on, and say so each time.
func TestSharedWrongTypeBreakersKeyIsRepaired(t *testing.T) {
	m := miniredis.RunT(t)
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, m.Addr(), fleetOptions{n: 2, shared: &chain.SharedOptions{},
			primary: chain.Target{Retry: retry.Policy{MaxAttempts: 1}, Breaker: breaker.Settings{ConsecutiveFailures: 1}}})
		const key = "backstop:support:breakers"
		for round := 1; round <= 2; round++ {
			m.Del(key)
			if err := m.Set(key, "not a hash"); err != nil {
				t.Fatal(err)
			}
			f.primary.mode.Store(overloaded)
			f.call(t, 0) // reads (repairs), opens its breaker, publishes
			if res := f.call(t, 1); !errors.Is(skipped(res), breaker.ErrOpenElsewhere) {
				t.Fatalf("round %d: replica 1 did not learn of replica 0's opening past a string on the key:\n%s\nlog:\n%s",
					round, path(res), f.log.String())
			}
			if got := strings.Count(f.log.String(), "held a string"); got != round {
				t.Fatalf("round %d: %d Warn records name the repair; want %d:\n%s", round, got, round, f.log.String())
			}
			// Heal: replica 0 probes after OpenFor and withdraws.
			f.primary.mode.Store(healthy)
			time.Sleep(breaker.DefaultOpenFor + time.Millisecond)
			f.call(t, 0)
		}
		if ttl := m.TTL(key); m.Exists(key) && ttl <= 0 {
			t.Fatalf("the repaired key has no TTL")
		}
	})
}
