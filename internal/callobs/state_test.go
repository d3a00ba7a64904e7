package callobs_test

import (
	"slices"
	"testing"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/internal/callobs"
	"github.com/backstop-llm/backstop/observe"
	"github.com/backstop-llm/backstop/tracing"
)

// states observes state only.
type states struct {
	unobserved
	events []observe.Event
}

func (s *states) Event(e observe.Event) { s.events = append(s.events, e) }

// TestOnBreakerChange: the breaker's callback tells the state observers,
// then the caller's own callback; with none observing state it is the
// caller's callback itself.
func TestOnBreakerChange(t *testing.T) {
	var got []string
	user := func(name string, from, to breaker.State) { got = append(got, name+" "+to.String()) }
	if f := callobs.StateOf("c", unobserved{}).OnBreakerChange(observe.Target{Name: "a"}, nil); f != nil {
		t.Error("unobserved, no callback: want nil")
	}
	s := &states{}
	f := callobs.StateOf("c", s).OnBreakerChange(observe.Target{Name: "a"}, user)
	f("a", breaker.Closed, breaker.Open)
	want := observe.BreakerChange{Chain: "c", Target: observe.Target{Name: "a"}, From: breaker.Closed.String(), To: breaker.Open.String()}
	if len(s.events) != 1 || s.events[0] != want || !slices.Equal(got, []string{"a " + breaker.Open.String()}) {
		t.Errorf("events %v, callback %v; want %v and the callback", s.events, got, want)
	}
	callobs.StateOf("c", s).SharedUnavailable("redis", "a")
	if e, ok := s.events[len(s.events)-1].(observe.SharedUnavailable); !ok || e.Store != "redis" || e.Chain != "c" {
		t.Errorf("last event %v; want SharedUnavailable of redis", s.events[len(s.events)-1])
	}
}

// TestJoin: nil observers are left out and named by position.
func TestJoin(t *testing.T) {
	var typed *log
	o, err, nils := callobs.Join(tracing.Config{}, []observe.Observer{&log{}, nil, typed})
	if err != nil || o == nil || !slices.Equal(nils, []int{2, 3}) {
		t.Errorf("Join = %v, %v, %v; want an observer, no error, nils [2 3]", o, err, nils)
	}
}
