package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/backstop-llm/backstop/internal/pause"
	"github.com/backstop-llm/backstop/ledger"
)

// record is a step as the ledger keeps it: the assistant turn's text and
// calls (their ids derive from the place).
type record struct {
	Text  string         `json:"text,omitempty"`
	Calls []recordedCall `json:"calls"`
}

type recordedCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// outcome is a call's result as the ledger keeps it.
type outcome struct {
	Output  string `json:"output"`
	IsError bool   `json:"error,omitempty"`
	Stop    bool   `json:"stop,omitempty"`
}

// stepLease is how long a Loop holds a step's key between recording it
// Started and Done (two ledger round trips).
const stepLease = 30 * time.Second

// finishTimeout bounds the recording of a call that succeeded after its
// caller left.
const finishTimeout = 5 * time.Second

// The waits between two looks at a key another owner holds.
const (
	pollFirst = 50 * time.Millisecond
	pollMax   = time.Second
)

// ledgerErr wraps an error of the ledger.
func ledgerErr(key string, err error) error {
	return fmt.Errorf("agent: the ledger, on key %q (no Once call runs without it): %w", key, err)
}

// recorded returns the step recorded at conv's step, if it is done.
func (l *Loop) recorded(ctx context.Context, conv string, step int) (record, bool, error) {
	key := stepKey(conv, step)
	e, err := l.led.Get(ctx, key)
	if err != nil {
		return record{}, false, ledgerErr(key, err)
	}
	if e.State != ledger.Done {
		return record{}, false, nil
	}
	var r record
	if err := json.Unmarshal(e.Result, &r); err != nil {
		return record{}, false, fmt.Errorf("agent: the step recorded under %q does not decode: %w", key, err)
	}
	return r, true, nil
}

// record records said as conv's step, before its calls run. When another
// request recorded the step first, its record is returned, and took is
// true: its calls, not the model's latest, are the step's.
func (l *Loop) record(ctx context.Context, conv string, step int, said record) (_ record, took bool, _ error) {
	key := stepKey(conv, step)
	b, err := json.Marshal(said)
	if err != nil {
		return said, false, err
	}
	wait := pollFirst
	for {
		// A step's key held past its lease had no call run yet (calls
		// run once the step is Done): taking it over is safe.
		was, err := l.led.Begin(ctx, key, l.owner, stepLease, true)
		if err != nil {
			return said, false, ledgerErr(key, err)
		}
		switch {
		case was.State == ledger.Absent || was.Expired(time.Now()):
			err := l.led.Finish(ctx, key, l.owner, b, l.keep)
			if err == nil {
				return said, false, nil
			}
			if !errors.Is(err, ledger.ErrNotOwner) {
				return said, false, ledgerErr(key, err)
			}
		case was.State == ledger.Done:
			var r record
			if err := json.Unmarshal(was.Result, &r); err != nil {
				return said, false, fmt.Errorf("agent: the step recorded under %q does not decode: %w", key, err)
			}
			return r, true, nil
		}
		if err := pause.For(ctx, wait); err != nil {
			return said, false, err
		}
		wait = min(2*wait, pollMax)
	}
}

