package bench

// The healthy path: one call through a chain with one healthy in-process
// target, against the same provider called directly, and against the same
// work through failsafe-go's retry + circuit breaker + fallback. The
// overhead of each is its time minus the direct call's, measured in one run.

import (
	"context"
	"testing"
	"time"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/degrade"
	"github.com/backstop-llm/backstop/llm"
	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/fallback"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/failsafe-go/failsafe-go/timeout"
)

// healthy answers every request at once with the same answer, as a
// provider whose HTTP round trip cost nothing would: what is left is the
// caller's machinery.
type healthy struct{ resp llm.Response }

func (*healthy) Name() string { return "anthropic" }

func (h *healthy) Complete(context.Context, llm.Request) (*llm.Response, error) { return &h.resp, nil }

var (
	provider = &healthy{resp: llm.Response{Text: "ok", Model: "claude-sonnet-5-5", ID: "msg_1", RequestID: "req_1", FinishReason: "end_turn",
		Usage: llm.Usage{InputTokens: 10, OutputTokens: 2}}}
	request = llm.Request{Model: "claude-sonnet-5-5", Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}},
		Params: llm.Params{MaxTokens: 100}}
	static = llm.Response{Text: "busy"}
	sink   *llm.Response
)

func backstopChain(tb testing.TB) *chain.Chain {
	c, err := chain.New("bench").
		Primary(chain.Target{Name: "sonnet", Provider: provider, Model: "claude-sonnet-5-5"}).
		OrDegrade(degrade.Static(static)).
		Build()
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// calls is the body of a benchmark of a chain: the same call to c, over
// and over, keeping each answer.
func calls(b *testing.B, c *chain.Chain) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res, err := c.Call(ctx, request)
		if err != nil {
			b.Fatal(err)
		}
		sink = res.Response
	}
}

func failsafeExecutor() failsafe.Executor[*llm.Response] {
	fb := fallback.NewWithResult(&static)
	rp := retrypolicy.NewBuilder[*llm.Response]().WithMaxAttempts(3).
		WithBackoff(500*time.Millisecond, 20*time.Second).WithJitterFactor(1).Build()
	cb := circuitbreaker.NewBuilder[*llm.Response]().WithFailureThreshold(5).
		WithFailureRateThreshold(0.5, 20, 30*time.Second).WithDelay(30 * time.Second).Build()
	return failsafe.With[*llm.Response](fb, rp, cb)
}

// failsafeBounded is failsafeExecutor with failsafe-go's Timeout policy
// innermost, bounding each attempt as the chain's default Timeout (10 minutes) does: the
// like-for-like baseline for a chain called without a deadline.
func failsafeBounded() failsafe.Executor[*llm.Response] {
	fb := fallback.NewWithResult(&static)
	rp := retrypolicy.NewBuilder[*llm.Response]().WithMaxAttempts(3).
		WithBackoff(500*time.Millisecond, 20*time.Second).WithJitterFactor(1).Build()
	cb := circuitbreaker.NewBuilder[*llm.Response]().WithFailureThreshold(5).
		WithFailureRateThreshold(0.5, 20, 30*time.Second).WithDelay(30 * time.Second).Build()
	return failsafe.With[*llm.Response](fb, rp, cb, timeout.New[*llm.Response](10*time.Minute))
}

func BenchmarkHealthyCall(b *testing.B) {
	ctx := context.Background()
	run := func(b *testing.B, call func() *llm.Response) {
		b.Run("serial", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sink = call()
			}
		})
		b.Run("parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if call() == nil {
						b.Error("no answer")
					}
				}
			})
		})
	}
	b.Run("direct", func(b *testing.B) {
		run(b, func() *llm.Response {
			r, _ := provider.Complete(ctx, request)
			return r
		})
	})
	b.Run("backstop", func(b *testing.B) {
		c := backstopChain(b)
		run(b, func() *llm.Response {
			res, err := c.Call(ctx, request)
			if err != nil {
				b.Fatal(err)
			}
			return res.Response
		})
	})
	b.Run("failsafe", func(b *testing.B) {
		ex := failsafeExecutor()
		run(b, func() *llm.Response {
			r, err := ex.Get(func() (*llm.Response, error) { return provider.Complete(ctx, request) })
			if err != nil {
				b.Fatal(err)
			}
			return r
		})
	})
}

