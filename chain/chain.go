package chain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/budget"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/retry"
	"github.com/backstop-llm/backstop/throttle"
	"github.com/backstop-llm/backstop/tracing"
	"github.com/backstop-llm/backstop/validate"
)

// Chain is a built fallback chain. It is safe for concurrent use; build one
// per use case and share it.
type Chain struct {
	name            string
	deadline        time.Duration
	degradeTimeout  time.Duration
	contentFallback bool
	restart         bool
	targets         []*target
	degrades        []degrader
	lastGoods       []*lastGood // remember every validated model answer
	schema          *validate.Schema
	tel             *tracing.Telemetry
	shared          *shared   // nil unless Builder.Shared
	epoch           time.Time // origin of clock
}

// degrader is a Degradation as Build compiled it.
type degrader struct {
	name     string
	d        Degradation
	lastGood *lastGood // d itself, unwrapped, when d is a LastGood
	tel      *tracing.Target
}

// clock reads the monotonic clock alone, which costs half of time.Now.
func (c *Chain) clock() time.Duration { return time.Since(c.epoch) }

// Name returns the chain's name.
func (c *Chain) Name() string { return c.name }

// Call walks the chain for req and returns the first answer, with how it was
// reached. Each model target gets req with its own Model, and its own System
// and Params where set; it is retried as its policy and the decision table
// say, then the chain moves on. When every model target has failed (or the
// deadline has passed), the degradations run in order.
//
// The error, when there is one, is one of: an error matching ErrExhausted
// that joins every target's cause; the failure of a target whose kind stops
// the chain (a bad request, a content refusal without ContentFallback),
// reachable as *TargetError and *llm.Error; or the caller's context error
// when ctx was canceled. The Result is returned in every case, with the
// attempts made.
func (c *Chain) Call(ctx context.Context, req llm.Request) (*Result, error) {
	ctx, obs := c.tel.StartCall(ctx)
	res, served, err := c.call(ctx, obs, req, nil)
	if obs != nil {
		outcome, errType := callOutcome(res, err)
		obs.End(served, res.Served.Model, res.Served.RequestID, res.Degraded, res.Age, outcome, errType)
	}
	return res, err
}

// moveOn applies the decision table's next-target column after t failed
// with kind: it returns why the call stops there, or "" to go on, raising
// *minWindow after a context-length failure.
func (c *Chain) moveOn(t *target, kind llm.Kind, minWindow *int) (stop string) {
	switch t.table.Rule(kind).Fallback {
	case retry.Stop:
		return kind.String() + " would fail on every target"
	case retry.IfAllowed:
		if !c.contentFallback {
			return "content-policy fallback is off (Builder.ContentFallback)"
		}
	case retry.LargerContext:
		*minWindow = max(*minWindow, t.ContextWindow)
	}
	return ""
}

// callOutcome is how a call (or a stream) ended, for telemetry: the
// outcome and, on failure, the call's error.type.
func callOutcome(res *Result, err error) (outcome, errType string) {
	switch {
	case err == nil && res.Degraded:
		return tracing.OutcomeDegraded, ""
	case err == nil:
		return tracing.OutcomeServed, ""
	case errors.Is(err, context.Canceled):
		return tracing.OutcomeCanceled, "canceled"
	case errors.Is(err, ErrIncomplete):
		return tracing.OutcomeFailed, "incomplete"
	case errors.Is(err, ErrExhausted):
		return tracing.OutcomeFailed, "exhausted"
	}
	return tracing.OutcomeFailed, llm.KindOf(err).String()
}

