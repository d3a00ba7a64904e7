package chain_test

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/backstop-llm/backstop/hedge"
	"github.com/backstop-llm/backstop/internal/oteltest"
	"github.com/backstop-llm/backstop/internal/redistest"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/redisstore"
	"github.com/backstop-llm/backstop/retry"
	"github.com/redis/go-redis/v9"
)

// The breaker's defaults these tests rely on: it opens after 5 consecutive
// failures, for 5s, and a shared breaker lengthens each opening by up to
// a quarter.
const (
	breakerFailures    = 5
	breakerOpenFor     = 5 * time.Second
	breakerJitterShare = 4
)

// Modes of a flaky provider.
const (
	healthy int32 = iota
	overloaded
	rateLimited // 429 asking for 120s, longer than any MaxRetryAfter here
)

// flaky is a provider whose behaviour the test switches, counting the
// requests it receives: the provider's view of a fleet of replicas.
type flaky struct {
	name string
	mode atomic.Int32
	n    atomic.Int64
}

func (f *flaky) Name() string { return f.name }
func (f *flaky) Complete(_ context.Context, req llm.Request) (*llm.Response, error) {
	f.n.Add(1)
	switch f.mode.Load() {
	case overloaded:
		return nil, &llm.Error{Provider: f.name, Status: 529, Kind: llm.KindOverloaded, Message: "overloaded"}
	case rateLimited:
		return nil, &llm.Error{Provider: f.name, Status: 429, Kind: llm.KindRateLimited, Message: "slow down", RetryAfter: 120 * time.Second}
	}
	return &llm.Response{Text: "ok from " + f.name, Model: req.Model}, nil
}

// fleet is n replicas of one chain, each with a Redis client of its own,
// sharing a primary and a fallback provider.
type fleet struct {
	primary, fallback *flaky
	replicas          []*chain.Chain
	clients           []*redis.Client // one per replica, when shared
	log               *redistest.Log
}

type fleetOptions struct {
	n       int
	name    string
	shared  *chain.SharedConfig // nil: not shared
	primary chain.Target        // Name, Provider and Model are set by newFleet
	tel     *oteltest.Telemetry
}

// newFleet builds the replicas, each on a client of addr made now (inside
// the caller's synctest bubble, if any) and closed when the test ends.
func newFleet(t *testing.T, addr string, o fleetOptions) *fleet {
	t.Helper()
	f := &fleet{primary: &flaky{name: "anthropic"}, fallback: &flaky{name: "openai"}, log: &redistest.Log{}}
	if o.name == "" {
		o.name = "support"
	}
	for range o.n {
		b := chain.New(o.name)
		if o.shared != nil {
			c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1, PoolSize: 4, DialerRetries: 1})
			t.Cleanup(func() { _ = c.Close() })
			f.clients = append(f.clients, c)
			opts := *o.shared
			opts.Logger = slog.New(slog.NewTextHandler(f.log, nil))
			if opts.Timeout == 0 {
				opts.Timeout = sharedTestTimeout
			}
			b.Shared(sharedStore(t, c), opts)
		}
		if o.tel != nil {
			b.TracerProvider(o.tel.TracerProvider).MeterProvider(o.tel.MeterProvider)
		}
		p := o.primary
		p.Name, p.Provider, p.Model = "primary", f.primary, "claude"
		c, err := b.Primary(p).
			OrProvider(chain.Target{Name: "fallback", Provider: f.fallback, Model: "gpt"}).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		f.replicas = append(f.replicas, c)
		t.Cleanup(c.Close) // its poller, before its client closes
	}
	return f
}

var ask = llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}

// waitReconnected returns once every replica's client answers a PING
// again. go-redis's pool, after PoolSize failed dials, fails fast and
// re-dials in the background once a second: this waits for that condition
// (at most 10s), not for a time. Real time only: call it outside synctest.
func (f *fleet) waitReconnected(t *testing.T) {
	t.Helper()
	for i, c := range f.clients {
		deadline := time.Now().Add(10 * time.Second)
		for c.Ping(context.Background()).Err() != nil {
			if time.Now().After(deadline) {
				t.Fatalf("replica %d's client did not reconnect to Redis within 10s", i)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// sharedTestTimeout is the SharedConfig.Timeout of the tests that are not
// about timeouts. Inside a synctest bubble a socket's deadline is still
// real time (SetReadDeadline converts it with time.Until), and a machine
// running the whole suite can miss the default 50ms: a replica would then
// decide alone and the counts would change.
const sharedTestTimeout = 10 * time.Second

// propagate lets what one replica published reach the others, inside a
// synctest bubble: a Refresh for their pollers' next read (or, idle, for
// their next call's), then the writes and reads on their way.
func propagate() {
	time.Sleep(defaultRefresh + time.Millisecond)
	synctest.Wait()
}

// settle is propagate in real time: each replica's Flush in turn waits
// for its poller's writes and next read, if it runs.
func (f *fleet) settle() {
	for _, c := range f.replicas {
		_ = c.Flush(context.Background()) // Redis may be stopped
	}
}

// call makes one call on replica i and fails the test if it is not served.
func (f *fleet) call(t *testing.T, i int) *chain.Result {
	t.Helper()
	res, err := f.replicas[i].Call(context.Background(), ask)
	if err != nil {
		t.Fatalf("replica %d: the call failed: %v\n%s", i, err, path(res))
	}
	return res
}

// skipped returns the error of the primary's skip in res, or nil.
func skipped(res *chain.Result) error {
	for _, a := range res.Attempts {
		if a.Target == "primary" && a.Decision == chain.DecisionSkip && a.N == 0 {
			return a.Err
		}
	}
	return nil
}

// sharedBackends runs test against an in-process miniredis and, when one
// is reachable (always under CI), the real Redis server.
func sharedBackends(t *testing.T, test func(t *testing.T, addr, prefix string)) {
	t.Run("miniredis", func(t *testing.T) {
		m := miniredis.RunT(t)
		test(t, m.Addr(), "")
	})
	t.Run("redis", func(t *testing.T) {
		test(t, redistest.Addr(t), strings.TrimSuffix(redistest.Prefix(t), ":"))
	})
}

func TestSharedBreakerOpenSkipsOtherReplicas(t *testing.T) {
	sharedBackends(t, func(t *testing.T, addr, prefix string) {
		synctest.Test(t, func(t *testing.T) {
			f := newFleet(t, addr, fleetOptions{n: 3, shared: &chain.SharedConfig{Prefix: prefix},
				primary: chain.Target{Retry: retry.Policy{MaxAttempts: 1}}})
			f.primary.mode.Store(overloaded)
			for range breakerFailures {
				if res := f.call(t, 0); res.Served.Target != "fallback" {
					t.Fatalf("served by %q; want the fallback", res.Served.Target)
				}
			}
			if got := f.primary.n.Load(); got != breakerFailures {
				t.Fatalf("the primary got %d requests; want %d", got, breakerFailures)
			}
			// Replica 0's breaker is open: the others skip the primary from
			// their next call on, without a request.
			othersSkip(t, f, breaker.ErrOpenElsewhere, breaker.ErrOpen, "open on another replica")
			if got := f.primary.n.Load(); got != breakerFailures {
				t.Fatalf("the primary got %d requests after replica 0 opened its breaker; want none", got-breakerFailures)
			}

			// The primary heals. Replica 0 probes once its open interval has
			// passed, on its next call; until its probe succeeds the others
			// keep skipping the primary.
			f.primary.mode.Store(healthy)
			time.Sleep(breakerOpenFor / 2)
			if res := f.call(t, 1); skipped(res) == nil {
				t.Fatalf("replica 1 used the primary before the probe:\n%s", path(res))
			}
			time.Sleep(opening(breakerOpenFor) - breakerOpenFor/2 + time.Millisecond)
			if res := f.call(t, 0); res.Served.Target != "primary" {
				t.Fatalf("the probe: served by %q; want the primary\n%s", res.Served.Target, path(res))
			}
			propagate()
			for i := 1; i < 3; i++ {
				if res := f.call(t, i); res.Served.Target != "primary" {
					t.Fatalf("replica %d after the probe: served by %q; want the primary\n%s", i, res.Served.Target, path(res))
				}
			}
			if got := f.primary.n.Load(); got != breakerFailures+3 {
				t.Fatalf("the primary got %d requests; want %d failures, one probe and two calls", got, breakerFailures)
			}
		})
	})
}

func TestSharedGateClosesOtherReplicas(t *testing.T) {
	sharedBackends(t, func(t *testing.T, addr, prefix string) {
		synctest.Test(t, func(t *testing.T) {
			f := newFleet(t, addr, fleetOptions{n: 3, shared: &chain.SharedConfig{Prefix: prefix}})
			f.primary.mode.Store(rateLimited)
			if res := f.call(t, 0); res.Served.Target != "fallback" || f.primary.n.Load() != 1 {
				t.Fatalf("served by %q after %d requests; want the fallback after 1\n%s", res.Served.Target, f.primary.n.Load(), path(res))
			}
			othersSkip(t, f, breaker.ErrGateClosedElsewhere, breaker.ErrGateClosed, "closed by another replica's Retry-After")
			if got := f.primary.n.Load(); got != 1 {
				t.Fatalf("the primary got %d requests; want 1: the others respect its Retry-After", got)
			}
		})
	})
}

// Redis down is run in real time, not in a synctest bubble: miniredis's
// Restart starts a listener goroutine that would join the bubble and keep
// it from ever being idle. Nothing waits: one attempt per target, and Redis
// is tried again on every call (ProbeEvery 1ns).
func TestSharedRedisDownCallsCarryOnThenShareAgain(t *testing.T) {
	m := miniredis.RunT(t)
	{
		tel := oteltest.New()
		f := newFleet(t, m.Addr(), fleetOptions{n: 3, tel: tel, shared: &chain.SharedConfig{ProbeEvery: time.Nanosecond},
			primary: chain.Target{Retry: retry.Policy{MaxAttempts: 1}}})
		f.call(t, 0)
		m.Close()

		// Redis is down: every call is served, on local state.
		f.primary.mode.Store(overloaded)
		for range breakerFailures {
			if res := f.call(t, 0); res.Served.Target != "fallback" {
				t.Fatalf("served by %q; want the fallback", res.Served.Target)
			}
		}
		// Replica 0 opened its breaker but could not tell the others:
		// replica 1 finds out for itself.
		before := f.primary.n.Load()
		if res := f.call(t, 1); skipped(res) != nil || f.primary.n.Load() != before+1 {
			t.Fatalf("replica 1 skipped the primary with Redis down:\n%s", path(res))
		}
		logs := f.log.String()
		if !strings.Contains(logs, "shared breaker state unavailable, using local state") {
			t.Fatalf("no log line says the shared state is unavailable:\n%s", logs)
		}
		// Replica 0's calls came within a Refresh of its last read: they
		// decided on its mirror, and its poller may not have seen Redis
		// fail yet; replica 1's first call did.
		if n := tel.Counter(t, "backstop.shared.unavailable"); n < 1 {
			t.Fatalf("backstop.shared.unavailable = %d; want at least one: a replica saw Redis fail", n)
		}
		var events int
		for _, s := range tel.Spans.GetSpans() {
			for _, e := range s.Events {
				if e.Name == "backstop.shared.local" {
					events++
				}
			}
		}
		if events == 0 {
			t.Fatal("no call span records that it decided on local state")
		}

		// Redis is back: after ProbeEvery, replica 1's own breaker opening
		// is shared again, and replica 2 skips the primary without a request.
		if err := m.Restart(); err != nil {
			t.Fatal(err)
		}
		f.waitReconnected(t)
		for range breakerFailures {
			f.call(t, 1)
		}
		if err := f.replicas[1].Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		before = f.primary.n.Load()
		res := f.call(t, 2)
		if err := skipped(res); !errors.Is(err, breaker.ErrOpenElsewhere) || f.primary.n.Load() != before {
			t.Fatalf("after Redis came back, replica 2's primary skip = %v with %d requests; want ErrOpenElsewhere and none\n%s",
				err, f.primary.n.Load()-before, path(res))
		}
		if !strings.Contains(f.log.String(), "available again, using shared state") {
			t.Fatalf("no log line says the shared state is back:\n%s", f.log.String())
		}
	}
}

// sharedStore returns redisstore's shared state on c, failing the test on
// an error.
func sharedStore(t testing.TB, c redis.UniversalClient) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSharedBuildErrors(t *testing.T) {
	m := miniredis.RunT(t)
	p := &flaky{name: "anthropic"}
	good := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
	defer good.Close()
	_, err := chain.New("c").Shared(sharedStore(t, good), chain.SharedConfig{Refresh: -time.Second, Timeout: -1}).
		Primary(chain.Target{Name: "p", Provider: p, Model: "m"}).Build()
	if !errors.Is(err, llm.ErrInvalidConfig) {
		t.Fatalf("err = %v; want llm.ErrInvalidConfig", err)
	}
	for _, want := range []string{"Refresh is -1s", "Timeout is -1ns"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q:\n%v", want, err)
		}
	}
	// A client that ignores its contexts' deadlines is refused by
	// redisstore.New; Build refuses the nil store that leaves, typed
	// or not.
	noTimeouts := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer noTimeouts.Close()
	store, err := redisstore.New(noTimeouts)
	if !errors.Is(err, llm.ErrInvalidConfig) || !strings.Contains(err.Error(), "ContextTimeoutEnabled is false") {
		t.Fatalf("redisstore.New of a client without context timeouts: %v", err)
	}
	for _, s := range []chain.Store{nil, store} {
		_, err = chain.New("c").Shared(s, chain.SharedConfig{}).
			Primary(chain.Target{Name: "p", Provider: p, Model: "m"}).Build()
		if !errors.Is(err, llm.ErrInvalidConfig) || !strings.Contains(err.Error(), "redisstore.New(client)") {
			t.Fatalf("a nil store (%T): err = %v; want llm.ErrInvalidConfig naming redisstore.New", s, err)
		}
	}
}

func TestSharedRefreshReadsAtMostOncePerInterval(t *testing.T) {
	m := miniredis.RunT(t)
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, m.Addr(), fleetOptions{n: 2, shared: &chain.SharedConfig{Refresh: time.Second},
			primary: chain.Target{Retry: retry.Policy{MaxAttempts: 1}}})
		f.call(t, 1) // replica 1 reads the (empty) shared state now
		f.primary.mode.Store(overloaded)
		for range breakerFailures {
			f.call(t, 0)
		}
		before := f.primary.n.Load()
		if res := f.call(t, 1); skipped(res) != nil || f.primary.n.Load() != before+1 {
			t.Fatalf("replica 1 read the shared state again within Refresh:\n%s", path(res))
		}
		time.Sleep(time.Second) // replica 1's poller reads again
		synctest.Wait()
		if res := f.call(t, 1); !errors.Is(skipped(res), breaker.ErrOpenElsewhere) {
			t.Fatalf("replica 1 did not read the shared state after Refresh:\n%s", path(res))
		}
	})
}

// Found with TestSharedRedisStoppedMidRun: a call that restarted an idle
// poller decided on the mirror its last run had read, however old, as long
// as that was within 2 x Refresh + Timeout (10s here): replica 1 sent a
// request the other replica's Retry-After had closed the target to.
func TestSharedRestartedPollerReadsBeforeTheCallDecides(t *testing.T) {
	m := miniredis.RunT(t)
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, m.Addr(), fleetOptions{n: 2, shared: &chain.SharedConfig{},
			primary: chain.Target{Retry: retry.Policy{MaxAttempts: 1}}})
		f.call(t, 1)            // replica 1's poller reads the (empty) shared state
		time.Sleep(time.Second) // and exits, idle
		synctest.Wait()
		f.primary.mode.Store(rateLimited)
		if res := f.call(t, 0); res.Served.Target != "fallback" {
			t.Fatalf("replica 0: served by %q\n%s", res.Served.Target, path(res))
		}
		if err := f.replicas[0].Flush(t.Context()); err != nil { // its gate is in Redis
			t.Fatal(err)
		}
		before := f.primary.n.Load()
		res := f.call(t, 1)
		if err := skipped(res); !errors.Is(err, breaker.ErrGateClosed) {
			t.Fatalf("replica 1, its poller restarted: primary skip = %v; want ErrGateClosed\n%s", err, path(res))
		}
		if got := f.primary.n.Load() - before; got != 0 {
			t.Fatalf("the primary got %d requests after its Retry-After was shared; want none", got)
		}
	})
}

// path lists a result's attempts, one per line, for failure messages.
func path(res *chain.Result) string {
	if res == nil {
		return "<nil result>"
	}
	var b strings.Builder
	for _, a := range res.Attempts {
		fmt.Fprintf(&b, "  %v\n", a)
	}
	return b.String()
}

// A Redis that accepts connections and never answers costs each store one
// Timeout, once: the calls are served by the primary meanwhile, and the
// log says why the replica decides alone. Real time (a silent socket cannot
// be waited on in a synctest bubble): about two Timeouts in all.
func TestSharedSilentRedisCallsCarryOn(t *testing.T) {
	addr := redistest.Silent(t)
	f := newFleet(t, addr, fleetOptions{n: 1, shared: &chain.SharedConfig{ProbeEvery: time.Hour, Timeout: 50 * time.Millisecond}})
	for range 3 {
		if res := f.call(t, 0); res.Served.Target != "primary" {
			t.Fatalf("served by %q\n%s", res.Served.Target, path(res))
		}
	}
	if logs := f.log.String(); !strings.Contains(logs, "no answer from Redis within the Timeout (50ms)") {
		t.Fatalf("the log does not say Redis did not answer in time:\n%s", logs)
	}
}

// sharedReplica is a chain called name sharing its state through c, with
// primary first and a healthy OpenAI "fallback" after it.
func sharedReplica(t testing.TB, c redis.UniversalClient, name string, opts chain.SharedConfig, primary chain.Target) *chain.Chain {
	t.Helper()
	ch, err := chain.New(name).Shared(sharedStore(t, c), opts).
		Primary(primary).
		OrProvider(chain.Target{Name: "fallback", Provider: &flaky{name: "openai"}, Model: "gpt"}).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ch.Close)
	return ch
}

// othersSkip checks that replicas 1 and 2 of f skip the primary on replica
// 0's word, without a request: their skip error is elsewhere (and so local),
// and their result says so in words containing says.
func othersSkip(t *testing.T, f *fleet, elsewhere, local error, says string) {
	t.Helper()
	propagate()
	for i := 1; i < 3; i++ {
		res := f.call(t, i)
		if err := skipped(res); !errors.Is(err, elsewhere) || !errors.Is(err, local) {
			t.Fatalf("replica %d: primary skip error = %v; want %v\n%s", i, err, elsewhere, path(res))
		}
		if !strings.Contains(path(res), says) {
			t.Fatalf("replica %d: the result does not say %q:\n%s", i, says, path(res))
		}
	}
}

// openedAndPublished is one replica with Refresh 1s whose primary (one
// attempt, ConsecutiveFailures 1, OpenFor 2s) has just failed: its breaker
// is open and published. The primary is left overloaded.
func openedAndPublished(t *testing.T, m *miniredis.Miniredis) *fleet {
	t.Helper()
	f := newFleet(t, m.Addr(), fleetOptions{n: 1, shared: &chain.SharedConfig{Refresh: time.Second},
		primary: chain.Target{Retry: retry.Policy{MaxAttempts: 1},
			Breaker: breaker.Config{ConsecutiveFailures: 1, OpenFor: 2 * time.Second}}})
	f.primary.mode.Store(overloaded)
	f.call(t, 0) // opens, publishes
	return f
}

// With Refresh, the replica whose probe closes its breaker must not skip
// the target on its own, stale publication until its next read.
func TestSharedProberUsesTheTargetAtOnceWithRefresh(t *testing.T) {
	m := miniredis.RunT(t)
	synctest.Test(t, func(t *testing.T) {
		f := openedAndPublished(t, m)
		time.Sleep(time.Second)
		f.call(t, 0) // reads its own publication
		f.primary.mode.Store(healthy)
		time.Sleep(opening(2*time.Second) - time.Second + time.Millisecond)
		if res := f.call(t, 0); res.Served.Target != "primary" {
			t.Fatalf("the probe: served by %q\n%s", res.Served.Target, path(res))
		}
		if res := f.call(t, 0); res.Served.Target != "primary" {
			t.Fatalf("right after its probe closed the breaker, the replica skipped the primary:\n%s", path(res))
		}
	})
}

