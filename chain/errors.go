package chain

import (
	"errors"
	"fmt"
	"strings"

	"github.com/backstop-llm/backstop/internal/capability"
	"github.com/backstop-llm/backstop/internal/pricecap"
	"github.com/backstop-llm/backstop/llm"
)

var (
	// ErrExhausted is matched (errors.Is) by the error of a call on which
	// every target and degradation failed. Its *ExhaustedError holds each
	// target's cause.
	ErrExhausted = errors.New("every target failed")
	// ErrNoMessages is returned by Call for a request without messages.
	ErrNoMessages = errors.New("request has no messages; add at least one llm.Message")
	// ErrContextWindow is the reason recorded for a target skipped after a
	// context-length failure because its ContextWindow is not larger.
	ErrContextWindow = capability.ErrContextWindow
	// ErrDeadline is the reason recorded for model targets not tried because
	// the chain's deadline had passed.
	ErrDeadline = errors.New("chain deadline passed")
	// ErrCapability is the reason recorded for a target skipped because
	// the request carries what its provider cannot take: a capability (see
	// Target.Lacks and llm.CapableProvider) or a media type (see
	// llm.MediaProvider).
	ErrCapability = capability.ErrCapability
	// ErrPriceCap is the reason recorded for a capped target skipped
	// because its worst case for the request is more than its price cap
	// allows (Builder.CapPrice).
	ErrPriceCap = pricecap.ErrPriceCap
)

// TargetError is one target's failure, as joined into an ExhaustedError or
// returned when the chain stops. Unwrap reaches the provider's *llm.Error.
type TargetError struct {
	Target string
	Tier   Tier
	Err    error
}

func (e *TargetError) Error() string {
	return "target " + quote(e.Target) + " (" + e.Tier.String() + "): " + e.Err.Error()
}

// Unwrap returns the target's cause.
func (e *TargetError) Unwrap() error { return e.Err }

// ExhaustedError is the error of a call on which every target failed. It
// matches ErrExhausted, and errors.Is/As see through it to every cause.
type ExhaustedError struct {
	// Chain is the chain's name.
	Chain string
	// Causes holds one *TargetError per target that failed, in order.
	Causes []error
}

func (e *ExhaustedError) Error() string {
	var b strings.Builder
	b.WriteString("chain ")
	b.WriteString(quote(e.Chain))
	b.WriteString(": ")
	b.WriteString(ErrExhausted.Error())
	for i, c := range e.Causes {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(c.Error())
	}
	return b.String()
}

// Is reports whether target is ErrExhausted.
func (e *ExhaustedError) Is(target error) bool { return target == ErrExhausted }

// Unwrap returns the causes.
func (e *ExhaustedError) Unwrap() []error { return e.Causes }

// As makes errors.As(err, &le) with le an *llm.Error (and so llm.KindOf)
// see the failure the call ended on, not the first: the last model
// target's *llm.Error, or, when no model target failed with one, the last
// degradation's. Other targets of errors.As see every cause, in order.
func (e *ExhaustedError) As(target any) bool {
	p, ok := target.(**llm.Error)
	if !ok {
		return false
	}
	for _, models := range []bool{true, false} {
		for i := len(e.Causes) - 1; i >= 0; i-- {
			var te *TargetError
			isModel := !errors.As(e.Causes[i], &te) || te.Tier != TierDegrade
			if isModel == models && errors.As(e.Causes[i], p) {
				return true
			}
		}
	}
	return false
}

// Kind is the kind of the failure the call ended on (see As), or
// llm.KindUnknown when no target failed with an *llm.Error.
func (e *ExhaustedError) Kind() llm.Kind {
	var le *llm.Error
	if e.As(&le) {
		return llm.KindOf(le)
	}
	return llm.KindUnknown
}

// ConfigError is one configuration problem found by Build. Build joins all
// of them; each wraps llm.ErrInvalidConfig.
type ConfigError struct {
	// Chain is the chain's name.
	Chain string
	// Target names the target at fault; empty for the chain as a whole.
	Target string
	// Problem says what is wrong and what to change; empty when Err says
	// it all (a degradation's Bind error).
	Problem string
	// Err is an underlying cause, such as a retry.Policy error.
	Err error
}

func (e *ConfigError) Error() string {
	s := "chain " + quote(e.Chain) + ": "
	if e.Target != "" {
		s += "target " + quote(e.Target) + ": "
	}
	s += e.Problem
	if e.Err != nil {
		if e.Problem != "" {
			s += ": "
		}
		s += e.Err.Error()
	}
	return s
}

// Is reports whether target is llm.ErrInvalidConfig.
func (e *ConfigError) Is(target error) bool { return target == llm.ErrInvalidConfig }

// Unwrap returns the underlying cause, if any.
func (e *ConfigError) Unwrap() error { return e.Err }

func quote(s string) string { return `"` + s + `"` }

// The errors of a stream (Chain.Stream).

// ErrAbandoned is matched by the error Stream.Result returns when the
// caller stopped reading the stream (broke out of ranging over Chunks)
// before it ended: the answer is neither complete nor validated, and was
// not remembered.
var ErrAbandoned = errors.New("the caller stopped reading the stream before it ended")

// ErrIncomplete is matched by the error of a stream that failed after its
// first chunk: the caller has part of an answer and no more of it.
var ErrIncomplete = errors.New("the answer is incomplete: the stream failed after it started")

// IncompleteError is a stream that failed after its first chunk. It
// matches ErrIncomplete, and errors.Is/As reach the failure.
type IncompleteError struct {
	// Target served the partial answer.
	Target string
	// Partial is the text the caller received before the failure.
	Partial string
	// Err is the failure, an *llm.Error with its Kind.
	Err error
}

func (e *IncompleteError) Error() string {
	return fmt.Sprintf("target %q: %v after %d bytes: %v", e.Target, ErrIncomplete, len(e.Partial), e.Err)
}

// Unwrap returns ErrIncomplete and the failure.
func (e *IncompleteError) Unwrap() []error { return []error{ErrIncomplete, e.Err} }

// ErrStreamConsumed is yielded when a Stream's Chunks are ranged over a
// second time: a Stream is one call, and its chunks are gone. Call
// Chain.Stream again for another call.
var ErrStreamConsumed = errors.New("the stream was read already: a Stream is one call; call Chain.Stream again")