// call is Call without its telemetry's start and end; it returns the
// telemetry of whatever served the call (nil when nothing did).
func (c *Chain) call(ctx context.Context, obs *tracing.Call, req llm.Request, st *streamState) (*Result, *tracing.Target, error) {
	res := &Result{}
	from := 0
	if st != nil {
		if st.res != nil {
			res = st.res // a restart goes on recording in the same result
		}
		from = st.from
	}
	if res.Attempts == nil {
		res.Attempts = res.buf[:0]
	}
	if len(req.Messages) == 0 {
		return res, nil, fmt.Errorf("chain %q: %w", c.name, ErrNoMessages)
	}
	caller := ctx
	if st != nil {
		caller, ctx = st.caller, st.ctx
	} else if c.deadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.deadline)
		defer cancel()
	}

	if c.shared != nil && from == 0 {
		c.sync(ctx, obs)
	}

	var causes []error
	begin := time.Duration(-1) // when the first attempt started
	minWindow := -1            // after a context-length failure: only larger windows
	if st != nil && st.from > 0 {
		// A restart: what the walk learned before it still holds.
		causes, begin, minWindow = st.causes, st.begin, st.minWindow
	}
	for i := from; i < len(c.targets); i++ {
		t := c.targets[i]
		if minWindow >= 0 && t.ContextWindow <= minWindow {
			res.skip(t, 0, ErrContextWindow, fmt.Sprintf("context window %d not larger than %d", t.ContextWindow, minWindow))
			obs.Skipped(t.tel, tracing.SkipOther, "context window")
			continue
		}
		if ctx.Err() != nil {
			if err := canceled(caller); err != nil {
				return res, nil, c.stopped(err)
			}
			for _, rest := range c.targets[i:] {
				res.skip(rest, 0, ErrDeadline, "the deadline passed")
			}
			causes = append(causes, fmt.Errorf("%w before %q was tried", ErrDeadline, t.Name))
			break
		}
		if until, err := t.gate.Refusal(); err != nil {
			reason := gateReason(until, err)
			res.skip(t, 0, err, reason)
			obs.Skipped(t.tel, tracing.SkipGate, reason)
			causes = append(causes, &TargetError{Target: t.Name, Tier: t.tier, Err: err})
			continue
		}
		ticket, err := t.breaker.Allow()
		if err != nil {
			reason := breakerReason(t, err)
			res.skip(t, 0, err, reason)
			obs.Skipped(t.tel, tracing.SkipBreaker, reason)
			causes = append(causes, &TargetError{Target: t.Name, Tier: t.tier, Err: err})
			continue
		}
		resp, js, kind, err := c.try(ctx, caller, obs, t, ticket, req, res, &begin, st)
		if err == nil {
			if st != nil && st.stream != nil {
				st.target, st.index = t, i
				st.causes, st.begin, st.minWindow = causes, begin, minWindow
				return res, t.tel, nil // committed: the stream goes on in Stream
			}
			res.serve(t, resp)
			res.JSON = js
			for _, l := range c.lastGoods {
				// A store that fails costs this call nothing: the answer is
				// served anyway, only not remembered.
				_ = l.remember(ctx, req, t.Name, resp)
			}
			return res, t.tel, nil
		}
		if cerr := canceled(caller); cerr != nil {
			res.decide(DecisionStop, "the caller canceled")
			return res, nil, c.stopped(cerr)
		}
		terr := &TargetError{Target: t.Name, Tier: t.tier, Err: err}
		causes = append(causes, terr)
		if stop := c.moveOn(t, kind, &minWindow); stop != "" {
			res.decide(DecisionStop, stop)
			return res, nil, fmt.Errorf("chain %q: %w", c.name, terr)
		}
	}

	if g := c.degrade(ctx, obs, req, res, &causes); g != nil {
		return res, g.tel, nil
	}
	return res, nil, &ExhaustedError{Chain: c.name, Causes: causes}
}

