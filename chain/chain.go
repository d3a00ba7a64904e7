package chain

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/budget"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/observe"
	"github.com/backstop-llm/backstop/retry"
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
	observers       []observe.Observer      // the tracing observer first, then Builder.Observe's
	state           []observe.StateObserver // those of them that observe state changes
	shared          *shared                 // nil unless Builder.Shared
	epoch           time.Time               // origin of clock
}

// degrader is a Degradation as Build compiled it.
type degrader struct {
	name     string
	d        Degradation
	lastGood *lastGood // d itself, unwrapped, when d is a LastGood
	ob       observe.Target
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
	ctx, obs := c.startCall(ctx, false)
	var w walk
	w.start(c, ctx, obs, req, sender{})
	s, err := w.run()
	w.done()
	w.end(s, err, "")
	return w.res, err
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
func (c *Chain) closeGate(ctx context.Context, obs *callObs, t *target, retryAfter time.Duration) {
	d := min(retryAfter, t.maxGate)
	until := time.Now().Add(d)
	t.gate.CloseUntil(until)
	obs.gateClosed(&t.ob, until)
	if c.shared != nil {
		_ = c.shared.state.PublishGate(context.WithoutCancel(ctx), t.Name, d)
	}
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

// serve fills the result from the answer of t.
func (r *Result) serve(t *target, resp *llm.Response) {
	r.Response = *resp
	r.Served = Served{Target: t.Name, Tier: t.tier, Provider: t.ob.Provider, Model: resp.Model, RequestID: resp.RequestID}
}
