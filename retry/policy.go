package retry

import (
	"cmp"
	"time"

	"github.com/backstop-llm/backstop/internal/problems"

	"github.com/backstop-llm/backstop/llm"
)

// Defaults of a zero Policy, as DESIGN.md sets them (WithDefaults
// returns a Policy with them filled in).
const (
	defaultMaxAttempts   = 3
	defaultBase          = 500 * time.Millisecond
	defaultCap           = 20 * time.Second
	defaultPad           = time.Second
	defaultMaxRetryAfter = 30 * time.Second
)

// Jitter chooses how a backoff is randomised, as in the AWS architecture
// blog's "Exponential Backoff And Jitter". With exp = min(Cap, Base*2^n):
type Jitter uint8

const (
	// FullJitter waits U(0, exp): the least total work. The default.
	FullJitter Jitter = iota
	// EqualJitter waits exp/2 + U(0, exp/2): never less than half.
	EqualJitter
	// DecorrelatedJitter waits min(Cap, U(Base, 3*previous wait)).
	DecorrelatedJitter
	// NoJitter waits exactly exp. Clients that failed together retry
	// together; use it only to reproduce that.
	NoJitter
)

var jitterNames = [...]string{FullJitter: "full", EqualJitter: "equal", DecorrelatedJitter: "decorrelated", NoJitter: "none"}

// String returns the jitter's name.
func (j Jitter) String() string { return name(j, "Jitter", jitterNames[:]) }

// Policy is how one target retries. The zero value means the documented
// defaults field by field, so Policy{MaxAttempts: 2} changes only that.
type Policy struct {
	// MaxAttempts is the number of attempts on the target, the first one
	// included. 0 means 3; 1 means no retries.
	MaxAttempts int
	// Base is the first backoff's scale. 0 means 500ms.
	Base time.Duration
	// Cap bounds any backoff. 0 means 20s.
	Cap time.Duration
	// Pad is the most that is added, at random, to a Retry-After, so that
	// clients told the same time do not return together. 0 means
	// 1s; use a negative value for no pad.
	Pad time.Duration
	// MaxRetryAfter is the longest Retry-After the chain waits out on this
	// target. A longer one moves to the next target at once. 0 means
	// 30s.
	MaxRetryAfter time.Duration
	// Jitter randomises backoffs. The zero value is FullJitter.
	Jitter Jitter
	// Rules replaces rows of the decision table for this target: how many
	// attempts a kind of failure gets (LiteLLM's retry_policy), whether it
	// counts against the breaker, whether the chain moves on. Start from
	// DefaultTable().Rule(kind) and change what you need. Nil keeps
	// DefaultTable.
	Rules map[llm.Kind]Rule
}

// Table returns the decision table of p: DefaultTable with p.Rules applied.
func (p Policy) Table() Table { return DefaultTable().with(p.Rules) }

// errHead begins every problem Validate reports.
var errHead = problems.Head("retry: invalid policy")

// WithDefaults returns p with every zero field set to its default. It is
// idempotent: a negative Pad (no pad) stays negative.
func (p Policy) WithDefaults() Policy {
	p.MaxAttempts = cmp.Or(p.MaxAttempts, defaultMaxAttempts)
	p.Base = cmp.Or(p.Base, defaultBase)
	p.Cap = cmp.Or(p.Cap, defaultCap)
	p.Pad = cmp.Or(p.Pad, defaultPad) // a negative Pad stays: it means none
	p.MaxRetryAfter = cmp.Or(p.MaxRetryAfter, defaultMaxRetryAfter)
	return p
}

// Validate reports every problem with p at once: negative counts or
// durations, a Cap below Base, an unknown Jitter.
func (p Policy) Validate() error {
	found := problems.New(errHead)
	bad := found.Addf
	if p.MaxAttempts < 0 {
		bad("MaxAttempts is %d; use 0 for the default (%d) or 1 for no retries", p.MaxAttempts, defaultMaxAttempts)
	}
	problems.NotNegative(found, "Base", p.Base, defaultBase)
	problems.NotNegative(found, "Cap", p.Cap, defaultCap)
	problems.NotNegative(found, "MaxRetryAfter", p.MaxRetryAfter, defaultMaxRetryAfter)
	if d := p.WithDefaults(); p.Base >= 0 && p.Cap >= 0 && d.Cap < d.Base {
		bad("Cap (%v) is below Base (%v); raise Cap or lower Base", d.Cap, d.Base)
	}
	if p.Jitter > NoJitter {
		bad("Jitter is %v; use FullJitter, EqualJitter, DecorrelatedJitter or NoJitter", p.Jitter)
	}
	for k, r := range p.Rules {
		switch {
		case int(k) >= llm.NumKinds:
			bad("Rules has a row for Kind(%d), which does not exist", uint8(k))
		case r.Attempts < 0:
			bad("Rules[%v].Attempts is %d; use 0 for the policy's MaxAttempts", k, r.Attempts)
		case r.Breaker > Excluded:
			bad("Rules[%v].Breaker is %v; use NotFailure, Failure, Trip or Excluded", k, r.Breaker)
		case r.Fallback > IfAllowed:
			bad("Rules[%v].Fallback is %v; use Next, Stop, LargerContext or IfAllowed", k, r.Fallback)
		case r.Verdict != VerdictOK && r.Verdict != DefaultTable()[k].Verdict:
			bad("Rules[%v].Verdict is %v; a failed call's verdict is DefaultTable's (%v) whichever target failed: leave it 0",
				k, r.Verdict, DefaultTable()[k].Verdict)
		}
	}
	return found.Err()
}
