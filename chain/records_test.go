package chain_test

// Result.Attempts: one record per attempt or skip, each with its own
// decision, wait and reason.

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/cache"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/degrade"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/retry"
)

var hi = llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}

// TestRetryRefusedByTheBreakerKeepsEachDecisionOnItsRecord: the quickstart
// printed "#3: unknown -> next: circuit breaker open" for an attempt never
// sent, and "#2 ... 529 overloaded" with no decision.
func TestRetryRefusedByTheBreakerKeepsEachDecisionOnItsRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &stub{name: "p", fn: fail(llm.KindOverloaded, 529)}
		res := served(t, chain.New("c").
			Primary(chain.Target{Name: "p", Provider: p, Model: "m", Breaker: breaker.Config{ConsecutiveFailures: 2}}).
			OrDegrade(degrade.Static(llm.Response{Text: "sorry"})))
		if len(res.Attempts) != 4 {
			t.Fatalf("attempts:\n%s", lines(res))
		}
		first, second, refused := res.Attempts[0], res.Attempts[1], res.Attempts[2]
		if first.Decision != chain.DecisionRetry || first.Kind != llm.KindOverloaded {
			t.Errorf("#1: %v; want overloaded -> retry", first)
		}
		if second.Decision != chain.DecisionNext || second.Kind != llm.KindOverloaded || second.Reason != "circuit breaker open" {
			t.Errorf("#2: %v; want overloaded -> next: circuit breaker open", second)
		}
		if refused.Decision != chain.DecisionSkip || refused.N != 3 || refused.Kind != llm.KindUnknown ||
			!errors.Is(refused.Err, breaker.ErrOpen) || refused.Status != 0 {
			t.Errorf("#3: %+v; want a skip of retry 3 for the open breaker", refused)
		}
		if s := refused.String(); s != "p #3: retry not sent: circuit breaker open" {
			t.Errorf("#3 prints %q", s)
		}
	})
}

// TestWaitBeforeARefusedRetryIsRecorded: a backoff slept before a retry
// that was then refused (another call closed the gate meanwhile) was
// recorded as a wait of 0.
func TestWaitBeforeARefusedRetryIsRecorded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &stub{name: "p", fn: func(_ context.Context, req llm.Request) (*llm.Response, error) {
			if req.Messages[0].Content == "b" { // the other call: a Retry-After too long to wait
				return nil, &llm.Error{Provider: "p", Status: 429, Kind: llm.KindRateLimited, RetryAfter: time.Hour}
			}
			return nil, &llm.Error{Provider: "p", Status: 503, Kind: llm.KindOverloaded}
		}}
		c, err := chain.New("c").
			Primary(chain.Target{Name: "p", Provider: p, Model: "m", Breaker: breaker.Config{Disabled: true},
				Retry: retry.Policy{Base: time.Second, Cap: time.Second, Jitter: retry.NoJitter}}).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			time.Sleep(100 * time.Millisecond)
			c.Call(context.Background(), llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "b"}}})
		}()
		res, _ := c.Call(t.Context(), hi)
		synctest.Wait()
		if len(res.Attempts) != 2 {
			t.Fatalf("attempts:\n%s", lines(res))
		}
		a := res.Attempts[1]
		if a.Decision != chain.DecisionSkip || a.N != 2 || a.Wait != time.Second || !errors.Is(a.Err, breaker.ErrGateClosed) {
			t.Errorf("#2: %+v; want a skip after the 1s it waited, for the closed gate", a)
		}
	})
}

// TestDegradationWithNothingToServeSaysWhy: a LastGood with nothing
// remembered printed no reason.
func TestDegradationWithNothingToServeSaysWhy(t *testing.T) {
	store, err := cache.NewMemory(cache.MemoryConfig{MaxEntries: 10, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	c, err := chain.New("c").
		Primary(chain.Target{Name: "p", Provider: &stub{name: "p", fn: fail(llm.KindAuth, 401)}, Model: "m"}).
		OrDegrade(degrade.LastGood(degrade.LastGoodConfig{Store: store})).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Call(context.Background(), hi)
	if !errors.Is(err, chain.ErrExhausted) {
		t.Fatalf("got %v", err)
	}
	last := res.Attempts[len(res.Attempts)-1]
	if last.Target != "last-good" || last.Reason != "nothing remembered for this question" || !errors.Is(last.Err, degrade.ErrNoLastGood) {
		t.Errorf("last-good: %+v (%s)", last, last)
	}
}

// TestStreamTheChainStoppedIsRecordedAsStopped: a stream that failed after
// its first chunk, with no restart, was recorded "-> next".
func TestStreamTheChainStoppedIsRecordedAsStopped(t *testing.T) {
	p := &streamer{stub: stub{name: "p"}, chunks: []string{"a", "b", "c"}, failAt: 2}
	c, err := chain.New("c").
		Primary(chain.Target{Name: "p", Provider: p, Model: "m"}).
		OrProvider(chain.Target{Name: "o", Provider: &stub{name: "o"}, Model: "m"}).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	s := c.Stream(context.Background(), hi)
	if _, err := collect(t, s); !errors.Is(err, chain.ErrIncomplete) {
		t.Fatalf("got %v", err)
	}
	res, _ := s.Result()
	if a := res.Attempts[len(res.Attempts)-1]; a.Decision != chain.DecisionStop || a.Kind != llm.KindOverloaded {
		t.Errorf("the stream's record: %v; want overloaded -> stop", a)
	}
}

// TestDecisionZeroValueIsNotServed: an unset Decision read as success.
func TestDecisionZeroValueIsNotServed(t *testing.T) {
	var d chain.Decision
	if d == chain.DecisionServed || d.String() != "none" {
		t.Errorf("the zero Decision is %v", d)
	}
}

// TestEveryRecordHasADecision: no record the chain makes is left without
// one, on any path of a mixed call.
func TestEveryRecordHasADecision(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int32
		flaky := &stub{name: "p", fn: func(context.Context, llm.Request) (*llm.Response, error) {
			if n.Add(1) < 3 {
				return nil, &llm.Error{Provider: "p", Status: 529, Kind: llm.KindOverloaded}
			}
			return &llm.Response{Text: "ok"}, nil
		}}
		res := served(t, chain.New("c").
			Primary(chain.Target{Name: "a", Provider: &stub{name: "a", fn: fail(llm.KindServer, 500)}, Model: "m", Retry: retry.Policy{MaxAttempts: 2}}).
			OrProvider(chain.Target{Name: "p", Provider: flaky, Model: "m"}))
		for _, a := range res.Attempts {
			if a.Decision == chain.DecisionNone {
				t.Errorf("a record without a decision: %v", a)
			}
		}
		if got := res.Attempts[len(res.Attempts)-1].Decision; got != chain.DecisionServed {
			t.Errorf("the answer's record: %v", got)
		}
	})
}

// served builds b and makes one call of it, which must answer.
func served(t *testing.T, b *chain.Builder) *chain.Result {
	t.Helper()
	c, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Call(t.Context(), hi)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func lines(res *chain.Result) string {
	var b strings.Builder
	for _, a := range res.Attempts {
		b.WriteString("  " + a.String() + "\n")
	}
	return b.String()
}
