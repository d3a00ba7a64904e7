package chain

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"
	"time"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/budget"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/retry"
	"github.com/backstop-llm/backstop/tracing"
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
	// Restart, with an empty Text, says that the answer so far has failed
	// and is discarded: the chunks after it are a new answer, from the
	// next target. It is sent only to streams with Builder.RestartStreams.
	Restart bool
}

// Stream is one streamed call. Range over Chunks once, then read Result.
// It is not safe for concurrent use.
type Stream struct {
	c         *Chain
	ctx       context.Context
	req       llm.Request
	res       *Result
	err       error
	restarts  int
	abandoned bool
}

// Stream calls the chain and streams the answer. Before the first chunk,
// every failure retries and falls back exactly as Call does. After the
// first chunk a failure ends the stream with an error matching
// ErrIncomplete that carries the partial text, never a second answer glued
// onto the first; with Builder.RestartStreams the chain moves on instead
// and says so with a Chunk whose Restart is set. A target whose provider
// does not implement llm.StreamProvider, and a degradation, answer in one
// chunk. The answer is validated against the Schema at the end and
// remembered by LastGood like any other.
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
//
// When the caller stopped reading before the stream ended, the error
// matches ErrAbandoned (it is not yielded: the loop had been left). Served
// then names the target whose stream was abandoned, Text holds the chunks
// the caller received, and the last Attempt has KindCanceled, DecisionStop
// and ErrAbandoned. A caller that stopped at a Restart chunk had received
// nothing of the next answer: Served and Text are empty.
func (s *Stream) Result() (*Result, error) { return s.res, s.err }

// Chunks returns the stream's chunks. A failure is yielded once, as the
// last value, and is also Result's error.
func (s *Stream) Chunks() iter.Seq2[Chunk, error] {
	return func(yield func(Chunk, error) bool) {
		s.err = s.run(yield)
	}
}

// streamState carries a streamed call through the walk (call and try) and
// holds the committed attempt while the caller reads.
type streamState struct {
	caller, ctx context.Context
	res         *Result
	from        int // the first target to try (after a restart)

	// the committed attempt
	target *target
	index  int
	stream llm.Stream
	sctx   context.Context // the context the provider streams under
	first  llm.Chunk
	eof    bool // the stream ended with its first read
	done   bool // finish has reported the attempt

	// what the walk learned, kept across a restart
	causes    []error
	begin     time.Duration
	minWindow int
	cancel    context.CancelFunc
	idle      context.CancelCauseFunc
	timer     *time.Timer
	span      tracing.Attempt
	ticket    breaker.Ticket
	n         int
	started   time.Duration
}

var (
	errFirstChunk = &llm.Error{Provider: "backstop", Kind: llm.KindTimeout, Message: "no first chunk within the target's FirstChunkTimeout"}
	errIdle       = &llm.Error{Provider: "backstop", Kind: llm.KindTimeout, Message: "no chunk within the target's IdleTimeout"}
)

// open starts the stream of one attempt and reads its first chunk. A
// provider that panics has the breaker ticket released first, as Call's
// attempts do.
func (st *streamState) open(ctx context.Context, sp llm.StreamProvider, t *target, req llm.Request, ticket breaker.Ticket) (resp *llm.Response, err error) {
	if ticket.Held() {
		defer func() {
			if p := recover(); p != nil {
				ticket.Report(retry.Excluded)
				panic(p)
			}
		}()
	}
	ctx, idle := context.WithCancelCause(ctx)
	var timer *time.Timer
	if t.FirstChunkTimeout > 0 {
		timer = time.AfterFunc(t.FirstChunkTimeout, func() { idle(errFirstChunk) })
	}
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
	s, err := sp.Stream(ctx, req)
	if err != nil {
		return fail(err)
	}
	if s == nil {
		return fail(&llm.Error{Provider: sp.Name(), Kind: llm.KindUnknown, Message: "provider returned neither a stream nor an error"})
	}
	first, err := s.Next()
	st.eof = err == io.EOF
	if st.eof {
		err = nil // an empty answer, complete
	}
	if err != nil {
		s.Close()
		return fail(err)
	}
	if timer != nil && !timer.Stop() && context.Cause(ctx) == errFirstChunk {
		s.Close()
		return fail(errFirstChunk)
	}
	resp = s.Response()
	if resp == nil {
		s.Close()
		return fail(&llm.Error{Provider: sp.Name(), Kind: llm.KindUnknown, Message: "the stream returned no response"})
	}
	st.stream, st.sctx, st.first, st.idle = s, ctx, first, idle
	if t.IdleTimeout > 0 {
		st.timer = time.AfterFunc(t.IdleTimeout, func() { idle(errIdle) })
	}
	return resp, nil
}

