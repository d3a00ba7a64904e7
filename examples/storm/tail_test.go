package storm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/hedge"
	"github.com/backstop-llm/backstop/internal/latency"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/fake"
	"github.com/backstop-llm/backstop/spread"
)

// The tail: tailDeployments deployments of one model answer in about a
// second (a lognormal of median tailMedian and sigma tailSigma); in the
// slow rows one of them, tailSlowOne, answers tailSlowShare of its
// requests in tailSlow instead. Calls arrive open-loop, one every
// tailEvery, whatever the answers do.
const (
	tailDeployments = 3
	tailSlowOne     = 2 // deploy-3
	tailMedian      = time.Second
	tailSigma       = 0.3
	tailSlow        = 8 * time.Second
	tailSlowShare   = 0.1
	tailEvery       = 25 * time.Millisecond
	tailSeed        = 0x7a11
)

// tailCalls is how many calls a row makes: 4000 (100s of arrivals), under
// the race detector too, where the rows, run side by side, take about 5
// seconds. Fewer make the p99 a noisier estimate: with 2000, one run in
// five put the hedged p99 at 1.45x the healthy one, against a goal of 1.5x.
const tailCalls = 4000

// tailLatency is how long deployment dep takes to answer call n: a draw
// of its own for each pair (seeded by both), so that every row sees the
// same latencies and a hedge to another deployment draws afresh. With
// slow, dep tailSlowOne takes tailSlow for tailSlowShare of its calls.
func tailLatency(n, dep int, slow bool) time.Duration {
	r := rand.New(rand.NewPCG(tailSeed, uint64(n)*tailDeployments+uint64(dep)))
	u, z := r.Float64(), r.NormFloat64() // both drawn whatever slow is
	if slow && dep == tailSlowOne && u < tailSlowShare {
		return tailSlow
	}
	return time.Duration(float64(tailMedian) * math.Exp(tailSigma*z))
}

// tailCallID finds the call's number in a request's body.
var tailCallID = regexp.MustCompile(`\(call (\d+)\)`)

// tailRun is what one row did.
type tailRun struct {
	tally
	took            []time.Duration // each call's latency, sorted
	requests        [tailDeployments]int
	hedges, won     int // hedges sent, and hedges that answered the call
	hedgesRefused   int // hedges the hedge budget refused
	slowServed      int // calls answered after tailSlow or more
	servedBySlowOne int
}

func (r *tailRun) quantile(q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(r.took)))) - 1
	return r.took[min(max(i, 0), len(r.took)-1)]
}

// extra is the requests sent beyond one per call, per call.
func (r *tailRun) extra() float64 {
	n := 0
	for _, k := range r.requests {
		n += k
	}
	return ratio(n-r.calls, r.calls)
}

func tail(t *testing.T, slow bool, h hedge.Config) tailRun {
	var run tailRun
	synctest.Test(t, func(t *testing.T) {
		fs := make([]*fake.Server, tailDeployments)
		for i := range fs {
			fs[i] = fake.New()
			fs[i].Handle(primaryModel, func(c fake.Call) fake.Outcome {
				m := tailCallID.FindSubmatch(c.Body)
				if m == nil {
					return fake.BadRequest("no call number")
				}
				n, _ := strconv.Atoi(string(m[1]))
				return fake.Answer("ok").After(tailLatency(n, i, slow))
			})
		}
		c := deployments(t, fs, nil, func(b *chain.Builder) {
			b.Spread(spread.LeastLoaded)
			if h.On() {
				b.Hedge(h)
			}
		})
		var mu sync.Mutex
		arrivals(tailCalls, tailEvery, func(n int) {
			req := ask
			req.Messages = []llm.Message{{Role: llm.RoleUser, Content: fmt.Sprintf("Where is my order? (call %d)", n)}}
			began := time.Now()
			res, err := c.Call(t.Context(), req)
			took := time.Since(began)
			mu.Lock()
			defer mu.Unlock()
			if !run.add(err) {
				return
			}
			run.took = append(run.took, took)
			if took >= tailSlow {
				run.slowServed++
			}
			if res.Served.Target == deploymentName(tailSlowOne) {
				run.servedBySlowOne++
			}
			for _, a := range res.Attempts {
				switch {
				case !a.Hedge:
				case a.Decision == chain.DecisionSkip:
					run.hedgesRefused++
				default:
					run.hedges++
					if a.Decision == chain.DecisionServed {
						run.won++
					}
				}
			}
		})
		for i, f := range fs {
			run.requests[i] = f.Requests(primaryModel)
		}
	})
	slices.Sort(run.took)
	return run
}

