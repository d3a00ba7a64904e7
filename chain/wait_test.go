package chain_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/retry"
)

// Without a fallback, a call that the open breaker refuses waits for the
// breaker's probe when it has time (no deadline here) and is served once
// the probe found the target back; a call whose deadline comes before the
// probe is due fails at once with the breaker's error, as before.
func TestCallWithoutFallbackWaitsForTheProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var down atomic.Bool
		p := &stub{name: "p", fn: func(ctx context.Context, req llm.Request) (*llm.Response, error) {
			if down.Load() {
				return fails(ctx)
			}
			return answers(ctx)
		}}
		c, err := chain.New("c").Primary(chain.Target{Name: "p", Provider: p, Model: "m",
			Retry: retry.Policy{MaxAttempts: 1}, Breaker: breaker.Config{ConsecutiveFailures: 1}}).Build()
		if err != nil {
			t.Fatal(err)
		}
		down.Store(true)
		if _, err := c.Call(t.Context(), question); err == nil {
			t.Fatal("the failing call answered")
		}
		time.Sleep(time.Second)
		down.Store(false) // back, 4s before the probe is due

		short, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		began := time.Now()
		if _, err := c.Call(short, question); !errors.Is(err, breaker.ErrOpen) || time.Since(began) != 0 {
			t.Fatalf("a call with 1s left: %v after %v; want breaker.ErrOpen at once", err, time.Since(began))
		}

		began = time.Now()
		res, err := c.Call(t.Context(), question)
		if err != nil || res.Served.Target != "p" {
			t.Fatalf("a call with time left: %v; want it served after the probe", err)
		}
		if d := time.Since(began); d < 3*time.Second || d > 5*time.Second {
			t.Fatalf("served after %v; want when the probe was due, 4s", d)
		}
		// The wait is in the attempt's record: a trace at 3 a.m. shows
		// where the 4s went.
		if a := res.Attempts[len(res.Attempts)-1]; a.Wait != time.Since(began) {
			t.Fatalf("the served attempt records a wait of %v; want the %v it waited for the probe\n%s", a.Wait, time.Since(began), lines(res))
		}
	})
}
