package chain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/backstop-llm/backstop/internal/race"
	"github.com/backstop-llm/backstop/internal/rank"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/observe"
	"github.com/backstop-llm/backstop/policy"
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

	// rank is this call's order of the targets, over c.layout: each
	// group that spreads is ranked when the walk enters it. hedged marks
	// the targets (by index) already tried in this call as racers: the
	// walk passes them over.
	rank   rank.Ranking
	hedged race.Set

	// now is when the policies were asked about the first attempt on the
	// target at pos, on the chain's clock; nowOK is true until anything
	// waited since: the attempt then starts at now, and the clock is read
	// once per call on the healthy path, not once per policy.
	now   time.Duration
	nowOK bool

	// waited is set once a policy made the call wait instead of refusing
	// (mayWait, policy.Admission.Awaited): a call waits so at most once.
	waited bool

	// pa and po are what the policies are asked about and told of: on
	// the walk, which lives on the heap already, so that passing them to
	// the policies (an interface's methods) moves nothing more there.
	pa policy.Attempt
	po policy.Outcome
	// req is the request try sends to the target at pos, prepared for it.
	req llm.Request

	// pat is the patience race of the attempt in flight (patience.go).
	pat patient
}

// target returns the target at position pos of this call's walk.
func (w *walk) target(pos int) *target { return w.c.targets[w.rank.At(pos)] }

// later reports whether a target of t's tier after the walk's position
// is still to be tried in this call (not yet sent a hedge).
func (w *walk) later(t *target) bool {
	for pos := w.pos + 1; pos < t.group.hi; pos++ {
		if !w.triedAsHedge(w.target(pos)) {
			return true
		}
	}
	return false
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
// gives back what a holds (abandon); policies that hold nothing and no
// count need no guard, and the healthy path pays for no defer.
func (s sender) send(ctx context.Context, a *attempt, req *llm.Request, st *streamState) (*llm.Response, error) {
	if s.stream == nil && a.t.load == nil && !a.holds.Holding() {
		return a.t.Provider.Complete(ctx, *req) // nothing to stream, count or give back
	}
	return s.watched(ctx, a, req, st)
}

// watched is send for an attempt that streams, is counted or holds
// something of its policies'.
func (s sender) watched(ctx context.Context, a *attempt, req *llm.Request, st *streamState) (*llm.Response, error) {
	if a.t.load != nil {
		a.t.load.Start()
	}
	if a.holds.Holding() || a.t.load != nil {
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
		res = &sr.Result
		w.rank.Start(c.layout, &sr.choice)
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
			w.rank.Enter(pos)
		}
		w.pos = pos
		t := w.target(pos)
		if w.triedAsHedge(t) {
			continue // its attempt, a hedge, is recorded
		}
		out := w.try(t, req)
		if out.skipped {
			if w.ctx.Err() != nil {
				break // the deadline passed: on to the degradations
			}
			continue
		}
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

// policyAttempt is what t's policies are asked about attempt n on t in
// phase ph, and told of: the walk as it stands, in w.pa. A first
// attempt's Send reads the clock once, for every policy and the attempt's
// start.
func (w *walk) policyAttempt(t *target, ph policy.Phase, n int) *policy.Attempt {
	pa := &w.pa
	*pa = policy.Attempt{Phase: ph, Target: t.Name, N: n, Needs: w.needs, Media: w.media, MinWindow: w.minWindow}
	if ph != policy.Peek {
		pa.Last = w.mayWait(t)
	}
	if ph == policy.Send {
		if n == 1 {
			w.now, w.nowOK = w.c.clock(), true
			pa.At = w.c.epoch.Add(w.now)
		} else {
			pa.At = time.Now()
		}
	}
	if dl, ok := w.ctx.Deadline(); ok {
		pa.Deadline = dl
	}
	return pa
}

// consult asks t's policies about attempt n on t, which sends req (nil in
// Plan and Peek), in phase ph; what they hold goes to holds (nil in Peek).
func (w *walk) consult(t *target, ph policy.Phase, n int, req *llm.Request, holds *policy.Holds) policy.Admission {
	pa := w.policyAttempt(t, ph, n)
	pa.Request = req
	return t.policies.Admit(w.ctx, pa, holds)
}

// passedOver passes over t, whose policies refused its first attempt
// (adm), and records why. A deadline that passed passes over every target
// from the walk's position on; a caller that canceled stops the call.
func (w *walk) passedOver(t *target, adm policy.Admission) tried {
	c := w.c
	if cerr := canceled(w.caller); cerr != nil {
		return tried{err: cerr, kind: llm.KindCanceled}
	}
	if errors.Is(adm.Err, ErrDeadline) {
		for p := w.pos; p < len(c.targets); p++ {
			w.pos = p
			w.passOver(w.target(p), observe.SkipDeadline, ErrDeadline, "the deadline passed", 0)
		}
		w.causes = append(w.causes, fmt.Errorf("%w before %q was tried", ErrDeadline, t.Name))
		return tried{skipped: true}
	}
	w.passOver(t, adm.Cause, adm.Err, adm.Reason, adm.Waited)
	w.causes = append(w.causes, &TargetError{Target: t.Name, Tier: t.tier, Err: adm.Err})
	return tried{skipped: true}
}

// notSent ends the walk on t when its policies refused retry n (adm),
// after wait: recorded with why, and the target's last failure (s) with
// the refusal is the target's cause.
func (w *walk) notSent(t *target, n int, wait time.Duration, s *sent, adm policy.Admission) tried {
	if cerr := canceled(w.caller); cerr != nil {
		rec := skipped(t, n, wait, cerr, "the caller canceled during the wait")
		rec.Decision = DecisionStop
		w.record(rec)
		return tried{err: cerr, kind: llm.KindCanceled}
	}
	w.record(skipped(t, n, wait, adm.Err, adm.Reason))
	w.obs.skip(&t.ob, n, adm.Cause, adm.Reason, adm.Err)
	return tried{err: &refusedError{s.err, adm.Err}, kind: s.kind}
}

// mayWait reports whether a call whose attempt on t a policy refuses may
// be made to wait instead (policy.Attempt.Last: a breaker's probe): when t
// is the walk's last target and the chain has no degradation (nothing
// else could answer), t does not hedge, and the call has not waited yet.
// With a fallback, a degradation included, the call moves on to it,
// without waiting.
func (w *walk) mayWait(t *target) bool {
	return !w.waited && w.pos == len(w.c.targets)-1 && len(w.c.degrades) == 0 && t.hedge == nil
}

// passOver records t, at the walk's position, passed over without a
// request (after waiting wait), for cause.
func (w *walk) passOver(t *target, cause observe.SkipCause, err error, reason string, wait time.Duration) {
	w.record(Attempt{Target: t.Name, Tier: t.tier, Model: t.Model, Wait: wait, Err: err, Decision: DecisionSkip, Reason: reason, Choice: w.rank.Choice(w.pos)})
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
	for _, m := range w.c.memories {
		// A store that fails costs this call nothing: the answer is
		// served anyway, only not remembered.
		_ = m.Remember(w.ctx, *req, t.Name, resp)
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
