package chain_test

import (
	"runtime"
	"testing"
	"testing/synctest"
	"time"
	"weak"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/retry"
)

var probe = llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "ping"}}, Params: llm.Params{MaxTokens: 1}}

func TestActiveProbeFindsRecoveryWithoutAUsersCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary := &timed{name: "eu-1", downUntil: time.Now().Add(7 * time.Second)}
		c, err := chain.New("c").
			Primary(chain.Target{Name: "eu-1", Provider: primary, Model: "sonnet-5", Probe: probe,
				Retry: retry.Policy{MaxAttempts: 1}, Breaker: breaker.Config{ConsecutiveFailures: 1}}).
			OrDeployment(chain.Target{Name: "eu-2", Provider: &timed{name: "eu-2"}, Model: "sonnet-5"}).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// The first call opens eu-1's breaker; calls every second after it
		// go to eu-2 while eu-1 is open, none of them its probe.
		served := map[string]int{}
		for range 10 {
			res, err := c.Call(t.Context(), question)
			if err != nil {
				t.Fatal(err)
			}
			served[res.Served.Target]++
			time.Sleep(time.Second)
		}
		// Opened at 0s: the probe at 5s finds eu-1 down and opens it for
		// another 5s (the default interval is fixed); the user calls at
		// 1..9s never probe.
		sent := primary.sent()
		if len(sent) != 2 || sent[1].Messages[0].Content != "ping" || sent[1].Model != "sonnet-5" || sent[1].Params.MaxTokens != 1 {
			t.Fatalf("eu-1 was sent %d requests: %+v", len(sent), sent)
		}
		time.Sleep(time.Second) // 11s: the probe at 10s found eu-1 up
		res, err := c.Call(t.Context(), question)
		if err != nil || res.Served.Target != "eu-1" || len(primary.sent()) != 4 {
			t.Fatalf("after recovery: %v %+v, %d requests", err, res.Served, len(primary.sent()))
		}
		if served["eu-1"] != 0 || served["eu-2"] != 10 {
			t.Fatalf("served %v", served)
		}
	})
}

func TestCloseStopsTheProbes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary := &timed{name: "eu-1", downUntil: time.Now().Add(time.Hour)}
		c, err := chain.New("c").
			Primary(chain.Target{Name: "eu-1", Provider: primary, Model: "m", Probe: probe,
				Retry: retry.Policy{MaxAttempts: 1}, Breaker: breaker.Config{ConsecutiveFailures: 1}}).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Call(t.Context(), question)
		time.Sleep(6 * time.Second) // one probe, at 5s
		c.Close()
		time.Sleep(time.Hour)
		if n := len(primary.sent()); n != 2 {
			t.Fatalf("%d requests; want the call and one probe before Close", n)
		}
	})
}

// witnessed is a provider the test does not hold: once it is collected,
// nothing holds the chain's target, which a probe's pending timer holds
// until its probing has stopped.
type witnessed struct{ *timed }

// droppedProbing builds a chain whose target p is probed while its
// breaker is open, opens the breaker with a call, and drops the chain:
// it returns only weak pointers to it and to its target's provider.
func droppedProbing(t *testing.T, p *timed) (weak.Pointer[chain.Chain], weak.Pointer[witnessed]) {
	t.Helper()
	w := &witnessed{p}
	c, err := chain.New("c").
		Primary(chain.Target{Name: p.name, Provider: w, Model: "m", Probe: probe,
			Retry: retry.Policy{MaxAttempts: 1}, Breaker: breaker.Config{ConsecutiveFailures: 1}}).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(t.Context(), question); err == nil {
		t.Fatal("the down target answered")
	}
	return weak.Make(c), weak.Make(w)
}

// TestDroppedChainStopsProbingAndIsCollected: chains dropped without
// Close, their targets down and their breakers open, are collected, and
// their active probes stop: none is sent in the hour after.
func TestDroppedChainStopsProbingAndIsCollected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 20
		down := make([]*timed, n)
		chains := make([]weak.Pointer[chain.Chain], n)
		providers := make([]weak.Pointer[witnessed], n)
		for i := range n {
			down[i] = &timed{name: "eu-1", downUntil: time.Now().Add(24 * time.Hour)}
			chains[i], providers[i] = droppedProbing(t, down[i])
		}
		time.Sleep(6 * time.Second) // each chain probes once, at 5s, while nobody has collected it
		sent := 0
		for _, p := range down {
			sent += p.count()
		}
		if sent != 2*n {
			t.Fatalf("%d requests before the chains were collected; want each chain's call and its probe (%d)", sent, 2*n)
		}

		runtime.GC()
		for i, c := range chains {
			if c.Value() != nil {
				t.Fatalf("chain %d was not collected: something its probe runs still holds it", i)
			}
		}
		// The cleanups that stop the probes run outside the bubble: wait
		// for them without letting the bubble's clock move (it moves only
		// while every goroutine of the bubble is blocked, and this one
		// spins). A stopped probe lets go of its target, and so of the
		// provider.
		for tries := 0; !allCollected(providers); tries++ {
			if tries == 1000 {
				t.Fatal("the collected chains' probes were not stopped: their pending timers still hold their targets")
			}
			runtime.GC()
			runtime.Gosched()
		}
		time.Sleep(time.Hour)
		for i, p := range down {
			if got := p.count(); got != 2 {
				t.Errorf("chain %d's target got %d requests; want no probe after the chain was collected", i, got-2)
			}
		}
	})
}

// allCollected reports whether every one of ps has been collected.
func allCollected[T any](ps []weak.Pointer[T]) bool {
	for _, p := range ps {
		if p.Value() != nil {
			return false
		}
	}
	return true
}

func TestProbeWithoutMessagesIsABuildError(t *testing.T) {
	wantBuildErr(t, chain.New("c").Primary(chain.Target{Name: "p", Provider: &stub{name: "x"}, Model: "m",
		Probe: llm.Request{System: "ping"}}), "Probe has no Messages")
}
