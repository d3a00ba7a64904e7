package policy

import (
	"context"
	"time"
)

// Set is a target's policies, in the order they are asked. Its methods are
// the whole seam as the walk sees it: Admit before an attempt, Settle
// after it.
type Set []Policy

// Holds keeps what each policy of a Set holds for one attempt, without
// allocating for a target of up to six policies.
type Holds struct {
	inline [6]Hold
	more   []Hold
}

// Holding reports whether any policy holds something that only its Settle
// gives back (a Hold with a Ref): an attempt whose provider panics must
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

// at returns the Hold of the i-th policy.
func (h *Holds) at(i int) *Hold {
	if i < len(h.inline) {
		return &h.inline[i]
	}
	i -= len(h.inline)
	for len(h.more) <= i {
		h.more = append(h.more, Hold{})
	}
	return &h.more[i]
}

// Admit asks every policy of s, in order, about a, and keeps what each
// holds in holds (a Hold from a later phase replaces an earlier one only
// when it holds something: a budget withdraws in Plan, a breaker holds its
// probe slot in Send). It returns the first refusal, after releasing every
// hold (Release), or the zero Admission; either way, Waited is the wait
// all the policies asked together. In Peek, nothing is held or released;
// in Plan, a policy that defers (Admission.Defer) ends the asking.
func (s Set) Admit(ctx context.Context, a *Attempt, holds *Holds) Admission {
	var waited time.Duration
	awaited := false
	for i, p := range s {
		adm := p.Admit(ctx, a)
		waited += adm.Waited
		awaited = awaited || adm.Awaited
		if adm.Err != nil {
			if a.Phase != Peek {
				s.Release(ctx, a, holds)
			}
			adm.Waited, adm.Awaited = waited, awaited
			return adm
		}
		if (adm.Hold.Ref != nil || adm.Hold.N != 0) && a.Phase != Peek {
			*holds.at(i) = adm.Hold
		}
		if adm.Defer && a.Phase == Plan {
			break // the rest is asked in Send
		}
	}
	return Admission{Waited: waited, Awaited: awaited}
}

// Settle tells every policy of s how a ended, giving each the Hold it
// gave (the zero Hold when it held nothing), and clears holds for the
// next attempt. Every policy of the Set is settled once for every attempt
// that was asked in Plan or Send, sent or not (Outcome.Sent).
func (s Set) Settle(ctx context.Context, a *Attempt, holds *Holds, o *Outcome) {
	for i, p := range s {
		h := holds.at(i)
		p.Settle(ctx, a, *h, o)
		*h = Hold{}
	}
}

// Release settles a as not sent (refused, or its wait cut short): each
// policy gives back what it held.
func (s Set) Release(ctx context.Context, a *Attempt, holds *Holds) {
	s.Settle(ctx, a, holds, &Outcome{})
}
