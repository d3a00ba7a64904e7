// Package relay holds the mechanics of relaying a provider's stream, none
// of which needs a chain: opening it and reading its first chunk within a
// time limit, the idle timer between chunks (stopped while the caller has a
// chunk), the loop that hands the chunks on and assembles the text, the
// classification of a failure while reading, and the release of what the
// stream holds. Package chain keeps the Stream its callers read, the walk's
// handover and the records.
package relay

import (
	"context"
	"errors"
	"io"
	"strings"
	"time"

	"github.com/backstop-llm/backstop/internal/callobs"
	"github.com/backstop-llm/backstop/internal/plan"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/policy"
	"github.com/backstop-llm/backstop/retry"
)

// The failures of the relay's own timers, compared by identity (Timer).
var (
	// ErrFirstChunk ends a stream whose first chunk did not come in time.
	ErrFirstChunk = &llm.Error{Provider: "backstop", Kind: llm.KindTimeout, Message: "no first chunk within the target's FirstChunkTimeout (when 0: its Timeout, or DefaultTimeout)"}
	// ErrIdle ends a stream that sent no chunk for its idle limit.
	ErrIdle = &llm.Error{Provider: "backstop", Kind: llm.KindTimeout, Message: "no chunk within the target's IdleTimeout (when 0: DefaultIdleTimeout)"}
)

// ErrPanicked ends, in its record, a stream whose provider or whose
// caller's loop panicked while it was relayed.
var ErrPanicked = errors.New("the stream panicked")

// Timer reports whether err is one of the relay's own timers' failures
// (ErrFirstChunk, ErrIdle), rather than a deadline's or the provider's.
func Timer(err error) bool { return err == ErrIdle || err == ErrFirstChunk }

// Stream is a provider's stream once its first chunk has come, while it
// is relayed. The zero Stream holds nothing (Release does nothing). It is
// copied by value until it is relayed: its timers hold no pointer to it.
type Stream struct {
	s      llm.Stream
	ctx    context.Context // the context the provider streams under
	first  llm.Chunk
	eof    bool // the stream ended with its first read
	closed bool // Release has closed s (kept: Response reads it)
	cancel context.CancelCauseFunc
	timer  *time.Timer   // the idle timer
	idle   time.Duration // its limit
}

// Open starts sp's stream of req under ctx and reads its first chunk,
// within first (0: no limit; ErrFirstChunk when it passes), then arms the
// idle timer (idle between two chunks; ErrIdle). On success s holds the
// stream and resp is its response (the first chunk is relayed by Relay).
// On failure s is left as it was, nothing stays open, and opened is the
// request id the stream's response headers carried, when it opened.
//
// A provider that panics (in Stream, or in the stream's Next or Response)
// leaves nothing open either: the stream it opened is closed, releasing
// its connection, and the first chunk's timer and context are ended; then
// the panic goes on.
func (s *Stream) Open(ctx context.Context, sp llm.StreamProvider, req *llm.Request, first, idle time.Duration) (resp *llm.Response, opened string, err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	var timer *time.Timer
	if first > 0 {
		timer = time.AfterFunc(first, func() { cancel(ErrFirstChunk) })
	}
	var ps llm.Stream
	defer func() {
		if resp != nil || err != nil {
			return // returned: ps is s's now, or closed
		}
		// Neither: a panic of the provider's cut Open short.
		if ps != nil {
			ps.Close()
		}
		if timer != nil {
			timer.Stop()
		}
		cancel(nil)
	}()
	fail := func(err error) (*llm.Response, string, error) {
		if timer != nil {
			timer.Stop()
		}
		if context.Cause(ctx) == ErrFirstChunk {
			err = ErrFirstChunk
		}
		cancel(nil)
		return nil, opened, err
	}
	ps, err = sp.Stream(ctx, *req)
	if err != nil {
		return fail(err)
	}
	if ps == nil {
		return fail(&llm.Error{Provider: sp.Name(), Kind: llm.KindUnknown, Message: "provider returned neither a stream nor an error"})
	}
	// abort ends ps before its first chunk, keeping the request id its
	// headers carried.
	abort := func(err error) (*llm.Response, string, error) {
		if r := ps.Response(); r != nil {
			opened = r.RequestID
		}
		ps.Close()
		return fail(err)
	}
	ch, err := ps.Next()
	eof := err == io.EOF
	if eof {
		err = nil // an empty answer, complete
	}
	if err != nil {
		return abort(err)
	}
	if timer != nil && !timer.Stop() && context.Cause(ctx) == ErrFirstChunk {
		return abort(ErrFirstChunk)
	}
	resp = ps.Response()
	if resp == nil {
		return abort(&llm.Error{Provider: sp.Name(), Kind: llm.KindUnknown, Message: "the stream returned no response"})
	}
	*s = Stream{s: ps, ctx: ctx, first: ch, eof: eof, cancel: cancel, idle: idle}
	s.timer = time.AfterFunc(idle, func() { cancel(ErrIdle) })
	return resp, "", nil
}

// Response is the stream's response: its metadata, and once the stream
// has ended its usage. s must have opened.
func (s *Stream) Response() *llm.Response { return s.s.Response() }

// Answer is a copy of the stream's response whose Text is text (Relay's).
func (s *Stream) Answer(text string) llm.Response {
	r := *s.s.Response()
	r.Text = text
	return r
}

