package chain_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/retry"
)

// silentThenFallback builds a chain of primary p, then a fallback that
// answers at once, every other field at its default.
func silentThenFallback(t *testing.T, p llm.Provider, edit func(*chain.Target)) (*chain.Chain, *timed) {
	t.Helper()
	fb := &timed{name: "fallback"}
	primary := chain.Target{Name: "primary", Provider: p, Model: "m"}
	if edit != nil {
		edit(&primary)
	}
	c, err := chain.New("patience").Primary(primary).
		OrProvider(chain.Target{Name: "fallback", Provider: fb, Model: "f"}).Build()
	if err != nil {
		t.Fatal(err)
	}
	return c, fb
}

// TestSilentPrimaryIsRacedByTheFallback: a primary that takes the request
// and never answers no longer holds the call until its deadline. With
// nothing configured, the fallback is raced after the patience's floor,
// 30 s, and serves; the silent attempt is recorded as overdue and counted against
// its breaker. Before, the call waited for the deadline and skipped every
// fallback ("not sent: the deadline passed").
func TestSilentPrimaryIsRacedByTheFallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		silent := &timed{name: "primary", release: make(chan struct{})}
		c, fb := silentThenFallback(t, silent, nil)
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		start := time.Now()
		res, err := c.Call(ctx, question)
		took := time.Since(start)
		if err != nil {
			t.Fatalf("%v\n%s", err, lines(res))
		}
		if res.Served.Target != "fallback" || took != 30*time.Second {
			t.Fatalf("served by %s after %v; want the fallback after %v:\n%s", res.Served.Target, took, 30*time.Second, lines(res))
		}
		if took > 35*time.Second {
			t.Fatalf("the goal is the fallback within 35s; took %v", took)
		}
		if silent.count() != 1 || fb.count() != 1 || silent.cancels() != 1 {
			t.Fatalf("requests: primary %d (canceled %d), fallback %d; want one each, the primary's canceled", silent.count(), silent.cancels(), fb.count())
		}
		lost := res.Attempts[0]
		if lost.Target != "primary" || lost.Decision != chain.DecisionLost || !strings.Contains(lost.Reason, "patience of 30s") {
			t.Fatalf("the silent attempt's record: %s", lines(res))
		}
		if won := res.Attempts[len(res.Attempts)-1]; won.Target != "fallback" || !won.Hedge {
			t.Fatalf("the racer's record: %s", lines(res))
		}
	})
}

// TestOverdueAttemptsOpenTheBreaker: a primary that went silent is a
// failing target, not a lost race: after the breaker's consecutive
// failures, calls go to the fallback without waiting.
func TestOverdueAttemptsOpenTheBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		silent := &timed{name: "primary", release: make(chan struct{})}
		c, _ := silentThenFallback(t, silent, nil)
		var waits []time.Duration
		for range 8 {
			start := time.Now()
			res, err := c.Call(t.Context(), question)
			if err != nil || res.Served.Target != "fallback" {
				t.Fatalf("%v\n%s", err, lines(res))
			}
			waits = append(waits, time.Since(start))
		}
		if waits[len(waits)-1] != 0 {
			t.Fatalf("waits %v: once the breaker opened on the silent primary, the fallback should serve at once", waits)
		}
		if n := silent.count(); n >= len(waits) {
			t.Fatalf("the silent primary was sent all %d calls; its breaker never opened", n)
		}
	})
}

