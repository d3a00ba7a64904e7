package chain_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/chain"
)

// TestPatienceTimerFiringAsTheAttemptAnswersSendsNoStrayRacer: a
// primary that answers at the very instant its patience runs out. The
// patience timer's goroutine has started but may not yet have sent the
// racer when the walk finds the timer expired; the walk must wait for it
// and end the racer it sends. Before, the walk went on as if nothing had
// fired, and the racer sent after the call returned ran on, unwaited for:
// a request to the fallback that nothing ever canceled.
func TestPatienceTimerFiringAsTheAttemptAnswersSendsNoStrayRacer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		primary := &timed{name: "primary", delay: time.Second}
		c, fb := silentThenFallback(t, primary, func(p *chain.Target) { p.Patience = time.Second })
		fb.release = release // the racer, when sent, waits until canceled
		for i := range 200 {
			res, err := c.Call(t.Context(), question)
			if err != nil || res.Served.Target != "primary" {
				t.Fatalf("call %d: served by %q, %v\n%s", i, res.Served.Target, err, lines(res))
			}
			synctest.Wait() // a stray racer, if any, has sent its request
			if sent, canceled := fb.count(), fb.cancels(); sent != canceled {
				t.Fatalf("call %d: the fallback got %d requests, %d of them canceled: a racer outlived its call", i, sent, canceled)
			}
		}
	})
}
