package storm

// The lab's shared pieces: the models, the question every client asks, the
// adapter over the fake provider, chains of one and two tiers, the
// measures taken from arrival times, a rate-limited deployment and clients
// calling it back to back.

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/anthropic"
	"github.com/backstop-llm/backstop/provider/fake"
)

const (
	primaryModel = "claude-sonnet-5-5"
	siblingModel = "claude-haiku-5"
)

// ask is the request every virtual client sends.
var ask = llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "Where is my order?"}}}

// claude is the real Anthropic adapter over the fake provider, in-process,
// so that it works inside a synctest bubble.
func claude(t testing.TB, f *fake.Server) llm.Provider {
	t.Helper()
	p, err := anthropic.New(anthropic.Config{APIKey: "sk-ant-storm", BaseURL: f.URL(), HTTPClient: f.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// build builds a chain of primary alone, or of primary and a healthy
// sibling model on the same fake deployment when sibling is true. Primary's
// Name, Provider and Model are filled in.
func build(t testing.TB, f *fake.Server, primary chain.Target, sibling bool) *chain.Chain {
	t.Helper()
	p := claude(t, f)
	primary.Name, primary.Provider, primary.Model = "primary", p, primaryModel
	b := chain.New("storm").Primary(primary)
	if sibling {
		b = b.OrSibling(chain.Target{Name: "sibling", Provider: p, Model: siblingModel})
	}
	c, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// deploymentName names the i-th deployment (from 0) of a chain built by
// deployments.
func deploymentName(i int) string { return "deploy-" + strconv.Itoa(i+1) }

// deployments builds a chain whose only tier is primaryModel on each of
// fs, one fake server a deployment (as a model deployed in several
// regions): the primary, then OrDeployment targets, named by
// deploymentName. target(i), when not nil, configures the i-th target
// (its Name, Provider and Model are filled in); tier, when not nil, sets
// the tier's spreading or hedging before Build.
func deployments(t testing.TB, fs []*fake.Server, target func(i int) chain.Target, tier func(*chain.Builder)) *chain.Chain {
	t.Helper()
	b := chain.New("storm")
	for i, f := range fs {
		var tg chain.Target
		if target != nil {
			tg = target(i)
		}
		tg.Name, tg.Provider, tg.Model = deploymentName(i), claude(t, f), primaryModel
		if i == 0 {
			b = b.Primary(tg)
		} else {
			b = b.OrDeployment(tg)
		}
	}
	if tier != nil {
		tier(b)
	}
	c, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// sent counts the attempts of res that reached target as requests.
func sent(res *chain.Result, target string) int {
	n := 0
	for _, a := range res.Attempts {
		if a.Target == target && a.Decision != chain.DecisionSkip {
			n++
		}
	}
	return n
}

// maxInWindow returns the largest number of times in any half-open window
// [t, t+w): the peak load a provider sees over w.
func maxInWindow(times []time.Time, w time.Duration) int {
	ts := append([]time.Time(nil), times...)
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	best, lo := 0, 0
	for hi := range ts {
		for ts[hi].Sub(ts[lo]) >= w {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}

// buckets counts times in consecutive buckets of width w from start; times
// before start are left out.
func buckets(times []time.Time, start time.Time, w time.Duration) []int {
	var out []int
	for _, at := range times {
		d := at.Sub(start)
		if d < 0 {
			continue
		}
		i := int(d / w)
		for len(out) <= i {
			out = append(out, 0)
		}
		out[i]++
	}
	return out
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ratio is a/b, or 0 when b is 0.
func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// A rate-limited deployment: its provider admits a number of requests a
// minute from a token bucket of that size, refilled continuously (as
// Anthropic keeps its limits; a rateBucket). An admitted request is
// answered after limitAnswer; a rejected one gets a 429 with retry-after
// after limitReject.
const (
	limitAnswer = time.Second
	limitReject = 500 * time.Millisecond
	// limitPause is how long a client waits after a call that failed
	// without any time passing (the chain refused it locally), so that a
	// closed loop does not spin at one instant of virtual time.
	limitPause = time.Second
)

// bucketCapacity is what a provider limited to perMinute requests a minute
// can serve in d: a full bucket at the start plus its refill.
func bucketCapacity(perMinute int, d time.Duration) float64 {
	return float64(perMinute) + float64(perMinute)*d.Minutes()
}

// rateBucket is a provider's request limit, a token bucket kept in exact
// integer units: one request is a minute of nanoseconds, and it refills
// perMinute units a nanosecond, so that a client pacing at exactly the
// limit is never refused by rounding.
type rateBucket struct {
	perMinute int64
	mu        sync.Mutex
	level     int64 // units
	at        time.Time
	end       time.Time // arrivals from end on are not counted
	quiet     bool      // send no rate-limit headers (the 429s' retry-after still)
	admitted  int
	rejected  int
}

const bucketUnit = int64(time.Minute) // units per request

// newRateBucket returns a full bucket of perMinute requests at start,
// counting the arrivals before end.
func newRateBucket(perMinute int, start, end time.Time) *rateBucket {
	return &rateBucket{perMinute: int64(perMinute), level: int64(perMinute) * bucketUnit, at: start, end: end}
}

// serve admits or rejects a request arriving at now, with the
// anthropic-ratelimit-requests-* headers of the bucket after it.
func (b *rateBucket) serve(now time.Time) fake.Outcome {
	b.mu.Lock()
	defer b.mu.Unlock()
	rate, capacity := b.perMinute, b.perMinute*bucketUnit
	b.level = min(capacity, b.level+int64(now.Sub(b.at))*rate)
	b.at = now
	counted := now.Before(b.end)
	var o fake.Outcome
	if b.level >= bucketUnit {
		b.level -= bucketUnit
		if counted {
			b.admitted++
		}
		o = fake.Answer("ok").After(limitAnswer)
	} else {
		if counted {
			b.rejected++
		}
		wait := time.Duration((bucketUnit - b.level + rate - 1) / rate)
		o = fake.RateLimited(strconv.Itoa(int((wait + time.Second - 1) / time.Second))).After(limitReject)
	}
	if b.quiet {
		return o
	}
	full := now.Add(time.Duration((capacity - b.level + rate - 1) / rate))
	return o.
		Header("anthropic-ratelimit-requests-limit", strconv.FormatInt(rate, 10)).
		Header("anthropic-ratelimit-requests-remaining", strconv.FormatInt(b.level/bucketUnit, 10)).
		Header("anthropic-ratelimit-requests-reset", full.Add(time.Second-1).Truncate(time.Second).UTC().Format(time.RFC3339))
}

// tally counts a row's calls and those that failed.
type tally struct{ calls, failed int }

// add counts a call that ended with err and reports whether it was
// answered.
func (t *tally) add(err error) bool {
	t.calls++
	if err != nil {
		t.failed++
	}
	return err == nil
}

// limitRun is what a row against rate-limited deployments did.
type limitRun struct {
	admitted, rejected int // at the providers, arrivals before the end
	calls, failed      int // calls made, and failed, before the end
	refused            int // failed calls that sent no request at all (refused locally)
}

// limitHead is the heading of the columns limitRun.row fills after the
// row's name.
var limitHead = []string{"requests", "answered", "goodput", "429s", "429s per answer", "calls", "failed", "refused locally"}

// row adds r to tb as a row named name, goodput taken against capacity,
// with more cells after limitHead's.
func (r limitRun) row(tb *table, name string, capacity float64, more ...any) {
	tb.row(append([]any{name, r.admitted + r.rejected, r.admitted, float64(r.admitted) / capacity, r.rejected,
		fmt.Sprintf("%.3f", ratio(r.rejected, r.admitted)), r.calls, r.failed, r.refused}, more...)...)
}

// check holds the row named name to the lab's goal against rate limits:
// goodput at least 0.95 of capacity, under 0.05 429s per answer.
func (r limitRun) check(t *testing.T, name string, capacity float64) {
	t.Helper()
	if share := float64(r.admitted) / capacity; share < 0.95 {
		t.Errorf("%s: goodput %.3f of capacity, want at least 0.95", name, share)
	}
	if per := ratio(r.rejected, r.admitted); per >= 0.05 {
		t.Errorf("%s: %.3f 429s per answer, want under 0.05", name, per)
	}
}

// client makes one call, the way a row of a table does.
type client func(ctx context.Context) error

// backToBack runs clients virtual clients until end, each making its next
// call as soon as the previous one ended, and waiting limitPause after a
// call that failed without any time passing. It returns the calls that
// ended before the run did, and how many of them failed; done, when not
// nil, is told of each of them too. Calls still going at end may finish: the
// answer to a request admitted just before end arrives limitAnswer later.
// The context is cancelled then rather than given a deadline, so that the
// chain does not refuse slots past the end of the run.
func backToBack(ctx context.Context, clients int, end time.Time, call client, done func(err error)) (calls, failed int) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	time.AfterFunc(time.Until(end.Add(limitAnswer+time.Millisecond)), cancel)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for time.Now().Before(end) {
				began := time.Now()
				err := call(ctx)
				if ctx.Err() != nil {
					return // cut short by the end of the run
				}
				mu.Lock()
				calls++
				if err != nil {
					failed++
				}
				mu.Unlock()
				if done != nil {
					done(err)
				}
				if err != nil && time.Since(began) == 0 {
					if sleep(ctx, limitPause) != nil {
						return
					}
				}
			}
		})
	}
	wg.Wait()
	return calls, failed
}

// arrivals starts call(0) to call(n-1) in goroutines of their own, one
// every every (all at the same instant when every is 0), and returns when
// all have returned.
func arrivals(n int, every time.Duration, call func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { call(i) })
		if every > 0 {
			time.Sleep(every)
		}
	}
	wg.Wait()
}

// inParallel runs row 0..n-1 of a scenario as parallel subtests of a
// subtest "rows", one synctest bubble each, and returns what each row
// measured, in order.
func inParallel[R any](t *testing.T, n int, row func(t *testing.T, i int) R) []R {
	runs := make([]R, n)
	t.Run("rows", func(t *testing.T) {
		for i := range n {
			t.Run(strconv.Itoa(i), func(t *testing.T) {
				t.Parallel()
				runs[i] = row(t, i)
			})
		}
	})
	return runs
}