// BenchmarkOverheadRatio measures the ratio BenchmarkHealthyCall is read
// for, backstop's overhead over failsafe-go's (each over the direct call),
// on one goroutine, with the three ways of calling interleaved in blocks of
// overheadBlock calls: whatever slows the machine down for a while (another
// tenant, the collector, the clock's frequency) falls on all three alike,
// where separate benchmarks a second apart each get their own share. Read
// its "ratio" metric (with benchstat over -count runs); ns/op is per block
// of all three and means little.
//
// "ratio-deadline" is the same ratio for calls whose context carries a
// deadline (a minute away), as a service's usually does: the chain's
// default per-attempt bound (10 minutes) then needs
// no timer of its own, where a context without one pays for it.
// "ratio-bounded" compares a call without a deadline like for like:
// against failsafe-go with its Timeout policy (10 minutes) added
// innermost, the timer backstop arms by default.
func BenchmarkOverheadRatio(b *testing.B) {
	ctx := context.Background()
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	c, ex, bounded := backstopChain(b), failsafeExecutor(), failsafeBounded()
	ways := [5]func() *llm.Response{
		func() *llm.Response { r, _ := provider.Complete(ctx, request); return r },
		func() *llm.Response {
			res, err := c.Call(ctx, request)
			if err != nil {
				b.Fatal(err)
			}
			return res.Response
		},
		func() *llm.Response {
			r, err := ex.Get(func() (*llm.Response, error) { return provider.Complete(ctx, request) })
			if err != nil {
				b.Fatal(err)
			}
			return r
		},
		func() *llm.Response {
			res, err := c.Call(dctx, request)
			if err != nil {
				b.Fatal(err)
			}
			return res.Response
		},
		func() *llm.Response {
			r, err := bounded.GetWithExecution(func(e failsafe.Execution[*llm.Response]) (*llm.Response, error) {
				return provider.Complete(e.Context(), request)
			})
			if err != nil {
				b.Fatal(err)
			}
			return r
		},
	}
	var spent [5]time.Duration
	for b.Loop() {
		for i, call := range ways {
			start := time.Now()
			for range overheadBlock {
				sink = call()
			}
			spent[i] += time.Since(start)
		}
	}
	calls := float64(b.N * overheadBlock)
	direct, backstop, failsafe := float64(spent[0])/calls, float64(spent[1])/calls, float64(spent[2])/calls
	withDeadline, failsafeTimeout := float64(spent[3])/calls, float64(spent[4])/calls
	b.ReportMetric((backstop-direct)/(failsafe-direct), "ratio")
	b.ReportMetric((withDeadline-direct)/(failsafe-direct), "ratio-deadline")
	b.ReportMetric((backstop-direct)/(failsafeTimeout-direct), "ratio-bounded")
	b.ReportMetric(backstop, "backstop-ns/call")
	b.ReportMetric(failsafe, "failsafe-ns/call")
}

// overheadBlock is how many calls BenchmarkOverheadRatio makes one way
// before the next: enough that reading the clock around a block costs
// nothing next to it, few enough that a block takes tens of microseconds.
const overheadBlock = 64

// TestBaselinesAnswer checks that the benchmarks measure real work: each
// way of calling returns the provider's answer.
func TestBaselinesAnswer(t *testing.T) {
	res, err := backstopChain(t).Call(context.Background(), request)
	if err != nil || res.Text != "ok" || res.Served.Target != "sonnet" {
		t.Fatalf("backstop: %v %+v", err, res)
	}
	r, err := failsafeExecutor().Get(func() (*llm.Response, error) { return provider.Complete(context.Background(), request) })
	if err != nil || r.Text != "ok" {
		t.Fatalf("failsafe: %v %+v", err, r)
	}
}