// runStep runs a step's calls, each in order, the Parallel ones next to
// each other concurrently, and returns their results in call order. A
// tool's ErrStop lets the calls running with it finish, answers the
// rest "not run" and returns the error; any other error (the ledger's,
// ErrDuplicate, the context's) ends the step at once.
func (l *Loop) runStep(ctx context.Context, calls []Call, say func(Event) error) ([]ToolRun, error) {
	runs := make([]ToolRun, len(calls))
	var stop error
	for i := 0; i < len(calls); {
		j := i + 1
		if t := l.tools[calls[i].Name]; t != nil && t.Parallel {
			for j < len(calls) {
				if u := l.tools[calls[j].Name]; u == nil || !u.Parallel {
					break
				}
				j++
			}
		}
		if stop != nil {
			for k := i; k < j; k++ {
				runs[k] = ToolRun{Call: calls[k], Output: "not run: another tool stopped the loop", IsError: true}
			}
			i = j
			continue
		}
		if say != nil {
			for k := i; k < j; k++ {
				if err := say(Event{Kind: ToolStarted, Step: calls[k].Step, Call: &ToolRun{Call: calls[k]}}); err != nil {
					return nil, err
				}
			}
		}
		errs := make([]error, j-i)
		if j-i == 1 {
			runs[i], errs[0] = l.runCall(ctx, calls[i])
		} else {
			var wg sync.WaitGroup
			for k := i; k < j; k++ {
				wg.Go(func() { runs[k], errs[k-i] = l.runCall(ctx, calls[k]) })
			}
			wg.Wait()
		}
		for k := i; k < j; k++ {
			if err := errs[k-i]; err != nil {
				return nil, err
			}
		}
		for k := i; k < j; k++ {
			if say != nil {
				run := runs[k]
				if err := say(Event{Kind: ToolFinished, Step: calls[k].Step, Call: &run}); err != nil {
					return nil, err
				}
			}
			if stop == nil && runs[k].IsError && errors.Is(runs[k].err, ErrStop) {
				stop = fmt.Errorf("agent: tool %q (call %s): %w", calls[k].Name, calls[k].ID, runs[k].err)
			}
		}
		i = j
	}
	return runs, stop
}

// runCall runs one call: a Once tool's through the ledger.
func (l *Loop) runCall(ctx context.Context, c Call) (ToolRun, error) {
	t := l.tools[c.Name]
	if t == nil {
		return ToolRun{Call: c, Output: fmt.Sprintf("There is no tool named %q here.", c.Name), IsError: true}, nil
	}
	if !t.Once {
		out, err, _ := invoke(ctx, t, t.Run, c)
		if ctx.Err() != nil {
			return ToolRun{}, ctx.Err()
		}
		if pe := (*PanicError)(nil); errors.As(err, &pe) {
			return ToolRun{}, pe
		}
		return done(c, out, err), nil
	}
	return l.runOnce(ctx, t, c)
}

// invoke calls fn under t's Timeout; timedOut says that its own deadline,
// not the caller's, ended it. A panic in fn is returned as a *PanicError:
// a tool runs on the loop's goroutines, where a panic would end the
// process.
func invoke(ctx context.Context, t *Tool, fn RunFunc, c Call) (out json.RawMessage, err error, timedOut bool) {
	tctx, cancel := context.WithTimeout(context.WithValue(ctx, callCtx{}, c), t.timeout())
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			out, err, timedOut = nil, &PanicError{Tool: c.Name, Call: c.ID, Value: p, Stack: debug.Stack()}, false
		}
	}()
	out, err = fn(tctx, c)
	timedOut = err != nil && ctx.Err() == nil && errors.Is(tctx.Err(), context.DeadlineExceeded)
	return out, err, timedOut
}

// done is the ToolRun of a call that returned out and err.
func done(c Call, out json.RawMessage, err error) ToolRun {
	if err != nil {
		return ToolRun{Call: c, Output: err.Error(), IsError: true, err: err}
	}
	if len(out) == 0 {
		out = json.RawMessage("null")
	}
	return ToolRun{Call: c, Output: string(out)}
}

// runOnce runs a Once call through the ledger: run it when its key is
// Absent, replay it when Done, wait for or refuse a live duplicate, and
// let Recover answer it when its outcome is unknown.
func (l *Loop) runOnce(ctx context.Context, t *Tool, c Call) (ToolRun, error) {
	takeover := false
	for {
		was, err := l.led.Begin(ctx, c.Key, l.owner, t.lease(), takeover)
		if err != nil {
			return ToolRun{}, ledgerErr(c.Key, err)
		}
		expired := was.Expired(time.Now())
		switch {
		case was.State == ledger.Done:
			return replay(c, was.Result)
		case was.State == ledger.Absent && !takeover:
			run, err := l.hold(ctx, t, c, false)
			if errors.Is(err, ledger.ErrNotOwner) {
				continue
			}
			return run, err
		case takeover && (was.State == ledger.Absent || expired):
			// Held, by taking over a key whose outcome is unknown.
			run, err := l.hold(ctx, t, c, true)
			if errors.Is(err, ledger.ErrNotOwner) {
				takeover = false
				continue
			}
			return run, err
		case expired:
			takeover = true
			continue
		}
		// Another owner holds the key, its lease live.
		takeover = false
		if t.OnDuplicate == Refuse {
			return ToolRun{}, fmt.Errorf("agent: tool %q (call %s, key %q) is held by %s: %w", c.Name, c.ID, c.Key, was.Owner, ErrDuplicate)
		}
		if err := l.await(ctx, c.Key); err != nil {
			return ToolRun{}, err
		}
	}
}