// A stream that fails after its first chunk opens its replica's breaker
// when it ends (the attempt is reported then), and the other replicas'
// next streams skip the target.
func TestSharedStreamFailureOpensForOtherReplicas(t *testing.T) {
	m := miniredis.RunT(t)
	synctest.Test(t, func(t *testing.T) {
		primary := &streamer{stub: stub{name: "anthropic"}, chunks: []string{"a", "b"}, failAt: 1}
		fallback := &streamer{stub: stub{name: "openai"}, chunks: []string{"ok"}}
		var replicas []*chain.Chain
		for range 2 {
			client := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = client.Close() })
			c, err := chain.New("streams").Shared(sharedStore(t, client), chain.SharedConfig{Timeout: sharedTestTimeout}).RestartStreams(true).
				Primary(chain.Target{Name: "primary", Provider: primary, Model: "m",
					Breaker: breaker.Config{ConsecutiveFailures: 1}}).
				OrProvider(chain.Target{Name: "fallback", Provider: fallback, Model: "f"}).
				Build()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
			replicas = append(replicas, c)
		}
		s := replicas[0].Stream(context.Background(), ask)
		if _, err := collect(t, s); err != nil {
			t.Fatalf("replica 0's stream: %v", err)
		}
		if primary.opened != 1 {
			t.Fatalf("the primary opened %d streams; want 1", primary.opened)
		}
		propagate()
		s = replicas[1].Stream(context.Background(), ask)
		if _, err := collect(t, s); err != nil {
			t.Fatalf("replica 1's stream: %v", err)
		}
		res, _ := s.Result()
		if err := skipped(res); !errors.Is(err, breaker.ErrOpenElsewhere) || primary.opened != 1 {
			t.Fatalf("replica 1: primary skip = %v after %d streams opened; want ErrOpenElsewhere and none\n%s", err, primary.opened-1, path(res))
		}
	})
}

// A breaker change Redis did not take is told by Flush (a replica about to
// stop), so the others learn of it. Real time, nothing waits (see
// TestSharedRedisDownCallsCarryOnThenShareAgain).
func TestSharedFlushTellsUnpublishedChanges(t *testing.T) {
	m := miniredis.RunT(t)
	f := newFleet(t, m.Addr(), fleetOptions{n: 2, shared: &chain.SharedConfig{ProbeEvery: time.Nanosecond},
		primary: chain.Target{Retry: retry.Policy{MaxAttempts: 1}}})
	m.Close()
	f.primary.mode.Store(overloaded)
	for range breakerFailures {
		f.call(t, 0) // opens replica 0's breaker; Redis does not take it
	}
	if err := f.replicas[0].Flush(context.Background()); err == nil {
		t.Fatal("Flush with Redis down reported nothing")
	}
	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	f.waitReconnected(t)
	if err := f.replicas[0].Flush(context.Background()); err != nil {
		t.Fatalf("Flush with Redis back: %v", err)
	}
	before := f.primary.n.Load()
	res := f.call(t, 1)
	if err := skipped(res); !errors.Is(err, breaker.ErrOpenElsewhere) || f.primary.n.Load() != before {
		t.Fatalf("replica 1 after replica 0's Flush: primary skip = %v; want ErrOpenElsewhere and no request\n%s", err, path(res))
	}
}

// Found in review: one failed write (a Redis blip at the moment the probe succeeds)
// loses the withdrawal of an Open publication. Once Redis answers again the
// stale publication is read by every replica, the prober included (its
// breaker is closed, so OpenElsewhere holds it), and nobody probes: the
// whole fleet skips a healthy target until the publication expires
// (2 x OpenFor after the opening).
func TestSharedLostWithdrawalIsToldAgain(t *testing.T) {
	m := miniredis.RunT(t)
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, m.Addr(), fleetOptions{n: 2, shared: &chain.SharedConfig{ProbeEvery: time.Millisecond},
			primary: chain.Target{Retry: retry.Policy{MaxAttempts: 1},
				Breaker: breaker.Config{ConsecutiveFailures: 1, OpenFor: 10 * time.Second}}})
		f.primary.mode.Store(overloaded)
		f.call(t, 0) // replica 0 opens its breaker and publishes it
		propagate()
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
		f := openedAndPublished(t, m)
		f.primary.mode.Store(healthy)
		time.Sleep(opening(2*time.Second) + time.Millisecond) // OpenFor (and its jitter) and Refresh have passed

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
		Shared(sharedStore(t, client), chain.SharedConfig{ProbeEvery: time.Hour, Logger: slog.New(slog.NewTextHandler(&log, nil))}).
		Primary(chain.Target{Name: "primary", Provider: primary, Model: "m",
			Retry: retry.Policy{MaxAttempts: 2, Base: time.Millisecond, Cap: time.Millisecond}}).
		OrProvider(chain.Target{Name: "fallback", Provider: fallback, Model: "f"}).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
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
	opts := chain.SharedConfig{Budget: budget.RatioConfig{Ratio: 0.01, MinRetries: 2}, Timeout: sharedTestTimeout}
	build := func(name, target string, p *flaky) *chain.Chain {
		return sharedReplica(t, c, name, opts, chain.Target{Name: target, Provider: p, Model: "m",
			Retry:   retry.Policy{MaxAttempts: 2, Base: time.Millisecond, Cap: time.Millisecond},
			Breaker: breaker.Config{Disabled: true}})
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
			return sharedReplica(t, c, "support", chain.SharedConfig{Timeout: sharedTestTimeout},
				chain.Target{Name: "primary", Provider: p, Model: "claude", Breaker: breaker.Config{MaxGate: maxGate}})
		}
		const maxGate = 10 * time.Second
		a, b := build(0), build(maxGate)
		p.mode.Store(rateLimited) // Retry-After 120s
		if _, err := a.Call(context.Background(), ask); err != nil {
			t.Fatal(err)
		}
		propagate()
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

