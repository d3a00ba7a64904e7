package callobs_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/backstop-llm/backstop/internal/callobs"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/observe"
)

// log is an observer that writes down each event of the calls it observes.
type log struct{ events []string }

func (l *log) StartCall(ctx context.Context, _ observe.CallStart) (context.Context, observe.Call) {
	return ctx, l
}
func (l *log) StartAttempt(ctx context.Context, e observe.AttemptStart) (context.Context, observe.Attempt) {
	l.events = append(l.events, "attempt "+e.Target.Name)
	return ctx, nil
}
func (l *log) Event(e observe.Event) {
	switch e := e.(type) {
	case observe.Fallback:
		l.events = append(l.events, fmt.Sprintf("fallback %s->%s %s", e.From.Name, e.To.Name, e.Reason))
	case observe.Retry:
		l.events = append(l.events, "retry "+e.Target.Name)
	case observe.Skip:
		l.events = append(l.events, "skip "+e.Target.Name)
	}
}
func (l *log) End(e observe.CallEnd) { l.events = append(l.events, "end "+e.Outcome) }

// unobserved observes no call.
type unobserved struct{}

func (unobserved) StartCall(ctx context.Context, _ observe.CallStart) (context.Context, observe.Call) {
	return ctx, nil
}

// TestFallbackNotRetry: entering another target after a failure or a
// skip is a fallback; a retry of the failed target is not, nor is a
// hedge.
func TestFallbackNotRetry(t *testing.T) {
	l := &log{}
	ctx, o := callobs.Start(context.Background(), l, observe.CallStart{})
	a, b, c := &observe.Target{Name: "a"}, &observe.Target{Name: "b"}, &observe.Target{Name: "c"}
	fail := observe.AttemptEnd{Kind: llm.KindTimeout, Err: errors.New("slow")}
	o.StartAttempt(ctx, a, observe.AttemptStart{N: 1})
	o.EndAttempt(nil, a, fail)
	o.Retry(a, 1, llm.KindTimeout, 0, 0, "")
	o.StartAttempt(ctx, a, observe.AttemptStart{N: 2})
	o.EndAttempt(nil, a, fail)
	o.StartAttempt(ctx, c, observe.AttemptStart{N: 1, Hedge: true})
	o.Skip(b, 0, 0, "open", nil)
	o.StartAttempt(ctx, c, observe.AttemptStart{N: 1})
	o.End(observe.CallEnd{Outcome: callobs.Served})
	want := []string{"attempt a", "retry a", "attempt a", "attempt c", "fallback a->b timeout", "skip b", "fallback b->c skipped", "attempt c", "end served"}
	if !slices.Equal(l.events, want) {
		t.Errorf("events\n%q\nwant\n%q", l.events, want)
	}
}

// TestUnobservedCallIsFree: a call nobody observes has a nil *Call whose
// every method is a no-op that allocates nothing.
func TestUnobservedCallIsFree(t *testing.T) {
	ctx := context.Background()
	tg := &observe.Target{Name: "a"}
	allocs := testing.AllocsPerRun(100, func() {
		_, o := callobs.Start(ctx, unobserved{}, observe.CallStart{})
		if o != nil {
			t.Fatal("a call nobody observes has a *Call")
		}
		o.StartAttempt(ctx, tg, observe.AttemptStart{N: 1})
		o.EndAttempt(nil, tg, observe.AttemptEnd{Err: errors.ErrUnsupported})
		o.Skip(tg, 0, 0, "", nil)
		o.Retry(tg, 1, 0, 0, 0, "")
		o.ValidationFailed(tg, errors.ErrUnsupported)
		o.End(observe.CallEnd{})
	})
	if allocs != 0 {
		t.Errorf("an unobserved call allocates %.0f times; want 0", allocs)
	}
}
