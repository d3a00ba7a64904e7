package chain_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/retry"
	"github.com/backstop-llm/backstop/spread"
)

// deployments builds a chain over one model on the providers given, in
// order, spreading its calls with s.
func deployments(t *testing.T, s spread.Strategy, weights []float64, ps ...llm.Provider) *chain.Chain {
	t.Helper()
	b := chain.New("spread").Spread(s)
	for i, p := range ps {
		tg := chain.Target{Name: p.Name(), Provider: p, Model: "sonnet-5", Retry: retry.Policy{MaxAttempts: 2}}
		if weights != nil {
			tg.Weight = weights[i]
		}
		if i == 0 {
			b.Primary(tg)
		} else {
			b.OrDeployment(tg)
		}
	}
	c, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// counter is a provider that answers at once and counts its requests.
type counter struct {
	name string
	mu   sync.Mutex
	n    int
}

func (p *counter) Name() string { return p.name }
func (p *counter) Complete(_ context.Context, req llm.Request) (*llm.Response, error) {
	p.mu.Lock()
	p.n++
	p.mu.Unlock()
	return &llm.Response{Text: "ok", Model: req.Model}, nil
}

func TestSpreadWeightedSharesTheCallsByWeight(t *testing.T) {
	a, b, c := &counter{name: "eu-1"}, &counter{name: "eu-2"}, &counter{name: "eu-3"}
	ch := deployments(t, spread.Weighted, []float64{1, 2, 1}, a, b, c)
	const calls = 4000
	for range calls {
		res, err := ch.Call(t.Context(), question)
		if err != nil {
			t.Fatal(err)
		}
		ch := res.Attempts[0].Choice
		if ch == nil || ch.Strategy != spread.Weighted || ch.Rank != 1 || ch.Of != 3 || ch.AgainstFigure != 4 {
			t.Fatalf("choice %+v", ch)
		}
	}
	for _, x := range []struct {
		p    *counter
		want float64
	}{{a, 0.25}, {b, 0.5}, {c, 0.25}} {
		// 4000 draws: the standard deviation of a share of 0.5 is 0.008.
		if got := float64(x.p.n) / calls; got < x.want-0.04 || got > x.want+0.04 {
			t.Errorf("%s got %.3f of the calls; want %.2f", x.p.name, got, x.want)
		}
	}
}

// held is a provider whose answers wait until released, so that a test
// can hold requests in flight.
type held struct {
	name    string
	release chan struct{}
	mu      sync.Mutex
	n       int
}

func (p *held) Name() string { return p.name }
func (p *held) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	p.mu.Lock()
	p.n++
	p.mu.Unlock()
	select {
	case <-p.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &llm.Response{Text: "ok", Model: req.Model}, nil
}

func TestSpreadLeastLoadedSendsToTheTargetWithFewerInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		busy := &held{name: "eu-1", release: make(chan struct{})}
		idle := &counter{name: "eu-2"}
		c := deployments(t, spread.LeastLoaded, nil, busy, idle)
		// Hold a call on eu-1 (calls drawn to eu-2 meanwhile end at once):
		// the other target then has none in flight.
		var wg sync.WaitGroup
		for busy.n < 1 {
			wg.Go(func() { _, _ = c.Call(t.Context(), question) })
			synctest.Wait()
		}
		before := idle.n
		for range 20 {
			res, err := c.Call(t.Context(), question)
			if err != nil || res.Served.Target != "eu-2" {
				t.Fatalf("served by %q (%v); want eu-2, the target with nothing in flight", res.Served.Target, err)
			}
			ch := res.Attempts[0].Choice
			if ch.Strategy != spread.LeastLoaded || ch.Figure != 0 || ch.Against != "eu-1" || ch.AgainstFigure < 1 {
				t.Fatalf("choice %+v (%s); want 0 in flight against eu-1's", ch, ch)
			}
		}
		if idle.n-before != 20 {
			t.Fatalf("eu-2 got %d requests; want 20", idle.n-before)
		}
		close(busy.release)
		wg.Wait()
	})
}

