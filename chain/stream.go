package chain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"

	"github.com/backstop-llm/backstop/cost"
	"github.com/backstop-llm/backstop/internal/callobs"
	"github.com/backstop-llm/backstop/internal/relay"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/observe"
)

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

// streamState is the committed attempt while the caller reads it: its
// own copy of the attempt, and the provider's stream (package relay).
type streamState struct {
	a    *attempt
	rs   relay.Stream
	done bool // finish has reported the attempt
}

// open starts the stream of attempt a (sending req) and reads its first
// chunk (relay.Stream.Open), keeping the attempt for when the stream ends.
// It returns an answer or an error; a stream that opened and failed before
// its first chunk leaves its request id in a.opened. A provider that
// panics leaves nothing open; the panic goes on, to the guard around every
// send (attempt.abandon), which gives back what the attempt holds, as for
// a panic in Complete.
func (st *streamState) open(ctx context.Context, sp llm.StreamProvider, a *attempt, req *llm.Request) (*llm.Response, error) {
	resp, opened, err := st.rs.Open(ctx, sp, req, a.t.firstChunkLimit(), a.t.idleLimit())
	if err != nil {
		a.opened = opened
		return nil, err
	}
	// The stream keeps its own attempt: the walk's lives on the walk's stack.
	own := new(attempt)
	*own = *a
	st.a, st.done = own, false
	return resp, nil
}

// release ends the committed attempt's resources, once: a panic mid-stream
// runs relay's release and then Stream.walk's.
func (st *streamState) release() {
	st.rs.Release()
	if st.a != nil && st.a.cancel != nil {
		st.a.cancel()
		st.a.cancel = nil
	}
}

// run walks the chain, streams the committed answer to yield, and returns
// the call's error.
func (s *Stream) run(yield func(Chunk, error) bool) error {
	c := s.c
	ctx, obs := callobs.Start(s.ctx, c.observer, observe.CallStart{Chain: c.name, Stream: true})
	w := &walk{}
	w.start(c, ctx, obs, sender{stream: s})
	defer w.done()
	s.w, s.res = w, w.res
	sv, err := s.walk(yield)
	w.end(sv, err, relay.Outcome(s.abandoned, errors.Is(err, ErrIncomplete), err, s.restarts))
	if s.abandoned {
		// Not yielded (the caller has left the loop): Result says it.
		err = fmt.Errorf("chain %q: %w", c.name, ErrAbandoned)
	}
	return err
}

// walk runs the walk, relays the answer it commits, and restarts it after
// a failure when Builder.RestartStreams allows.
func (s *Stream) walk(yield func(Chunk, error) bool) (sv served, err error) {
	defer func() {
		if p := recover(); p != nil {
			// The provider or the caller's loop panicked mid-stream: release
			// the breaker's ticket (a half-open probe slot would be held for
			// good), end the span, close the stream; then panic on.
			if s.st.a != nil && !s.st.done {
				s.finish(relay.ErrPanicked, DecisionStop, "the stream panicked", true)
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

// relay streams the committed attempt to yield. It returns the failure
// that ended it (nil for a complete, valid answer) and the decision
// recorded for it (DecisionNext when the walk restarts), or stopped when
// the caller broke out of the loop.
func (s *Stream) relay(yield func(Chunk, error) bool) (err error, d Decision, stopped bool) {
	st, res := &s.st, s.res
	a := st.a
	t := a.t
	defer st.release()
	s.w.obs.FirstChunk(a.obs, &t.ob, a.n, s.c.clock()-a.start)
	text, err, stopped := st.rs.Relay(s.w.caller, func(ch llm.Chunk) bool {
		return yield(Chunk{Text: ch.Text, ToolCall: ch.ToolCall}, nil)
	})
	if stopped {
		s.abandon(text)
		return nil, DecisionStop, true
	}
	r := st.rs.Answer(text)
	res.serve(t, &r)
	if err == nil && (t.schema != nil || len(r.ToolCalls) > 0) {
		var js json.RawMessage
		if js, err = s.c.checkAnswer(t, a.tools, &r); err != nil && llm.KindOf(err) == llm.KindInvalidOutput {
			s.w.obs.ValidationFailed(&t.ob, err)
		}
		res.JSON = js
	}
	d, reason := DecisionServed, ""
	if err != nil {
		d, reason = DecisionStop, "the stream failed after it started"
		// Restart when RestartStreams allows and something is left to try.
		on := s.c.restart && (s.w.from < len(s.c.targets) || len(s.c.degrades) > 0)
		if ok, larger := relay.Restart(llm.KindOf(err), on, &t.table, s.c.contentFallback); ok {
			d, reason = DecisionNext, "restarted on the next target"
			if larger {
				s.w.minWindow = max(s.w.minWindow, t.ContextWindow)
			}
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

// abandon ends the committed attempt when the caller stopped reading: it
// is reported as abandoned, and the result names its target as the one
// that served text, what the caller received.
func (s *Stream) abandon(text string) {
	s.finish(ErrAbandoned, DecisionStop, "the caller stopped reading", true)
	r := s.st.rs.Answer(text)
	s.res.serve(s.st.a.t, &r)
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
	if t.load != nil {
		t.group.Sample(t.load, a.start, elapsed, err, w.send.commits(t))
	}
	w.po = st.rs.Settled(err, excluded, w.ctx, &t.table, c.epoch.Add(a.start+elapsed), elapsed)
	resp, kind := w.po.Response, w.po.Kind
	if err == nil {
		w.po.Cost = cost.Of(resp.Usage, t.Price)
	} else { // cut after its first chunk: billed for what it generated
		w.po.Cost = cost.Cut(resp, t.Price)
	}
	lostOn := w.prompt(t, resp.Usage, &w.po.Cost, a.start+elapsed)
	rec := a.record(&sent{err: err, kind: kind, elapsed: elapsed, status: 200, requestID: resp.RequestID, cost: w.po.Cost, lostOn: lostOn}, d, reason)
	w.settle(a)
	w.obs.EndAttempt(a.obs, &t.ob, observe.AttemptEnd{N: a.n, Response: resp, Status: 200, RequestID: resp.RequestID,
		Kind: kind, Err: err, Duration: elapsed, Cost: w.po.Cost})
	w.record(rec)
}