// try makes the attempts on one target, the first under ticket, and returns
// its answer, or its last failure and that failure's kind. Each attempt,
// and each retry refused, is recorded in res. begin is when the call's
// first attempt started (negative until then).
func (c *Chain) try(ctx, caller context.Context, obs *tracing.Call, t *target, ticket breaker.Ticket, req llm.Request, res *Result, begin *time.Duration, st *streamState) (*llm.Response, json.RawMessage, llm.Kind, error) {
	treq := req
	t.prepare(&treq)
	var js json.RawMessage
	var wait, prev time.Duration
	var last error
	var lastKind llm.Kind
	for n := 1; ; n++ {
		if n > 1 {
			// The gate and the breaker are asked again: other calls may
			// have closed or opened them during the wait.
			var why error
			var until time.Time
			if until, why = t.gate.Refusal(); why != nil {
				reason := gateReason(until, why)
				res.decide(DecisionNext, reason)
				obs.Skipped(t.tel, tracing.SkipGate, reason)
			} else if ticket, why = t.breaker.Allow(); why != nil {
				reason := breakerReason(t, why)
				res.decide(DecisionNext, reason)
				obs.Skipped(t.tel, tracing.SkipBreaker, reason)
			}
			if why != nil {
				res.skip(t, n, why, "retry not sent")
				refund(ctx, t.budget)
				return nil, nil, lastKind, &refusedError{last, why}
			}
		}
		if t.throttle != nil {
			paced, err := c.pace(ctx, caller, obs, t, treq, res, n)
			if err != nil {
				ticket.Report(retry.Excluded) // not sent: count nothing
				if errors.Is(err, context.Canceled) {
					return nil, nil, llm.KindCanceled, err
				}
				if last != nil {
					refund(ctx, t.budget)
					return nil, nil, lastKind, &refusedError{last, err}
				}
				return nil, nil, llm.KindRateLimited, err
			}
			wait += paced
		}
		actx, span := ctx, tracing.Attempt{}
		if obs != nil {
			actx, span = obs.StartAttempt(ctx, t.tel, n, treq)
		}
		var cancel context.CancelFunc
		if t.Timeout > 0 {
			actx, cancel = context.WithTimeout(actx, t.Timeout)
		}
		start := c.clock()
		if *begin < 0 {
			*begin = start
		}
		var resp *llm.Response
		var err error
		var sp llm.StreamProvider
		streams := false
		if st != nil {
			sp, streams = t.Provider.(llm.StreamProvider)
		}
		if !streams {
			// A provider that does not stream answers whole, through the
			// ordinary path: validated (and re-asked) before it is shown.
			resp, err = complete(actx, t, treq, ticket)
		} else {
			resp, err = st.open(actx, sp, t, treq, ticket)
		}
		elapsed := c.clock() - start
		if st != nil && streams && err == nil && resp == nil {
			st.release()
		}
		if st != nil && streams && err == nil && resp != nil {
			// Committed: the attempt goes on while the caller reads, and
			// is reported when the stream ends.
			st.commit(obs, cancel, span, ticket, n, start, elapsed)
			res.Attempts = append(res.Attempts, Attempt{Target: t.Name, Tier: t.tier, Model: t.Model, N: n, Wait: wait,
				Duration: elapsed, Status: 200, RequestID: resp.RequestID})
			return resp, nil, llm.KindUnknown, nil
		}
		if cancel != nil {
			cancel()
		}
		if err == nil && resp == nil {
			err = &llm.Error{Provider: t.Provider.Name(), Kind: llm.KindUnknown, Message: "provider returned neither an answer nor an error"}
		}
		var invalid *llm.Response
		if err == nil && t.schema != nil {
			var verr error
			if js, verr = t.schema.Validate(resp.Text); verr != nil {
				invalid = resp
				err = invalidOutput(t.Provider.Name(), 200, resp.RequestID, verr)
			}
		}
		a := Attempt{Target: t.Name, Tier: t.tier, Model: t.Model, N: n, Wait: wait, Duration: elapsed}
		now := c.epoch.Add(start + elapsed) // carries the monotonic reading
		if t.throttle != nil {
			t.throttle.Observe(now, rateLimitOf(resp, err), llm.KindOf(err) == llm.KindRateLimited)
		}
		if err == nil {
			if obs != nil {
				obs.EndAttempt(span, t.tel, resp, 200, llm.KindUnknown, nil, elapsed)
			}
			c.settle(ctx, t, ticket, retry.NotFailure, budget.Outcome{Retry: n > 1, Success: true, At: now})
			a.Status = 200
			a.RequestID = resp.RequestID
			res.Attempts = append(res.Attempts, a)
			return resp, js, llm.KindUnknown, nil
		}

		var le *llm.Error
		var retryAfter time.Duration
		var shouldRetry *bool
		if errors.As(err, &le) {
			a.Status, a.RequestID = le.Status, le.RequestID
			retryAfter, shouldRetry = le.RetryAfter, le.ShouldRetry
		}
		a.Kind = llm.KindOf(err)
		if canceled(caller) != nil {
			a.Kind = llm.KindCanceled
		} else if a.Kind == llm.KindCanceled {
			// A provider reporting a cancellation the caller did not ask
			// for is a failed attempt, not a reason to stop the chain.
			a.Kind = llm.KindUnknown
		}
		a.Err = err
		last, lastKind = err, a.Kind
		res.Attempts = append(res.Attempts, a)
		obs.EndAttempt(span, t.tel, invalid, a.Status, a.Kind, err, elapsed)
		if invalid != nil && obs != nil {
			paths, keywords := violations(err)
			obs.ValidationFailed(t.tel, paths, keywords)
		}
		verdict := t.table.Rule(a.Kind).Breaker
		if verdict == retry.Failure && ctx.Err() != nil && !c.fair(ctx, start, *begin) {
			verdict = retry.Excluded // our deadline cut it short before it had a fair chance
		}
		c.settle(ctx, t, ticket, verdict, budget.Outcome{Retry: n > 1, At: now})
		if a.Kind == llm.KindCanceled {
			return nil, nil, a.Kind, err
		}

		// leave moves on from t. A Retry-After this call does not wait out
		// closes t's gate, so that concurrent calls skip t instead of each
		// rediscovering the 429.
		leave := func(reason string, err error) (*llm.Response, json.RawMessage, llm.Kind, error) {
			if retryAfter > 0 {
				c.closeGate(ctx, obs, t, retryAfter)
			}
			res.decide(DecisionNext, reason)
			return nil, nil, a.Kind, err
		}
		if max := t.table.Attempts(a.Kind, t.policy, shouldRetry); n >= max {
			if max == 1 {
				return leave(a.Kind.String()+" is not retried", err)
			}
			return leave(fmt.Sprintf("%d of %d attempts used", n, max), err)
		}
		if retryAfter > t.policy.MaxRetryAfter {
			return leave(fmt.Sprintf("retry-after %v exceeds MaxRetryAfter %v", retryAfter, t.policy.MaxRetryAfter), err)
		}
		if invalid != nil {
			// Re-ask at once, with the problems added to the conversation.
			wait = 0
			treq.Messages = reask(treq.Messages, invalid.Text, err)
		} else {
			wait = t.policy.Wait(n-1, prev, retryAfter)
			prev = wait
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return leave(fmt.Sprintf("a wait of %v would end past the deadline", wait.Round(time.Millisecond)), err)
		}
		if why := t.breaker.Refusal(); why != nil {
			// Opened by other calls (or replicas) meanwhile: do not sleep
			// to find out.
			reason := breakerReason(t, why)
			obs.Skipped(t.tel, tracing.SkipBreaker, reason)
			res.skip(t, n+1, why, "retry not sent")
			return leave(reason, &refusedError{err, why})
		}
		if berr := t.budget.Withdraw(ctx); berr != nil {
			obs.Skipped(t.tel, tracing.SkipBudget, "retry budget exhausted")
			r0, r1, r2, r3 := leave("retry budget exhausted", &refusedError{err, berr})
			res.skip(t, n+1, berr, "retry not sent")
			return r0, r1, r2, r3
		}
		reason := ""
		switch {
		case invalid != nil:
			reason = "re-asked with the schema's problems"
		case retryAfter > 0:
			reason = "retry-after " + retryAfter.String()
		}
		res.decide(DecisionRetry, reason)
		obs.Retry(t.tel, a.Kind, wait, retryAfter, reason)
		if serr := sleep(ctx, wait); serr != nil {
			// The deadline or the caller ended the wait; the retry
			// granted is not sent.
			refund(ctx, t.budget)
			if cerr := canceled(caller); cerr != nil {
				return nil, nil, llm.KindCanceled, cerr
			}
			res.decide(DecisionNext, "the deadline passed during the wait")
			return nil, nil, a.Kind, err
		}
	}
}

