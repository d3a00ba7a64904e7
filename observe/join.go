package observe

import (
	"context"
	"errors"
	"fmt"
)

// Join returns one Observer that hands every event to each of obs, in the
// order given; chain.Builder.Observe joins a chain's observers with it.
// Each observer is asked about a call and about an attempt as if it were
// alone: it is given the context the observers before it returned, and an
// observer that returns a nil Call (or Attempt) is told nothing more of
// it. The Call that StartCall returns is nil when none of obs observes the
// call, and is that observer's own when only one does: a call that nobody
// observes costs no allocation.
//
// The joined Observer is a Binder, whose Bind tells every Binder in obs
// and returns their errors joined, each naming its observer's type; it is
// a StateObserver when one of obs is, and then hands the state events to
// each that is. Join leaves out the nil observers; it returns obs[0]
// itself when that is the only one, and an Observer that observes nothing
// when there is none.
func Join(obs ...Observer) Observer {
	f := &fanout{}
	for _, o := range obs {
		switch o := o.(type) {
		case nil:
		case *fanout:
			f.add(o.obs...)
		case stateFanout:
			f.add(o.obs...)
		default:
			f.add(o)
		}
	}
	switch {
	case len(f.obs) == 1:
		return f.obs[0]
	case len(f.state) > 0:
		return stateFanout{f}
	}
	return f
}

// fanout is several observers joined; state holds those of them that are
// StateObservers.
type fanout struct {
	obs   []Observer
	state []StateObserver
}

var (
	_ Binder        = (*fanout)(nil)
	_ StateObserver = stateFanout{}
)

func (f *fanout) add(obs ...Observer) {
	for _, o := range obs {
		f.obs = append(f.obs, o)
		if s, ok := o.(StateObserver); ok {
			f.state = append(f.state, s)
		}
	}
}

// StartCall asks each observer in turn, and joins the Calls they return.
func (f *fanout) StartCall(ctx context.Context, e CallStart) (context.Context, Call) {
	var one Call
	var all calls // made at the second Call
	for _, o := range f.obs {
		var c Call
		ctx, c = o.StartCall(ctx, e)
		switch {
		case c == nil:
		case one == nil:
			one = c
		default:
			if all == nil {
				all = append(make(calls, 0, len(f.obs)), one)
			}
			all = append(all, c)
		}
	}
	if all != nil {
		return ctx, all
	}
	return ctx, one
}

// Bind tells every Binder of f the chain's targets.
func (f *fanout) Bind(chain string, targets []Target) error {
	var errs []error
	for _, o := range f.obs {
		if b, ok := o.(Binder); ok {
			if err := b.Bind(chain, targets); err != nil {
				errs = append(errs, fmt.Errorf("%T: %w", o, err))
			}
		}
	}
	return errors.Join(errs...)
}

// stateFanout is a fanout of which one observer or more are
// StateObservers.
type stateFanout struct{ *fanout }

// Event hands a state event to each StateObserver.
func (f stateFanout) Event(e Event) {
	for _, s := range f.state {
		s.Event(e)
	}
}

// calls are the Calls of the observers that observe a call, two or more.
type calls []Call

func (cs calls) StartAttempt(ctx context.Context, e AttemptStart) (context.Context, Attempt) {
	var one Attempt
	var all attempts // made at the second Attempt
	for _, c := range cs {
		var a Attempt
		ctx, a = c.StartAttempt(ctx, e)
		switch {
		case a == nil:
		case one == nil:
			one = a
		default:
			if all == nil {
				all = append(make(attempts, 0, len(cs)), one)
			}
			all = append(all, a)
		}
	}
	if all != nil {
		return ctx, all
	}
	return ctx, one
}

func (cs calls) Event(e Event) {
	for _, c := range cs {
		c.Event(e)
	}
}

func (cs calls) End(e CallEnd) {
	for _, c := range cs {
		c.End(e)
	}
}

// attempts are the Attempts of the observers that observe an attempt, two
// or more.
type attempts []Attempt

func (as attempts) Event(e Event) {
	for _, a := range as {
		a.Event(e)
	}
}

func (as attempts) End(e AttemptEnd) {
	for _, a := range as {
		a.End(e)
	}
}
