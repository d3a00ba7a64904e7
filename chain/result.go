package chain

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/backstop-llm/backstop/cost"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/spread"
)

// Result is a call's answer and how it was reached. On failure Call returns
// a Result too, with the attempts made and no answer.
type Result struct {
	// Response is the answer, whichever target or degradation served it:
	// the provider's own, not a copy (a provider returns a new Response
	// per call, see llm.Provider); res.Text and the other fields read
	// through it. Never nil: a call nothing answered has an empty one.
	// (It is a pointer so that a call copies no answer and a Result takes
	// 296 bytes rather than 520; code that passed res.Response where an
	// llm.Response is wanted passes *res.Response.)
	*llm.Response
	// Served says who answered.
	Served Served
	// Attempts records every attempt, skip and refusal, in order.
	Attempts []Attempt
	// JSON is the answer's JSON as validated against the chain's (or the
	// serving target's) Schema; nil when the chain has no Schema.
	JSON json.RawMessage
	// Degraded is true when a degradation, not a model, answered.
	Degraded bool
	// Age is how old a remembered answer is (LastGood); 0 for a fresh one.
	Age time.Duration

	// buf backs Attempts for the common one-attempt call, so that a
	// healthy call allocates the Result alone (296 bytes, in the 320-byte
	// size class: keep it there).
	buf [1]Attempt
}

// Cost is what the call cost: its attempts' Cost added up, the failed,
// retried, re-asked, hedged and lost ones included. Compare it with the
// Cost of the attempt that served (Attempts' last) to read what the
// fallbacks, retries, hedges and re-asks added.
func (r *Result) Cost() cost.Cost {
	var c cost.Cost
	for i := range r.Attempts {
		c = c.Add(r.Attempts[i].Cost)
	}
	return c
}

// Served identifies what answered a call.
type Served struct {
	// Target is the target's or degradation's name.
	Target string
	// Tier is the target's tier.
	Tier Tier
	// Provider is the provider's Name ("anthropic", "openai"); "backstop"
	// for a degradation.
	Provider string
	// Model is the model the provider says answered.
	Model string
	// RequestID is the provider's request id for the answer.
	RequestID string
}

// Decision is what the chain did after an attempt.
type Decision uint8

// The decisions.
const (
	// DecisionNone is the zero value: no decision was recorded. The chain
	// records every attempt with its decision, so a record that says none
	// was not made by it.
	DecisionNone Decision = iota
	// DecisionServed: the attempt answered the call.
	DecisionServed
	// DecisionRetry: the chain tried the same target again.
	DecisionRetry
	// DecisionNext: the chain moved on to the next target (after the last,
	// the call failed with ErrExhausted).
	DecisionNext
	// DecisionStop: the chain gave up on the call (a request wrong everywhere,
	// a caller that canceled).
	DecisionStop
	// DecisionSkip: no request was sent; the target was passed over.
	DecisionSkip
	// DecisionLost: the attempt was one of a hedged race that another
	// attempt won: canceled when the winner answered (its breaker told
	// neither of a failure nor of a success), or failed before it.
	DecisionLost
)

// String returns the decision's name.
func (d Decision) String() string {
	switch d {
	case DecisionNone:
		return "none"
	case DecisionServed:
		return "served"
	case DecisionRetry:
		return "retry"
	case DecisionNext:
		return "next"
	case DecisionStop:
		return "stop"
	case DecisionSkip:
		return "skip"
	case DecisionLost:
		return "lost"
	}
	return "unknown"
}

// Attempt is one attempt on a target, or one target passed over.
type Attempt struct {
	// Target identifies the target; Model is the model requested.
	Target, Model string
	// Tier is the target's tier.
	Tier Tier
	// Kind classifies a failure; KindUnknown on success.
	Kind llm.Kind
	// Decision is what the chain did next; Reason says why, in words.
	Decision Decision
	// Hedge is true for an attempt sent as a hedge: the same request as an
	// attempt on another target of the tier that had not answered within
	// the hedge delay (Builder.Hedge). A hedge its budget refused was not
	// sent: it is a DecisionSkip on the target it would have gone to, with
	// budget.ErrExhausted and a Reason saying so, and Hedge false.
	Hedge bool
	// N counts the attempts on this target, from 1. A retry refused (by
	// the budget or the breaker) keeps the number it would have had; a
	// target passed over has 0.
	N int
	// Status is the HTTP status (200 on success); 0 when none arrived.
	Status int
	// Err is the failure, or the reason for a skip; nil on success.
	Err error
	// RequestID is the provider's request id, when it sent one.
	RequestID string
	// Wait is how long the chain waited before this attempt.
	Wait time.Duration
	// Duration is how long the attempt took.
	Duration time.Duration
	Reason   string
	// Choice explains why the attempt went to this target when its tier
	// spreads its calls (Builder.Spread): the strategy, the target's rank
	// in this call's order and the figures compared. Nil in an ordered
	// tier.
	Choice *spread.Choice
	// Cost is what the attempt cost: its answer's usage at the target's
	// Price (an answer that failed its schema was billed too), a stream
	// cut short priced by what it had sent; zero for a skip, a refusal
	// and a failure without an answer. Its CacheLost is what leaving the
	// target that held the conversation's prompt cache added (a
	// failover, a hedge), and Reason then says "cache lost on <that
	// target>" (docs/concepts.md, "Prompt caches").
	Cost cost.Cost
}

// String renders the attempt on one line, for logs.
func (a Attempt) String() string {
	var b strings.Builder
	b.WriteString(a.Target)
	if a.N > 0 {
		b.WriteString(" #")
		b.WriteString(strconv.Itoa(a.N))
	}
	if a.Hedge {
		b.WriteString(" (hedge)")
	}
	if a.Wait > 0 {
		b.WriteString(" after ")
		b.WriteString(a.Wait.Round(time.Millisecond).String())
	}
	switch {
	case a.Decision == DecisionSkip && a.N > 1:
		b.WriteString(": retry not sent")
	case a.Decision == DecisionSkip:
		b.WriteString(": not sent")
	case a.Err == nil:
		b.WriteString(": ok")
	default:
		b.WriteString(": ")
		if a.Status != 0 {
			b.WriteString(strconv.Itoa(a.Status))
			b.WriteByte(' ')
		}
		b.WriteString(a.Kind.String())
	}
	if a.RequestID != "" {
		b.WriteString(" (")
		b.WriteString(a.RequestID)
		b.WriteByte(')')
	}
	if a.Decision != DecisionServed && a.Decision != DecisionSkip {
		b.WriteString(" -> ")
		b.WriteString(a.Decision.String())
	}
	if a.Reason != "" {
		b.WriteString(": ")
		b.WriteString(a.Reason)
	}
	if a.Choice != nil {
		b.WriteString(" [")
		b.WriteString(a.Choice.String())
		b.WriteByte(']')
	}
	return b.String()
}

// serve fills the result from the answer of t.
func (r *Result) serve(t *target, resp *llm.Response) {
	// Field by field: a composite literal would be built aside and copied
	// into the heap whole.
	r.Response = resp
	s := &r.Served
	s.Target, s.Tier, s.Provider, s.Model, s.RequestID = t.Name, t.tier, t.ob.Provider, resp.Model, resp.RequestID
}

// spreadResult is a Result with room for the first Choice its call
// records: a chain that spreads allocates it instead of a bare Result, so
// that a healthy call allocates once.
type spreadResult struct {
	Result
	choice spread.Choice
}