// TestSlowFirstTokenIsRacedAfterTenSeconds: a stream whose first token is
// 20 s away is served by the fallback after the patience's floor for a
// first chunk, 10 s; the goal is within 15 s. Before: no first-chunk limit at all (21 s), and a
// configured one retried the slow target three times (31.5 s).
func TestSlowFirstTokenIsRacedAfterTenSeconds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := &rprov{name: "primary", steps: chunks("late answer"), every: 20 * time.Second}
		fb := &rprov{name: "fallback", steps: chunks("fast ", "answer")}
		c, err := chain.New("patience").Primary(chain.Target{Name: "primary", Provider: slow, Model: "m"}).
			OrProvider(chain.Target{Name: "fallback", Provider: fb, Model: "f"}).Build()
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		s := c.Stream(t.Context(), question)
		got, err := collect(t, s)
		took := time.Since(start)
		res, _ := s.Result()
		if err != nil {
			t.Fatalf("%v\n%s", err, lines(res))
		}
		if text := texts(got); text != "fast answer" || res.Served.Target != "fallback" {
			t.Fatalf("got %q from %s", text, res.Served.Target)
		}
		if took != 10*time.Second || took > 15*time.Second {
			t.Fatalf("served after %v; want %v (the goal: within 15s)", took, 10*time.Second)
		}
	})
}

// TestSlowTargetAloneIsWaitedFor: with nowhere else to go, a slow target
// is neither cut nor raced: a whole answer three minutes away, and a
// first token a minute away, are waited for.
func TestSlowTargetAloneIsWaitedFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := &timed{name: "only", delay: 3 * time.Minute}
		c, err := chain.New("alone").Primary(chain.Target{Name: "only", Provider: slow, Model: "m"}).Build()
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Call(t.Context(), question)
		if err != nil || slow.count() != 1 {
			t.Fatalf("%v after %d requests\n%s", err, slow.count(), lines(res))
		}

		sp := &rprov{name: "only", steps: chunks("slow ", "thought"), every: 55 * time.Second}
		c, err = chain.New("alone").Primary(chain.Target{Name: "only", Provider: sp, Model: "m"}).Build()
		if err != nil {
			t.Fatal(err)
		}
		s := c.Stream(t.Context(), question)
		got, err := collect(t, s)
		if err != nil || texts(got) != "slow thought" || sp.opened != 1 {
			t.Fatalf("%q, %v after %d streams", texts(got), err, sp.opened)
		}
	})
}

// TestTimeoutMovesOnFirst: an attempt that timed out is not retried on
// its target while the next target can take the call: a 1 s Timeout on a
// silent primary reaches the fallback after 1 s, not after three
// timeouts and two backoffs. Before: 3 attempts on the primary.
func TestTimeoutMovesOnFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		silent := &timed{name: "primary", release: make(chan struct{})}
		c, fb := silentThenFallback(t, silent, func(t *chain.Target) { t.Timeout = time.Second })
		start := time.Now()
		res, err := c.Call(t.Context(), question)
		if err != nil || res.Served.Target != "fallback" {
			t.Fatalf("%v\n%s", err, lines(res))
		}
		if took := time.Since(start); took != time.Second || silent.count() != 1 || fb.count() != 1 {
			t.Fatalf("after %v: primary %d, fallback %d requests; want 1s, one each\n%s", took, silent.count(), fb.count(), lines(res))
		}
		if a := res.Attempts[0]; a.Kind != llm.KindTimeout || a.Decision != chain.DecisionNext || !strings.Contains(a.Reason, "another target is tried first") {
			t.Fatalf("the timed-out attempt's record:\n%s", lines(res))
		}
	})
}

// TestTimeoutRetriedWhenNothingElseCan: with no other target, a timed-out
// attempt is retried as before.
func TestTimeoutRetriedWhenNothingElseCan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &scripted{name: "only", script: []func(context.Context) (*llm.Response, error){hangs, answers}}
		c, err := chain.New("alone").Primary(chain.Target{Name: "only", Provider: p, Model: "m", Timeout: time.Second,
			Retry: retry.Policy{Base: time.Millisecond}}).Build()
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Call(t.Context(), question)
		if err != nil || p.n.Load() != 2 || res.Attempts[0].Decision != chain.DecisionRetry {
			t.Fatalf("%v after %d requests\n%s", err, p.n.Load(), lines(res))
		}
	})
}

