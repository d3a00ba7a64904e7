package chain

import (
	"context"
	"errors"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/budget"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/retry"
	"github.com/backstop-llm/backstop/spend"
	"github.com/backstop-llm/backstop/throttle"
)

// VerdictOf maps the error of Call, Stream or Decode to a retry.Verdict:
// how a service that called the chain answers its own client (its
// HTTPStatus says with what). A call that exhausted the chain is
// retry.VerdictRetryLater when any model target failed for a transient
// reason, retry.VerdictUnavailable when every one failed on its
// configuration or its spend cap; a call the chain stopped takes the
// verdict of the kind that stopped it: the Verdict column of
// retry.DefaultTable, which has one for every kind.
//
// A call a money budget refused (Builder.Spend; an error matching
// spend.ErrExceeded) is retry.VerdictOverBudget (429): answer it with
// Retry-After at the period's reset, the Reset of the
// *spend.ExceededError errors.As finds. A call that exhausted the chain
// is so when a budget passed a model target over and no other failed for
// a transient reason.
func VerdictOf(err error) retry.Verdict {
	var ex *ExhaustedError
	switch {
	case err == nil:
		return retry.VerdictOK
	case errors.Is(err, context.Canceled), errors.Is(err, ErrAbandoned):
		return retry.VerdictCanceled
	case errors.Is(err, ErrNoMessages), errors.Is(err, ErrStreamConsumed):
		return retry.VerdictBadRequest
	case errors.Is(err, ErrIncomplete):
		return retry.VerdictRetryLater
	case errors.As(err, &ex):
		return ex.verdict()
	case errors.Is(err, spend.ErrExceeded):
		return retry.VerdictOverBudget
	}
	return kindVerdict(llm.KindOf(err))
}

// verdict is an exhausted call's: retry later if any model target's
// failure was transient, else over budget if a money budget passed one
// over.
func (e *ExhaustedError) verdict() retry.Verdict {
	v := retry.VerdictUnavailable
	for _, c := range e.Causes {
		var te *TargetError
		if errors.As(c, &te) && te.Tier == TierDegrade {
			continue // a degradation's failure says nothing of the models
		}
		switch {
		case errors.Is(c, spend.ErrExceeded):
			v = retry.VerdictOverBudget // until its period resets, whatever else failed
			continue
		case errors.Is(c, spend.ErrUnpriced):
			continue // a configuration's: unavailable
		}
		switch {
		case errors.Is(c, breaker.ErrOpen), errors.Is(c, breaker.ErrGateClosed), errors.Is(c, budget.ErrExhausted),
			errors.Is(c, throttle.ErrThrottled), errors.Is(c, ErrDeadline):
			return retry.VerdictRetryLater
		}
		switch kindVerdict(llm.KindOf(c)) {
		case retry.VerdictRetryLater:
			return retry.VerdictRetryLater
		case retry.VerdictBadRequest:
			if v != retry.VerdictOverBudget {
				v = retry.VerdictBadRequest // a context too long for every window, say
			}
		}
	}
	return v
}

// kindVerdict is the verdict of one failure's kind: its row's in the
// decision table (a kind out of range is KindUnknown's).
func kindVerdict(k llm.Kind) retry.Verdict { return retry.DefaultTable().Rule(k).Verdict }