// await polls key until it is no longer Started by a live owner.
func (l *Loop) await(ctx context.Context, key string) error {
	for wait := pollFirst; ; wait = min(2*wait, pollMax) {
		if err := pause.For(ctx, wait); err != nil {
			return err
		}
		e, err := l.led.Get(ctx, key)
		if err != nil {
			return ledgerErr(key, err)
		}
		if e.State != ledger.Started || e.Expired(time.Now()) {
			return nil
		}
	}
}

// hold runs a call whose key the loop holds: Run (or Recover, when the
// outcome was unknown, and when Run timed out), then records the result.
// ErrNotOwner means another owner took the key over meanwhile: its result
// is the call's.
func (l *Loop) hold(ctx context.Context, t *Tool, c Call, recovering bool) (ToolRun, error) {
	fn := t.Run
	if recovering {
		fn = t.Recover
	}
	out, err, timedOut := invoke(ctx, t, fn, c)
	if pe := (*PanicError)(nil); errors.As(err, &pe) {
		// It may have acted before it panicked: the key stays Started,
		// and once its lease ends the next request's Recover decides.
		return ToolRun{}, fmt.Errorf("agent: key %q was left with its outcome unknown: %w", c.Key, pe)
	}
	if timedOut && !recovering {
		recovering = true
		out, err, timedOut = invoke(ctx, t, t.Recover, c)
	}
	if ctx.Err() != nil {
		if err == nil {
			// The caller left, but the call succeeded: record it, so
			// that a retry replays it rather than recovering it.
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
			defer cancel()
			if b, merr := json.Marshal(outcome{Output: done(c, out, nil).Output}); merr == nil && l.led.Finish(fctx, c.Key, l.owner, b, l.keep) == nil {
				return ToolRun{}, fmt.Errorf("agent: tool %q (call %s, key %q) ran and was recorded, but: %w", c.Name, c.ID, c.Key, ctx.Err())
			}
		}
		// The outcome is unknown: the key stays Started, and once its
		// lease ends the next request's Recover decides.
		return ToolRun{}, fmt.Errorf("agent: tool %q (call %s, key %q) was left with its outcome unknown: %w", c.Name, c.ID, c.Key, ctx.Err())
	}
	if timedOut {
		return ToolRun{}, fmt.Errorf("agent: tool %q (call %s, key %q): Recover timed out, the outcome is unknown: %w", c.Name, c.ID, c.Key, err)
	}
	run := done(c, out, err)
	run.Recovered = recovering
	b, merr := json.Marshal(outcome{Output: run.Output, IsError: run.IsError, Stop: errors.Is(err, ErrStop)})
	if merr != nil {
		return ToolRun{}, merr
	}
	if ferr := l.led.Finish(ctx, c.Key, l.owner, b, l.keep); ferr != nil {
		if errors.Is(ferr, ledger.ErrNotOwner) {
			return ToolRun{}, ferr
		}
		return ToolRun{}, ledgerErr(c.Key, ferr)
	}
	return run, nil
}

// replay is the ToolRun of a call whose result the ledger recorded.
func replay(c Call, result []byte) (ToolRun, error) {
	var o outcome
	if err := json.Unmarshal(result, &o); err != nil {
		return ToolRun{}, fmt.Errorf("agent: the result recorded under %q does not decode: %w", c.Key, err)
	}
	run := ToolRun{Call: c, Output: o.Output, IsError: o.IsError, Replayed: true}
	if o.Stop {
		run.err = fmt.Errorf("%w (replayed: %s)", ErrStop, o.Output)
	}
	return run, nil
}