// Relay hands the stream's chunks to deliver, the first one first (unless
// it carries neither text nor a tool call), until the stream ends, fails,
// or deliver returns false (stopped: the caller stopped reading). The idle
// timer is stopped while deliver has a chunk: the caller's time is not the
// provider's silence. text is the text of every chunk read, the refused
// one included; err is the failure that ended the stream, classified (see
// classify), nil at its end.
func (s *Stream) Relay(caller context.Context, deliver func(llm.Chunk) bool) (text string, err error, stopped bool) {
	// The text is assembled once, in a builder that grows geometrically: a
	// stream costs time and memory linear in its size, whatever the size of
	// its chunks.
	var b strings.Builder
	b.WriteString(s.first.Text)
	if (s.first.Text != "" || s.first.ToolCall != nil) && !s.deliver(deliver, s.first) {
		return b.String(), nil, true
	}
	for !s.eof {
		ch, nerr := s.s.Next()
		if nerr == io.EOF {
			break
		}
		if nerr != nil {
			return b.String(), s.classify(caller, nerr), false
		}
		b.WriteString(ch.Text)
		if !s.deliver(deliver, ch) {
			return b.String(), nil, true
		}
	}
	return b.String(), nil, false
}

// deliver hands ch to, the idle timer stopped meanwhile.
func (s *Stream) deliver(to func(llm.Chunk) bool, ch llm.Chunk) bool {
	if s.timer != nil {
		s.timer.Stop()
	}
	ok := to(ch)
	if s.timer != nil {
		s.timer.Reset(s.idle)
	}
	return ok
}

// classify turns a failure while reading into the error to report: the
// relay's timers' cancellations are theirs (KindTimeout), the caller's
// KindCanceled, and a cancellation the caller did not ask for (a deadline
// of the stream's context) is not the caller's: KindTimeout when a
// deadline passed, else KindUnknown.
func (s *Stream) classify(caller context.Context, err error) error {
	if cause := context.Cause(s.ctx); Timer(cause) {
		return cause
	}
	if cerr := caller.Err(); errors.Is(cerr, context.Canceled) {
		return &llm.Error{Provider: "backstop", Kind: llm.KindCanceled, Err: cerr}
	}
	if llm.KindOf(err) == llm.KindCanceled {
		if errors.Is(s.ctx.Err(), context.DeadlineExceeded) {
			return &llm.Error{Provider: "backstop", Kind: llm.KindTimeout, Message: "the deadline passed during the stream", Err: err}
		}
		return &llm.Error{Provider: "backstop", Kind: llm.KindUnknown, Message: "the stream was canceled", Err: err}
	}
	return err
}

// Verdict classifies how a relayed stream's attempt ended, for its record
// and its target's policies: err is the failure that ended it (nil: a
// complete answer, a success). excluded (the caller stopped reading, or
// the stream panicked) counts it as neither a success nor a failure, of
// kind KindCanceled. A failure counts as table's rule for its kind says,
// except a timeout that is not the relay's own timers' once call (the
// call's context) has ended: the call's deadline cut a stream that was
// still sending, which is no failure of the target's.
func Verdict(err error, excluded bool, call context.Context, table *retry.Table) (kind llm.Kind, v retry.BreakerVerdict, success bool) {
	switch {
	case excluded:
		return llm.KindCanceled, retry.Excluded, false
	case err == nil:
		return llm.KindUnknown, retry.NotFailure, true
	}
	kind = llm.KindOf(err)
	v = table.Rule(kind).Breaker
	if kind == llm.KindTimeout && !Timer(err) && call.Err() != nil {
		v = retry.Excluded
	}
	return kind, v, false
}

// Settled is the policy.Outcome of a relayed stream's attempt that ended
// with err (classified by Verdict, under the call's context call and
// table) at at, elapsed after it started. s must have opened.
func (s *Stream) Settled(err error, excluded bool, call context.Context, table *retry.Table, at time.Time, elapsed time.Duration) policy.Outcome {
	kind, verdict, success := Verdict(err, excluded, call, table)
	resp := s.Response()
	return policy.Outcome{Sent: true, Verdict: verdict, Success: success, Kind: kind, Err: err,
		Response: resp, RateLimit: resp.RateLimit, At: at, Elapsed: elapsed}
}

// Restart reports whether, after a committed stream failed with kind, the
// walk may go on to the next target: on (restarts are allowed and
// something is left to try), the caller did not cancel, and the decision
// table's next-target column allows it (plan.Leave). larger says that the
// kind's rule falls back to a larger context window.
func Restart(kind llm.Kind, on bool, table *retry.Table, contentFallback bool) (ok, larger bool) {
	if kind == llm.KindCanceled || !on {
		return false, false
	}
	if plan.Leave(plan.Failure{Kind: kind}, plan.Limits{Table: *table, ContentFallback: contentFallback}, "").Decision == plan.Stop {
		return false, false
	}
	return true, table.Rule(kind).Fallback == retry.LargerContext
}

// Outcome is how a stream ended, for telemetry (observe.CallEnd's
// Stream): abandoned (the caller left the loop), incomplete (cut short
// after its first chunk), or, when err is nil, restarted (after restarts
// restarts) or complete; "" when it failed before its first chunk.
func Outcome(abandoned, incomplete bool, err error, restarts int) string {
	switch {
	case abandoned:
		return callobs.StreamAbandoned
	case incomplete:
		return callobs.StreamIncomplete
	case err == nil && restarts > 0:
		return callobs.StreamRestarted
	case err == nil:
		return callobs.StreamComplete
	}
	return ""
}

// Release ends what s holds, once: its idle timer, the provider's stream
// (closed; Response still reads it) and its context.
func (s *Stream) Release() {
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	if s.s != nil && !s.closed {
		s.closed = true
		s.s.Close()
	}
	if s.cancel != nil {
		s.cancel(nil)
		s.cancel = nil
	}
}
