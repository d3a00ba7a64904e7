package storm

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/budget"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/provider/fake"
)

// The outage: the primary answers 503 to everything for outageLength while
// one call arrives every outageEvery; the sibling is healthy.
const outageEvery = 100 * time.Millisecond

// outageLength is 10 minutes of virtual time, 2 under the race detector.
func outageLength() time.Duration {
	if raceEnabled {
		return 2 * time.Minute
	}
	return 10 * time.Minute
}

// outageRun is what one outage did.
type outageRun struct {
	calls, answered, primary int
	byBudget, byBreaker      int // retries the budget refused; calls and retries the breaker refused
}

func outage(t *testing.T, target chain.Target) outageRun {
	var run outageRun
	synctest.Test(t, func(t *testing.T) {
		f := fake.New()
		f.Script(primaryModel, fake.Status(503))
		c := build(t, f, target, true)
		var mu sync.Mutex
		arrivals(int(outageLength()/outageEvery), outageEvery, func(int) {
			res, err := c.Call(t.Context(), ask)
			mu.Lock()
			defer mu.Unlock()
			run.calls++
			if err == nil {
				run.answered++
			}
			for _, a := range res.Attempts {
				switch {
				case a.Decision != chain.DecisionSkip:
				case errors.Is(a.Err, budget.ErrExhausted):
					run.byBudget++
				case errors.Is(a.Err, breaker.ErrOpen):
					run.byBreaker++
				}
			}
		})
		run.primary = f.Requests(primaryModel)
	})
	return run
}

func TestStormOutage(t *testing.T) {
	length := outageLength()
	tb := table{
		title: fmt.Sprintf("Outage: the primary answers 503 for %v, one call every %v (%d calls), the next tier healthy",
			length, outageEvery, int(length/outageEvery)),
		shows: "Requests sent to the dead primary per call, and the share of calls answered, by what bounds the retries (3 attempts each).",
		head:  []string{"retries bounded by", "calls", "requests to primary", "per call", "retries refused by budget", "refused by breaker", "answered"},
	}
	bucket, err := budget.NewTokenBucket(budget.TokenBucketConfig{})
	if err != nil {
		t.Fatal(err)
	}
	off := breaker.Config{Disabled: true}
	rows := []struct {
		name   string
		target chain.Target
	}{
		{"nothing (Unlimited, breaker off)", chain.Target{Budget: budget.Unlimited(), Breaker: off}},
		{"ratio budget (default), breaker off", chain.Target{Breaker: off}},
		{"token bucket (500, cost 5), breaker off", chain.Target{Budget: bucket, Breaker: off}},
		{"breaker (default), Unlimited", chain.Target{Budget: budget.Unlimited()}},
		{"budget and breaker (defaults)", chain.Target{}},
	}
	runs := inParallel(t, len(rows), func(t *testing.T, i int) outageRun { return outage(t, rows[i].target) })
	for i, r := range rows {
		run := runs[i]
		tb.row(r.name, run.calls, run.primary, fmt.Sprintf("%.3f", ratio(run.primary, run.calls)), run.byBudget, run.byBreaker,
			fmt.Sprintf("%.1f%%", 100*ratio(run.answered, run.calls)))
	}
	def := runs[len(runs)-1]
	tb.note("The ratio budget allows retries of at most 10%% of first attempts over 10s (floor 10); the token bucket refunds only on")
	tb.note("success, so against a dead primary it spends its 100 retries and stops; the breaker opens after 5 failures and probes")
	tb.note("at 5, 15, 35 and 75s, then every 60s (the open interval doubles from 5s up to 60s). The next tier answers every call")
	tb.note("whichever bounds the retries: only the primary's load differs.")
	tb.raceNote("%v of outage instead of 10m.", length)
	tb.print(t)

	if per := ratio(def.primary, def.calls); per > 1.1 {
		t.Errorf("defaults: %.2f requests per call to the dead primary, want at most 1.1", per)
	}
	if def.answered != def.calls {
		t.Errorf("defaults: %d of %d calls answered, want all", def.answered, def.calls)
	}
}
