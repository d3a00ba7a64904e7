package llm

import (
	"strconv"
	"strings"
	"time"
)

// Error is one failed attempt, as a provider adapter reports it. Every field
// but Provider and Kind may be empty: a connection that was refused has no
// Status, a proxy's HTML error page has no Type.
//
// Error never contains the API key: adapters redact it from everything they
// quote (a key shorter than 16 bytes, a placeholder such as "none", where
// it stands as a whole token, so that text merely containing its letters
// is not corrupted). Nor does its text contain the prompt or the answer: whatever the
// provider wrote in its own words, which can quote either (an error message
// such as "invalid value for content: …", the start of a body that could
// not be read), is kept apart in Detail, which Error leaves out.
type Error struct {
	// Provider is the adapter's Name ("anthropic", "openai", …).
	Provider string
	// Status is the HTTP status code; 0 when no response arrived.
	Status int
	// Type and Code are the provider's error type and code as sent
	// (rate_limit_error, insufficient_quota, context_length_exceeded, …).
	Type, Code string
	// Message says what went wrong in words that cannot quote the request
	// or the answer: backstop's own description ("response body is not the
	// expected JSON (…)", "the stream ended before the answer was
	// complete"), or empty when the provider's own message (in Detail) is
	// all there is.
	Message string
	// Detail is the provider's own text: its error message, or the start of
	// a body or an event that could not be read (at most 200 bytes). It can
	// quote the prompt or the answer, so Error leaves it out and telemetry
	// records it only when the chain's CaptureContent is on; read it from
	// here to log it where prompts may go. The API key is redacted from it
	// too.
	Detail string
	// RequestID is the provider's request id, to quote to its support.
	RequestID string
	// RetryAfter is the wait the provider asked for (retry-after,
	// retry-after-ms); 0 when it asked for none.
	RetryAfter time.Duration
	// ShouldRetry is the provider's x-should-retry header, nil when absent.
	// When set it overrides the decision table's retry column.
	ShouldRetry *bool
	// RateLimit is the allowance announced with the failure, if any.
	RateLimit RateLimit
	// Kind classifies the failure for the decision table.
	Kind Kind
	// Err is the underlying cause (a net error, a JSON syntax error), if any.
	Err error
}

// Error describes the failure on one line: provider, kind, status, type or
// code, Message, request id and any Retry-After. It never includes Detail;
// when there is a Detail but no Message it says that the provider's message
// was withheld, and how long it is.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Provider)
	if e.Provider == "" {
		b.WriteString("llm")
	}
	b.WriteString(": ")
	b.WriteString(e.Kind.String())
	if e.Status != 0 {
		b.WriteString(" (HTTP ")
		b.WriteString(strconv.Itoa(e.Status))
		b.WriteByte(')')
	}
	if e.Type != "" {
		b.WriteByte(' ')
		b.WriteString(e.Type)
	}
	if e.Code != "" && e.Code != e.Type {
		b.WriteByte('/')
		b.WriteString(e.Code)
	}
	switch {
	case e.Message != "":
		b.WriteString(": ")
		b.WriteString(e.Message)
	case e.Err != nil:
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	case e.Detail != "":
		b.WriteString(": message withheld, may quote the request (")
		b.WriteString(strconv.Itoa(len(e.Detail)))
		b.WriteString(" bytes in Detail)")
	}
	if e.RequestID != "" || e.RetryAfter > 0 {
		b.WriteString(" [")
		if e.RequestID != "" {
			b.WriteString("request-id ")
			b.WriteString(e.RequestID)
		}
		if e.RetryAfter > 0 {
			if e.RequestID != "" {
				b.WriteString(", ")
			}
			b.WriteString("retry after ")
			b.WriteString(e.RetryAfter.String())
		}
		b.WriteByte(']')
	}
	return b.String()
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }
