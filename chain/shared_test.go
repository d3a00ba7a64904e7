package chain_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/internal/redistest"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/redisstore"
	"github.com/backstop-llm/backstop/retry"
	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
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
	shared  *chain.SharedOptions // nil: not shared
	primary chain.Target         // Name, Provider and Model are set by newFleet
	tel     *telemetry
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
			b.TracerProvider(o.tel.tp).MeterProvider(o.tel.mp)
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

// sharedTestTimeout is the SharedOptions.Timeout of the tests that are not
// about timeouts. Inside a synctest bubble a socket's deadline is still
// real time (SetReadDeadline converts it with time.Until), and a machine
// running the whole suite can miss the default 50ms: a replica would then
// decide alone and the counts would change.
const sharedTestTimeout = 10 * time.Second

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
			f := newFleet(t, addr, fleetOptions{n: 3, shared: &chain.SharedOptions{Prefix: prefix},
				primary: chain.Target{Retry: retry.Policy{MaxAttempts: 1}}})
			f.primary.mode.Store(overloaded)
			for range breaker.DefaultConsecutiveFailures {
				if res := f.call(t, 0); res.Served.Target != "fallback" {
					t.Fatalf("served by %q; want the fallback", res.Served.Target)
				}
			}
			if got := f.primary.n.Load(); got != breaker.DefaultConsecutiveFailures {
				t.Fatalf("the primary got %d requests; want %d", got, breaker.DefaultConsecutiveFailures)
			}
			// Replica 0's breaker is open: the others skip the primary from
			// their next call on, without a request.
			for i := 1; i < 3; i++ {
				res := f.call(t, i)
				if err := skipped(res); !errors.Is(err, breaker.ErrOpenElsewhere) || !errors.Is(err, breaker.ErrOpen) {
					t.Fatalf("replica %d: primary skip error = %v; want ErrOpenElsewhere\n%s", i, err, path(res))
				}
				if !strings.Contains(path(res), "open on another replica") {
					t.Fatalf("replica %d: the result does not say why:\n%s", i, path(res))
				}
			}
			if got := f.primary.n.Load(); got != breaker.DefaultConsecutiveFailures {
				t.Fatalf("the primary got %d requests after replica 0 opened its breaker; want none", got-breaker.DefaultConsecutiveFailures)
			}

			// The primary heals. Replica 0 probes after OpenFor; until its
			// probe succeeds the others keep skipping the primary.
			f.primary.mode.Store(healthy)
			time.Sleep(breaker.DefaultOpenFor / 2)
			if res := f.call(t, 1); skipped(res) == nil {
				t.Fatalf("replica 1 used the primary before the probe:\n%s", path(res))
			}
			time.Sleep(breaker.DefaultOpenFor/2 + time.Millisecond)
			if res := f.call(t, 0); res.Served.Target != "primary" {
				t.Fatalf("the probe: served by %q; want the primary\n%s", res.Served.Target, path(res))
			}
			for i := 1; i < 3; i++ {
				if res := f.call(t, i); res.Served.Target != "primary" {
					t.Fatalf("replica %d after the probe: served by %q; want the primary\n%s", i, res.Served.Target, path(res))
				}
			}
			if got := f.primary.n.Load(); got != breaker.DefaultConsecutiveFailures+3 {
				t.Fatalf("the primary got %d requests; want %d failures, one probe and two calls", got, breaker.DefaultConsecutiveFailures)
			}
		})
	})
}

