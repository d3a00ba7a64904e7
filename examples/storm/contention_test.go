package storm

import (
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/budget"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/provider/fake"
	"github.com/backstop-llm/backstop/retry"
)

// Contention, after the AWS architecture blog's "Exponential Backoff And
// Jitter": contentionClients clients want one piece of work each from a
// provider that admits one request at a time; a request that finds it busy
// gets a 409 at once, and each admitted request takes contentionWork.
const (
	contentionClients = 100
	contentionWork    = 100 * time.Millisecond
)

// contentionPolicy is every client's policy: enough attempts that all
// finish, with the budget and the breaker off (below).
func contentionPolicy(j retry.Jitter) retry.Policy {
	return retry.Policy{Base: 100 * time.Millisecond, Cap: 10 * time.Second, MaxAttempts: 1000, Jitter: j}
}

// contentionRun is what one contention did.
type contentionRun struct {
	calls, failed int
	finish        time.Duration // when the last client was done
}

func contend(t *testing.T, j retry.Jitter) contentionRun {
	var run contentionRun
	synctest.Test(t, func(t *testing.T) {
		f := fake.New()
		var mu sync.Mutex
		busy := false
		release := func() {
			mu.Lock()
			busy = false
			mu.Unlock()
		}
		f.Handle(primaryModel, func(fake.Call) fake.Outcome {
			mu.Lock()
			defer mu.Unlock()
			if busy {
				return fake.Status(409)
			}
			busy = true
			return fake.Answer("done").After(contentionWork).OnDone(release)
		})
		c := build(t, f, chain.Target{
			Retry:   contentionPolicy(j),
			Budget:  budget.Unlimited(),
			Breaker: breaker.Config{Disabled: true},
		}, false)
		start := time.Now()
		var rmu sync.Mutex
		arrivals(contentionClients, 0, func(int) {
			_, err := c.Call(t.Context(), ask)
			rmu.Lock()
			defer rmu.Unlock()
			if err != nil {
				run.failed++
			}
			run.finish = max(run.finish, time.Since(start))
		})
		run.calls = f.Requests(primaryModel)
	})
	return run
}

func TestStormContention(t *testing.T) {
	p := contentionPolicy(retry.FullJitter)
	tb := table{
		title: fmt.Sprintf("Contention: %d clients, a provider that admits one request at a time (409 when busy, %v per request)",
			contentionClients, contentionWork),
		shows: fmt.Sprintf("Total calls to the provider and time until every client is done, by jitter (Base %v, Cap %v, MaxAttempts %d, no budget, no breaker).",
			p.Base, p.Cap, p.MaxAttempts),
		head: []string{"jitter", "calls", "per client", "calls vs no jitter", "all done at", "failed"},
	}
	modes := []retry.Jitter{retry.NoJitter, retry.FullJitter, retry.EqualJitter, retry.DecorrelatedJitter}
	runs := make(map[retry.Jitter]contentionRun)
	for _, j := range modes {
		runs[j] = contend(t, j)
	}
	none := runs[retry.NoJitter]
	for _, j := range modes {
		r := runs[j]
		tb.row(j.String(), r.calls, ratio(r.calls, contentionClients), ratio(r.calls, none.calls), r.finish, r.failed)
	}
	full := runs[retry.FullJitter]
	tb.note("Published (AWS): no jitter is the clear loser; jitter cuts the calls by more than half. Measured: full jitter makes %.2f", ratio(full.calls, none.calls))
	tb.note("of no jitter's calls. Without jitter the clients that collided stay in step: each round admits one and rejects the rest.")
	tb.print(t)

	for _, j := range modes {
		if r := runs[j]; r.failed > 0 {
			t.Errorf("%v jitter: %d clients never got their work done", j, r.failed)
		}
	}
	if 2*full.calls > none.calls {
		t.Errorf("full jitter made %d calls, more than half of no jitter's %d", full.calls, none.calls)
	}
}
