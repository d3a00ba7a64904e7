package callobs

import (
	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/internal/check"
	"github.com/backstop-llm/backstop/observe"
	"github.com/backstop-llm/backstop/tracing"
)

// Join joins the OpenTelemetry observer of tel, first, and given's. telErr
// is tel's failure (its observer is then left out); nils are the 1-based
// positions in given of nil observers, left out too.
func Join(tel tracing.Config, given []observe.Observer) (o observe.Observer, telErr error, nils []int) {
	var obs []observe.Observer
	if t, err := tracing.New(tel); err != nil {
		telErr = err
	} else {
		obs = append(obs, t)
	}
	for i, g := range given {
		if check.IsNil(g) {
			nils = append(nils, i+1)
			continue
		}
		obs = append(obs, g)
	}
	return observe.Join(obs...), telErr, nils
}

// State is a chain's observers of the changes that belong to no call
// (observe.StateObserver), with the chain's name. The callbacks of
// breakers and shared stores hold a copy, never the chain, which must stay
// collectable while they live on.
type State struct {
	Chain string
	Obs   observe.StateObserver // nil when none observes state
}

// StateOf is the share of o, the chain's observers, that observes state.
func StateOf(chain string, o observe.Observer) State {
	s := State{Chain: chain}
	s.Obs, _ = o.(observe.StateObserver)
	return s
}

// BreakerChanged tells the state observers that t's breaker changed.
func (s State) BreakerChanged(t observe.Target, from, to breaker.State) {
	if s.Obs != nil {
		s.Obs.Event(observe.BreakerChange{Chain: s.Chain, Target: t, From: from.String(), To: to.String()})
	}
}

// SharedUnavailable tells the state observers that a shared store
// stopped answering.
func (s State) SharedUnavailable(store, target string) {
	if s.Obs != nil {
		s.Obs.Event(observe.SharedUnavailable{Chain: s.Chain, Store: store, Target: target})
	}
}

// OnBreakerChange is the breaker.Config.OnStateChange of target t: it
// tells the state observers (when any), then calls user (when not nil).
// It is user itself when none observes state.
func (s State) OnBreakerChange(t observe.Target, user func(name string, from, to breaker.State)) func(name string, from, to breaker.State) {
	if s.Obs == nil {
		return user
	}
	return func(name string, from, to breaker.State) {
		s.BreakerChanged(t, from, to)
		if user != nil {
			user(name, from, to)
		}
	}
}
