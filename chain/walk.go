package chain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/observe"
	"github.com/backstop-llm/backstop/spread"
)

// walk is one call's way through the chain: the model targets in order,
// each admitted (context window, deadline, gate, breaker), tried (attempt,
// plan, record, wait, as often as plan says), then left; then the
// degradations. Call and Stream each make one; Stream keeps it across a
// restart, so that what the walk learned (the causes, the context window
// that overflowed) still holds. The walk does not know whether it streams:
// its sender makes each attempt.
type walk struct {
	c      *Chain
	caller context.Context // the caller's context, as the observers returned it
	ctx    context.Context // caller bounded by the chain's Deadline
	res    *Result
	obs    *callObs // nil when nobody observes the call
	send   sender

	from      int                // the first position of the walk to try
	pos       int                // the position being tried
	causes    []error            // one per target that failed, in order
	begin     time.Duration      // when the first attempt started, on the chain's clock; -1 before
	minWindow int                // after a context-length failure: only larger windows; -1 before
	needs     llm.Capabilities   // what the request carries beyond text (0 in a chain whose targets all carry everything and every media type)
	media     *llm.Request       // the request, when it carries media and a target takes only some media types; else nil
	cancel    context.CancelFunc // the deadline's

	// ranked marks the groups (by index) that spread and were ranked for
	// this call; 0 while the walk follows the chain's order. order (big,
	// in a chain of more than inlineRank targets) is then the index of the
	// target at each position, figs the figure it was ranked by, vs what
	// each group's first was preferred to; spare is room for the first
	// Choice, in the result's allocation. hedged marks the targets (by
	// index) already tried in this call as racers: the walk passes them
	// over.
	ranked uint8
	order  [inlineRank]int8
	figs   [inlineRank]float32
	vs     [groups]rival
	big    *bigRanking
	spare  *spread.Choice
	hedged targetSet

	// now is when admit let the target at pos in, on the chain's clock;
	// nowOK is true until anything waited since: the first attempt then
	// starts at now, and the clock is read once per call on the healthy
	// path, not once per policy.
	now   time.Duration
	nowOK bool
	// probeWait is how long admit or readmit waited for the breaker's
	// probe (Breaker.Wait) before the attempt they let in: the attempt's
	// record counts it in its Wait.
	probeWait time.Duration

	// waited is set once the walk has waited for a breaker's probe
	// (mayWait): a call waits at most once. owed is a retry the budget
	// refused on the last target, held until the backoff has passed: if
	// the breaker opened meanwhile, the call waits for its probe instead
	// (readmit). unpaid is set while the retry in hand was not withdrawn
	// from the budget (it goes after a probe), so that nothing is refunded.
	waited bool
	unpaid bool
	owed   error

	// pat is the patience race of the attempt in flight (patience.go).
	pat patient
}

// walks are Call's walks: a patience race's timer holds the walk, which
// would otherwise move every call's walk to the heap.
var walks = sync.Pool{New: func() any { return new(walk) }}

// sender makes one attempt. Call's (stream nil) sends the request and
// returns the whole answer; Stream's opens a stream and returns once its
// first chunk is read, and commits: it keeps its own copy of the attempt,
// which goes on after the walk, and ends it itself. It is a struct, not an
// interface, so that the attempt it is given stays on the walk's stack.
type sender struct{ stream *Stream }

// send makes attempt a, sending req, under ctx, counting it in flight on
// its target's load (the walk ends the count when it ends the attempt). A
// stream opens into st, or into the Stream's own state when st is nil (a
// hedged race gives each attempt its own). A provider that panics first
// gives back what a holds (abandon); a ticket that holds nothing and no
// count need no guard, and the healthy path pays for no defer.
func (s sender) send(ctx context.Context, a *attempt, req *llm.Request, st *streamState) (*llm.Response, error) {
	if s.stream == nil && a.t.load == nil && !a.ticket.Held() {
		return a.t.Provider.Complete(ctx, *req) // nothing to stream, count or give back
	}
	return s.watched(ctx, a, req, st)
}

// watched is send for an attempt that streams, is counted or holds a
// ticket.
func (s sender) watched(ctx context.Context, a *attempt, req *llm.Request, st *streamState) (*llm.Response, error) {
	if a.t.load != nil {
		a.t.load.Start()
	}
	if a.ticket.Held() || a.t.load != nil {
		return s.guarded(ctx, a, req, st)
	}
	return s.open(ctx, a, req, st)
}

