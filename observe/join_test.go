package observe_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/backstop-llm/backstop/observe"
)

// key is the context key the recorders pass their names under.
type key struct{}

// recorder observes calls and writes what it sees into a shared log, each
// line prefixed with its name; it observes nothing when quiet. It records
// the name the context it was given carries, then passes on a context
// carrying its own, so that a test sees the context each observer got.
type recorder struct {
	name  string
	quiet bool // StartCall returns a nil Call
	none  bool // StartAttempt returns a nil Attempt
	log   *[]string
}

func (r *recorder) say(s string) { *r.log = append(*r.log, r.name+" "+s) }

func (r *recorder) StartCall(ctx context.Context, e observe.CallStart) (context.Context, observe.Call) {
	from, _ := ctx.Value(key{}).(string)
	r.say("start " + e.Chain + " from=" + from)
	if r.quiet {
		return ctx, nil
	}
	return context.WithValue(ctx, key{}, r.name), recCall{r}
}

type recCall struct{ r *recorder }

func (c recCall) StartAttempt(ctx context.Context, e observe.AttemptStart) (context.Context, observe.Attempt) {
	from, _ := ctx.Value(key{}).(string)
	c.r.say("attempt " + e.Target.Name + " from=" + from)
	if c.r.none {
		return ctx, nil
	}
	return context.WithValue(ctx, key{}, c.r.name+"/a"), recAttempt(c)
}

func (c recCall) Event(e observe.Event) {
	if f, ok := e.(observe.Fallback); ok {
		c.r.say("fallback " + f.From.Name)
	}
}

func (c recCall) End(e observe.CallEnd) { c.r.say("end " + e.Outcome) }

type recAttempt struct{ r *recorder }

func (a recAttempt) Event(e observe.Event) {
	if f, ok := e.(observe.FirstChunk); ok {
		a.r.say("chunk " + f.Target.Name)
	}
}

func (a recAttempt) End(e observe.AttemptEnd) { a.r.say("attempt end " + e.Target.Name) }

// stateRecorder is a recorder that also observes state and binds.
type stateRecorder struct {
	recorder
	bindErr error
}

func (s *stateRecorder) Event(e observe.Event) {
	if b, ok := e.(observe.BreakerChange); ok {
		s.say("breaker " + b.To)
	}
}

func (s *stateRecorder) Bind(chain string, targets []observe.Target) error {
	s.say("bind " + chain)
	return s.bindErr
}

// silent observes no call.
type silent struct{}

func (silent) StartCall(ctx context.Context, _ observe.CallStart) (context.Context, observe.Call) {
	return ctx, nil
}

// drive sends one call's events through o, as a chain does.
func drive(o observe.Observer) {
	ctx, call := o.StartCall(context.Background(), observe.CallStart{Chain: "c"})
	if call == nil {
		return
	}
	t := observe.Target{Name: "a"}
	_, at := call.StartAttempt(ctx, observe.AttemptStart{Target: t, N: 1})
	if at != nil {
		at.Event(observe.FirstChunk{Target: t})
		at.End(observe.AttemptEnd{Target: t})
	}
	call.Event(observe.Fallback{From: t})
	call.End(observe.CallEnd{Outcome: "served"})
}

// TestJoinHandsEachEventToEachObserverInOrder: every observer that
// observes the call gets every event, in the order given, each with the
// context the one before it returned; one that returns a nil Call (or
// Attempt) is told nothing more of it.
func TestJoinHandsEachEventToEachObserverInOrder(t *testing.T) {
	var log []string
	a := &recorder{name: "a", log: &log}
	quiet := &recorder{name: "q", quiet: true, log: &log}
	b := &recorder{name: "b", none: true, log: &log}
	c := &recorder{name: "c", log: &log}
	drive(observe.Join(a, nil, quiet, b, c))
	want := []string{
		"a start c from=",
		"q start c from=a",
		"b start c from=a",
		"c start c from=b",
		"a attempt a from=c",
		"b attempt a from=a/a",
		"c attempt a from=a/a",
		"a chunk a", "c chunk a",
		"a attempt end a", "c attempt end a",
		"a fallback a", "b fallback a", "c fallback a",
		"a end served", "b end served", "c end served",
	}
	if !reflect.DeepEqual(log, want) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(log, "\n"), strings.Join(want, "\n"))
	}
}

