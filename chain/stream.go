package chain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"
	"time"

	"github.com/backstop-llm/backstop/internal/plan"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/observe"
	"github.com/backstop-llm/backstop/policy"
	"github.com/backstop-llm/backstop/retry"
)

// ErrAbandoned is matched by the error Stream.Result returns when the
// caller stopped reading the stream (broke out of ranging over Chunks)
// before it ended: the answer is neither complete nor validated, and was
// not remembered.
var ErrAbandoned = errors.New("the caller stopped reading the stream before it ended")

// ErrIncomplete is matched by the error of a stream that failed after its
// first chunk: the caller has part of an answer and no more of it.
var ErrIncomplete = errors.New("the answer is incomplete: the stream failed after it started")

// IncompleteError is a stream that failed after its first chunk. It
// matches ErrIncomplete, and errors.Is/As reach the failure.
type IncompleteError struct {
	// Target served the partial answer.
	Target string
	// Partial is the text the caller received before the failure.
	Partial string
	// Err is the failure, an *llm.Error with its Kind.
	Err error
}

func (e *IncompleteError) Error() string {
	return fmt.Sprintf("target %q: %v after %d bytes: %v", e.Target, ErrIncomplete, len(e.Partial), e.Err)
}

// Unwrap returns ErrIncomplete and the failure.
func (e *IncompleteError) Unwrap() []error { return []error{ErrIncomplete, e.Err} }

// Chunk is a piece of a streamed answer.
type Chunk struct {
	// Text is the next piece of the answer.
	Text string
	// ToolCall is a tool call the model finished making, its arguments
	// whole (they are checked against the tool's InputSchema once the
	// stream ends); nil in a text chunk. Result().ToolCalls has them all.
	ToolCall *llm.ToolCall
	// Restart, with an empty Text, says that the answer so far has failed
	// and is discarded: the chunks after it are a new answer, from the
	// next target. It is sent only to streams with Builder.RestartStreams.
	Restart bool
}

// ErrStreamConsumed is yielded when a Stream's Chunks are ranged over a
// second time: a Stream is one call, and its chunks are gone. Call
// Chain.Stream again for another call.
var ErrStreamConsumed = errors.New("the stream was read already: a Stream is one call; call Chain.Stream again")

// Stream is one streamed call. Range over Chunks once, then read Result.
// It is not safe for concurrent use.
type Stream struct {
	c         *Chain
	ctx       context.Context
	req       llm.Request
	w         *walk
	res       *Result
	err       error
	read      bool // Chunks has been ranged over
	restarts  int
	abandoned bool
	st        streamState // the committed attempt
}

// Stream calls the chain and streams the answer. Before the first chunk,
// every failure retries and falls back exactly as Call does. After the
// first chunk a failure ends the stream with an error matching
// ErrIncomplete that carries the partial text, never a second answer glued
// onto the first; with Builder.RestartStreams the chain moves on instead
// (to the next targets, then the degradations) and says so with a Chunk
// whose Restart is set. A target whose provider does not implement
// llm.StreamProvider, and a degradation, answer in one chunk. The answer is
// validated against the Schema at the end and remembered by LastGood like
// any other; a complete answer that fails the schema is restarted on the
// next target with RestartStreams, and otherwise ends the stream with the
// schema failure (matching validate.ErrInvalid, not ErrIncomplete).
//
//	s := c.Stream(ctx, req)
//	for chunk, err := range s.Chunks() {
//		if err != nil { ... }
//		fmt.Print(chunk.Text)
//	}
//	res, err := s.Result()
//
// Breaking out of the loop closes the stream: nothing is left running.
// A stream left before it ended (even after its last chunk, if the loop is
// left before the end is read) is abandoned: Result's error matches
// ErrAbandoned, its Served names the target whose stream was abandoned and
// its Text holds what the caller received; that answer is neither
// validated nor remembered. An answer delivered in one chunk is whole once
// that chunk is read: leaving the loop then abandons nothing.
func (c *Chain) Stream(ctx context.Context, req llm.Request) *Stream {
	return &Stream{c: c, ctx: ctx, req: req}
}