// Found in review: SharedConfig.Budget is validated only through the budgets it
// makes; when every target has its own Budget, an invalid one is accepted
// silently.
func TestSharedBudgetConfigValidatedAtBuild(t *testing.T) {
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	_, err := chain.New("c").Shared(sharedStore(t, c), chain.SharedConfig{Budget: budget.RatioConfig{Ratio: 5}}).
		Primary(chain.Target{Name: "p", Provider: &flaky{name: "anthropic"}, Model: "m", Budget: budget.Unlimited()}).
		Build()
	if err == nil || !strings.Contains(err.Error(), "Ratio") {
		t.Errorf("Build with SharedConfig.Budget.Ratio 5 = %v; want an error naming Ratio", err)
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
			ch, err := chain.New("solo").Shared(sharedStore(t, c), chain.SharedConfig{ProbeEvery: time.Millisecond, Timeout: sharedTestTimeout, Logger: slog.New(slog.DiscardHandler)}).
				Primary(chain.Target{Name: "primary", Provider: p, Model: "claude", Retry: retry.Policy{MaxAttempts: 1},
					Breaker: breaker.Config{ConsecutiveFailures: 1, OpenFor: 10 * time.Second}}).
				Build()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(ch.Close)
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
		build := func(p llm.Provider, br breaker.Config) *chain.Chain {
			c := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = c.Close() })
			return sharedReplica(t, c, "support", chain.SharedConfig{Timeout: sharedTestTimeout},
				chain.Target{Name: "primary", Provider: p, Model: "claude", Breaker: br,
					Retry: retry.Policy{MaxAttempts: 2, Base: time.Millisecond, Cap: time.Millisecond}})
		}
		g := &gated{started: make(chan struct{}), release: make(chan struct{})}
		bad := &flaky{name: "anthropic"}
		bad.mode.Store(overloaded)
		r0 := build(bad, breaker.Config{ConsecutiveFailures: 1})
		r1 := build(g, breaker.Config{})
		var a *chain.Result
		var wg sync.WaitGroup
		wg.Go(func() { a, _ = r1.Call(context.Background(), ask) })
		<-g.started
		_, _ = r0.Call(context.Background(), ask) // r0 opens, publishes
		propagate()
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
// opening is the longest a shared breaker's opening of d lasts: d and its
// random lengthening (see breaker.JitterShare).
func opening(d time.Duration) time.Duration { return d + d/breakerJitterShare }

func keepRedisTime(m *miniredis.Miniredis) { m.SetTime(time.Now()) }

// Found in review (issue 12, item 6): a publication read from Redis was
// re-applied from "now" on every read, capped per read only, so the cap was
// no cap. An open-until 300 days ahead, on a key with no TTL, kept a healthy
// target skipped far past 2 x the reader's OpenFor.
func TestSharedRemoteOpenCappedByReadersOpenFor(t *testing.T) {
	m := miniredis.RunT(t)
	synctest.Test(t, func(t *testing.T) {
		const openFor = 10 * time.Second
		f := newFleet(t, m.Addr(), fleetOptions{n: 1, shared: &chain.SharedConfig{},
			primary: chain.Target{Retry: retry.Policy{MaxAttempts: 1}, Breaker: breaker.Config{OpenFor: openFor}}})
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
			ch, err := chain.New("support").Shared(sharedStore(t, c), chain.SharedConfig{Timeout: sharedTestTimeout}).
				Primary(chain.Target{Name: "primary", Provider: p, Model: "claude",
					Retry: retry.Policy{MaxAttempts: 1}, Breaker: breaker.Config{MaxGate: maxGate}}).
				OrProvider(chain.Target{Name: "fallback", Provider: &flaky{name: "openai"}, Model: "gpt"}).
				Build()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(ch.Close)
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
		propagate()
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
		propagate()
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
		f := newFleet(t, m.Addr(), fleetOptions{n: 2, shared: &chain.SharedConfig{},
			primary: chain.Target{Retry: retry.Policy{MaxAttempts: 1}, Breaker: breaker.Config{ConsecutiveFailures: 1}}})
		const key = "backstop:support:breakers"
		for round := 1; round <= 2; round++ {
			m.Del(key)
			if err := m.Set(key, "not a hash"); err != nil {
				t.Fatal(err)
			}
			f.primary.mode.Store(overloaded)
			f.call(t, 0) // reads (repairs), opens its breaker, publishes
			propagate()
			if res := f.call(t, 1); !errors.Is(skipped(res), breaker.ErrOpenElsewhere) {
				t.Fatalf("round %d: replica 1 did not learn of replica 0's opening past a string on the key:\n%s\nlog:\n%s",
					round, path(res), f.log.String())
			}
			if got := strings.Count(f.log.String(), "held a string"); got != round {
				t.Fatalf("round %d: %d Warn records name the repair; want %d:\n%s", round, got, round, f.log.String())
			}
			// Heal: replica 0 probes after OpenFor and withdraws.
			f.primary.mode.Store(healthy)
			time.Sleep(opening(breakerOpenFor) + time.Millisecond)
			f.call(t, 0)
			propagate()
		}
		if ttl := m.TTL(key); m.Exists(key) && ttl <= 0 {
			t.Fatalf("the repaired key has no TTL")
		}
	})
}

// The tests from here on need a real Redis server: under CI=true they fail
// without one; elsewhere they skip, saying how to start one (see
// internal/redistest).

