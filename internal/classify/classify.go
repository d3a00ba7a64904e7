// Package classify reads a failed attempt as the adapters see it (status,
// headers, the vendor's error type, code and message, the body) into an
// *llm.Error with its Kind, Retry-After, x-should-retry, request id and rate
// limit: one table per vendor, shared by backstop's own adapters and those
// over the official SDKs (which live under provider/ and so may import it).
package classify

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/backstop-llm/backstop/llm"
)

// Vendor is a provider's error vocabulary: the table Classify reads its
// error types and codes with. backstop's own adapters classify through it,
// so an adapter over an official SDK classifies exactly as they do.
type Vendor uint8

// The vendors.
const (
	// VendorOther classifies by status alone.
	VendorOther Vendor = iota
	// VendorAnthropic: the Anthropic API's error types
	// (rate_limit_error, overloaded_error, …) and error.details.error_code
	// codes, on the API, Bedrock and Vertex alike.
	VendorAnthropic
	// VendorOpenAI: OpenAI's error types and codes (insufficient_quota,
	// context_length_exceeded, …), on OpenAI, Azure and compatible servers.
	VendorOpenAI
	// VendorGoogle: google.rpc.Status codes (RESOURCE_EXHAUSTED,
	// UNAVAILABLE, …) of the Gemini API and Vertex AI, and RetryInfo's
	// retryDelay as the wait.
	VendorGoogle
	// VendorBedrock: AWS Bedrock's exception names (x-amzn-ErrorType:
	// ThrottlingException, ServiceUnavailableException, …).
	VendorBedrock
)

// Reply is what a provider said about a failed attempt, as any adapter
// can read it from the HTTP response (an official SDK's error type holds
// the status, the headers and the decoded body).
type Reply struct {
	// Status is the HTTP status; 0 when no response arrived.
	Status int
	// Header is the response's headers; nil when there were none.
	Header http.Header
	// Type, Code and Message are the provider's error type, code and
	// message as sent (Google: the status name, e.g. RESOURCE_EXHAUSTED,
	// as Type; Bedrock: the exception name as Type).
	Type, Code, Message string
	// Body is the raw error body, when the adapter has it: spend caps are
	// recognised anywhere in it, and Google's RetryInfo is read from it.
	Body []byte
	// Received is when the response arrived, for Retry-After dates and
	// rate-limit resets; zero means now.
	Received time.Time
}

// Classify turns a failed attempt's reply into the *Error the chain acts
// on: its Kind by v's table (then by status), RetryAfter (retry-after-ms,
// Retry-After in every RFC 9110 form, Google's RetryInfo.retryDelay),
// ShouldRetry (x-should-retry), RequestID (the vendor's request-id
// header), the rate limit announced with it, and Type, Code and, as
// Detail, Message. provider is the adapter's Name.
//
// Classify does not redact: an adapter that holds the API key removes it
// from Detail (and from anything else it quotes) before returning the
// error.
func Classify(provider string, v Vendor, r Reply) *llm.Error {
	now := r.Received
	if now.IsZero() {
		now = time.Now()
	}
	e := &llm.Error{Provider: provider, Status: r.Status, Type: r.Type, Code: r.Code, Detail: r.Message,
		Kind: v.Kind(r.Status, r.Type, r.Code, r.Message, r.Body)}
	if r.Header != nil {
		e.RetryAfter, _ = RetryAfter(r.Header, now)
		e.ShouldRetry = ShouldRetry(r.Header)
		e.RequestID = v.RequestID(r.Header)
		e.RateLimit = v.RateLimit(r.Header, now)
	}
	if v == VendorGoogle && e.RetryAfter == 0 {
		if d, ok := googleRetryDelay(r.Body); ok {
			e.RetryAfter = d
		}
	}
	return e
}

// Kind classifies a failure by v's table: the error type and code first,
// then the status alone (429 rate limited, 529 and 503 overloaded, other
// 5xx server, ...; a 2xx is KindServer, an answer that was not one).
// VendorOther has no table: the status decides. body, when given, is
// searched for spend caps.
func (v Vendor) Kind(status int, typ, code, message string, body []byte) llm.Kind {
	var k llm.Kind
	var ok bool
	switch v {
	case VendorAnthropic:
		k, ok = anthropicKind(typ, code, message, body)
	case VendorOpenAI:
		k, ok = openaiKind(typ, code)
	case VendorGoogle:
		k, ok = googleKind(typ, message, body)
	case VendorBedrock:
		k, ok = bedrockKind(typ, message)
	}
	if ok {
		return k
	}
	if status >= 200 && status <= 299 {
		return llm.KindServer
	}
	return llm.KindOf(&llm.Error{Status: status}) // the status alone, as KindOf reads it
}