// Result returns the call's result and error once Chunks has ended. The
// Result's Text is what the caller received (after the last Restart).
// Called before Chunks was ranged over, it reads the whole stream itself
// (as Call would answer), and the chunks are gone.
//
// When the caller stopped reading before the stream ended, the error
// matches ErrAbandoned (it is not yielded: the loop had been left). Served
// then names the target whose stream was abandoned, Text holds the chunks
// the caller received, and the last Attempt has KindCanceled, DecisionStop
// and ErrAbandoned. A caller that stopped at a Restart chunk had received
// nothing of the next answer: Served and Text are empty.
func (s *Stream) Result() (*Result, error) {
	if !s.read {
		for range s.Chunks() {
		}
	}
	return s.res, s.err
}

// Chunks returns the stream's chunks. A failure is yielded once, as the
// last value, and is also Result's error. Ranging over it a second time
// sends nothing and yields ErrStreamConsumed.
func (s *Stream) Chunks() iter.Seq2[Chunk, error] {
	return func(yield func(Chunk, error) bool) {
		if s.read {
			yield(Chunk{}, fmt.Errorf("chain %q: %w", s.c.name, ErrStreamConsumed))
			return
		}
		s.read = true
		s.err = s.run(yield)
	}
}

// streamState is the committed attempt while the caller reads it.
type streamState struct {
	a      *attempt
	stream llm.Stream
	sctx   context.Context // the context the provider streams under
	first  llm.Chunk
	eof    bool // the stream ended with its first read
	done   bool // finish has reported the attempt
	closed bool // release has closed stream (kept: finish reads its Response)
	idle   context.CancelCauseFunc
	timer  *time.Timer
}

var (
	errFirstChunk = &llm.Error{Provider: "backstop", Kind: llm.KindTimeout, Message: "no first chunk within the target's FirstChunkTimeout (when 0: its Timeout, or DefaultTimeout)"}
	errIdle       = &llm.Error{Provider: "backstop", Kind: llm.KindTimeout, Message: "no chunk within the target's IdleTimeout (when 0: DefaultIdleTimeout)"}
)

// open starts the stream of attempt a (sending req) and reads its first chunk, keeping
// the attempt for when the stream ends. It returns an answer or an error.
// A provider that panics (in Stream, or in the stream's Next or Response)
// leaves nothing open: the stream it opened is closed, releasing its
// connection, and the first chunk's timer and context are ended; then the
// panic goes on, to the guard around every send (attempt.abandon), which
// gives back what the attempt holds, as for a panic in Complete.
func (st *streamState) open(ctx context.Context, sp llm.StreamProvider, a *attempt, req *llm.Request) (resp *llm.Response, err error) {
	t := a.t
	ctx, idle := context.WithCancelCause(ctx)
	var timer *time.Timer
	if limit := t.firstChunkLimit(); limit > 0 {
		timer = time.AfterFunc(limit, func() { idle(errFirstChunk) })
	}
	var s llm.Stream
	defer func() {
		if resp != nil || err != nil {
			return // returned: s is the caller's now, or closed
		}
		// Neither: a panic of the provider's cut open short.
		if s != nil {
			s.Close()
		}
		if timer != nil {
			timer.Stop()
		}
		idle(nil)
	}()
	fail := func(err error) (*llm.Response, error) {
		if timer != nil {
			timer.Stop()
		}
		if cause := context.Cause(ctx); cause == errFirstChunk {
			err = errFirstChunk
		}
		idle(nil)
		return nil, err
	}
	s, err = sp.Stream(ctx, *req)
	if err != nil {
		return fail(err)
	}
	if s == nil {
		return fail(&llm.Error{Provider: sp.Name(), Kind: llm.KindUnknown, Message: "provider returned neither a stream nor an error"})
	}
	// abort ends s before its first chunk, keeping the request id its
	// headers carried: the attempt's record and end say it.
	abort := func(err error) (*llm.Response, error) {
		if r := s.Response(); r != nil {
			a.opened = r.RequestID
		}
		s.Close()
		return fail(err)
	}
	first, err := s.Next()
	eof := err == io.EOF
	if eof {
		err = nil // an empty answer, complete
	}
	if err != nil {
		return abort(err)
	}
	if timer != nil && !timer.Stop() && context.Cause(ctx) == errFirstChunk {
		return abort(errFirstChunk)
	}
	resp = s.Response()
	if resp == nil {
		return abort(&llm.Error{Provider: sp.Name(), Kind: llm.KindUnknown, Message: "the stream returned no response"})
	}
	// The stream keeps its own attempt: the walk's lives on the walk's stack.
	own := new(attempt)
	*own = *a
	*st = streamState{a: own, stream: s, sctx: ctx, first: first, eof: eof, idle: idle}
	st.timer = time.AfterFunc(t.idleLimit(), func() { idle(errIdle) })
	return resp, nil
}