// pace waits for t's self-throttling slot for attempt n and returns how
// long it waited, or throttle.ErrThrottled (recorded as a skip) when the
// slot is further away than MaxWait or the deadline, or the caller's
// cancellation.
func (c *Chain) pace(ctx, caller context.Context, obs *tracing.Call, t *target, req llm.Request, res *Result, n int) (time.Duration, error) {
	now := time.Now()
	limit := t.throttle.MaxWait()
	if dl, ok := ctx.Deadline(); ok {
		limit = min(limit, dl.Sub(now))
	}
	wait, r, ok := t.throttle.Reserve(now, throttle.EstimateTokens(req), limit)
	if ok && wait <= 0 {
		return 0, nil
	}
	if !ok {
		reason := "self-throttled: the next slot is " + wait.Round(time.Millisecond).String() + " away"
		if n > 1 {
			res.decide(DecisionNext, reason)
			res.skip(t, n, throttle.ErrThrottled, "retry not sent")
		} else {
			res.skip(t, 0, throttle.ErrThrottled, reason)
		}
		obs.Skipped(t.tel, tracing.SkipOther, reason)
		return 0, throttle.ErrThrottled
	}
	if err := sleep(ctx, wait); err != nil {
		r.Cancel(time.Now())
		if cerr := canceled(caller); cerr != nil {
			return 0, cerr
		}
		return 0, throttle.ErrThrottled
	}
	return wait, nil
}

