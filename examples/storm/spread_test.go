package storm

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/provider/fake"
	"github.com/backstop-llm/backstop/spread"
)

// The spread: spreadClients clients calling back to back against three
// deployments of one model whose providers admit spreadLimits requests a
// minute each (a rateBucket apiece, lab_test.go).
const spreadClients = 300

var spreadLimits = [...]int{30, 60, 120}

// spreadLength is the virtual time each client runs: 5 minutes, 30
// seconds under the race detector (the 429 storms of the rows that do not
// throttle make it the slowest scenario there).
func spreadLength() time.Duration {
	if raceEnabled {
		return 30 * time.Second
	}
	return 5 * time.Minute
}

// spreadCapacity is what the three deployments can serve in d together.
func spreadCapacity(d time.Duration) float64 {
	var c float64
	for _, l := range spreadLimits {
		c += bucketCapacity(l, d)
	}
	return c
}

// spreadRun is what one row did.
type spreadRun struct {
	admitted, rejected [len(spreadLimits)]int // at each provider, arrivals before the end
	calls, failed      int                    // calls made, and failed, before the end
	refused            int                    // failed calls that sent no request at all
}

// total is the row's figures over all deployments.
func (r *spreadRun) total() limitRun {
	all := limitRun{calls: r.calls, failed: r.failed, refused: r.refused}
	for i := range r.admitted {
		all.admitted += r.admitted[i]
		all.rejected += r.rejected[i]
	}
	return all
}

// errRefused marks a call that failed without a request sent.
var errRefused = errors.New("refused locally")

func spreadOut(t *testing.T, s spread.Strategy) spreadRun {
	var run spreadRun
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		end := start.Add(spreadLength())
		fs := make([]*fake.Server, len(spreadLimits))
		bs := make([]*rateBucket, len(spreadLimits))
		for i, l := range spreadLimits {
			fs[i], bs[i] = fake.New(), newRateBucket(l, start, end)
			fs[i].Handle(primaryModel, func(c fake.Call) fake.Outcome { return bs[i].serve(c.Time) })
		}
		c := deployments(t, fs, func(i int) chain.Target {
			return chain.Target{Weight: float64(spreadLimits[i])}
		}, func(b *chain.Builder) { b.Spread(s) })
		call := func(ctx context.Context) error {
			res, err := c.Call(ctx, ask)
			if err != nil {
				n := 0
				for i := range spreadLimits {
					n += sent(res, deploymentName(i))
				}
				if n == 0 {
					return fmt.Errorf("%w: %w", errRefused, err)
				}
			}
			return err
		}
		var mu sync.Mutex
		run.calls, run.failed = backToBack(t.Context(), spreadClients, end, call, func(err error) {
			if errors.Is(err, errRefused) {
				mu.Lock()
				run.refused++
				mu.Unlock()
			}
		})
		for i, b := range bs {
			run.admitted[i], run.rejected[i] = b.admitted, b.rejected
		}
	})
	return run
}

func TestStormSpread(t *testing.T) {
	length := spreadLength()
	capacity := spreadCapacity(length)
	limits := fmt.Sprint(spreadLimits[0], ", ", spreadLimits[1], " and ", spreadLimits[2])
	tb := table{
		title: fmt.Sprintf("Spread: %d clients calling back to back for %v against 3 deployments of one model limited to %s requests a minute",
			spreadClients, length, limits),
		shows: fmt.Sprintf("Goodput (answers / capacity; capacity = the buckets %s plus their refill over %v = %.0f requests), 429s per answer, by spreading.",
			limits, length, capacity),
		head: append(append([]string{"spreading"}, limitHead...), "requests per deployment", "answers per deployment"),
	}
	rows := []struct {
		name     string
		strategy spread.Strategy
	}{
		{"ordered (default)", spread.Ordered},
		{"weighted 30/60/120", spread.Weighted},
		{"headroom-aware", spread.Headroom},
	}
	const headroom = 2
	runs := inParallel(t, len(rows), func(t *testing.T, i int) spreadRun { return spreadOut(t, rows[i].strategy) })
	for i, r := range rows {
		run := runs[i]
		var req, ans []string
		for d := range spreadLimits {
			req = append(req, strconv.Itoa(run.admitted[d]+run.rejected[d]))
			ans = append(ans, strconv.Itoa(run.admitted[d]))
		}
		run.total().row(&tb, r.name, capacity, strings.Join(req, " / "), strings.Join(ans, " / "))
	}
	tb.note("Each deployment keeps its limit as a token bucket of that size, refilled continuously; an answer takes %v, a 429", limitAnswer)
	tb.note("(with retry-after, whole seconds) %v, and every response carries the anthropic-ratelimit-requests-* headers.", limitReject)
	tb.note("A client whose call failed without any time passing waits %v before its next call. Every target has the", limitPause)
	tb.note("defaults (retries, ratio budget, breaker, the default pacing; no throttle configured) and its Weight set to its")
	tb.note("limit, which only weighted reads. Refused locally: failed calls that sent no request (every deployment passed")
	tb.note("over: a Retry-After gate closed, a breaker open, a throttle with no slot within MaxWait).")
	tb.note("Goodput alone does not tell the rows apart: %d clients keep every bucket empty whichever way the calls are spread.", spreadClients)
	tb.note("What differs is the 429s sent to get there. The default pacing sends everything until a deployment's headers")
	tb.note("announce its limit, then paces it: ordered and weighted send their 429s in the first instants, before each")
	tb.note("deployment has answered (ordered sends the first instant's calls to deploy-1, and its 429s' retries on); weighted")
	tb.note("draws the first by weight.")
	tb.note("Headroom gives each target a throttle that learns its limit from the headers (throttle Learn, default MaxWait")
	tb.note("5s) and ranks the targets by the room it reports: a call with no slot within 5s anywhere is refused locally")
	tb.note("instead of being sent to be refused. Its 429, when there is one (0 or 1 a run), is a provisional request (one a")
	tb.note("second until the first headers) sent to deploy-1 as its first answer arrived, which that answer's remaining could")
	tb.note("not count, as in the rate-limit lab.")
	tb.note("Goal: headroom-aware at least 0.95 of capacity with under 0.05 429s per answer.")
	tb.raceNote("%v of traffic instead of 5m (the start's full buckets are then a larger share of capacity).", length)
	tb.print(t)

	runs[headroom].total().check(t, rows[headroom].name, capacity)
}
