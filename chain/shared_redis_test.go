package chain_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/budget"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/internal/redistest"
	"github.com/backstop-llm/backstop/retry"
	"github.com/redis/go-redis/v9"
)

// The tests in this file need a real Redis server: under CI=true they fail
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
		Breaker: breaker.Settings{Disabled: true}, // the budget alone limits retries here
	}
	run := func(t *testing.T, shared bool) (retries int64) {
		synctest.Test(t, func(t *testing.T) {
			o := fleetOptions{n: replicas, primary: primary}
			if shared {
				o.shared = &chain.SharedOptions{Prefix: prefix, Budget: cfg}
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
	if shared > int64(budget.DefaultMinRetries) {
		t.Fatalf("with a shared budget the primary got %d retries; one budget allows %d", shared, budget.DefaultMinRetries)
	}
	if shared < int64(budget.DefaultMinRetries) {
		t.Fatalf("with a shared budget the primary got %d retries; one budget grants %d", shared, budget.DefaultMinRetries)
	}
	if want := int64(replicas * budget.DefaultMinRetries); local != want {
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
		shared: &chain.SharedOptions{ProbeEvery: time.Nanosecond},
		primary: chain.Target{Retry: retry.Policy{MaxAttempts: 1},
			// Breakers that do not open here: each replica must keep
			// asking the primary, so that the gate below is what skips it.
			Breaker: breaker.Settings{ConsecutiveFailures: 1 << 20, MinRequests: 1 << 20}}})

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
	b, err := budget.NewShared(sharedStore(t, client).Budget("backstop:support:primary:budget"), budget.SharedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	firsts, _, err := b.Counts(context.Background())
	if err != nil || firsts < 1 {
		t.Fatalf("the shared budget counts %d first attempts since Redis came back (err %v); want at least 1", firsts, err)
	}
}
