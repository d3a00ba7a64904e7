package breaker

// The breaker and the gate as policies of a chain's target (package
// policy): what the walk asks before an attempt and tells after it.

import (
	"context"
	"errors"
	"time"

	"github.com/backstop-llm/backstop/cost"
	"github.com/backstop-llm/backstop/observe"
	"github.com/backstop-llm/backstop/policy"
	"github.com/backstop-llm/backstop/retry"
)

// Admit admits attempt a while the breaker is closed, and the half-open
// probe; it refuses with ErrOpen (ErrOpenElsewhere) while the breaker is
// open. In Send it takes the attempt's ticket, held until Settle; on the
// call's last target (a.Last) it waits for the breaker's probe (Wait)
// instead of refusing. In Plan it refuses a retry the open breaker would
// refuse after its backoff, unless the call may wait for the probe then:
// it defers to Send, and no policy after it spends anything on the retry.
func (b *Breaker) Admit(ctx context.Context, a *policy.Attempt) policy.Admission {
	switch a.Phase {
	case policy.Peek:
		return b.refusal(b.refusalNow())
	case policy.Plan:
		err := b.refusalNow()
		if err != nil && a.Last {
			return policy.Admission{Defer: true} // Send waits for the probe; nothing is spent on it
		}
		return b.refusal(err)
	}
	var t ticket
	var err error
	if a.At.IsZero() {
		t, err = b.allowNow()
	} else {
		t, err = b.allowAt(a.At)
	}
	var waited time.Duration
	awaited := false
	if err != nil && a.Last && !a.Hedge {
		awaited = true
		start := time.Now()
		if b.shared != nil {
			t, err = b.shared.poller.waitFor(ctx, b)
		} else {
			t, err = b.wait(ctx)
		}
		waited = time.Since(start)
	}
	if err != nil {
		adm := b.refusal(err)
		adm.Waited, adm.Awaited = waited, awaited
		return adm
	}
	h := policy.Hold{N: t.changes}
	if t.done != nil {
		h.Ref = t.done
	}
	return policy.Admission{Hold: h, Waited: waited, Awaited: awaited}
}

// refusal is the Admission refusing with err, nil to admit.
func (b *Breaker) refusal(err error) policy.Admission {
	if err == nil {
		return policy.Admission{}
	}
	reason := "circuit breaker " + b.State().String()
	if errors.Is(err, ErrOpenElsewhere) {
		reason = "circuit breaker open on another replica"
	}
	return policy.Admission{Err: err, Reason: reason, Cause: observe.SkipBreaker}
}

// Settle reports the attempt's outcome on the ticket Admit took: its
// verdict when it was sent (or lost a race), nothing when it was not (a
// probe slot it held is free again). With Config.MaxFailedSpend, a
// failure whose cost brings the failures' spend in the window to it is
// reported as retry.Trip: gobreaker cannot be opened from outside, and a
// Trip opens it through the path a spend cap already takes, with the
// same opening, probe and state changes. A change it causes is published to
// the other replicas when the breaker is shared.
func (b *Breaker) Settle(_ context.Context, a *policy.Attempt, h policy.Hold, o *policy.Outcome) {
	if b.cb == nil {
		return // disabled: it took no ticket
	}
	t := ticket{b: b, changes: h.N}
	if h.Ref != nil {
		t.done = h.Ref.(func(error))
	}
	if !o.Sent {
		if t.done != nil {
			t.Report(retry.Excluded)
		}
		return
	}
	v := o.Verdict
	if b.spent != nil && v == retry.Failure && o.Cost.Spent > 0 && b.overspent(o.Cost.Spent, o.At) {
		v = retry.Trip
	}
	t.ReportAt(v, o.At)
	if b.shared != nil {
		b.shared.publishLater(b)
	}
}

// Admit refuses an attempt while the gate is closed (ErrGateClosed, or
// ErrGateClosedElsewhere), in Send and Peek; in Plan it admits (the
// backoff may outlast the closure: Send asks again).
func (g *Gate) Admit(_ context.Context, a *policy.Attempt) policy.Admission {
	if a.Phase == policy.Plan {
		return policy.Admission{}
	}
	until, err := g.refused()
	if err == nil {
		return policy.Admission{}
	}
	who := "a Retry-After"
	if errors.Is(err, ErrGateClosedElsewhere) {
		who = "another replica's Retry-After"
	}
	return policy.Admission{Err: err, Cause: observe.SkipGate,
		Reason: "closed by " + who + " for " + time.Until(until).Round(time.Millisecond).String()}
}

// Settle does nothing: a gate is closed by the walk's decision not to wait
// out a Retry-After (CloseUntil), not by an attempt's end.
func (g *Gate) Settle(context.Context, *policy.Attempt, policy.Hold, *policy.Outcome) {}

// overspent counts spent, the cost of a failure that ended at at (the
// zero time: now), against Config.MaxFailedSpend, and reports whether the
// failures in the window have cost that much.
func (b *Breaker) overspent(spent cost.Money, at time.Time) bool {
	if at.IsZero() {
		at = time.Now()
	}
	b.spent.AddNAt(0, int64(spent), at)
	sum, _ := b.spent.Sums()
	return sum >= int64(b.settings.MaxFailedSpend)
}