func TestSharedGateClosesOtherReplicas(t *testing.T) {
	sharedBackends(t, func(t *testing.T, addr, prefix string) {
		synctest.Test(t, func(t *testing.T) {
			f := newFleet(t, addr, fleetOptions{n: 3, shared: &chain.SharedOptions{Prefix: prefix}})
			f.primary.mode.Store(rateLimited)
			if res := f.call(t, 0); res.Served.Target != "fallback" || f.primary.n.Load() != 1 {
				t.Fatalf("served by %q after %d requests; want the fallback after 1\n%s", res.Served.Target, f.primary.n.Load(), path(res))
			}
			for i := 1; i < 3; i++ {
				res := f.call(t, i)
				if err := skipped(res); !errors.Is(err, breaker.ErrGateClosedElsewhere) || !errors.Is(err, breaker.ErrGateClosed) {
					t.Fatalf("replica %d: primary skip error = %v; want ErrGateClosedElsewhere\n%s", i, err, path(res))
				}
				if !strings.Contains(path(res), "closed by another replica's Retry-After") {
					t.Fatalf("replica %d: the result does not say where the Retry-After came from:\n%s", i, path(res))
				}
			}
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
		tel := newTelemetry()
		f := newFleet(t, m.Addr(), fleetOptions{n: 3, tel: tel, shared: &chain.SharedOptions{ProbeEvery: time.Nanosecond},
			primary: chain.Target{Retry: retry.Policy{MaxAttempts: 1}}})
		f.call(t, 0)
		m.Close()

		// Redis is down: every call is served, on local state.
		f.primary.mode.Store(overloaded)
		for range breaker.DefaultConsecutiveFailures {
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
		if n := tel.counter(t, "backstop.shared.unavailable"); n < 2 {
			t.Fatalf("backstop.shared.unavailable = %d; want at least one per replica that saw Redis fail", n)
		}
		var events int
		for _, s := range tel.spans.GetSpans() {
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
		for range breaker.DefaultConsecutiveFailures {
			f.call(t, 1)
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
func sharedStore(t testing.TB, c redis.UniversalClient) *redisstore.Shared {
	t.Helper()
	s, err := redisstore.NewShared(c)
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
	_, err := chain.New("c").Shared(sharedStore(t, good), chain.SharedOptions{Refresh: -time.Second, Timeout: -1}).
		Primary(chain.Target{Name: "p", Provider: p, Model: "m"}).Build()
	if !errors.Is(err, chain.ErrInvalidConfig) {
		t.Fatalf("err = %v; want ErrInvalidConfig", err)
	}
	for _, want := range []string{"Refresh is -1s", "Timeout is -1ns"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q:\n%v", want, err)
		}
	}
	// A client that ignores its contexts' deadlines is refused by
	// redisstore.NewShared; Build refuses the nil store that leaves, typed
	// or not.
	noTimeouts := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer noTimeouts.Close()
	store, err := redisstore.NewShared(noTimeouts)
	if !errors.Is(err, redisstore.ErrInvalidConfig) || !strings.Contains(err.Error(), "ContextTimeoutEnabled is false") {
		t.Fatalf("redisstore.NewShared of a client without context timeouts: %v", err)
	}
	for _, s := range []chain.SharedStore{nil, store} {
		_, err = chain.New("c").Shared(s, chain.SharedOptions{}).
			Primary(chain.Target{Name: "p", Provider: p, Model: "m"}).Build()
		if !errors.Is(err, chain.ErrInvalidConfig) || !strings.Contains(err.Error(), "redisstore.NewShared(client)") {
			t.Fatalf("a nil store (%T): err = %v; want ErrInvalidConfig naming redisstore.NewShared", s, err)
		}
	}
}

func TestSharedRefreshReadsAtMostOncePerInterval(t *testing.T) {
	m := miniredis.RunT(t)
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, m.Addr(), fleetOptions{n: 2, shared: &chain.SharedOptions{Refresh: time.Second},
			primary: chain.Target{Retry: retry.Policy{MaxAttempts: 1}}})
		f.call(t, 1) // replica 1 reads the (empty) shared state now
		f.primary.mode.Store(overloaded)
		for range breaker.DefaultConsecutiveFailures {
			f.call(t, 0)
		}
		before := f.primary.n.Load()
		if res := f.call(t, 1); skipped(res) != nil || f.primary.n.Load() != before+1 {
			t.Fatalf("replica 1 read the shared state again within Refresh:\n%s", path(res))
		}
		time.Sleep(time.Second)
		if res := f.call(t, 1); !errors.Is(skipped(res), breaker.ErrOpenElsewhere) {
			t.Fatalf("replica 1 did not read the shared state after Refresh:\n%s", path(res))
		}
	})
}

// telemetry records spans and metrics in memory, synchronously: no
// goroutine outlives the test.
type telemetry struct {
	spans  *tracetest.InMemoryExporter
	tp     *sdktrace.TracerProvider
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
}

func newTelemetry() *telemetry {
	t := &telemetry{spans: tracetest.NewInMemoryExporter(), reader: sdkmetric.NewManualReader()}
	t.tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(t.spans))
	t.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(t.reader))
	return t
}

// counter returns the total of the int64 counter named name.
func (tel *telemetry) counter(t *testing.T, name string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tel.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if s, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == name {
				for _, p := range s.DataPoints {
					n += p.Value
				}
			}
		}
	}
	return n
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
	f := newFleet(t, addr, fleetOptions{n: 1, shared: &chain.SharedOptions{ProbeEvery: time.Hour, Timeout: 50 * time.Millisecond}})
	for range 3 {
		if res := f.call(t, 0); res.Served.Target != "primary" {
			t.Fatalf("served by %q\n%s", res.Served.Target, path(res))
		}
	}
	if logs := f.log.String(); !strings.Contains(logs, "no answer from Redis within the Timeout (50ms)") {
		t.Fatalf("the log does not say Redis did not answer in time:\n%s", logs)
	}
}

// With Refresh, the replica whose probe closes its breaker must not skip
// the target on its own, stale publication until its next read.
func TestSharedProberUsesTheTargetAtOnceWithRefresh(t *testing.T) {
	m := miniredis.RunT(t)
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, m.Addr(), fleetOptions{n: 1, shared: &chain.SharedOptions{Refresh: time.Second},
			primary: chain.Target{Retry: retry.Policy{MaxAttempts: 1},
				Breaker: breaker.Settings{ConsecutiveFailures: 1, OpenFor: 2 * time.Second}}})
		f.primary.mode.Store(overloaded)
		f.call(t, 0) // opens, publishes
		time.Sleep(time.Second)
		f.call(t, 0) // reads its own publication
		f.primary.mode.Store(healthy)
		time.Sleep(time.Second + time.Millisecond)
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
			c, err := chain.New("streams").Shared(sharedStore(t, client), chain.SharedOptions{Timeout: sharedTestTimeout}).RestartStreams(true).
				Primary(chain.Target{Name: "primary", Provider: primary, Model: "m",
					Breaker: breaker.Settings{ConsecutiveFailures: 1}}).
				OrProvider(chain.Target{Name: "fallback", Provider: fallback, Model: "f"}).
				Build()
			if err != nil {
				t.Fatal(err)
			}
			replicas = append(replicas, c)
		}
		s := replicas[0].Stream(context.Background(), ask)
		if _, err := collect(t, s); err != nil {
			t.Fatalf("replica 0's stream: %v", err)
		}
		if primary.opened != 1 {
			t.Fatalf("the primary opened %d streams; want 1", primary.opened)
		}
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
	f := newFleet(t, m.Addr(), fleetOptions{n: 2, shared: &chain.SharedOptions{ProbeEvery: time.Nanosecond},
		primary: chain.Target{Retry: retry.Policy{MaxAttempts: 1}}})
	m.Close()
	f.primary.mode.Store(overloaded)
	for range breaker.DefaultConsecutiveFailures {
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