// release ends the committed attempt's resources, once: a panic mid-stream
// runs relay's release and then Stream.walk's.
func (st *streamState) release() {
	if st.timer != nil {
		st.timer.Stop()
		st.timer = nil
	}
	if st.stream != nil && !st.closed {
		st.closed = true
		st.stream.Close()
	}
	if st.idle != nil {
		st.idle(nil)
		st.idle = nil
	}
	if st.a != nil && st.a.cancel != nil {
		st.a.cancel()
		st.a.cancel = nil
	}
}

// run walks the chain, streams the committed answer to yield, and returns
// the call's error.
func (s *Stream) run(yield func(Chunk, error) bool) error {
	c := s.c
	ctx, obs := c.startCall(s.ctx, true)
	w := &walk{}
	w.start(c, ctx, obs, sender{stream: s})
	defer w.done()
	s.w, s.res = w, w.res
	sv, err := s.walk(yield)
	w.end(sv, err, s.outcome(err))
	if s.abandoned {
		// Not yielded (the caller has left the loop): Result says it.
		err = fmt.Errorf("chain %q: %w", c.name, ErrAbandoned)
	}
	return err
}

// outcome is how the stream ended, for telemetry; "" when it failed
// before its first chunk.
func (s *Stream) outcome(err error) string {
	switch {
	case s.abandoned:
		return streamAbandoned
	case errors.Is(err, ErrIncomplete):
		return streamIncomplete
	case err == nil && s.restarts > 0:
		return streamRestarted
	case err == nil:
		return streamComplete
	}
	return ""
}

// walk runs the walk, relays the answer it commits, and restarts it after
// a failure when Builder.RestartStreams allows.
func (s *Stream) walk(yield func(Chunk, error) bool) (sv served, err error) {
	defer func() {
		if p := recover(); p != nil {
			// The provider or the caller's loop panicked mid-stream: release
			// the breaker's ticket (a half-open probe slot would be held for
			// good), end the span, close the stream; then panic on.
			if s.st.a != nil && s.st.stream != nil && !s.st.done {
				s.finish(errPanicked, DecisionStop, "the stream panicked", true)
				s.st.release()
			}
			panic(p)
		}
	}()
	for {
		sv, err := s.w.run(&s.req)
		if err != nil {
			yield(Chunk{}, err)
			return served{}, err
		}
		if !sv.streaming {
			// A degradation, or a target that does not stream, answered
			// whole (validated like any Call): one chunk.
			yield(Chunk{Text: s.res.Text}, nil)
			return sv, nil
		}
		t := s.st.a.t
		ferr, d, stopped := s.relay(yield)
		switch {
		case stopped:
			s.abandoned = true
			return sv, nil // the caller broke out of the loop
		case ferr == nil:
			return sv, nil
		case d != DecisionNext:
			return served{}, s.failed(t, ferr, yield)
		}
		// Restart: forget the answer, say so, go on from the next target.
		s.w.causes = append(s.w.causes, &TargetError{Target: t.Name, Tier: t.tier, Err: ferr})
		s.res.Response, s.res.Served, s.res.JSON = nil, Served{}, nil
		s.restarts++
		if !yield(Chunk{Restart: true}, nil) {
			s.abandoned = true
			return served{}, nil
		}
		s.st = streamState{}
	}
}