// guarded is open, giving back what a holds if its provider panics.
func (s sender) guarded(ctx context.Context, a *attempt, req *llm.Request, st *streamState) (*llm.Response, error) {
	defer a.abandon()
	return s.open(ctx, a, req, st)
}

// open sends req to a's provider: a stream when s streams and the
// provider can, the whole answer otherwise.
func (s sender) open(ctx context.Context, a *attempt, req *llm.Request, st *streamState) (*llm.Response, error) {
	if s.stream != nil {
		if sp, ok := a.t.Provider.(llm.StreamProvider); ok {
			if st == nil {
				st = &s.stream.st
			}
			return st.open(ctx, sp, a, req)
		}
	}
	return a.t.Provider.Complete(ctx, *req)
}

// commits reports whether an answer send returned for t is still
// arriving, to be validated, recorded and settled by the stream.
func (s sender) commits(t *target) bool {
	if s.stream == nil {
		return false
	}
	_, ok := t.Provider.(llm.StreamProvider)
	return ok
}

// start starts the walk of req, bounded by c's deadline; the walk's done
// releases the deadline's timer. w must be new (zero); it lives on its
// caller's stack.
func (w *walk) start(c *Chain, ctx context.Context, obs *callObs, send sender) {
	// Field by field: w is new (zero) and large, and a composite literal
	// would be built aside and copied.
	w.c, w.caller, w.ctx, w.obs, w.send = c, ctx, ctx, obs, send
	w.begin, w.minWindow = -1, -1
	var res *Result
	if c.spreads {
		sr := &spreadResult{} // the result and its first Choice, at once
		res, w.spare = &sr.Result, &sr.choice
	} else {
		res = &Result{}
	}
	res.Attempts = res.buf[:0]
	w.res = res
	if c.deadline > 0 {
		w.ctx, w.cancel = context.WithTimeout(ctx, c.deadline)
	}
}

// done releases the walk's deadline and leaves its result whole: a call
// that nothing answered has an empty Response, never a nil one, so that
// res.Text reads "" instead of panicking.
func (w *walk) done() {
	if w.cancel != nil {
		w.cancel()
	}
	if w.res.Response == nil {
		w.res.Response = new(llm.Response)
	}
}

// served is what answered a call; ob is nil when nothing did.
type served struct {
	ob *observe.Target
	// streaming is true when the answer is a committed stream, still
	// arriving.
	streaming bool
}

// run walks the model targets from w.from, then the degradations. It
// returns what answered (nil when nothing did) and the call's error.
func (w *walk) run(req *llm.Request) (served, error) {
	c := w.c
	if len(req.Messages) == 0 {
		return served{}, fmt.Errorf("chain %q: %w", c.name, ErrNoMessages)
	}
	// A request no target could take is refused before anything is sent.
	// The tools' InputSchemas are compiled when a call of the tool is
	// checked (once per distinct schema per chain), not here: hashing every
	// schema of every request would cost more than checking the one called.
	if err := req.Validate(); err != nil {
		return served{}, fmt.Errorf("chain %q: %w", c.name, err)
	}
	if c.lacks || c.picky { // otherwise every target carries whatever the request needs
		w.needs = req.Needs()
	}
	if c.picky && w.needs&carriesMedia != 0 {
		if err := c.untaken(req); err != nil {
			return served{}, fmt.Errorf("chain %q: %w", c.name, err)
		}
		w.media = req
	}
	if c.shared != nil && w.from == 0 {
		c.sync(w.ctx, w.obs)
	}
	for pos := w.from; pos < len(c.targets); pos++ {
		if c.spreads {
			w.enter(pos)
		}
		w.pos = pos
		t := w.target(pos)
		if w.triedAsHedge(t) {
			continue // its attempt, a hedge, is recorded
		}
		ticket, ok, err := w.admit(t, pos)
		if err != nil {
			return served{}, err // the caller canceled
		}
		if !ok {
			if w.ctx.Err() != nil {
				break // the deadline passed: on to the degradations
			}
			continue
		}
		out := w.try(t, ticket, req)
		if out.by != nil {
			t = out.by // a hedge answered
		}
		switch {
		case out.err == nil && out.committed:
			w.from = pos + 1 // a restart goes on from the next target
			return served{ob: &t.ob, streaming: true}, nil
		case out.err == nil:
			w.serve(t, out.resp, out.js, req)
			return served{ob: &t.ob}, nil
		case out.kind == llm.KindCanceled:
			if cerr := canceled(w.caller); cerr != nil {
				return served{}, c.stopped(cerr)
			}
			return served{}, c.stopped(out.err)
		}
		terr := &TargetError{Target: t.Name, Tier: t.tier, Err: out.err}
		w.causes = append(w.causes, terr)
		if out.stop {
			return served{}, fmt.Errorf("chain %q: %w", c.name, terr)
		}
	}
	w.from = len(c.targets)
	if g := w.degrade(req); g != nil {
		return served{ob: &g.ob}, nil
	}
	return served{}, &ExhaustedError{Chain: c.name, Causes: w.causes}
}