// TestShared40ReplicasSpendOneBudget: 40 replicas calling a primary that
// fails every request retry it as much as one budget allows together,
// against 40 budgets' worth without Shared.
func TestShared40ReplicasSpendOneBudget(t *testing.T) {
	const replicas, calls = 40, 10
	addr, prefix := redistest.Addr(t), strings.TrimSuffix(redistest.Prefix(t), ":")
	cfg := budget.RatioConfig{Ratio: 0.01} // the floor of 10 per window decides
	primary := chain.Target{
		Retry:   retry.Policy{MaxAttempts: 4, Base: time.Millisecond, Cap: 10 * time.Millisecond},
		Breaker: breaker.Config{Disabled: true}, // the budget alone limits retries here
	}
	run := func(t *testing.T, shared bool) (retries int64) {
		synctest.Test(t, func(t *testing.T) {
			o := fleetOptions{n: replicas, primary: primary}
			if shared {
				o.shared = &chain.SharedConfig{Prefix: prefix, Budget: cfg}
			}
			var f *fleet
			if shared {
				f = newFleet(t, addr, o)
			} else {
				f = newFleetWithBudgets(t, cfg, primary)
			}
			f.primary.mode.Store(overloaded)
			var wg sync.WaitGroup
			for i := range f.replicas {
				wg.Go(func() {
					for range calls {
						f.call(t, i)
					}
				})
			}
			wg.Wait()
			retries = f.primary.n.Load() - replicas*calls
			if logs := f.log.String(); logs != "" {
				t.Logf("the replicas logged:\n%s", logs)
			}
		})
		return retries
	}
	local := run(t, false)
	shared := run(t, true)
	t.Logf("retries sent to the failing primary by %d replicas x %d calls: local budgets %d, one shared budget %d (%.0fx)",
		replicas, calls, local, shared, float64(local)/float64(max(shared, 1)))
	if shared > int64(10 /* budget's default floor */) {
		t.Fatalf("with a shared budget the primary got %d retries; one budget allows %d", shared, 10 /* budget's default floor */)
	}
	if shared < int64(10 /* budget's default floor */) {
		t.Fatalf("with a shared budget the primary got %d retries; one budget grants %d", shared, 10 /* budget's default floor */)
	}
	if want := int64(replicas * 10 /* budget's default floor */); local != want {
		t.Fatalf("with local budgets the primary got %d retries; want %d (40 floors)", local, want)
	}
}

// newFleetWithBudgets is newFleet without Shared, each replica with a
// ratio budget of cfg of its own.
func newFleetWithBudgets(t *testing.T, cfg budget.RatioConfig, primary chain.Target) *fleet {
	t.Helper()
	f := &fleet{primary: &flaky{name: "anthropic"}, fallback: &flaky{name: "openai"}, log: &redistest.Log{}}
	for range 40 {
		b, err := budget.NewRatio(cfg)
		if err != nil {
			t.Fatal(err)
		}
		p := primary
		p.Name, p.Provider, p.Model, p.Budget = "primary", f.primary, "claude", b
		c, err := chain.New("support").Primary(p).
			OrProvider(chain.Target{Name: "fallback", Provider: f.fallback, Model: "gpt"}).Build()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		f.replicas = append(f.replicas, c)
	}
	return f
}

