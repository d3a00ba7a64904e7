package storm

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/fake"
	"github.com/backstop-llm/backstop/throttle"
)

// The rate limit: rlClients clients, each making its next call as soon as
// the previous one ends, against one target whose provider admits
// rlPerMinute requests a minute (a rateBucket, lab_test.go).
const (
	rlClients   = 200
	rlPerMinute = 50
)

// rlLength is the virtual time each client runs: 3 minutes, 1 under the
// race detector.
func rlLength() time.Duration {
	if raceEnabled {
		return time.Minute
	}
	return 3 * time.Minute
}

// rlCapacity is what the provider can serve in d.
func rlCapacity(d time.Duration) float64 { return bucketCapacity(rlPerMinute, d) }

// rateLimited runs one row; its refused are the calls the chain refused
// without a request (self-throttled).
func rateLimited(t *testing.T, makeClient func(t *testing.T, p llm.Provider, refused func()) client) limitRun {
	var run limitRun
	synctest.Test(t, func(t *testing.T) {
		f := fake.New()
		start := time.Now()
		end := start.Add(rlLength())
		b := newRateBucket(rlPerMinute, start, end)
		f.Handle(primaryModel, func(c fake.Call) fake.Outcome { return b.serve(c.Time) })
		var mu sync.Mutex
		call := makeClient(t, claude(t, f), func() {
			mu.Lock()
			run.refused++
			mu.Unlock()
		})
		run.calls, run.failed = backToBack(t.Context(), rlClients, end, call, nil)
		run.admitted, run.rejected = b.admitted, b.rejected
	})
	return run
}

// viaChain is a client that calls a chain whose only target is the
// primary, configured by target.
func viaChain(target chain.Target) func(*testing.T, llm.Provider, func()) client {
	return func(t *testing.T, p llm.Provider, refused func()) client {
		target.Name, target.Provider, target.Model = "primary", p, primaryModel
		c, err := chain.New("storm").Primary(target).Build()
		if err != nil {
			t.Fatal(err)
		}
		return func(ctx context.Context) error {
			res, err := c.Call(ctx, ask)
			if err != nil && sent(res, "primary") == 0 && errors.Is(err, throttle.ErrThrottled) {
				refused()
			}
			return err
		}
	}
}

// direct is a client that runs loop around the adapter.
func direct(loop func(context.Context, llm.Provider, llm.Request) (*llm.Response, error)) func(*testing.T, llm.Provider, func()) client {
	return func(_ *testing.T, p llm.Provider, _ func()) client {
		req := ask
		req.Model = primaryModel
		return func(ctx context.Context) error {
			_, err := loop(ctx, p, req)
			return err
		}
	}
}

// rlMaxWait is the MaxWait the lab gives self-throttling: longer than any
// queue the clients build here (rlClients slots at 1.2s is 4 minutes; 5.7
// after one 429 slows the limiter to 0.7), so that calls wait for their
// slot instead of being refused, and no reservation is cancelled (but the
// stale ones Learn's provisional pace granted, which the rebuilt limiter
// no longer counts).
const rlMaxWait = 10 * time.Minute