// commit keeps what the attempt needs until the stream ends.
func (st *streamState) commit(obs *tracing.Call, cancel context.CancelFunc, span tracing.Attempt, ticket breaker.Ticket, n int, started, firstChunk time.Duration) {
	st.cancel, st.span, st.ticket, st.n, st.started, st.done = cancel, span, ticket, n, started, false
	obs.FirstChunk(span, firstChunk)
}

// release ends the committed attempt's resources.
func (st *streamState) release() {
	if st.timer != nil {
		st.timer.Stop()
		st.timer = nil
	}
	if st.stream != nil {
		st.stream.Close()
	}
	if st.idle != nil {
		st.idle(nil)
		st.idle = nil
	}
	if st.cancel != nil {
		st.cancel()
		st.cancel = nil
	}
}

// run walks the chain, streams the committed answer to yield, and returns
// the call's error.
func (s *Stream) run(yield func(Chunk, error) bool) error {
	c := s.c
	ctx, obs := c.tel.StartCall(s.ctx)
	st := &streamState{caller: ctx, ctx: ctx}
	if c.deadline > 0 {
		var cancel context.CancelFunc
		st.ctx, cancel = context.WithTimeout(ctx, c.deadline)
		defer cancel()
	}
	served, err := s.walk(st, obs, yield)
	switch {
	case s.abandoned:
		obs.StreamEnded(tracing.StreamAbandoned)
	case errors.Is(err, ErrIncomplete):
		obs.StreamEnded(tracing.StreamIncomplete)
	case err == nil && s.restarts > 0:
		obs.StreamEnded(tracing.StreamRestarted)
	case err == nil:
		obs.StreamEnded(tracing.StreamComplete)
	}
	if obs != nil {
		outcome, errType := callOutcome(s.res, err)
		obs.End(served, s.res.Served.Model, s.res.Served.RequestID, s.res.Degraded, s.res.Age, outcome, errType)
	}
	if s.abandoned {
		// Not yielded (the caller has left the loop): Result says it.
		err = fmt.Errorf("chain %q: %w", c.name, ErrAbandoned)
	}
	return err
}

// walk is run without the telemetry's start and end.
func (s *Stream) walk(st *streamState, obs *tracing.Call, yield func(Chunk, error) bool) (served *tracing.Target, err error) {
	c := s.c
	defer func() {
		if p := recover(); p != nil {
			// The provider or the caller's loop panicked mid-stream: release
			// the breaker's ticket (a half-open probe slot would be held for
			// good), end the span, close the stream; then panic on.
			if st.target != nil && st.stream != nil && !st.done {
				s.finish(st, obs, errPanicked, true)
				st.release()
			}
			panic(p)
		}
	}()
	for {
		res, served, err := c.call(st.ctx, obs, s.req, st)
		s.res, st.res = res, res
		if err != nil {
			yield(Chunk{}, err)
			return nil, err
		}
		if st.target == nil || st.stream == nil {
			// A degradation, or a target that does not stream, answered
			// whole (validated like any Call): one chunk.
			yield(Chunk{Text: res.Text}, nil)
			return served, nil
		}
		t := st.target
		ferr, stopped := s.relay(st, obs, yield)
		if stopped {
			s.abandoned = true
			return t.tel, nil // the caller broke out of the loop
		}
		if ferr == nil {
			return t.tel, nil
		}
		kind := llm.KindOf(ferr)
		partial := res.Text
		incomplete := func() (*tracing.Target, error) {
			ierr := fmt.Errorf("chain %q: %w", c.name, &IncompleteError{Target: t.Name, Partial: partial, Err: ferr})
			yield(Chunk{}, ierr)
			return nil, ierr
		}
		if kind == llm.KindCanceled || !c.restart || st.index+1 >= len(c.targets) {
			return incomplete()
		}
		// A restart follows the decision table's next-target column, as
		// the walk does.
		if c.moveOn(t, kind, &st.minWindow) != "" {
			return incomplete()
		}
		st.causes = append(st.causes, &TargetError{Target: t.Name, Tier: t.tier, Err: ferr})
		// Restart: forget the partial answer, say so, go on from the next
		// target.
		res.Response, res.Served, res.JSON = llm.Response{}, Served{}, nil
		s.restarts++
		if !yield(Chunk{Restart: true}, nil) {
			s.abandoned = true
			return nil, nil
		}
		st.from, st.target, st.stream = st.index+1, nil, nil
	}
}

var errPanicked = errors.New("the stream panicked")