// failed is the error of a committed stream on t that failed with ferr and
// is not restarted: a complete answer that failed its schema, or a stream
// cut short (matching ErrIncomplete, with the text the caller received).
// It is yielded, as the stream's last value.
func (s *Stream) failed(t *target, ferr error, yield func(Chunk, error) bool) error {
	var err error
	if llm.KindOf(ferr) == llm.KindInvalidOutput {
		err = fmt.Errorf("chain %q: %w", s.c.name, &TargetError{Target: t.Name, Tier: t.tier, Err: ferr})
	} else {
		err = fmt.Errorf("chain %q: %w", s.c.name, &IncompleteError{Target: t.Name, Partial: s.res.Text, Err: ferr})
	}
	yield(Chunk{}, err)
	return err
}

// restarts reports whether, after the committed stream on t failed with
// kind, the walk may go on: RestartStreams is on, the caller did not
// cancel, the decision table's next-target column allows it, and there is
// something left to try.
func (s *Stream) restartable(t *target, kind llm.Kind) bool {
	c := s.c
	if kind == llm.KindCanceled || !c.restart || s.w.from >= len(c.targets) && len(c.degrades) == 0 {
		return false
	}
	st := plan.Leave(plan.Failure{Kind: kind}, plan.Limits{Table: t.table, ContentFallback: c.contentFallback}, "")
	if st.Decision == plan.Stop {
		return false
	}
	if t.table.Rule(kind).Fallback == retry.LargerContext {
		s.w.minWindow = max(s.w.minWindow, t.ContextWindow)
	}
	return true
}

var errPanicked = errors.New("the stream panicked")

// relay streams the committed attempt to yield. It returns the failure
// that ended it (nil for a complete, valid answer) and the decision
// recorded for it (DecisionNext when the walk restarts), or stopped when
// the caller broke out of the loop.
func (s *Stream) relay(yield func(Chunk, error) bool) (err error, d Decision, stopped bool) {
	st, res := &s.st, s.res
	a := st.a
	t := a.t
	defer st.release()
	// The text is assembled once, in a builder that grows geometrically: a
	// stream costs time and memory linear in its size, whatever the size of
	// its chunks. It becomes the Result's Text (without a copy) at the end,
	// at a failure or when the caller stops reading.
	var text strings.Builder
	text.WriteString(st.first.Text)
	s.w.obs.firstChunk(a.obs, &t.ob, a.n, s.c.clock()-a.start)
	if (st.first.Text != "" || st.first.ToolCall != nil) && !s.deliver(yield, Chunk{Text: st.first.Text, ToolCall: st.first.ToolCall}) {
		s.abandon(text.String())
		return nil, DecisionStop, true
	}
	for !st.eof {
		ch, nerr := st.stream.Next()
		if nerr == io.EOF {
			break
		}
		if nerr != nil {
			err = s.classify(nerr)
			break
		}
		text.WriteString(ch.Text)
		if !s.deliver(yield, Chunk{Text: ch.Text, ToolCall: ch.ToolCall}) {
			s.abandon(text.String())
			return nil, DecisionStop, true
		}
	}
	r := *st.stream.Response()
	r.Text = text.String()
	res.serve(t, &r)
	if err == nil && (t.schema != nil || len(r.ToolCalls) > 0) {
		var js json.RawMessage
		if js, err = s.c.checkAnswer(t, a.tools, &r); err != nil && llm.KindOf(err) == llm.KindInvalidOutput {
			s.w.obs.validationFailed(&t.ob, err)
		}
		res.JSON = js
	}
	d, reason := DecisionServed, ""
	if err != nil {
		d, reason = DecisionStop, "the stream failed after it started"
		if s.restartable(t, llm.KindOf(err)) {
			d, reason = DecisionNext, "restarted on the next target"
		}
	}
	s.finish(err, d, reason, false)
	if err == nil {
		for _, m := range s.c.memories {
			_ = m.Remember(s.w.ctx, s.req, t.Name, &r)
		}
	}
	return err, d, false
}

