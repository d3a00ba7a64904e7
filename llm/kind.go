package llm

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"syscall"
)

// Kind classifies a failed attempt. The chain's decision table has one row
// per Kind: whether to retry the same target, whether the failure counts
// against the target's circuit breaker, and whether to move to the next
// target.
type Kind uint8

// The kinds of failure, as DESIGN.md's decision table names them. Each
// is numbered explicitly, and NumKinds is one more than the largest: a new
// kind takes the next number, raises NumKinds and gets a name and a row
// of the decision table (retry.DefaultTable) with its verdict (the column
// chain.VerdictOf reads); the tests of llm, retry and chain fail until it
// has all of them, so that it cannot fall through to KindUnknown's.
const (
	// KindUnknown is a failure nothing else describes: not retried on the
	// same target, counted by the breaker, passed to the next target.
	KindUnknown Kind = 0
	// KindRateLimited is a 429 that is not a spend cap.
	KindRateLimited Kind = 1
	// KindQuota is a spend cap or exhausted credit (Anthropic's
	// enforced, contract and linked-organization spend limits or
	// billing_error, OpenAI insufficient_quota and its billing and spend
	// limit codes). Waiting does not help; it is never retried.
	KindQuota Kind = 2
	// KindOverloaded is a 529 or 503: the provider is shedding load.
	KindOverloaded Kind = 3
	// KindServer is a 500, 502, 504 or other 5xx.
	KindServer Kind = 4
	// KindTimeout is a 408, an attempt that ran out of time, or a stream
	// that stalled.
	KindTimeout Kind = 5
	// KindConnection is a refused or reset connection, a DNS or TLS failure,
	// or a response cut short.
	KindConnection Kind = 6
	// KindConflict is a 409.
	KindConflict Kind = 7
	// KindContextLength is a prompt longer than the model's context window.
	KindContextLength Kind = 8
	// KindContentFilter is a refusal or answer withheld by a content policy.
	KindContentFilter Kind = 9
	// KindAuth is a 401 or 403: a bad key or a missing permission.
	KindAuth Kind = 10
	// KindNotFound is a 404: an unknown model or a wrong URL.
	KindNotFound Kind = 11
	// KindBadRequest is a 400, 413 or 422: the request is wrong everywhere.
	KindBadRequest Kind = 12
	// KindInvalidOutput is an answer that failed the chain's JSON Schema.
	KindInvalidOutput Kind = 13
	// KindCanceled is the caller's context being canceled.
	KindCanceled Kind = 14

	// NumKinds is the number of kinds, for tables indexed by Kind.
	NumKinds = 15
)

var kindNames = [NumKinds]string{
	KindUnknown:       "unknown",
	KindRateLimited:   "rate_limited",
	KindQuota:         "quota",
	KindOverloaded:    "overloaded",
	KindServer:        "server",
	KindTimeout:       "timeout",
	KindConnection:    "connection",
	KindConflict:      "conflict",
	KindContextLength: "context_length",
	KindContentFilter: "content_filter",
	KindAuth:          "auth",
	KindNotFound:      "not_found",
	KindBadRequest:    "bad_request",
	KindInvalidOutput: "invalid_output",
	KindCanceled:      "canceled",
}

// String returns the kind's snake_case name, as used in telemetry.
func (k Kind) String() string {
	if int(k) < NumKinds {
		return kindNames[k]
	}
	return "unknown"
}

// kindFromStatus classifies an HTTP status code on its own, for responses
// whose body says nothing more specific.
func kindFromStatus(status int) Kind {
	switch {
	case status == 408:
		return KindTimeout
	case status == 409:
		return KindConflict
	case status == 429:
		return KindRateLimited
	case status == 402:
		return KindQuota
	case status == 401 || status == 403:
		return KindAuth
	case status == 404:
		return KindNotFound
	case status == 503 || status == 529:
		return KindOverloaded
	case status >= 500 && status <= 599:
		return KindServer
	case status >= 400 && status <= 499:
		return KindBadRequest
	}
	return KindUnknown
}

// KindOf classifies any error. It looks through wrapping: an *Error's Kind
// (or its Status when Kind is unset) wins; otherwise context cancellation is
// KindCanceled, a deadline or any net timeout is KindTimeout, and refused or
// reset connections, DNS and TLS failures and unexpected EOFs are
// KindConnection. A nil error and anything unrecognised are KindUnknown.
func KindOf(err error) Kind {
	if err == nil {
		return KindUnknown
	}
	var e *Error
	if errors.As(err, &e) {
		if e.Kind != KindUnknown {
			return e.Kind
		}
		if k := kindFromStatus(e.Status); k != KindUnknown {
			return k
		}
		if e.Err != nil {
			return KindOf(e.Err)
		}
		return KindUnknown
	}
	switch {
	case errors.Is(err, context.Canceled):
		return KindCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return KindTimeout
	}
	var timeout interface{ Timeout() bool }
	if errors.As(err, &timeout) && timeout.Timeout() {
		return KindTimeout
	}
	if isConnection(err) {
		return KindConnection
	}
	return KindUnknown
}

func isConnection(err error) bool {
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, net.ErrClosed):
		return true
	}
	var (
		dns     *net.DNSError
		op      *net.OpError
		record  tls.RecordHeaderError
		verify  *tls.CertificateVerificationError
		unknown x509.UnknownAuthorityError
		host    x509.HostnameError
	)
	return errors.As(err, &dns) || errors.As(err, &op) || errors.As(err, &record) ||
		errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &host)
}