// relay streams the committed attempt to yield. It returns the failure
// that ended it (nil for a complete, valid answer), or stopped when the
// caller broke out of the loop.
func (s *Stream) relay(st *streamState, obs *tracing.Call, yield func(Chunk, error) bool) (err error, stopped bool) {
	c, t, res := s.c, st.target, st.res
	defer st.release()
	// The text is assembled once, in a builder that grows geometrically: a
	// stream costs time and memory linear in its size, whatever the size of
	// its chunks. It becomes the Result's Text (without a copy) at the end,
	// at a failure or when the caller stops reading.
	var text strings.Builder
	text.WriteString(st.first.Text)
	if st.first.Text != "" {
		st.pause()
		ok := yield(Chunk{Text: st.first.Text}, nil)
		st.resume(t)
		if !ok {
			s.abandon(st, obs, text.String())
			return nil, true
		}
	}
	for !st.eof {
		ch, nerr := st.stream.Next()
		if nerr == io.EOF {
			break
		}
		if nerr != nil {
			err = s.classify(st, nerr)
			break
		}
		text.WriteString(ch.Text)
		st.pause() // the caller's time is not the provider's silence
		ok := yield(Chunk{Text: ch.Text}, nil)
		st.resume(t)
		if !ok {
			s.abandon(st, obs, text.String())
			return nil, true
		}
	}
	r := *st.stream.Response()
	r.Text = text.String()
	res.serve(t, &r)
	if err == nil && t.schema != nil {
		js, verr := t.schema.Validate(r.Text)
		if verr != nil {
			err = invalidOutput(t.Provider.Name(), 200, r.RequestID, verr)
		}
		res.JSON = js
	}
	s.finish(st, obs, err, false)
	if err == nil {
		for _, l := range c.lastGoods {
			_ = l.remember(st.ctx, s.req, t.Name, &r)
		}
	}
	return err, false
}

// abandon ends the committed attempt when the caller stopped reading: it
// is reported as abandoned, and the result names its target as the one
// that served text, what the caller received.
func (s *Stream) abandon(st *streamState, obs *tracing.Call, text string) {
	s.finish(st, obs, nil, true)
	r := *st.stream.Response()
	r.Text = text
	st.res.serve(st.target, &r)
}

// pause stops the idle timer while the caller handles a chunk.
func (st *streamState) pause() {
	if st.timer != nil {
		st.timer.Stop()
	}
}

// resume restarts the idle timer before the next read.
func (st *streamState) resume(t *target) {
	if st.timer != nil {
		st.timer.Reset(t.IdleTimeout)
	}
}

// classify turns a failure while reading into the error to report: our
// timers' cancellations are KindTimeout, the caller's KindCanceled, and a
// cancellation the caller did not ask for (the chain's deadline) is not
// the caller's: Timeout when a deadline passed, else Unknown.
func (s *Stream) classify(st *streamState, err error) error {
	switch context.Cause(st.sctx) {
	case errIdle:
		return errIdle
	case errFirstChunk:
		return errFirstChunk
	}
	if cerr := canceled(st.caller); cerr != nil {
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

// finish reports the committed attempt, once: to its breaker, budget,
// throttle, span and the result's record of it.
func (s *Stream) finish(st *streamState, obs *tracing.Call, err error, abandoned bool) {
	if st.done {
		return
	}
	st.done = true
	c, t, res := s.c, st.target, st.res
	elapsed := c.clock() - st.started
	now := c.epoch.Add(st.started + elapsed)
	a := &res.Attempts[len(res.Attempts)-1]
	a.Duration = elapsed
	resp := st.stream.Response()
	if t.throttle != nil {
		t.throttle.Observe(now, rateLimitOf(resp, err), llm.KindOf(err) == llm.KindRateLimited)
	}
	switch {
	case abandoned:
		c.settle(st.ctx, t, st.ticket, retry.Excluded, budget.Outcome{Retry: st.n > 1, At: now})
		kind := llm.KindCanceled
		if err == nil {
			err = ErrAbandoned
			a.Kind, a.Err, a.Decision, a.Reason = kind, err, DecisionStop, "the caller stopped reading"
		}
		obs.EndAttempt(st.span, t.tel, resp, 200, kind, err, elapsed)
	case err != nil:
		a.Kind, a.Err, a.Decision = llm.KindOf(err), err, DecisionNext
		verdict := t.table.Rule(a.Kind).Breaker
		if a.Kind == llm.KindTimeout && err != errIdle && err != errFirstChunk && st.ctx.Err() != nil {
			verdict = retry.Excluded // the chain's deadline cut a stream that was still sending
		}
		c.settle(st.ctx, t, st.ticket, verdict, budget.Outcome{Retry: st.n > 1, At: now})
		obs.EndAttempt(st.span, t.tel, resp, 200, a.Kind, err, elapsed)
	default:
		c.settle(st.ctx, t, st.ticket, retry.NotFailure, budget.Outcome{Retry: st.n > 1, Success: true, At: now})
		obs.EndAttempt(st.span, t.tel, resp, 200, llm.KindUnknown, nil, elapsed)
	}
}