// TestJoinNobodyObservesForFree: when no observer observes a call, the
// joined one returns a nil Call and allocates nothing; when one does, its
// own Call is returned.
func TestJoinNobodyObservesForFree(t *testing.T) {
	o := observe.Join(silent{}, silent{}, silent{})
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		if _, call := o.StartCall(ctx, observe.CallStart{Chain: "c"}); call != nil {
			t.Fatalf("nobody observes the call, and Join returned the Call %T", call)
		}
	})
	if allocs != 0 {
		t.Errorf("a call nobody observes allocates %.0f times in Join; want 0", allocs)
	}
	var log []string
	a := &recorder{name: "a", log: &log}
	_, call := observe.Join(silent{}, a, silent{}).StartCall(ctx, observe.CallStart{})
	if _, ok := call.(recCall); !ok {
		t.Errorf("one observer observes the call, and Join returned %T, not its Call", call)
	}
}

// TestJoinOfOneOrNone: Join of one observer (nils left out) is that
// observer; Join of none observes nothing.
func TestJoinOfOneOrNone(t *testing.T) {
	var log []string
	a := &recorder{name: "a", log: &log}
	if o := observe.Join(nil, a, nil); o != observe.Observer(a) {
		t.Errorf("Join(nil, a, nil) = %T, not a", o)
	}
	for _, o := range []observe.Observer{observe.Join(), observe.Join(nil)} {
		if o == nil {
			t.Fatal("Join of no observer returned nil")
		}
		if _, call := o.StartCall(context.Background(), observe.CallStart{}); call != nil {
			t.Errorf("Join of no observer observes the call with %T", call)
		}
		if _, ok := o.(observe.StateObserver); ok {
			t.Error("Join of no observer is a StateObserver")
		}
	}
}

// TestJoinFlattens: a Join of Joins hands each event once to each
// observer, in order.
func TestJoinFlattens(t *testing.T) {
	var log []string
	a := &recorder{name: "a", log: &log}
	b := &stateRecorder{recorder: recorder{name: "b", log: &log}}
	c := &recorder{name: "c", log: &log}
	o := observe.Join(observe.Join(a, b), c)
	o.StartCall(context.Background(), observe.CallStart{Chain: "x"})
	o.(observe.StateObserver).Event(observe.BreakerChange{To: "open"})
	want := []string{"a start x from=", "b start x from=a", "c start x from=b", "b breaker open"}
	if !reflect.DeepEqual(log, want) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(log, "\n"), strings.Join(want, "\n"))
	}
}

// TestJoinState: the joined observer is a StateObserver only when one of
// its observers is, and hands state events to those alone.
func TestJoinState(t *testing.T) {
	var log []string
	a := &recorder{name: "a", log: &log}
	c := &recorder{name: "c", log: &log}
	if _, ok := observe.Join(a, c).(observe.StateObserver); ok {
		t.Error("Join of observers none of which observes state is a StateObserver")
	}
	s1 := &stateRecorder{recorder: recorder{name: "s1", log: &log}}
	s2 := &stateRecorder{recorder: recorder{name: "s2", log: &log}}
	so, ok := observe.Join(a, s1, c, s2).(observe.StateObserver)
	if !ok {
		t.Fatal("Join of StateObservers is not one")
	}
	so.Event(observe.BreakerChange{To: "half-open"})
	if want := []string{"s1 breaker half-open", "s2 breaker half-open"}; !reflect.DeepEqual(log, want) {
		t.Errorf("state events: %q; want %q", log, want)
	}
}

// TestJoinBind: Bind tells every Binder, and returns their refusals
// joined, each naming its observer's type.
func TestJoinBind(t *testing.T) {
	var log []string
	refused := errors.New("no such chain")
	a := &recorder{name: "a", log: &log}
	s1 := &stateRecorder{recorder: recorder{name: "s1", log: &log}, bindErr: refused}
	s2 := &stateRecorder{recorder: recorder{name: "s2", log: &log}}
	b, ok := observe.Join(a, s1, s2).(observe.Binder)
	if !ok {
		t.Fatal("the joined observer is not a Binder")
	}
	err := b.Bind("c", nil)
	if want := []string{"s1 bind c", "s2 bind c"}; !reflect.DeepEqual(log, want) {
		t.Errorf("binds: %q; want %q", log, want)
	}
	if !errors.Is(err, refused) || err.Error() != "*observe_test.stateRecorder: no such chain" {
		t.Errorf("Bind's error: %v", err)
	}
	log = log[:0]
	if err := observe.Join(a, s2).(observe.Binder).Bind("c", nil); err != nil {
		t.Errorf("nobody refused, and Bind returned %v", err)
	}
}
