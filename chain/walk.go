package chain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/backstop-llm/backstop/internal/callobs"
	"github.com/backstop-llm/backstop/internal/capability"
	"github.com/backstop-llm/backstop/internal/race"
	"github.com/backstop-llm/backstop/internal/rank"
	"github.com/backstop-llm/backstop/internal/seam"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/observe"
	"github.com/backstop-llm/backstop/policy"
	"github.com/backstop-llm/backstop/spend"
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
	obs    *callobs.Call // nil when nobody observes the call
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

	// now is when the policies were asked (Send) about the walk's attempt
	// in hand, on the chain's clock; nowOK is true until anything waited
	// since: the attempt then starts at now, and the clock is read once
	// per attempt, not once per policy and again for its start.
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
	// deadline is w.ctx's deadline, read once as the walk starts; zero
	// when it has none.
	deadline time.Time
	// req is the request try sends to the target at pos, prepared for it.
	req llm.Request
	// again, set by a Stream whose committed answer failed its check, is
	// the re-ask try makes next, of the target at from; nil otherwise.
	again *again

	// pat is the patience race of the attempt in flight (patience.go).
	pat patient

	// call is the caller's request, as run was given it
	// (policy.Attempt.Caller); key its conversation's prefix in the
	// chain's memory of prompt caches, once keyed (affinity.go).
	call  *llm.Request
	key   uint64
	keyed bool
}

// target returns the target at position pos of this call's walk.
func (w *walk) target(pos int) *target { return w.c.targets[w.rank.At(pos)] }

// later reports whether a target of t's tier after the walk's position
// is still to be tried in this call (not yet sent a hedge).
func (w *walk) later(t *target) bool {
	for pos := w.pos + 1; pos < t.group.Hi; pos++ {
		if !w.triedAsHedge(w.target(pos)) {
			return true
		}
	}
	return false
}

// triedAsHedge reports whether t was sent a racer in this call.
func (w *walk) triedAsHedge(t *target) bool { return w.hedged.Has(t.ob.Index) }

// onward reports whether a target after the walk's position can take the
// call now: it has not been sent it as a racer, and its policies would
// admit it (it carries the request, its gate and breaker are open).
func (w *walk) onward(t *target) bool {
	for pos := w.pos + 1; pos < len(w.c.targets); pos++ {
		u := w.ahead(t, pos)
		if w.triedAsHedge(u) || w.consult(u, policy.Peek, 1, nil, nil).Err != nil {
			continue
		}
		return true
	}
	return false
}

// ahead returns the target at position pos, after t's: the walk's order
// within t's tier, or a later tier's (ranked when the walk entered it,
// the chain's order when it has not yet).
func (w *walk) ahead(t *target, pos int) *target {
	if pos < t.group.Hi {
		return w.target(pos)
	}
	u := w.c.targets[pos]
	if w.rank.Ranked(u.group.Index) {
		return w.target(pos)
	}
	return u
}

// walks are Call's walks: a patience race's timer holds the walk, which
// would otherwise move every call's walk to the heap.
var walks = sync.Pool{New: func() any { return new(walk) }}

// start starts the walk of req, bounded by c's deadline; the walk's done
// releases the deadline's timer. w must be new (zero); it lives on its
// caller's stack.
func (w *walk) start(c *Chain, ctx context.Context, obs *callobs.Call, send sender) {
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
	w.deadline, _ = w.ctx.Deadline()
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
	w.call = req
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
		w.needs = capability.Needs(req)
	}
	if c.picky && w.needs&capability.Media != 0 {
		if err := capability.Untaken(req, c.fits); err != nil {
			return served{}, fmt.Errorf("chain %q: %w", c.name, err)
		}
		w.media = req
	}
	if c.shared != nil && w.from == 0 && w.again == nil {
		c.sync(w.ctx, w.obs)
	}
	for pos := w.from; pos < len(c.targets); pos++ {
		if c.spreads && w.rank.Enter(pos) {
			if tab := c.warm.Load(); tab != nil {
				w.affine(pos, tab)
			}
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

// passOver records t, at the walk's position, passed over without a
// request (after waiting wait), for cause.
func (w *walk) passOver(t *target, cause observe.SkipCause, err error, reason string, wait time.Duration) {
	w.record(Attempt{Target: t.Name, Tier: t.tier, Model: t.Model, Wait: wait, Err: err, Decision: DecisionSkip, Reason: reason, Choice: w.rank.Choice(w.pos)})
	if cause != observe.SkipDeadline {
		w.obs.Skip(&t.ob, 0, cause, reason, err)
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
		return callobs.Degraded, ""
	case err == nil:
		return callobs.Served, ""
	case errors.Is(err, context.Canceled):
		return callobs.Canceled, "canceled"
	case errors.Is(err, ErrIncomplete):
		return callobs.Failed, "incomplete"
	case errors.Is(err, ErrExhausted):
		return callobs.Failed, "exhausted"
	case errors.Is(err, spend.ErrExceeded): // a budget's Refuse
		return callobs.Failed, "over_budget"
	}
	return callobs.Failed, llm.KindOf(err).String()
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
	for i := range res.Attempts {
		if res.Attempts[i].Decision != DecisionSkip {
			e.Attempts++
		}
	}
	e.Cost = res.Cost()
	w.obs.End(e)
}

// hedgeTarget returns the first target after the walk's position in its
// tier (in this call's order) that may take a hedge of an attempt sending
// req now, at position pos: one not yet tried as a hedge whose policies
// admit a hedge (policy.Attempt.Hedge: a slot now or none) of the request
// the hedge would send it, hreq; holds is what they hold for it. When take
// is false, the policies are only asked whether they would (Peek), and
// hold nothing. Nothing is recorded of those that may not, but for a
// money budget's refusal (the walk records the others if it comes to
// them); a refusal with policy.Admission.Stop ends the search.
func (w *walk) hedgeTarget(from *target, hi int, req, caller *llm.Request, take bool) (pos int, h *target, hreq llm.Request, holds seam.Holds) {
	for pos = w.pos + 1; pos < hi; pos++ {
		t := w.ahead(from, pos)
		if w.triedAsHedge(t) {
			continue
		}
		if !take {
			if w.consult(t, policy.Peek, 1, nil, nil).Err == nil {
				return pos, t, hreq, holds
			}
			continue
		}
		hreq = hedgeRequest(t, req, caller)
		adm := w.askPolicies(t, policy.Send, 1, true, &hreq, &holds)
		if adm.Err == nil {
			return pos, t, hreq, holds
		}
		if adm.Cause == observe.SkipSpend {
			// What a racer would have cost is recorded when money
			// refused it: the skip, not a hedge.
			rec := skipped(t, 1, 0, adm.Err, "not sent as a racer: "+adm.Reason)
			rec.Choice = w.rank.Choice(pos)
			w.record(rec)
			w.obs.Skip(&t.ob, 1, adm.Cause, adm.Reason, adm.Err)
		}
		if adm.Stop {
			break // no other target takes it
		}
	}
	return 0, nil, hreq, holds
}

// hedgeRequest is the request a hedge of an attempt sending req sends to
// h: the caller's, with the conversation as req's (a re-ask's included),
// prepared for h.
func hedgeRequest(h *target, req, caller *llm.Request) llm.Request {
	hreq := *caller
	hreq.Messages = req.Messages
	h.prepare(&hreq)
	return hreq
}