// rateLimitOf is the allowance announced with an answer or a failure.
func rateLimitOf(resp *llm.Response, err error) llm.RateLimit {
	if resp != nil {
		return resp.RateLimit
	}
	var le *llm.Error
	if errors.As(err, &le) {
		return le.RateLimit
	}
	return llm.RateLimit{}
}

// complete makes one attempt. A provider that panics has its breaker
// ticket released (a half-open probe slot would otherwise be held for good)
// before the panic goes on; a ticket that holds nothing needs no guard.
func complete(ctx context.Context, t *target, req llm.Request, ticket breaker.Ticket) (*llm.Response, error) {
	if !ticket.Held() {
		return t.Provider.Complete(ctx, req)
	}
	return completeGuarded(ctx, t, req, ticket)
}

func completeGuarded(ctx context.Context, t *target, req llm.Request, ticket breaker.Ticket) (*llm.Response, error) {
	defer func() {
		if p := recover(); p != nil {
			ticket.Report(retry.Excluded)
			panic(p)
		}
	}()
	return t.Provider.Complete(ctx, req)
}

// fair reports whether an attempt that started at start (on c's clock) and
// was cut short by ctx's deadline had a fair chance: at least half of the
// time the call had from its first attempt. Such an attempt counts against
// the target's breaker; a target that hangs until every call's deadline is
// failing, even without a per-attempt Timeout.
func (c *Chain) fair(ctx context.Context, start, begin time.Duration) bool {
	dl, ok := ctx.Deadline()
	if !ok {
		return true
	}
	end := dl.Sub(c.epoch)
	return end-start >= (end-begin)/2
}

// gateReason says why a gate closed until until refused an attempt with
// err.
func gateReason(until time.Time, err error) string {
	who := "a Retry-After"
	if errors.Is(err, breaker.ErrGateClosedElsewhere) {
		who = "another replica's Retry-After"
	}
	return "closed by " + who + " for " + time.Until(until).Round(time.Millisecond).String()
}