// admit decides whether t, at position pos of the walk, gets a first
// attempt: its context window, the deadline, its Retry-After gate and its
// breaker. It records a target passed over. ok is false for one; err is
// the caller's cancellation. The checks that pass on the healthy path are
// made here; what follows a refusal is out of line, so that the path
// every call takes stays short.
func (w *walk) admit(t *target, pos int) (ticket breaker.Ticket, ok bool, err error) {
	if !w.fits(t) || w.ctx.Err() != nil {
		return ticket, false, w.unfit(t, pos)
	}
	if until, err := t.gate.Refusal(); err != nil {
		w.refused(t, observe.SkipGate, err, until)
		return ticket, false, nil
	}
	w.now, w.nowOK = w.c.clock(), true // read once, for the breaker, the throttle and the attempt's start
	if ticket, err = t.breaker.AllowAt(w.c.epoch.Add(w.now)); err != nil {
		if w.mayWait(t) {
			w.waited, w.nowOK = true, false
			ticket, err = w.waitBreaker(t)
			w.probeWait = w.c.clock() - w.now
		}
		if err != nil {
			w.refused(t, observe.SkipBreaker, err, time.Time{})
			return ticket, false, nil
		}
	}
	return ticket, true, nil
}

// waitBreaker is t.breaker.Wait for the walk. On a shared chain it keeps
// the poller reading while the call waits: the wait for another replica's
// probe ends when a read finds its publication withdrawn.
func (w *walk) waitBreaker(t *target) (breaker.Ticket, error) {
	s := w.c.shared
	if s == nil {
		return t.breaker.Wait(w.ctx)
	}
	s.waiting.Add(1)
	s.ensure()
	defer func() {
		s.used.Store(s.now())
		s.waiting.Add(-1)
	}()
	return t.breaker.Wait(w.ctx)
}

// mayWait reports whether a call whose attempt on t its breaker refused
// waits for the breaker's probe (breaker.Breaker.Wait) instead of passing
// t over: when t is the walk's last target and the chain has no
// degradation (nothing else could answer), t does not hedge, and the call
// has not waited yet. With a fallback, a degradation included, the call
// moves on to it, without waiting.
func (w *walk) mayWait(t *target) bool {
	return !w.waited && w.pos == len(w.c.targets)-1 && len(w.c.degrades) == 0 && t.hedge == nil
}

// fits reports whether t can take the request as the walk knows it now:
// it carries everything the request needs, takes its media types, and its
// context window is larger than one that overflowed.
func (w *walk) fits(t *target) bool {
	return w.needs&^t.caps == 0 && (w.media == nil || t.media.Refused(w.media) == nil) &&
		(w.minWindow < 0 || t.ContextWindow > w.minWindow)
}

// unfit passes over t, at position pos, which cannot carry the request,
// has too small a context window, or comes after the deadline (every
// target from pos on is passed over then); it returns the caller's
// cancellation, if that is what ended the deadline.
func (w *walk) unfit(t *target, pos int) error {
	c := w.c
	if miss := w.needs &^ t.caps; miss != 0 {
		w.passOver(t, observe.SkipCapability, ErrCapability, "cannot carry "+miss.String())
		w.causes = append(w.causes, &TargetError{Target: t.Name, Tier: t.tier, Err: fmt.Errorf("%w: %s", ErrCapability, miss)})
		return nil
	}
	if w.media != nil {
		if md := t.media.Refused(w.media); md != nil {
			what := describeMedia(md)
			w.passOver(t, observe.SkipCapability, ErrCapability, "cannot carry "+what)
			w.causes = append(w.causes, &TargetError{Target: t.Name, Tier: t.tier, Err: fmt.Errorf("%w: %s", ErrCapability, what)})
			return nil
		}
	}
	if w.minWindow >= 0 && t.ContextWindow <= w.minWindow {
		reason := fmt.Sprintf("context window %d not larger than %d", t.ContextWindow, w.minWindow)
		if t.ContextWindow == 0 {
			reason = fmt.Sprintf("context window unknown: the catalogue does not know model %q; set the target's ContextWindow, or add the model with Builder.Catalog", servedModel(&t.Target))
		}
		w.passOver(t, observe.SkipContextWindow, ErrContextWindow, reason)
		w.causes = append(w.causes, &TargetError{Target: t.Name, Tier: t.tier, Err: fmt.Errorf("%w: %s", ErrContextWindow, reason)})
		return nil
	}
	if err := canceled(w.caller); err != nil {
		return c.stopped(err)
	}
	for p := pos; p < len(c.targets); p++ {
		w.pos = p
		w.passOver(w.target(p), observe.SkipDeadline, ErrDeadline, "the deadline passed")
	}
	w.causes = append(w.causes, fmt.Errorf("%w before %q was tried", ErrDeadline, t.Name))
	return nil
}

// refused passes over t, whose gate (closed until until) or breaker
// refused it with err.
func (w *walk) refused(t *target, cause observe.SkipCause, err error, until time.Time) {
	var reason string
	if cause == observe.SkipGate {
		reason = gateReason(until, err)
	} else {
		reason = breakerReason(t, err)
	}
	w.passOver(t, cause, err, reason)
	w.causes = append(w.causes, &TargetError{Target: t.Name, Tier: t.tier, Err: err})
}

// passOver records t, at the walk's position, passed over without a
// request, for cause.
func (w *walk) passOver(t *target, cause observe.SkipCause, err error, reason string) {
	w.record(Attempt{Target: t.Name, Tier: t.tier, Model: t.Model, Err: err, Decision: DecisionSkip, Reason: reason, Choice: w.choice(w.pos)})
	if cause != observe.SkipDeadline {
		w.obs.skip(&t.ob, 0, cause, reason, err)
	}
}

// record adds a to the result: the only place Result.Attempts grows, once
// per attempt or skip, with its decision, wait and reason already set.
func (w *walk) record(a Attempt) { *w.grow() = a }

// grow adds a zero record to the result and returns it, for record, and
// for the served attempt, whose record is written in place (sparing the
// healthy path a copy of the record into the heap).
func (w *walk) grow() *Attempt {
	r := w.res
	n := len(r.Attempts)
	if n < cap(r.Attempts) {
		// Past its length the slice is zero (the result's own allocation,
		// or append's) and nothing shortens it: the slot is taken as it
		// is, sparing the healthy path a zeroing store into the heap.
		r.Attempts = r.Attempts[:n+1]
	} else {
		r.Attempts = append(r.Attempts, Attempt{})
	}
	return &r.Attempts[n]
}

// serve fills the result from t's answer and remembers it.
func (w *walk) serve(t *target, resp *llm.Response, js json.RawMessage, req *llm.Request) {
	w.res.serve(t, resp)
	if js != nil {
		w.res.JSON = js
	}
	for _, l := range w.c.lastGoods {
		// A store that fails costs this call nothing: the answer is
		// served anyway, only not remembered.
		_ = l.remember(w.ctx, *req, t.Name, resp)
	}
}

// outcome is how a call (or a stream) ended, for telemetry: the outcome
// and, on failure, the call's error.type.
func outcome(res *Result, err error) (string, string) {
	switch {
	case err == nil && res.Degraded:
		return outcomeDegraded, ""
	case err == nil:
		return outcomeServed, ""
	case errors.Is(err, context.Canceled):
		return outcomeCanceled, "canceled"
	case errors.Is(err, ErrIncomplete):
		return outcomeFailed, "incomplete"
	case errors.Is(err, ErrExhausted):
		return outcomeFailed, "exhausted"
	}
	return outcomeFailed, llm.KindOf(err).String()
}

// end reports the end of the call to its observers.
func (w *walk) end(s served, err error, stream string) {
	if w.obs != nil {
		w.ended(s, err, stream)
	}
}

// ended is end for an observed call.
func (w *walk) ended(s served, err error, stream string) {
	res := w.res
	out, errType := outcome(res, err)
	e := observe.CallEnd{Model: res.Served.Model, RequestID: res.Served.RequestID, Degraded: res.Degraded, Age: res.Age,
		Outcome: out, ErrorType: errType, Err: err, Stream: stream}
	e.Served = s.ob
	for _, a := range res.Attempts {
		if a.Decision != DecisionSkip {
			e.Attempts++
		}
	}
	w.obs.end(e)
}
