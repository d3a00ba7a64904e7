package chain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"

	"github.com/backstop-llm/backstop/cost"
	"github.com/backstop-llm/backstop/internal/answer"
	"github.com/backstop-llm/backstop/internal/callobs"
	"github.com/backstop-llm/backstop/internal/plan"
	"github.com/backstop-llm/backstop/internal/relay"
	"github.com/backstop-llm/backstop/internal/seam"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/observe"
	"github.com/backstop-llm/backstop/policy"
)

// Chunk is a piece of a streamed answer.
type Chunk struct {
	// Text is the next piece of the answer.
	Text string
	// ToolCall is a tool call the model made, in a chunk of its own (Text
	// empty); nil in a text chunk. Tool calls are delivered only once the
	// answer has ended and every call in it passed its checks (a tool of
	// the request, arguments valid against its InputSchema): after all of
	// the answer's text, in the order the model made them, and they are
	// Result().ToolCalls. A consumer may run a tool as its chunk arrives:
	// an invalid call is never delivered. An answer whose calls fail is
	// re-asked (see Chain.Stream), after a Restart chunk if its text was
	// shown.
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
	shown     bool        // text of the committed attempt was delivered
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
// Text streams as it arrives; the answer's tool calls are held until it
// has ended and they passed their checks (see Chunk.ToolCall). An answer
// whose tool calls fail them is handled as Call handles it (re-asked on
// the same target with the problems, then the next target), never
// delivered: when none of its text was shown, whatever RestartStreams
// says, with no Restart chunk; when some was, only with RestartStreams,
// after a Restart chunk, and otherwise the stream ends with the check's
// failure (KindInvalidOutput, not ErrIncomplete).
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
			// whole (validated like any Call): one chunk, then its calls.
			s.whole(yield)
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
		case d == DecisionRetry:
			// A re-ask of the same target (s.w.again): the walk goes on
			// from its position.
			s.w.from = s.w.pos
		case d != DecisionNext:
			return served{}, s.failed(t, ferr, yield)
		default:
			s.w.causes = append(s.w.causes, &TargetError{Target: t.Name, Tier: t.tier, Err: ferr})
		}
		// Restart: forget the answer, say so if the caller saw any of it,
		// go on.
		s.res.Response, s.res.Served, s.res.JSON = nil, Served{}, nil
		if s.shown {
			s.restarts++
			if !yield(Chunk{Restart: true}, nil) {
				s.w.again = nil
				s.abandoned = true
				return served{}, nil
			}
		}
		s.st = streamState{}
	}
}

