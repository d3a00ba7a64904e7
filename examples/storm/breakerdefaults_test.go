package storm

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/provider/fake"
)

// The breaker's defaults against issue 24's findings 3 and 4, nothing
// configured: a flaky primary under concurrency, a recovered primary with a
// fallback, a blip and a herd without one.

// A flaky primary: flakyClients clients call back to back, flakyCalls calls
// in all; the primary answers a fast 529 to 30% of requests, a 429 to 5%,
// and the rest after flakyAnswer.
const (
	flakyClients = 50
	flakyCalls   = 2000
	flakyFail    = 10 * time.Millisecond
	flakyAnswer  = 500 * time.Millisecond
)

// flakyRun is what the flaky primary's row did.
type flakyRun struct {
	calls, primary, failed int
	requests, failures     int // requests to the primary, and those answered 529
}

// flakyOutcome is the primary's answer to its n-th request (from 0): a
// fixed pattern of 20 (6 fast 529s, one 429, 13 answers), so that every
// run sees the same mix.
func flakyOutcome(n int) fake.Outcome {
	switch n % 20 {
	case 0, 3, 7, 10, 13, 17:
		return fake.Overloaded().After(flakyFail)
	case 5:
		return fake.RateLimited("1").After(flakyFail)
	}
	return fake.Answer("ok").After(flakyAnswer)
}