// timed is a provider that answers after its delay.
type timed struct {
	name  string
	delay time.Duration
	n     int
}

func (p *timed) Name() string { return p.name }
func (p *timed) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	p.n++
	select {
	case <-time.After(p.delay):
		return &llm.Response{Text: "ok", Model: req.Model, RequestID: "req_" + p.name}, nil
	case <-ctx.Done():
		return nil, &llm.Error{Provider: p.name, Kind: llm.KindCanceled, Err: ctx.Err()}
	}
}

func TestSpreadLatencyAvoidsTheSlowTarget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow, fast := &timed{name: "slow", delay: 2 * time.Second}, &timed{name: "fast", delay: 200 * time.Millisecond}
		c := deployments(t, spread.Latency, nil, slow, fast)
		for range 100 {
			if _, err := c.Call(t.Context(), question); err != nil {
				t.Fatal(err)
			}
		}
		// Once each has been sampled, the slow one is tried again only
		// when its latency has decayed below the fast one's.
		if slow.n > 10 {
			t.Fatalf("slow target got %d of 100 calls, fast %d", slow.n, fast.n)
		}
	})
}

func TestSpreadRetriesOnAnotherTargetOfTheTierFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		down := &stub{name: "eu-1", fn: fail(llm.KindOverloaded, 529)}
		up := &counter{name: "eu-2"}
		c := deployments(t, spread.Weighted, []float64{1e9, 1}, down, up) // eu-1 is drawn first
		start := time.Now()
		res, err := c.Call(t.Context(), question)
		if err != nil || res.Served.Target != "eu-2" {
			t.Fatalf("%v %+v", err, res.Served)
		}
		if waited := time.Since(start); waited != 0 {
			t.Errorf("the call waited %v; the other target needs no backoff", waited)
		}
		first := res.Attempts[0]
		if first.Target != "eu-1" || first.Decision != chain.DecisionNext || !strings.Contains(first.Reason, "another deployment target first") {
			t.Fatalf("first attempt %v", first)
		}
		if second := res.Attempts[1]; second.Choice == nil || second.Choice.Rank != 2 {
			t.Fatalf("second attempt %v", second)
		}
	})
}

func TestSpreadRetriesInPlaceOnceEveryTargetWasTried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := 0
		flaky := &stub{name: "eu-2", fn: func(_ context.Context, req llm.Request) (*llm.Response, error) {
			if n++; n == 1 {
				return nil, &llm.Error{Provider: "eu-2", Status: 529, Kind: llm.KindOverloaded}
			}
			return &llm.Response{Text: "ok"}, nil
		}}
		c := deployments(t, spread.Weighted, []float64{1e9, 1}, &stub{name: "eu-1", fn: fail(llm.KindOverloaded, 529)}, flaky)
		res, err := c.Call(t.Context(), question)
		if err != nil || res.Served.Target != "eu-2" || len(res.Attempts) != 3 || res.Attempts[1].Decision != chain.DecisionRetry {
			t.Fatalf("%v\n%s", err, lines(res))
		}
	})
}

func TestSpreadBuildProblems(t *testing.T) {
	p := &stub{name: "x"}
	for _, tc := range []struct {
		name string
		b    *chain.Builder
		says string
	}{
		{"degrade tier", chain.New("c").Spread(spread.LeastLoaded, chain.TierDegrade).Primary(chain.Target{Name: "p", Provider: p, Model: "m"}), "name a model tier"},
		{"unknown strategy", chain.New("c").Spread(spread.Strategy(42)).Primary(chain.Target{Name: "p", Provider: p, Model: "m"}), "use one of spread.Ordered"},
		{"negative weight", chain.New("c").Primary(chain.Target{Name: "p", Provider: p, Model: "m", Weight: -1}), "Weight is -1"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantBuildErr(t, tc.b, tc.says) })
	}
}