// TestPatienceIsLearned: a target whose answers routinely take 25 s is
// not raced at the 30 s floor once it has answered 20 times: its patience
// is twice its p99, so a 45 s answer is waited for.
func TestPatienceIsLearned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := &timed{name: "primary", delay: 25 * time.Second}
		c, fb := silentThenFallback(t, slow, nil)
		for range 20 {
			if res, err := c.Call(t.Context(), question); err != nil || res.Served.Target != "primary" {
				t.Fatalf("%v\n%s", err, lines(res))
			}
		}
		slow.delay = 45 * time.Second
		res, err := c.Call(t.Context(), question)
		if err != nil || res.Served.Target != "primary" || fb.count() != 0 {
			t.Fatalf("a 45s answer from a target that answers in 25s was raced: %v, fallback sent %d\n%s", err, fb.count(), lines(res))
		}
	})
}

// TestDeclaredPatience: Patience set on a target is its patience from the
// first call.
func TestDeclaredPatience(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := &timed{name: "primary", delay: 50 * time.Second}
		c, fb := silentThenFallback(t, slow, func(t *chain.Target) { t.Patience = time.Minute })
		res, err := c.Call(t.Context(), question)
		if err != nil || res.Served.Target != "primary" || fb.count() != 0 {
			t.Fatalf("%v, fallback sent %d\n%s", err, fb.count(), lines(res))
		}
		if _, err := chain.New("bad").Primary(chain.Target{Name: "p", Provider: slow, Model: "m", Patience: -time.Second}).Build(); err == nil ||
			!strings.Contains(err.Error(), "Patience") {
			t.Fatalf("a negative Patience: %v", err)
		}
	})
}

// TestStreamStalledMidAnswerIsCutByTheDefault: a stream that stops
// sending mid-answer is ended after DefaultIdleTimeout, with KindTimeout,
// and a 30 s pause is waited out.
func TestStreamStalledMidAnswerIsCutByTheDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		paused := &rprov{name: "only", steps: chunks("a", "b"), every: 30 * time.Second}
		c, err := chain.New("idle").Primary(chain.Target{Name: "only", Provider: paused, Model: "m", Patience: time.Hour}).Build()
		if err != nil {
			t.Fatal(err)
		}
		got, err := collect(t, c.Stream(t.Context(), question))
		if err != nil || texts(got) != "ab" {
			t.Fatalf("a 30s pause: %q, %v", texts(got), err)
		}
		stalled := &rprov{name: "only", steps: chunks("a", "b"), every: 2 * time.Minute}
		c, err = chain.New("idle").Primary(chain.Target{Name: "only", Provider: stalled, Model: "m", FirstChunkTimeout: time.Hour}).Build()
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = collect(t, c.Stream(t.Context(), question))
		if llm.KindOf(err) != llm.KindTimeout || time.Since(start) != 2*time.Minute+chain.DefaultIdleTimeout {
			t.Fatalf("a stalled stream ended after %v with %v; want a timeout %v after its first chunk", time.Since(start), err, chain.DefaultIdleTimeout)
		}
	})
}

// TestPanicAfterThePatienceRaceEndsTheRacer: a slow attempt whose
// provider panics after its racer was sent does not leave the racer
// running: it is canceled, and the panic reaches the caller.
func TestPanicAfterThePatienceRaceEndsTheRacer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := &scripted{name: "primary", script: []func(context.Context) (*llm.Response, error){
			func(ctx context.Context) (*llm.Response, error) {
				time.Sleep(40 * time.Second) // raced at 30s
				panic("provider bug")
			},
		}}
		fb := &timed{name: "fallback", delay: time.Minute}
		c, err := chain.New("patience").Primary(chain.Target{Name: "primary", Provider: slow, Model: "m"}).
			OrProvider(chain.Target{Name: "fallback", Provider: fb, Model: "f"}).Build()
		if err != nil {
			t.Fatal(err)
		}
		func() {
			defer func() {
				if p := recover(); p != "provider bug" {
					t.Fatalf("recovered %v; want the provider's panic", p)
				}
			}()
			c.Call(t.Context(), question)
		}()
		if fb.count() != 1 || fb.cancels() != 1 {
			t.Fatalf("the racer: %d requests, %d canceled; want its one request canceled", fb.count(), fb.cancels())
		}
	})
}
