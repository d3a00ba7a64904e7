package chain

// Why a target or a retry was not sent (a closed gate, an open breaker, an
// exhausted budget), in words for the records and as an error for the
// causes.

import (
	"context"
	"errors"
	"time"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/budget"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/observe"
	"github.com/backstop-llm/backstop/retry"
)

// gateReason says why a gate closed until until refused an attempt with
// err.
func gateReason(until time.Time, err error) string {
	who := "a Retry-After"
	if errors.Is(err, breaker.ErrGateClosedElsewhere) {
		who = "another replica's Retry-After"
	}
	return "closed by " + who + " for " + time.Until(until).Round(time.Millisecond).String()
}

// breakerReason says why t's breaker refused an attempt with err.
func breakerReason(t *target, err error) string {
	if errors.Is(err, breaker.ErrOpenElsewhere) {
		return "circuit breaker open on another replica"
	}
	return "circuit breaker " + t.breaker.State().String()
}

// refund gives back a retry that was granted but not sent, if b can.
func refund(ctx context.Context, b budget.Budget) {
	if r, ok := b.(budget.Refunder); ok {
		r.Refund(ctx)
	}
}

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
func (c *Chain) closeGate(ctx context.Context, obs *callObs, t *target, retryAfter time.Duration) {
	d := min(retryAfter, t.maxGate)
	until := time.Now().Add(d)
	t.gate.CloseUntil(until)
	obs.gateClosed(&t.ob, until)
	if c.shared != nil {
		c.publishGate(t, d)
	}
}

// retryRefused asks, before sleeping, whether the retry plan granted can be
// sent: not when other calls (or replicas) opened the breaker meanwhile,
// nor when the budget is exhausted. A refused retry leaves the target.
func (w *walk) retryRefused(a *attempt, s *sent) (tried, bool) {
	t := a.t
	var why error
	var reason string
	var cause observe.SkipCause
	if why = t.breaker.Refusal(); why != nil {
		if w.mayWait(t) {
			w.unpaid = true // sent after the probe, if it succeeds: see readmit
			return tried{}, false
		}
		reason, cause = breakerReason(t, why), observe.SkipBreaker
	} else if why = t.budget.Withdraw(w.ctx); why != nil {
		if w.mayWait(t) {
			// Many calls failing at once may open the breaker during the
			// backoff: then the probe decides, not the budget (readmit).
			w.unpaid, w.owed = true, why
			return tried{}, false
		}
		reason, cause = "retry budget exhausted", observe.SkipBudget
	} else {
		return tried{}, false
	}
	// The refusal ends this call's retry, nothing more: the Retry-After
	// was granted as a wait calls will take, so the gate stays open.
	w.record(a.record(s, DecisionNext, reason))
	w.record(skipped(t, a.n+1, 0, why, reason))
	w.obs.skip(&t.ob, a.n+1, cause, reason, why)
	return tried{err: &refusedError{s.err, why}, kind: s.kind}, true
}

// readmit asks the gate and the breaker again after the wait before retry
// n: other calls may have closed or opened them meanwhile. A refusal is
// recorded with the wait that was slept for nothing.
func (w *walk) readmit(t *target, n int, wait time.Duration) (breaker.Ticket, error) {
	var why error
	var reason string
	var cause observe.SkipCause
	owed := w.owed
	w.owed = nil
	if until, err := t.gate.Refusal(); err != nil {
		why, reason, cause = err, gateReason(until, err), observe.SkipGate
	} else if ticket, err := t.breaker.Allow(); err == nil && owed != nil {
		// The breaker stayed closed: the budget's refusal stands.
		ticket.Report(retry.Excluded)
		why, reason, cause = owed, "retry budget exhausted", observe.SkipBudget
	} else if err == nil {
		return ticket, nil
	} else if w.mayWait(t) {
		w.waited = true
		before := w.c.clock()
		ticket, err = w.waitBreaker(t)
		w.probeWait = w.c.clock() - before
		if err == nil {
			return ticket, nil
		}
		wait += w.probeWait
		w.probeWait = 0
		why, reason, cause = err, breakerReason(t, err), observe.SkipBreaker
	} else {
		why, reason, cause = err, breakerReason(t, err), observe.SkipBreaker
	}
	w.record(skipped(t, n, wait, why, reason))
	w.obs.skip(&t.ob, n, cause, reason, why)
	return breaker.Ticket{}, why
}

// waitCut ends the walk on t when the deadline or the caller ended the
// wait before attempt a+1, after slept: the retry granted is not sent.
func (w *walk) waitCut(a *attempt, s *sent, slept time.Duration) tried {
	w.owed = nil
	w.unsend(a.t)
	if cerr := canceled(w.caller); cerr != nil {
		rec := skipped(a.t, a.n+1, slept, cerr, "the caller canceled during the wait")
		rec.Decision = DecisionStop
		w.record(rec)
		return tried{err: cerr, kind: llm.KindCanceled}
	}
	w.record(skipped(a.t, a.n+1, slept, ErrDeadline, "the deadline passed during the wait"))
	return tried{err: s.err, kind: s.kind}
}

// unsend gives back to t's budget the retry the walk withdrew and will not
// send (refused, or its wait cut short); a retry that waited for the
// breaker's probe was never withdrawn (unpaid), and gives back nothing.
func (w *walk) unsend(t *target) {
	if !w.unpaid {
		refund(w.ctx, t.budget)
	}
	w.unpaid = false
}
