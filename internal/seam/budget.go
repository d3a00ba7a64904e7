package seam

// Budgets as policies of a chain's target: the retry budget and the
// hedge budget, on the seam.

import (
	"context"

	"github.com/backstop-llm/backstop/budget"
	"github.com/backstop-llm/backstop/observe"
	"github.com/backstop-llm/backstop/policy"
)

// Retries makes b the retry budget of a target: in Plan it withdraws a
// retry (a first attempt spends nothing), refusing with b's error when
// b refuses (softly on the call's last target: the breaker's probe may
// still take the call after the backoff); every attempt sent is recorded
// as it ends; a retry withdrawn and not sent is refunded when b has a
// Refund method.
func Retries(b budget.Budget) policy.Policy { return retries{b} }

type retries struct{ b budget.Budget }

func (r retries) Admit(ctx context.Context, a *policy.Attempt) policy.Admission {
	if a.Phase != policy.Plan || a.N < 2 {
		return policy.Admission{}
	}
	if err := r.b.Withdraw(ctx); err != nil {
		return policy.Admission{Err: err, Reason: "retry budget exhausted", Cause: observe.SkipBudget, Soft: a.Last}
	}
	return policy.Admission{Hold: policy.Hold{N: 1}}
}

func (r retries) Settle(ctx context.Context, a *policy.Attempt, h policy.Hold, o *policy.Outcome) {
	switch {
	case o.Sent && !o.Lost:
		r.b.Record(ctx, budget.Outcome{Retry: a.N > 1, Success: o.Success, At: o.At})
	case !o.Sent && h.N == 1:
		if rf, ok := r.b.(refunder); ok {
			rf.Refund(ctx)
		}
	}
}

// Hedges makes b the hedge budget of a hedged tier: asked for a hedge
// (a.Hedge, in Send), it withdraws one, refusing for every target of the
// tier when b refuses. A hedge withdrawn and not sent is refunded when b
// has a Refund method. (The calls a hedge may be sent for are recorded by the
// race, as each first attempt of the tier starts.)
func Hedges(b budget.Budget) policy.Policy { return hedges{b} }

type hedges struct{ b budget.Budget }

func (hb hedges) Admit(ctx context.Context, a *policy.Attempt) policy.Admission {
	if a.Phase != policy.Send || !a.Hedge {
		return policy.Admission{}
	}
	if err := hb.b.Withdraw(ctx); err != nil {
		return policy.Admission{Err: err, Reason: "hedge not sent: the hedge budget is exhausted", Cause: observe.SkipBudget}
	}
	return policy.Admission{Hold: policy.Hold{N: 1}}
}

func (hb hedges) Settle(ctx context.Context, _ *policy.Attempt, h policy.Hold, o *policy.Outcome) {
	if !o.Sent && h.N == 1 {
		if rf, ok := hb.b.(refunder); ok {
			rf.Refund(ctx)
		}
	}
}

// refunder is a budget that gives back a retry or a hedge it granted and
// that was not sent (budget.Ratio, budget.TokenBucket, budget.Shared).
type refunder interface{ Refund(ctx context.Context) }
