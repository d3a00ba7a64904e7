// Package seam is the walk's side of package policy: a target's policies
// asked in order and settled (Set, Holds), and the budgets as policies
// (Retries, Hedges). A policy's author needs none of it; chain does.
package seam

import (
	"context"
	"time"

	"github.com/backstop-llm/backstop/policy"
)

// Set is a target's policies, in the order they are asked. Its methods are
// the whole seam as the walk sees it: Admit before an attempt, Settle
// after it.
type Set []policy.Policy

// Holds keeps what each policy of a Set holds for one attempt, without
// allocating for a target of up to six policies.
type Holds struct {
	inline [6]policy.Hold
	more   []policy.Hold
}

// Holding reports whether any policy holds something that only its Settle
// gives back (a policy.Hold with a Ref): an attempt whose provider panics must
// still be settled (Release).
func (h *Holds) Holding() bool {
	for i := range h.inline {
		if h.inline[i].Ref != nil {
			return true
		}
	}
	for i := range h.more {
		if h.more[i].Ref != nil {
			return true
		}
	}
	return false
}

// at returns the policy.Hold of the i-th policy.
func (h *Holds) at(i int) *policy.Hold {
	if i < len(h.inline) {
		return &h.inline[i]
	}
	i -= len(h.inline)
	for len(h.more) <= i {
		h.more = append(h.more, policy.Hold{})
	}
	return &h.more[i]
}

// Admit asks every policy of s, in order, about a, and keeps what each
// holds in holds (a policy.Hold from a later phase replaces an earlier one only
// when it holds something: a budget withdraws in policy.Plan, a breaker holds its
// probe slot in policy.Send). It returns the first refusal, after releasing every
// hold (Release), or the zero policy.Admission; either way, Waited is the wait
// all the policies asked together. In policy.Peek, nothing is held or released;
// in policy.Plan, a policy that defers (policy.Admission.Defer) ends the asking.
func (s Set) Admit(ctx context.Context, a *policy.Attempt, holds *Holds) policy.Admission {
	var waited time.Duration
	awaited := false
	for i, p := range s {
		adm := p.Admit(ctx, a)
		waited += adm.Waited
		awaited = awaited || adm.Awaited
		if adm.Err != nil {
			if a.Phase != policy.Peek {
				s.Release(ctx, a, holds)
			}
			adm.Waited, adm.Awaited = waited, awaited
			return adm
		}
		if (adm.Hold.Ref != nil || adm.Hold.N != 0) && a.Phase != policy.Peek {
			*holds.at(i) = adm.Hold
		}
		if adm.Defer && a.Phase == policy.Plan {
			break // the rest is asked in policy.Send
		}
	}
	return policy.Admission{Waited: waited, Awaited: awaited}
}

// Settle tells every policy of s how a ended, giving each the policy.Hold it
// gave (the zero policy.Hold when it held nothing), and clears holds for the
// next attempt. Every policy of the Set is settled once for every attempt
// that was asked in policy.Plan or policy.Send, sent or not (policy.Outcome.Sent).
func (s Set) Settle(ctx context.Context, a *policy.Attempt, holds *Holds, o *policy.Outcome) {
	for i, p := range s {
		h := holds.at(i)
		p.Settle(ctx, a, *h, o)
		*h = policy.Hold{}
	}
}

// Release settles a as not sent (refused, or its wait cut short): each
// policy gives back what it held.
func (s Set) Release(ctx context.Context, a *policy.Attempt, holds *Holds) {
	s.Settle(ctx, a, holds, &policy.Outcome{})
}