// RequestID returns the request id the vendor sends in h.
func (v Vendor) RequestID(h http.Header) string {
	for _, name := range requestIDHeaders[v] {
		if id := h.Get(name); id != "" {
			return id
		}
	}
	return ""
}

// requestIDHeaders are the headers each vendor names its request id in,
// in the order they are read.
var requestIDHeaders = [...][]string{
	VendorOther:     {"Request-Id", "X-Request-Id"},
	VendorAnthropic: {"Request-Id"},
	VendorOpenAI:    {"X-Request-Id", "Apim-Request-Id"}, // Azure's gateway adds the second
	VendorGoogle:    {"X-Goog-Request-Id", "X-Request-Id"},
	VendorBedrock:   {"X-Amzn-Requestid"},
}

// RateLimit reads the rate-limit headers v sends (anthropic-ratelimit-*,
// x-ratelimit-*); Google and Bedrock send none.
func (v Vendor) RateLimit(h http.Header, received time.Time) llm.RateLimit {
	switch v {
	case VendorAnthropic:
		b := func(name string) llm.Allowance {
			p := "Anthropic-Ratelimit-" + name
			return allowance(h, p+"-Limit", p+"-Remaining", p+"-Reset", received, resetRFC3339)
		}
		return llm.RateLimit{Requests: b("Requests"), Tokens: b("Tokens"), InputTokens: b("Input-Tokens"), OutputTokens: b("Output-Tokens")}
	case VendorOpenAI, VendorOther:
		b := func(name string) llm.Allowance {
			return allowance(h, "X-Ratelimit-Limit-"+name, "X-Ratelimit-Remaining-"+name, "X-Ratelimit-Reset-"+name, received, resetDuration)
		}
		return llm.RateLimit{Requests: b("Requests"), Tokens: b("Tokens")}
	}
	return llm.RateLimit{}
}

// allowance reads one bucket from the headers named limit, remaining and
// reset.
func allowance(h http.Header, limit, remaining, reset string, received time.Time, parse func(string, time.Time) (time.Time, bool)) llm.Allowance {
	var a llm.Allowance
	if n, ok := headerCount(h, limit); ok {
		a.Limit = n
	}
	if n, ok := headerCount(h, remaining); ok {
		a.Remaining = n
	}
	if v := strings.TrimSpace(h.Get(reset)); v != "" {
		if t, ok := parse(v, received); ok {
			a.Reset = t
		}
	}
	return a
}

// headerCount reads a non-negative decimal count, clamped to MaxInt32.
func headerCount(h http.Header, name string) (int32, bool) {
	v := strings.TrimSpace(h.Get(name))
	if v == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil && !isRange(err) || n < 0 {
		return 0, false
	}
	return int32(min(n, math.MaxInt32)), true
}

// resetRFC3339 reads a reset sent as an RFC 3339 time (Anthropic).
func resetRFC3339(v string, _ time.Time) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339, v)
	return t, err == nil
}

// resetDuration reads a reset sent as a Go-style duration ("1s", "6m0s",
// "12ms") from when the response arrived (OpenAI), or as plain seconds (some
// compatible servers).
func resetDuration(v string, received time.Time) (time.Time, bool) {
	d, err := time.ParseDuration(v)
	if err != nil {
		var ok bool
		if d, ok = parseRetryAfter(v, received); !ok {
			return time.Time{}, false
		}
	}
	if d < 0 {
		return time.Time{}, false
	}
	return received.Add(d), true
}

// ShouldRetry reads the x-should-retry header (which the official SDKs
// honour before the status): nil when absent or neither true nor false.
func ShouldRetry(h http.Header) *bool {
	var b bool
	switch v := strings.TrimSpace(h.Get("X-Should-Retry")); {
	case strings.EqualFold(v, "true"):
		b = true
	case strings.EqualFold(v, "false"):
	default:
		return nil
	}
	return &b
}

// googleRetryDelay reads RetryInfo.retryDelay ("30s", "1.5s") from a
// google.rpc.Status body's details.
func googleRetryDelay(body []byte) (time.Duration, bool) {
	if !bytes.Contains(body, []byte("retryDelay")) {
		return 0, false
	}
	var b struct {
		Error struct {
			Details []struct {
				Type       string `json:"@type"`
				RetryDelay string `json:"retryDelay"`
			} `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &b) != nil {
		return 0, false
	}
	for _, d := range b.Error.Details {
		if d.RetryDelay == "" || !strings.HasSuffix(d.Type, "google.rpc.RetryInfo") {
			continue
		}
		if w, err := time.ParseDuration(d.RetryDelay); err == nil && w >= 0 {
			return min(w, maxRetryAfter), true
		}
	}
	return 0, false
}
