package observe

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"
)

// budgetRefused stands for an event a later version adds: a type of this
// package that no observer written today knows.
type budgetRefused struct{ Target Target }

func (budgetRefused) event() {}

// todays is an observer written against today's event set, as a user
// outside the module writes one: a type switch over the events it wants.
type todays struct{ seen []string }

func (o *todays) StartCall(ctx context.Context, _ CallStart) (context.Context, Call) { return ctx, o }
func (o *todays) StartAttempt(ctx context.Context, _ AttemptStart) (context.Context, Attempt) {
	return ctx, todaysAttempt{o}
}
func (o *todays) Event(e Event) {
	switch e := e.(type) {
	case Retry:
		o.seen = append(o.seen, "retry "+e.Target.Name)
	case Fallback:
		o.seen = append(o.seen, "fallback "+e.From.Name+" -> "+e.To.Name)
	}
}
func (o *todays) End(e CallEnd) { o.seen = append(o.seen, "end "+e.Outcome) }

type todaysAttempt struct{ o *todays }

func (a todaysAttempt) Event(e Event) {
	if e, ok := e.(FirstChunk); ok {
		a.o.seen = append(a.o.seen, "first chunk "+e.Target.Name)
	}
}
func (a todaysAttempt) End(e AttemptEnd) { a.o.seen = append(a.o.seen, "attempt "+e.Target.Name) }

// TestObserversIgnoreAnEventAddedLater: an event type added after an
// observer was written reaches it through the Event method it already
// has, which ignores it; the events it knows keep arriving, in order.
// observe.Funcs and observe.Log do the same.
func TestObserversIgnoreAnEventAddedLater(t *testing.T) {
	a, b := Target{Name: "sonnet"}, Target{Name: "gpt"}
	walk := func(o Observer) {
		ctx, call := o.StartCall(context.Background(), CallStart{Chain: "c"})
		if call == nil {
			return
		}
		_, at := call.StartAttempt(ctx, AttemptStart{Target: a, N: 1})
		at.Event(budgetRefused{Target: a})
		at.Event(FirstChunk{Target: a, N: 1, After: time.Second})
		at.End(AttemptEnd{Target: a, N: 1})
		call.Event(Retry{Target: a, N: 1})
		call.Event(budgetRefused{Target: a})
		call.Event(Fallback{From: a, To: b, Reason: "skipped"})
		call.End(CallEnd{Outcome: "served"})
		if so, ok := o.(StateObserver); ok {
			so.Event(budgetRefused{Target: a})
		}
	}

	o := &todays{}
	walk(o)
	want := []string{"first chunk sonnet", "attempt sonnet", "retry sonnet", "fallback sonnet -> gpt", "end served"}
	if len(o.seen) != len(want) {
		t.Fatalf("today's observer saw %q; want %q", o.seen, want)
	}
	for i := range want {
		if o.seen[i] != want[i] {
			t.Fatalf("today's observer saw %q; want %q", o.seen, want)
		}
	}

	var funcs []string
	walk(&Funcs{
		OnRetry:    func(Retry) { funcs = append(funcs, "retry") },
		OnFallback: func(Fallback) { funcs = append(funcs, "fallback") },
		OnCallEnd:  func(CallEnd) { funcs = append(funcs, "end") },
	})
	if got := len(funcs); got != 3 || funcs[0] != "retry" || funcs[1] != "fallback" || funcs[2] != "end" {
		t.Fatalf("Funcs called %q; want retry, fallback, end", funcs)
	}

	var buf bytes.Buffer
	walk(Log(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	if n := bytes.Count(buf.Bytes(), []byte("\n")); n != 4 {
		t.Fatalf("Log wrote %d records; want 4 (attempt, retry, fallback, call):\n%s", n, buf.String())
	}
}