func flaky(t *testing.T) flakyRun {
	var run flakyRun
	synctest.Test(t, func(t *testing.T) {
		f := fake.New()
		var n, fails atomic.Int64
		f.Handle(primaryModel, func(fake.Call) fake.Outcome {
			i := int(n.Add(1) - 1)
			if i%20 == 0 || i%20 == 3 || i%20 == 7 || i%20 == 10 || i%20 == 13 || i%20 == 17 {
				fails.Add(1)
			}
			return flakyOutcome(i)
		})
		c := build(t, f, chain.Target{}, true)
		var left atomic.Int64
		left.Store(flakyCalls)
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range flakyClients {
			wg.Go(func() {
				for left.Add(-1) >= 0 {
					res, err := c.Call(t.Context(), ask)
					mu.Lock()
					run.calls++
					switch {
					case err != nil:
						run.failed++
					case res.Served.Target == "primary":
						run.primary++
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		run.requests, run.failures = int(n.Load()), int(fails.Load())
	})
	return run
}

// A recovered primary with a fallback: one call every recoverEvery; the
// primary answers 503 from the start for the outage's length, then answers
// again; calls go on for recoverAfter past its recovery.
const (
	recoverEvery = 4 * time.Second
	recoverAfter = 20 * time.Second
)

// recoverRun is what one outage's row did.
type recoverRun struct {
	calls, failed int
	// back is how long after the recovery the primary first served a
	// call; -1 if it did not.
	back time.Duration
	// perMinute is the most requests the primary received in any minute
	// of the outage after its first 10 seconds (the failures that opened
	// the breaker).
	perMinute int
}

func recoverWithFallback(t *testing.T, outage time.Duration) recoverRun {
	run := recoverRun{back: -1}
	synctest.Test(t, func(t *testing.T) {
		f := fake.New()
		start := time.Now()
		up := start.Add(outage)
		f.Handle(primaryModel, func(c fake.Call) fake.Outcome {
			if c.Time.Before(up) {
				return fake.Status(503)
			}
			return fake.Answer("ok")
		})
		c := build(t, f, chain.Target{}, true)
		var mu sync.Mutex
		arrivals(int((outage+recoverAfter)/recoverEvery), recoverEvery, func(int) {
			res, err := c.Call(t.Context(), ask)
			mu.Lock()
			defer mu.Unlock()
			run.calls++
			if err != nil {
				run.failed++
				return
			}
			if res.Served.Target == "primary" && run.back < 0 {
				run.back = max(time.Since(up), 0)
			}
		})
		var during []time.Time
		for _, at := range f.Arrivals(primaryModel) {
			if at.Sub(start) >= 10*time.Second && at.Before(up) {
				during = append(during, at)
			}
		}
		run.perMinute = maxInWindow(during, time.Minute)
	})
	return run
}

// A blip without a fallback: blipRate calls a second for blipRun; the
// primary answers 503 for one second from blipAt.
const (
	blipEvery = 100 * time.Millisecond
	blipAt    = 5 * time.Second
	blipRun   = 20 * time.Second
)

// blipRun is what the blip's row did.
type blipResult struct {
	calls, failed, failedAfter int // failedAfter: failed calls that started after the recovery
}

func blip(t *testing.T) blipResult {
	var run blipResult
	synctest.Test(t, func(t *testing.T) {
		f := fake.New()
		start := time.Now()
		down, up := start.Add(blipAt), start.Add(blipAt+time.Second)
		f.Handle(primaryModel, func(c fake.Call) fake.Outcome {
			if !c.Time.Before(down) && c.Time.Before(up) {
				return fake.Status(503)
			}
			return fake.Answer("ok")
		})
		c := build(t, f, chain.Target{}, false)
		var mu sync.Mutex
		arrivals(int(blipRun/blipEvery), blipEvery, func(int) {
			began := time.Now()
			_, err := c.Call(t.Context(), ask)
			mu.Lock()
			defer mu.Unlock()
			run.calls++
			if err != nil {
				run.failed++
				if !began.Before(up) {
					run.failedAfter++
				}
			}
		})
	})
	return run
}

// A herd without a fallback: herdClients callers arrive at once, in the
// middle of a one-second blip of 503s; deadline, when positive, bounds
// each call.
type herdResult struct {
	calls, answered, requests int
	failFast                  int // failed calls that failed within a second, without waiting
	last                      time.Duration
}

func herdBlip(t *testing.T, deadline time.Duration) herdResult {
	var run herdResult
	synctest.Test(t, func(t *testing.T) {
		f := fake.New()
		start := time.Now()
		up := start.Add(500 * time.Millisecond) // down since 500ms before the herd
		f.Handle(primaryModel, func(c fake.Call) fake.Outcome {
			if c.Time.Before(up) {
				return fake.Status(503)
			}
			return fake.Answer("ok")
		})
		c := build(t, f, chain.Target{}, false)
		var mu sync.Mutex
		arrivals(herdClients, 0, func(int) {
			ctx := t.Context()
			if deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, deadline)
				defer cancel()
			}
			began := time.Now()
			_, err := c.Call(ctx, ask)
			mu.Lock()
			defer mu.Unlock()
			run.calls++
			run.last = max(run.last, time.Since(start))
			if err == nil {
				run.answered++
			} else if time.Since(began) < time.Second {
				run.failFast++
			}
		})
		run.requests = f.Requests(primaryModel)
	})
	return run
}

func TestStormBreakerDefaults(t *testing.T) {
	tb := table{
		title: "Breaker defaults: a flaky primary, a recovered primary with a fallback, a blip and a herd without one (nothing configured)",
		shows: "What each scenario's goal measures, with the library's defaults.",
		head:  []string{"scenario", "calls", "measure", "goal", "met"},
	}
	type outcome struct {
		flaky   flakyRun
		recover recoverRun
		blip    blipResult
		herd    herdResult
	}
	type row struct {
		name string
		run  func(t *testing.T) outcome
	}
	rows := []row{
		{"30% fast 529s, 5% 429s, 50 clients, fallback", func(t *testing.T) outcome { return outcome{flaky: flaky(t)} }},
		{"primary down 60s, a call every 4s, fallback", func(t *testing.T) outcome { return outcome{recover: recoverWithFallback(t, time.Minute)} }},
		{"primary down 5m, a call every 4s, fallback", func(t *testing.T) outcome { return outcome{recover: recoverWithFallback(t, 5*time.Minute)} }},
		{"1s blip at 10 calls/s, no fallback", func(t *testing.T) outcome { return outcome{blip: blip(t)} }},
		{"herd of 200 in a 1s blip, no fallback", func(t *testing.T) outcome { return outcome{herd: herdBlip(t, 0)} }},
		{"herd of 200 in a 1s blip, 2s deadline, no fallback", func(t *testing.T) outcome { return outcome{herd: herdBlip(t, 2*time.Second)} }},
	}
	runs := inParallel(t, len(rows), func(t *testing.T, i int) outcome { return rows[i].run(t) })
	yes := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "NO"
	}
	var fails []string
	check := func(name string, ok bool, format string, args ...any) {
		if !ok {
			fails = append(fails, name+": "+fmt.Sprintf(format, args...))
		}
	}

	fl := runs[0].flaky
	share := ratio(fl.primary, fl.calls)
	tb.row(rows[0].name, fl.calls, fmt.Sprintf("%.1f%% served by the primary (%d requests, %.1f%% 529s)", 100*share, fl.requests, 100*ratio(fl.failures, fl.requests)),
		">= 55%", yes(share >= 0.55))
	check(rows[0].name, share >= 0.55, "%.1f%% of %d calls served by the primary, want at least 55%%", 100*share, fl.calls)

	for _, i := range []int{1, 2} {
		r := runs[i].recover
		back := "never"
		if r.back >= 0 {
			back = r.back.String()
		}
		ok := r.back >= 0 && r.back <= 10*time.Second && r.perMinute <= 12 && r.failed == 0
		tb.row(rows[i].name, r.calls, fmt.Sprintf("primary back %s after recovery; %d requests/min at most while down; %d failed", back, r.perMinute, r.failed),
			"<= 10s, <= 12/min, 0 failed", yes(ok))
		check(rows[i].name, ok, "back %s after recovery (want <= 10s), %d requests a minute while down (want <= 12), %d failed (want 0)", back, r.perMinute, r.failed)
	}

	bl := runs[3].blip
	tb.row(rows[3].name, bl.calls, fmt.Sprintf("%d failed, %d of them started after the recovery", bl.failed, bl.failedAfter), "0 after", yes(bl.failedAfter == 0))
	check(rows[3].name, bl.failedAfter == 0, "%d calls that started after the recovery failed, want 0", bl.failedAfter)

	h := runs[4].herd
	per := ratio(h.requests, h.calls)
	ok := h.answered >= 190 && per <= 2
	tb.row(rows[4].name, h.calls, fmt.Sprintf("%d answered, %.2f requests per call, last at %v", h.answered, per, h.last), ">= 190, <= 2/call", yes(ok))
	check(rows[4].name, ok, "%d answered (want >= 190), %.2f requests per call (want <= 2)", h.answered, per)

	hd := runs[5].herd
	tb.row(rows[5].name, hd.calls, fmt.Sprintf("%d answered, %d of the failed within 1s", hd.answered, hd.failFast), "fail fast", yes(hd.failFast == hd.calls-hd.answered))
	check(rows[5].name, hd.failFast == hd.calls-hd.answered, "%d of %d failed calls failed within 1s, want all", hd.failFast, hd.calls-hd.answered)

	tb.note("Every row uses chain.Target{} for the primary (the default breaker, retries and budget) and, where there is one, a")
	tb.note("healthy sibling model as the fallback. The flaky primary answers each run of 20 requests with 6 fast (10ms) 529s, one")
	tb.note("429 (Retry-After 1s) and 13 answers after 500ms. Back: from the recovery to the first call the primary served;")
	tb.note("requests/min counts the primary's requests in any minute of the outage after its first 10s. The blip row counts")
	tb.note("failed calls that started after the recovery. The herd arrives 500ms into a 1s blip of 503s; with a 2s deadline")
	tb.note("a call cannot wait for the breaker's probe (due 5s after it opened) and must fail at once with breaker.ErrOpen.")
	tb.print(t)
	for _, f := range fails {
		t.Error(f)
	}
}
