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
// Error never contains the API key: adapters redact it from messages they
// quote.
type Error struct {
	// Provider is the adapter's Name ("anthropic", "openai", …).
	Provider string
	// Status is the HTTP status code; 0 when no response arrived.
	Status int
	// Type and Code are the provider's error type and code as sent
	// (rate_limit_error, insufficient_quota, context_length_exceeded, …).
	Type, Code string
	// Message is the provider's human-readable message.
	Message string
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

// Error describes the failure on one line: provider, status, type or code,
// message, request id and any Retry-After.
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
