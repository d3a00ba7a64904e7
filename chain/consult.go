package chain

// The walk's side of the policy seam: what a target's policies are asked
// about before an attempt, and what follows their refusal.

import (
	"errors"
	"fmt"
	"time"

	"github.com/backstop-llm/backstop/internal/seam"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/observe"
	"github.com/backstop-llm/backstop/policy"
)

// policyAttempt is what t's policies are asked about attempt n on t in
// phase ph (a hedge's or a racer's when hedge is set), and told of: the
// walk as it stands, in w.pa. The walk's own attempt reads the clock once
// in Send, for every policy and the attempt's start (w.now); a racer, sent
// from the race, reads its own.
func (w *walk) policyAttempt(t *target, ph policy.Phase, n int, hedge bool) *policy.Attempt {
	// Field by field: a composite literal would be built aside and copied.
	pa := &w.pa
	pa.Phase, pa.Target, pa.N, pa.Hedge, pa.Last = ph, t.Name, n, hedge, false
	pa.Needs, pa.Media, pa.MinWindow, pa.Request, pa.Caller = w.needs, w.media, w.minWindow, nil, nil
	pa.At, pa.Deadline = time.Time{}, w.deadline
	pa.Price, pa.MaxOutput = t.Price, t.maxOutput
	if ph != policy.Peek && !hedge {
		pa.Last = w.mayWait(t)
	}
	if ph == policy.Send {
		if !hedge {
			w.now, w.nowOK = w.c.clock(), true
			pa.At = w.c.epoch.Add(w.now)
		} else {
			pa.At = time.Now()
		}
	}
	return pa
}

// consult asks t's policies about the walk's attempt n on t, which sends
// req (nil in Plan and Peek), in phase ph; what they hold goes to holds
// (nil in Peek).
func (w *walk) consult(t *target, ph policy.Phase, n int, req *llm.Request, holds *seam.Holds) policy.Admission {
	return w.askPolicies(t, ph, n, false, req, holds)
}

// askPolicies is consult for the walk's attempts and for a race's (hedge set):
// the call's deadline, which is the walk's own check, then t's policies.
func (w *walk) askPolicies(t *target, ph policy.Phase, n int, hedge bool, req *llm.Request, holds *seam.Holds) policy.Admission {
	if ph != policy.Plan && w.ctx.Err() != nil {
		return policy.Admission{Err: ErrDeadline, Reason: "the deadline passed", Cause: observe.SkipDeadline}
	}
	pa := w.policyAttempt(t, ph, n, hedge)
	if req != nil {
		pa.Request, pa.Caller = req, w.call
	}
	return t.policies.Admit(w.ctx, pa, holds)
}

// passedOver passes over t, whose policies refused its first attempt
// (adm), and records why. A deadline that passed passes over every target
// from the walk's position on; a caller that canceled stops the call, and
// so does a refusal that says so (policy.Admission.Stop).
func (w *walk) passedOver(t *target, adm policy.Admission) tried {
	c := w.c
	if cerr := canceled(w.caller); cerr != nil {
		return tried{err: cerr, kind: llm.KindCanceled}
	}
	if errors.Is(adm.Err, ErrDeadline) {
		for p := w.pos; p < len(c.targets); p++ {
			w.pos = p
			w.passOver(w.target(p), observe.SkipDeadline, ErrDeadline, "the deadline passed", 0)
		}
		w.causes = append(w.causes, fmt.Errorf("%w before %q was tried", ErrDeadline, t.Name))
		return tried{skipped: true}
	}
	w.passOver(t, adm.Cause, adm.Err, adm.Reason, adm.Waited)
	if adm.Stop {
		return tried{err: adm.Err, stop: true} // run ends the call with it, as t's cause
	}
	w.causes = append(w.causes, &TargetError{Target: t.Name, Tier: t.tier, Err: adm.Err})
	return tried{skipped: true}
}

// notSent ends the walk on t when its policies refused retry n (adm),
// after wait: recorded with why, and the target's last failure (s) with
// the refusal is the target's cause; a refusal that says so ends the call
// (policy.Admission.Stop).
func (w *walk) notSent(t *target, n int, wait time.Duration, s *sent, adm policy.Admission) tried {
	if out, stop := w.stoppedWaiting(t, n, wait); stop {
		return out
	}
	w.record(skipped(t, n, wait, adm.Err, adm.Reason))
	w.obs.Skip(&t.ob, n, adm.Cause, adm.Reason, adm.Err)
	return tried{err: &refusedError{s.err, adm.Err}, kind: s.kind, stop: adm.Stop}
}

// mayWait reports whether a call whose attempt on t a policy refuses may
// be made to wait instead (policy.Attempt.Last: a breaker's probe): when t
// is the walk's last target and the chain has no degradation (nothing
// else could answer), t does not hedge, and the call has not waited yet.
// With a fallback, a degradation included, the call moves on to it,
// without waiting.
func (w *walk) mayWait(t *target) bool {
	return !w.waited && w.pos == len(w.c.targets)-1 && len(w.c.degrades) == 0 && t.hedge == nil
}