// breakerReason says why t's breaker refused an attempt with err.
func breakerReason(t *target, err error) string {
	if errors.Is(err, breaker.ErrOpenElsewhere) {
		return "circuit breaker open on another replica"
	}
	return "circuit breaker " + t.breaker.State().String()
}

// refund gives back a retry that was granted but not sent, if b can.
func refund(ctx context.Context, b budget.Budget) {
	if r, ok := b.(budget.Refunder); ok {
		r.Refund(ctx)
	}
}

// refusedError is a target's last failure with the reason its next retry
// was not sent (budget.ErrExhausted, breaker.ErrOpen, the gate); both are
// reachable with errors.Is and errors.As.
type refusedError struct{ last, why error }

func (e *refusedError) Error() string {
	return e.last.Error() + "; retry not sent: " + e.why.Error()
}

func (e *refusedError) Unwrap() []error { return []error{e.last, e.why} }

// closeGate closes t for a Retry-After that this call does not wait out, so
// that concurrent calls skip t instead of each rediscovering the 429.
// With Builder.Shared, the other replicas are told too.
func (c *Chain) closeGate(ctx context.Context, obs *tracing.Call, t *target, retryAfter time.Duration) {
	d := min(retryAfter, t.maxGate)
	until := time.Now().Add(d)
	t.gate.CloseUntil(until)
	obs.GateClosed(t.tel, until)
	if c.shared != nil {
		_ = c.shared.state.PublishGate(context.WithoutCancel(ctx), t.Name, d)
	}
}

// degrade runs the degradations in order until one gives an answer that
// passes the chain's Schema, fills res from it and returns it; each failure
// is recorded in res and added to causes. walk is the context the model
// targets were tried under: the degradations run on past its deadline
// (not past the caller's cancellation), each for at most DegradeTimeout,
// and all of them together end at most one DegradeTimeout after that
// deadline.
func (c *Chain) degrade(walk context.Context, obs *tracing.Call, req llm.Request, res *Result, causes *[]error) *degrader {
	var end time.Time // when every degradation must have answered; zero for no bound in all
	if dl, ok := walk.Deadline(); ok {
		end = dl.Add(c.degradeTimeout)
	}
	for i := range c.degrades {
		g := &c.degrades[i]
		if canceled(walk) != nil {
			return nil
		}
		timeout := c.degradeTimeout
		if !end.IsZero() {
			timeout = min(timeout, time.Until(end))
		}
		ctx, span := obs.StartAttempt(context.WithoutCancel(walk), g.tel, 1, req)
		ctx, cancel := context.WithTimeout(ctx, timeout)
		start := c.clock()
		var resp *llm.Response
		var age time.Duration
		var err error
		if g.lastGood != nil {
			resp, age, err = g.lastGood.recall(ctx, req)
		} else {
			resp, err = g.d.Degrade(ctx, req)
		}
		elapsed := c.clock() - start
		cancel()
		if err == nil && resp == nil {
			err = errNilResponse
		}
		var js json.RawMessage
		if err == nil && c.schema != nil {
			if js, err = c.schema.Validate(resp.Text); err != nil {
				err = invalidOutput("backstop", 0, "", err)
			}
		}
		a := Attempt{Target: g.name, Tier: TierDegrade, N: 1, Duration: elapsed}
		if err != nil {
			a.Kind, a.Err, a.Decision = llm.KindOf(err), err, DecisionNext
			obs.EndAttempt(span, g.tel, nil, 0, a.Kind, err, elapsed)
			res.Attempts = append(res.Attempts, a)
			*causes = append(*causes, &TargetError{Target: g.name, Tier: TierDegrade, Err: err})
			continue
		}
		obs.EndAttempt(span, g.tel, resp, 0, llm.KindUnknown, nil, elapsed)
		a.RequestID = resp.RequestID
		res.Attempts = append(res.Attempts, a)
		res.Response = *resp
		res.JSON = js
		res.Degraded = true
		res.Age = age
		res.Served = Served{Target: g.name, Tier: TierDegrade, Provider: "backstop", Model: resp.Model, RequestID: resp.RequestID}
		return g
	}
	return nil
}