func TestStormTail(t *testing.T) {
	calls := tailCalls
	tb := table{
		title: fmt.Sprintf("Tail: %d calls, one every %v (open loop), over %d deployments of one model answering in about %v; in the slow rows %s answers %.0f%% of its requests in %v",
			calls, tailEvery, tailDeployments, tailMedian, deploymentName(tailSlowOne), 100*tailSlowShare, tailSlow),
		shows: "Call latency (p50, p99) and the extra requests hedging costs, by hedging; the tier spreads its calls least-loaded in every row.",
		head:  []string{"row", "p50", "p99", "p99 vs healthy", "max", "calls of 8s+", "extra requests (hedges / calls)", "hedges won", "hedges refused by budget", "requests per deployment"},
	}
	rows := []struct {
		name  string
		slow  bool
		hedge hedge.Config
	}{
		{"healthy (no slow tail), no hedging", false, hedge.Config{}},
		{"slow tail, no hedging", true, hedge.Config{}},
		{"slow tail, hedge Adaptive (p95 of the tier)", true, hedge.Config{Adaptive: true}},
		{"slow tail, hedge Delay 2s", true, hedge.Config{Delay: 2 * time.Second}},
	}
	const healthy, adaptive = 0, 2
	runs := inParallel(t, len(rows), func(t *testing.T, i int) tailRun { return tail(t, rows[i].slow, rows[i].hedge) })
	base := runs[healthy].quantile(0.99)
	for i, r := range rows {
		run := runs[i]
		if run.failed > 0 {
			t.Errorf("%s: %d of %d calls failed", r.name, run.failed, run.calls)
		}
		if len(run.took) == 0 {
			continue
		}
		p99 := run.quantile(0.99)
		tb.row(r.name, run.quantile(0.5), p99, fmt.Sprintf("%.2fx", float64(p99)/float64(base)), run.took[len(run.took)-1], run.slowServed,
			fmt.Sprintf("%.1f%%", 100*run.extra()), run.won, run.hedgesRefused, fmt.Sprint(run.requests))
	}
	tb.note("Answer times: LLM answers take longer the longer the answer, so a deployment's answer time is drawn from a lognormal")
	tb.note("(median %v, sigma %.1f: p95 %v, p99 %v), one draw per call and deployment from a PCG seeded by both, so every row", tailMedian, tailSigma,
		lognormalQuantile(0.95).Round(time.Millisecond), lognormalQuantile(0.99).Round(time.Millisecond))
	tb.note("sees the same answer times and a hedge draws its own. Latency is a call's, from Call to its return; extra requests are")
	tb.note("the requests all deployments received beyond one per call (hedges: the calls never fail), per call. Spreading is")
	tb.note("least-loaded (two deployments drawn, the one with fewer requests in flight first) in every row: it reads nothing of")
	tb.note("latency, so the rows differ by hedging alone (Latency's peak EWMA would also steer calls off the slow deployment).")
	tb.note("An adaptive hedge waits the p95 of the tier's recent answer times (the last %d; none before %d) and spends from the", latency.WindowSize, latency.MinSamples)
	tb.note("default hedge budget (10%% of the calls over 10s, at least 10 per window): it hedges the slow requests and also the")
	tb.note("5%% of healthy ones slower than the p95, most of which then answer first anyway (hedges sent but not won). The")
	tb.note("adaptive row's calls of 8s are slow requests left unhedged: sent before the tier had %d answers, or when the budget", latency.MinSamples)
	tb.note("was spent (refused). A hedged slow request costs its call the delay plus a second draw, which sets the hedged p99.")
	tb.note("Goal: p99 with adaptive hedging at most 1.5x the healthy p99, with at most 15%% extra requests.")
	tb.print(t)

	got := runs[adaptive]
	if len(got.took) == 0 {
		return
	}
	if p99 := got.quantile(0.99); float64(p99) > 1.5*float64(base) {
		t.Errorf("adaptive hedging: p99 %v, more than 1.5x the healthy p99 %v", p99, base)
	}
	if e := got.extra(); e > 0.15 {
		t.Errorf("adaptive hedging: %.1f%% extra requests, want at most 15%%", 100*e)
	}
}

// lognormalQuantile is the q quantile of the tail's answer times.
func lognormalQuantile(q float64) time.Duration {
	return time.Duration(float64(tailMedian) * math.Exp(tailSigma*math.Sqrt2*math.Erfinv(2*q-1)))
}