// TestSharedRedisStoppedMidRun stops a real redis-server while replicas
// are serving an incident and starts it again: no call fails or is lost
// meanwhile, and sharing resumes once Redis is back. It runs in real time
// (the server is a process): nothing waits, since each target gets one
// attempt and Redis is tried again on every call (ProbeEvery 1ns).
func TestSharedRedisStoppedMidRun(t *testing.T) {
	const replicas = 4
	srv := redistest.StartServer(t)
	f := newFleet(t, srv.Addr(), fleetOptions{n: replicas,
		shared: &chain.SharedConfig{ProbeEvery: time.Nanosecond},
		primary: chain.Target{Retry: retry.Policy{MaxAttempts: 1},
			// Breakers that do not open here: each replica must keep
			// asking the primary, so that the gate below is what skips it.
			Breaker: breaker.Config{ConsecutiveFailures: 1 << 20, MinRequests: 1 << 20}}})

	serveAll := func(phase string, perReplica int, want string) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, replicas*perReplica)
		for i := range f.replicas {
			wg.Go(func() {
				for range perReplica {
					res, err := f.replicas[i].Call(context.Background(), ask)
					switch {
					case err != nil:
						errs <- err
					case res.Served.Target != want:
						errs <- errors.New(phase + ": served by " + res.Served.Target + ", want " + want + "\n" + path(res))
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("%s: %v", phase, err)
		}
		if t.Failed() {
			t.FailNow()
		}
	}

	serveAll("Redis up, primary healthy", 5, "primary")
	srv.Stop()
	f.primary.mode.Store(overloaded)
	serveAll("Redis stopped, primary failing", 25, "fallback")
	if got := f.primary.n.Load(); got != replicas*5+replicas*25 {
		t.Fatalf("the primary got %d requests; want every call's first attempt (%d)", got, replicas*30)
	}
	f.settle() // the pollers' reads find Redis stopped
	if logs := f.log.String(); !strings.Contains(logs, "unavailable, using local state") {
		t.Fatalf("no log line says Redis is unavailable:\n%s", logs)
	}

	srv.Start()
	f.waitReconnected(t)
	// Replica 0 gets a 429 asking for 120s: the others, sharing again,
	// skip the primary without a request.
	f.primary.mode.Store(rateLimited)
	if res := f.call(t, 0); res.Served.Target != "fallback" {
		t.Fatalf("replica 0: served by %q\n%s", res.Served.Target, path(res))
	}
	f.settle() // replica 0 writes the gate, the others read it
	before := f.primary.n.Load()
	for i := 1; i < replicas; i++ {
		res := f.call(t, i)
		if err := skipped(res); !errors.Is(err, breaker.ErrGateClosed) {
			t.Fatalf("replica %d after Redis came back: primary skip = %v; want ErrGateClosed\n%s", i, err, path(res))
		}
	}
	if got := f.primary.n.Load() - before; got != 0 {
		t.Fatalf("the primary got %d requests after its Retry-After was shared; want none", got)
	}
	if !strings.Contains(f.log.String(), "available again, using shared state") {
		t.Fatalf("no log line says Redis is back:\n%s", f.log.String())
	}

	// The budgets count in Redis again.
	for _, c := range f.replicas {
		if err := c.Flush(context.Background()); err != nil {
			t.Fatalf("Flush: %v", err)
		}
	}
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer client.Close()
	b, err := budget.NewShared(sharedStore(t, client).Budget("backstop:support:primary:budget"), budget.SharedConfig{})
	if err != nil {
		t.Fatal(err)
	}
	firsts, _, err := b.Counts(context.Background())
	if err != nil || firsts < 1 {
		t.Fatalf("the shared budget counts %d first attempts since Redis came back (err %v); want at least 1", firsts, err)
	}
}

// TestSharedHedgeBudgetIsOneForAllReplicas: four replicas hedge every call
// of a slow primary. Each alone would hedge up to its own floor (10 per
// window); sharing, they hedge up to one floor in all.
func TestSharedHedgeBudgetIsOneForAllReplicas(t *testing.T) {
	sharedBackends(t, func(t *testing.T, addr, prefix string) {
		synctest.Test(t, func(t *testing.T) {
			for _, shared := range []bool{false, true} {
				slow := &timed{name: "eu-1", delay: 3 * time.Second}
				fast := &timed{name: "eu-2", delay: 100 * time.Millisecond}
				var replicas []*chain.Chain
				for range 4 {
					b := chain.New("hedged-" + strconv.FormatBool(shared)).Hedge(hedge.Config{Delay: time.Second})
					if shared {
						c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
						t.Cleanup(func() { _ = c.Close() })
						b.Shared(sharedStore(t, c), chain.SharedConfig{Prefix: prefix, Timeout: sharedTestTimeout})
					}
					c, err := b.Primary(chain.Target{Name: "eu-1", Provider: slow, Model: "m", Breaker: breaker.Config{Disabled: true}}).
						OrDeployment(chain.Target{Name: "eu-2", Provider: fast, Model: "m"}).Build()
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(c.Close)
					replicas = append(replicas, c)
				}
				for range 5 {
					for _, r := range replicas {
						if _, err := r.Call(t.Context(), question); err != nil {
							t.Fatal(err)
						}
					}
				}
				want := 20 // every call hedged: each replica's 5 are under its floor of 10
				if shared {
					want = 10 // one floor for the four
				}
				if fast.count() != want {
					t.Errorf("shared %v: %d hedges sent of 20 calls; want %d", shared, fast.count(), want)
				}
			}
		})
	})
}

// Found in review: Flush wrote the shared retry budgets' batched first
// attempts but not the shared hedge budgets', which a stopping replica
// then lost.
func TestSharedFlushWritesTheHedgeBudget(t *testing.T) {
	m := miniredis.RunT(t)
	client := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
	defer client.Close()
	p := &timed{name: "eu-1"}
	c, err := chain.New("hedged").Hedge(hedge.Config{Delay: time.Second}).
		Shared(sharedStore(t, client), chain.SharedConfig{Timeout: sharedTestTimeout}).
		Primary(chain.Target{Name: "eu-1", Provider: p, Model: "m"}).
		OrDeployment(chain.Target{Name: "eu-2", Provider: &timed{name: "eu-2"}, Model: "m"}).Build()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	for range 3 {
		if _, err := c.Call(t.Context(), question); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Flush(context.Background()); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	b, err := budget.NewShared(sharedStore(t, client).Budget("backstop:hedged:tier%3Adeployment:hedge"), budget.SharedConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if firsts, _, err := b.Counts(context.Background()); err != nil || firsts != 3 {
		t.Fatalf("the shared hedge budget counts %d first attempts (err %v); want the 3 calls", firsts, err)
	}
}

// TestSharedCloseAsThePollerGoesIdle: a Close on the very tick at which
// the poller finds itself idle must not end the poller twice. It closed
// the channel of reads twice and panicked, or (after a restart) stopped
// the next poller.
func TestSharedCloseAsThePollerGoesIdle(t *testing.T) {
	m := miniredis.RunT(t)
	for range 40 {
		synctest.Test(t, func(t *testing.T) {
			f := newFleet(t, m.Addr(), fleetOptions{n: 1, shared: &chain.SharedConfig{}})
			f.call(t, 0)
			time.Sleep(3 * defaultRefresh) // the tick at which it goes idle
			f.replicas[0].Close()
			f.call(t, 0) // a poller again
			f.replicas[0].Close()
		})
	}
}

// defaultRefresh is SharedConfig.Refresh's default: how often the poller
// reads the other replicas' breakers and gates.
const defaultRefresh = 100 * time.Millisecond
