package chain

// What a refused retry leaves: the target's last failure with the reason
// its retry was not sent.

import (
	"context"
	"time"

	"github.com/backstop-llm/backstop/internal/callobs"
	"github.com/backstop-llm/backstop/llm"
)

// refusedError is a target's last failure with the reason its next retry
// was not sent (budget.ErrExhausted, breaker.ErrOpen, the gate); both are
// reachable with errors.Is and errors.As.
type refusedError struct{ last, why error }

func (e *refusedError) Error() string {
	return e.last.Error() + "; retry not sent: " + e.why.Error()
}

func (e *refusedError) Unwrap() []error { return []error{e.last, e.why} }

// closeGate closes t for a Retry-After that this call does not wait out, so
// that concurrent calls skip t instead of each rediscovering the 429.
// With Builder.Shared, the other replicas are told too.
func (c *Chain) closeGate(ctx context.Context, obs *callobs.Call, t *target, retryAfter time.Duration) {
	d := min(retryAfter, t.maxGate)
	until := time.Now().Add(d)
	t.gate.CloseUntil(until)
	obs.GateClosed(&t.ob, until)
	if c.shared != nil {
		c.shared.PublishGateLater(t.Name, d)
	}
}

// waitCut ends the walk on t when the deadline or the caller ended the
// wait before attempt a+1, after slept: the retry granted is not sent.
func (w *walk) waitCut(a *attempt, s *sent, slept time.Duration) tried {
	if out, stop := w.stoppedWaiting(a.t, a.n+1, slept); stop {
		return out
	}
	w.record(skipped(a.t, a.n+1, slept, ErrDeadline, "the deadline passed during the wait"))
	return tried{err: s.err, kind: s.kind}
}

// stoppedWaiting ends the walk on t when the caller canceled while attempt
// n waited (after wait): recorded as the stop it is. stop is false when
// the caller did not cancel.
func (w *walk) stoppedWaiting(t *target, n int, wait time.Duration) (out tried, stop bool) {
	cerr := canceled(w.caller)
	if cerr == nil {
		return tried{}, false
	}
	rec := skipped(t, n, wait, cerr, "the caller canceled during the wait")
	rec.Decision = DecisionStop
	w.record(rec)
	return tried{err: cerr, kind: llm.KindCanceled}, true
}
