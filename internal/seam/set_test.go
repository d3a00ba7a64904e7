package seam_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/backstop-llm/backstop/internal/seam"
	"github.com/backstop-llm/backstop/observe"
	"github.com/backstop-llm/backstop/policy"
)

// probe is a policy that answers as told and keeps what it is told.
type probe struct {
	name    string
	refuse  error
	hold    policy.Hold
	log     *[]string
	settled []policy.Hold
}

func (p *probe) Admit(_ context.Context, a *policy.Attempt) policy.Admission {
	*p.log = append(*p.log, fmt.Sprintf("%s admit %d", p.name, a.Phase))
	if p.refuse != nil {
		return policy.Admission{Err: p.refuse, Reason: p.name + " says no", Cause: observe.SkipBudget}
	}
	return policy.Admission{Hold: p.hold}
}

func (p *probe) Settle(_ context.Context, _ *policy.Attempt, h policy.Hold, o *policy.Outcome) {
	*p.log = append(*p.log, fmt.Sprintf("%s settle sent=%v", p.name, o.Sent))
	p.settled = append(p.settled, h)
}

func TestSetAsksInOrderAndStopsAtTheFirstRefusal(t *testing.T) {
	var log []string
	no := errors.New("no")
	a := &probe{name: "a", hold: policy.Hold{N: 7}, log: &log}
	b := &probe{name: "b", refuse: no, log: &log}
	c := &probe{name: "c", log: &log}
	s := seam.Set{a, b, c}
	var holds seam.Holds
	adm := s.Admit(t.Context(), &policy.Attempt{Phase: policy.Send, N: 1}, &holds)
	if !errors.Is(adm.Err, no) || adm.Reason != "b says no" || adm.Err == nil {
		t.Fatalf("got %+v; want b's refusal", adm)
	}
	want := []string{"a admit 0", "b admit 0", "a settle sent=false", "b settle sent=false", "c settle sent=false"}
	if fmt.Sprint(log) != fmt.Sprint(want) {
		t.Fatalf("log %v; want %v (c never asked; every policy released)", log, want)
	}
	if len(a.settled) != 1 || a.settled[0].N != 7 {
		t.Fatalf("a was given back %v; want its hold 7", a.settled)
	}
}

func TestSetKeepsAnEarlierPhasesHold(t *testing.T) {
	var log []string
	budget := &probe{name: "budget", log: &log}
	s := seam.Set{budget}
	var holds seam.Holds
	budget.hold = policy.Hold{N: 1} // withdrawn in Plan
	s.Admit(t.Context(), &policy.Attempt{Phase: policy.Plan, N: 2}, &holds)
	budget.hold = policy.Hold{} // nothing more in Send
	s.Admit(t.Context(), &policy.Attempt{Phase: policy.Send, N: 2}, &holds)
	s.Settle(t.Context(), &policy.Attempt{Phase: policy.Send, N: 2}, &holds, &policy.Outcome{Sent: true})
	if len(budget.settled) != 1 || budget.settled[0].N != 1 {
		t.Fatalf("settled with %v; want Plan's hold", budget.settled)
	}
	s.Settle(t.Context(), &policy.Attempt{Phase: policy.Send, N: 3}, &holds, &policy.Outcome{Sent: true})
	if budget.settled[1].N != 0 {
		t.Fatalf("a second settle gave back %v; holds are cleared once settled", budget.settled[1])
	}
}

func TestPeekHoldsAndReleasesNothing(t *testing.T) {
	var log []string
	p := &probe{name: "p", hold: policy.Hold{Ref: &log}, refuse: nil, log: &log}
	q := &probe{name: "q", refuse: errors.New("no"), log: &log}
	var holds seam.Holds
	seam.Set{p, q}.Admit(t.Context(), &policy.Attempt{Phase: policy.Peek}, &holds)
	if holds.Holding() || len(p.settled)+len(q.settled) != 0 {
		t.Fatalf("a peek held %v and settled %v %v", holds.Holding(), p.settled, q.settled)
	}
}

func TestHoldsBeyondSix(t *testing.T) {
	var log []string
	var s seam.Set
	for i := range 9 {
		s = append(s, &probe{name: fmt.Sprint(i), hold: policy.Hold{N: uint64(i + 1)}, log: &log})
	}
	var holds seam.Holds
	s.Admit(t.Context(), &policy.Attempt{Phase: policy.Send}, &holds)
	s.Settle(t.Context(), &policy.Attempt{Phase: policy.Send}, &holds, &policy.Outcome{Sent: true})
	for i, p := range s {
		if got := p.(*probe).settled[0].N; got != uint64(i+1) {
			t.Fatalf("policy %d was given back %d", i, got)
		}
	}
}

func TestHoldingSeesARef(t *testing.T) {
	var holds seam.Holds
	var log []string
	s := seam.Set{&probe{name: "n", hold: policy.Hold{N: 3}, log: &log}}
	s.Admit(t.Context(), &policy.Attempt{Phase: policy.Send}, &holds)
	if holds.Holding() {
		t.Fatal("a number alone is nothing to give back on a panic")
	}
	s = seam.Set{&probe{name: "r", hold: policy.Hold{Ref: &log}, log: &log}}
	s.Admit(t.Context(), &policy.Attempt{Phase: policy.Send}, &holds)
	if !holds.Holding() {
		t.Fatal("a Ref must be given back")
	}
}

// deferring defers in Plan, as an open breaker on the call's last target
// does.
type deferring struct{ probe }

func (d *deferring) Admit(ctx context.Context, a *policy.Attempt) policy.Admission {
	d.probe.Admit(ctx, a)
	return policy.Admission{Defer: a.Phase == policy.Plan}
}

func TestDeferInPlanSpendsNothingAfterIt(t *testing.T) {
	var log []string
	breaker := &deferring{probe{name: "breaker", log: &log}}
	budget := &probe{name: "budget", hold: policy.Hold{N: 1}, log: &log}
	s := seam.Set{breaker, budget}
	var holds seam.Holds
	adm := s.Admit(t.Context(), &policy.Attempt{Phase: policy.Plan, N: 2}, &holds)
	if adm.Err != nil {
		t.Fatalf("a deferring policy admits: %+v", adm)
	}
	if fmt.Sprint(log) != "[breaker admit 1]" {
		t.Fatalf("log %v: the budget must not be asked in Plan after a deferral", log)
	}
}