// whole yields an answer the walk served whole: its text in one chunk
// (none when it is empty and the answer calls tools), then its tool calls,
// checked like any Call's.
func (s *Stream) whole(yield func(Chunk, error) bool) {
	calls := s.res.ToolCalls
	if (s.res.Text != "" || len(calls) == 0) && !yield(Chunk{Text: s.res.Text}, nil) {
		return
	}
	for i := range calls {
		if !yield(Chunk{ToolCall: &calls[i]}, nil) {
			return
		}
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

// relay streams the committed attempt to yield: its text as it arrives,
// its tool calls once they passed their checks. It returns the failure
// that ended it (nil for a complete, valid answer) and the decision
// recorded for it (DecisionNext when the walk restarts, DecisionRetry when
// it re-asks the same target), or stopped when the caller broke out of the
// loop.
func (s *Stream) relay(yield func(Chunk, error) bool) (err error, d Decision, stopped bool) {
	st, res := &s.st, s.res
	a := st.a
	t := a.t
	defer st.release()
	s.w.obs.FirstChunk(a.obs, &t.ob, a.n, s.c.clock()-a.start)
	s.shown = false
	text, err, stopped := st.rs.Relay(s.w.caller, func(ch llm.Chunk) bool {
		if ch.ToolCall != nil && ch.Text == "" {
			return true // held until the answer's calls are checked, below
		}
		s.shown = s.shown || ch.Text != ""
		return yield(Chunk{Text: ch.Text}, nil)
	})
	if stopped {
		s.abandon(text, nil)
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
	if err == nil {
		// Checked: the calls are the caller's now, after the text, in order.
		for i := range r.ToolCalls {
			if !yield(Chunk{ToolCall: &r.ToolCalls[i]}, nil) {
				s.abandon(text, r.ToolCalls[:i+1])
				return nil, DecisionStop, true
			}
		}
	}
	d, reason := DecisionServed, ""
	var refused *policy.Admission
	if err != nil {
		d, reason, refused = s.next(a, &r, err)
	}
	s.finish(err, d, reason, false)
	switch {
	case d == DecisionRetry:
		s.w.obs.Retry(&t.ob, a.n, llm.KindInvalidOutput, 0, 0, reason)
	case refused != nil:
		// As try: the re-ask refused is recorded, and the target's cause
		// says both.
		out := s.w.notSent(t, a.n+1, 0, &sent{err: err, kind: llm.KindInvalidOutput}, *refused)
		err = out.err
		if out.stop || out.kind == llm.KindCanceled {
			d = DecisionStop
		}
	case err == nil:
		for _, m := range s.c.memories {
			_ = m.Remember(s.w.ctx, s.req, t.Name, &r)
		}
	}
	return err, d, false
}

// again is a re-ask that Stream decided after the committed answer of
// the walk's target at its position, t, failed its check: try goes on on
// t from attempt n, sending msgs (the conversation with the problems),
// as its own loop would after a re-ask (holds and owed, what the policies
// said of the retry; last, the failure it retries).
type again struct {
	t     *target
	n     int
	msgs  []llm.Message
	holds seam.Holds
	owed  policy.Admission
	last  sent
}

// next decides what follows the committed answer r of attempt a, which
// failed with err (the decision to record, why, and a re-ask the target's
// policies refused, to record after it). An answer whose tool calls failed
// their check is re-asked on the same target as Call does (plan, then the
// policies' Plan), unless its text was shown and RestartStreams is off, or
// it came from a racer (a hedge, a patience race), whose place in the walk
// is not the walk's; a re-ask sets s.w.again. Otherwise the stream restarts
// on the next target when something is left to try and RestartStreams
// allows it; an answer that failed its check and of which nothing was
// shown needs no RestartStreams: for the caller, nothing had started.
func (s *Stream) next(a *attempt, r *llm.Response, err error) (d Decision, reason string, refused *policy.Admission) {
	w, t := s.w, a.t
	kind := llm.KindOf(err)
	unseen := kind == llm.KindInvalidOutput && !s.shown
	if kind == llm.KindInvalidOutput && len(r.ToolCalls) > 0 && (unseen || s.c.restart) && !a.hedge && w.target(w.pos) == t {
		sn := sent{err: err, kind: kind, invalid: r}
		if step := w.plan(a, &sn, 0); step.Decision == plan.Retry {
			var holds seam.Holds
			owed := w.consult(t, policy.Plan, a.n+1, nil, &holds)
			if owed.Err == nil || owed.Soft {
				w.again = &again{t: t, n: a.n + 1, msgs: answer.Reask(w.req.Messages, w.req.Tools, r, err), holds: holds, owed: owed, last: sn}
				return DecisionRetry, step.Reason, nil
			}
			refused = &owed
		}
	}
	d, reason = DecisionStop, "the stream failed after it started"
	// Restart when allowed and something is left to try.
	on := (s.c.restart || unseen) && (w.from < len(s.c.targets) || len(s.c.degrades) > 0)
	if ok, larger := relay.Restart(kind, on, &t.table, s.c.contentFallback); ok {
		d, reason = DecisionNext, "restarted on the next target"
		if larger {
			w.minWindow = max(w.minWindow, t.ContextWindow)
		}
	}
	if refused != nil {
		reason = refused.Reason
	}
	return d, reason, refused
}

// abandon ends the committed attempt when the caller stopped reading: it
// is reported as abandoned, and the result names its target as the one
// that served text and calls, what the caller received.
func (s *Stream) abandon(text string, calls []llm.ToolCall) {
	s.finish(ErrAbandoned, DecisionStop, "the caller stopped reading", true)
	r := s.st.rs.Answer(text)
	r.ToolCalls = calls
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
	billed := cost.Of(resp.Usage, t.Price)
	if err != nil { // cut after its first chunk: billed for what it generated
		billed = cost.Cut(resp, t.Price)
	}
	var lostOn *target
	w.po.Cost, lostOn = w.bill(t, &resp.Usage, billed, a.start+elapsed)
	rec := a.record(&sent{err: err, kind: kind, elapsed: elapsed, status: 200, requestID: resp.RequestID, cost: w.po.Cost, lostOn: lostOn}, d, reason)
	w.settle(a)
	w.obs.EndAttempt(a.obs, &t.ob, observe.AttemptEnd{N: a.n, Response: resp, Status: 200, RequestID: resp.RequestID,
		Kind: kind, Err: err, Duration: elapsed, Cost: w.po.Cost})
	w.record(rec)
}