// invalidOutput is the failure of an answer that did not pass its schema
// (verr, from validate). Its Message names only where and which keyword
// failed, since a violation's own message may quote the answer ("got
// \"Jane Doe\", want ..."); the whole description is its Detail, which the
// error's text leaves out.
func invalidOutput(provider string, status int, requestID string, verr error) *llm.Error {
	return &llm.Error{Provider: provider, Status: status, Kind: llm.KindInvalidOutput,
		Message: schemaSummary(verr), Detail: verr.Error(), RequestID: requestID, Err: verr}
}

// schemaSummary describes a schema failure without quoting the answer:
// "the answer does not match the schema: at /price (type); at (root)
// (required)", at most three places, then how many more.
func schemaSummary(verr error) string {
	switch {
	case errors.Is(verr, validate.ErrNoJSON):
		return "the answer holds no JSON"
	case errors.Is(verr, validate.ErrBadJSON):
		return "the answer's JSON is not valid"
	}
	paths, keywords := violations(verr)
	var b strings.Builder
	b.WriteString("the answer does not match the schema: ")
	for i := range paths {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d more", len(paths)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		p := paths[i]
		if p == "" {
			p = "(root)"
		}
		fmt.Fprintf(&b, "at %s (%s)", p, keywords[i])
	}
	return b.String()
}

// violations lists the paths and keywords of a schema failure, for
// telemetry: never the messages, which may quote the answer.
func violations(err error) (paths, keywords []string) {
	var verr *validate.ValidationError
	if !errors.As(err, &verr) {
		return []string{""}, []string{"no_json"}
	}
	for _, v := range verr.Violations {
		paths = append(paths, v.Path)
		keywords = append(keywords, v.Keyword)
	}
	return paths, keywords
}

// reask returns the conversation to re-ask a model whose answer failed the
// schema: msgs, the answer, and the problems (validate.Feedback). msgs is
// copied, never appended to in place.
func reask(msgs []llm.Message, answer string, err error) []llm.Message {
	out := make([]llm.Message, 0, len(msgs)+2)
	out = append(out, msgs...)
	return append(out,
		llm.Message{Role: llm.RoleAssistant, Content: answer},
		llm.Message{Role: llm.RoleUser, Content: validate.Feedback(err)})
}

func (c *Chain) stopped(err error) error {
	return fmt.Errorf("chain %q: stopped: %w", c.name, err)
}

// canceled returns the caller's context error when the caller canceled; a
// caller's deadline is treated like the chain's (the walk ends, degradations
// run) and reports nil.
func canceled(caller context.Context) error {
	if err := caller.Err(); errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// sleep waits d or until ctx ends, whichever is first.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// decide records what the chain did after the last attempt.
func (r *Result) decide(d Decision, reason string) {
	if n := len(r.Attempts); n > 0 {
		r.Attempts[n-1].Decision, r.Attempts[n-1].Reason = d, reason
	}
}

// skip records an attempt not sent: a target passed over (n = 0) or a
// retry refused (n = the attempt it would have been).
func (r *Result) skip(t *target, n int, err error, reason string) {
	r.Attempts = append(r.Attempts, Attempt{Target: t.Name, Tier: t.tier, Model: t.Model, N: n,
		Err: err, Decision: DecisionSkip, Reason: reason})
}

// serve fills the result from the answer of t.
func (r *Result) serve(t *target, resp *llm.Response) {
	r.Response = *resp
	r.Served = Served{Target: t.Name, Tier: t.tier, Provider: t.Provider.Name(), Model: resp.Model, RequestID: resp.RequestID}
}