func TestStormRateLimit(t *testing.T) {
	length := rlLength()
	capacity := rlCapacity(length)
	tb := table{
		title: fmt.Sprintf("Rate limit: %d clients calling back to back for %v against one target limited to %d requests a minute",
			rlClients, length, rlPerMinute),
		shows: fmt.Sprintf("Goodput (answers / capacity; capacity = bucket %d + %d/min refill x %v = %.0f requests) and 429s per answer, by client.",
			rlPerMinute, rlPerMinute, length, capacity),
		head: append([]string{"client"}, limitHead...),
	}
	limit := func(s throttle.Settings) chain.Target { return chain.Target{Throttle: s} }
	rows := []struct {
		name   string
		client func(*testing.T, llm.Provider, func()) client
		heavy  bool // tens of thousands of requests: run beside the other heavy rows
	}{
		{"naive loop (retry at once until answered)", direct(naive), true},
		{"SDK-like (2 retries, Retry-After honoured)", direct(sdkLike), true},
		{"backstop defaults", viaChain(chain.Target{}), true},
		{"throttle 50/min, Burst 50, MaxWait 10m", viaChain(limit(throttle.Settings{RequestsPerMinute: rlPerMinute, Burst: rlPerMinute, MaxWait: rlMaxWait})), false},
		{"throttle 50/min, default Burst, MaxWait 10m", viaChain(limit(throttle.Settings{RequestsPerMinute: rlPerMinute, MaxWait: rlMaxWait})), false},
		{"throttle 50/min, Burst 50, default MaxWait", viaChain(limit(throttle.Settings{RequestsPerMinute: rlPerMinute, Burst: rlPerMinute})), false},
		{"throttle Learn only (defaults)", viaChain(limit(throttle.Settings{Learn: true})), false},
		{"throttle Learn, Burst 50, MaxWait 10m", viaChain(limit(throttle.Settings{Learn: true, Burst: rlPerMinute, MaxWait: rlMaxWait})), false},
	}
	// The known limit with the lab's Burst and MaxWait, and both learned
	// limits.
	asserted := []int{3, 6, 7}
	runs := make([]limitRun, len(rows))
	// The heavy rows run in parallel, one bubble each; the throttled rows
	// run one at a time after them, each with the whole machine, as a
	// service's limiter would be used from every core.
	t.Run("heavy", func(t *testing.T) {
		for i, r := range rows {
			if r.heavy {
				t.Run(strconv.Itoa(i), func(t *testing.T) {
					t.Parallel()
					runs[i] = rateLimited(t, r.client)
				})
			}
		}
	})
	for i, r := range rows {
		if !r.heavy {
			runs[i] = rateLimited(t, r.client)
		}
	}
	for i, r := range rows {
		runs[i].row(&tb, r.name, capacity)
	}
	tb.note("An answer takes %v; a 429 (with retry-after, whole seconds) takes %v. Every response carries the", limitAnswer, limitReject)
	tb.note("anthropic-ratelimit-requests-limit, -remaining and -reset headers. A client whose call failed without any time passing")
	tb.note("(refused locally) waits %v before its next call. Goal: goodput within 5%% of capacity, under 0.05 429s per answer.", limitPause)
	tb.note("Burst 50 matches the provider's bucket (Anthropic keeps an RPM limit as a bucket of that size); for a configured")
	tb.note("limit the default Burst (one second's worth: 1) leaves the provider's full bucket unused at the start. MaxWait 10m")
	tb.note("is longer than any queue these clients build (%d slots of 1.2s), so calls wait for their slot instead of being", rlClients)
	tb.note("refused. With the default MaxWait (5s) most calls find their slot too far away and move on at once (refused")
	tb.note("locally) without taking it, so the limiter keeps its pace and goodput holds. Learn sends one request a second until")
	tb.note("the first headers (a second later here), then adopts the announced limit and, with the default Burst, the provider's")
	tb.note("bucket (50, drained to the announced remaining); calls waiting on provisional slots take theirs again at the learned")
	tb.note("pace. A Learn row's 429 comes from a provisional request sent as the first answer arrived, which that answer's")
	tb.note("remaining could not count: the limiter believes it has one request more than the provider until the 429.")
	tb.note("The budget limits retries, not calls: a client whose retry is refused calls again at once. The defaults send far")
	tb.note("fewer requests to be refused than the naive loop because each 429's Retry-After closes the target's gate, so the")
	tb.note("calls in between fail at once without a request; only self-throttling sends none to be refused.")
	tb.raceNote("%v of traffic instead of 3m.", length)
	tb.print(t)

	for _, i := range asserted {
		runs[i].check(t, rows[i].name, capacity)
	}
}