// deliver yields one chunk to the caller, the idle timer stopped while the
// caller has it (the caller's time is not the provider's silence).
func (s *Stream) deliver(yield func(Chunk, error) bool, ch Chunk) bool {
	st := &s.st
	if st.timer != nil {
		st.timer.Stop()
	}
	ok := yield(ch, nil)
	if st.timer != nil {
		st.timer.Reset(st.a.t.idleLimit())
	}
	return ok
}

// abandon ends the committed attempt when the caller stopped reading: it
// is reported as abandoned, and the result names its target as the one
// that served text, what the caller received.
func (s *Stream) abandon(text string) {
	s.finish(ErrAbandoned, DecisionStop, "the caller stopped reading", true)
	r := *s.st.stream.Response()
	r.Text = text
	s.res.serve(s.st.a.t, &r)
}

// classify turns a failure while reading into the error to report: our
// timers' cancellations are KindTimeout, the caller's KindCanceled, and a
// cancellation the caller did not ask for (the chain's deadline) is not
// the caller's: Timeout when a deadline passed, else Unknown.
func (s *Stream) classify(err error) error {
	st := &s.st
	switch context.Cause(st.sctx) {
	case errIdle:
		return errIdle
	case errFirstChunk:
		return errFirstChunk
	}
	if cerr := canceled(s.w.caller); cerr != nil {
		return &llm.Error{Provider: "backstop", Kind: llm.KindCanceled, Err: cerr}
	}
	if llm.KindOf(err) == llm.KindCanceled {
		if errors.Is(st.sctx.Err(), context.DeadlineExceeded) {
			return &llm.Error{Provider: "backstop", Kind: llm.KindTimeout, Message: "the deadline passed during the stream", Err: err}
		}
		return &llm.Error{Provider: "backstop", Kind: llm.KindUnknown, Message: "the stream was canceled", Err: err}
	}
	return err
}

// finish reports the committed attempt, once: to its throttle, breaker,
// budget and observers, and records it with decision d. excluded (the
// caller stopped reading, or the stream panicked) counts it as neither a
// success nor a failure.
func (s *Stream) finish(err error, d Decision, reason string, excluded bool) {
	st := &s.st
	if st.done {
		return
	}
	st.done = true
	c, w, a := s.c, s.w, st.a
	t := a.t
	elapsed := c.clock() - a.start
	now := c.epoch.Add(a.start + elapsed)
	if t.load != nil {
		w.sample(a, elapsed, err)
	}
	resp := st.stream.Response()
	rec := a.record(&sent{elapsed: elapsed, status: 200, requestID: resp.RequestID}, d, reason)
	end := observe.AttemptEnd{N: a.n, Response: resp, Status: 200, RequestID: resp.RequestID, Duration: elapsed}
	verdict, success := retry.NotFailure, true
	switch {
	case excluded:
		verdict, success = retry.Excluded, false
		rec.Kind, rec.Err = llm.KindCanceled, err
		end.Kind, end.Err = llm.KindCanceled, err
	case err != nil:
		rec.Kind, rec.Err = llm.KindOf(err), err
		end.Kind, end.Err = rec.Kind, err
		verdict, success = t.table.Rule(rec.Kind).Breaker, false
		if rec.Kind == llm.KindTimeout && err != errIdle && err != errFirstChunk && w.ctx.Err() != nil {
			verdict = retry.Excluded // the chain's deadline cut a stream that was still sending
		}
	}
	w.settle(a, policy.Outcome{Sent: true, Verdict: verdict, Success: success, Kind: rec.Kind, Err: rec.Err,
		Response: resp, RateLimit: rateLimitOf(resp, err), At: now, Elapsed: elapsed})
	w.obs.endAttempt(a.obs, &t.ob, end)
	w.record(rec)
}
