package budget

import (
	"context"
	"errors"
	"time"

	"github.com/backstop-llm/backstop/internal/problems"
)

// Budget limits how many retries a target may send, so that retries stay a
// small fraction of the load when a target is failing (Google SRE book ch.
// 21: a 10% budget keeps worst-case load near 1.1x instead of 3x).
// Implementations must be safe for concurrent use and cheap: the chain calls
// Record after every attempt.
type Budget interface {
	// Record is told of every attempt the chain sent, first attempts and
	// retries alike, once its outcome is known.
	Record(ctx context.Context, o Outcome)
	// Withdraw is asked before every retry, never before a first attempt.
	// It returns nil and spends one retry when the budget allows it, or an
	// error matching ErrExhausted.
	Withdraw(ctx context.Context) error
}

// A Budget may also have a method Refund(ctx context.Context): the chain
// then calls it to take back a retry it granted when the retry was not
// sent after all (the caller canceled during the wait, the breaker opened
// meanwhile). Ratio, TokenBucket and Shared have it.

// Outcome is what Record is told about one attempt.
type Outcome struct {
	// Retry reports that the attempt was a retry (a Withdraw granted it);
	// false for a first attempt.
	Retry bool
	// Success reports that the attempt succeeded.
	Success bool
	// At is when the attempt ended, read from the monotonic clock
	// (time.Now, or derived from it with Add). The zero value means now:
	// the budget reads the clock itself. The chain sets it so that one
	// clock read serves the attempt's timing, its breaker and its budget.
	At time.Time
}

var (
	// ErrExhausted is returned (and matched with errors.Is) by Withdraw when
	// the budget refuses a retry. The chain then sends no retry to that
	// target and moves on to the next one.
	ErrExhausted = errors.New("retry budget exhausted: recent retries to this target already use up its budget, so this retry is not sent")

	// errHead begins every configuration problem of the package.
	errHead = problems.Head("budget: invalid configuration")
)

// Unlimited returns a Budget that grants every retry and records nothing: it
// switches budgeting off, leaving only each target's retry.Policy to bound
// retries. Every call returns the same comparable value, so
// b == Unlimited() tells whether budgeting is off.
func Unlimited() Budget { return unlimited{} }

type unlimited struct{}

func (unlimited) Record(context.Context, Outcome) {}
func (unlimited) Withdraw(context.Context) error  { return nil }

// refunder is a Budget that can take back a retry it granted when the
// retry was not sent after all (the caller canceled during the wait, the
// breaker opened meanwhile). The chain calls Refund when a Budget has it
// (see Budget).
type refunder interface {
	Refund(ctx context.Context)
}
