package llm

import "time"

// Response is a model's answer.
type Response struct {
	// Text is the concatenated text of the answer.
	Text string
	// Model is the model the provider says served the answer, which can differ
	// from the model requested (aliases, pinned snapshots).
	Model string
	// ID is the provider's message or completion id (msg_…, chatcmpl-…).
	ID string
	// RequestID is the provider's request id from the response headers
	// (request-id, x-request-id): the id to quote to the provider's support.
	RequestID string
	// FinishReason is the provider's stop reason as sent (end_turn, stop,
	// max_tokens, length, content_filter, …).
	FinishReason string
	Usage        Usage
	RateLimit    RateLimit
}

// Usage counts the tokens of one call.
type Usage struct {
	// InputTokens includes cached input tokens (read and written), as the
	// OpenTelemetry GenAI conventions count them.
	InputTokens  int
	OutputTokens int
}

// RateLimit is the allowance a provider announced in its response headers
// (anthropic-ratelimit-*, x-ratelimit-*). A provider that sends none leaves it
// zero.
type RateLimit struct {
	Requests     Allowance
	Tokens       Allowance
	InputTokens  Allowance
	OutputTokens Allowance
}

// Allowance is one rate-limit bucket as announced by the provider. The
// zero value means the provider announced nothing for this bucket.
type Allowance struct {
	// Limit is the bucket's size; Remaining what is left of it now.
	Limit, Remaining int
	// Reset is when the bucket is full again; zero when not reported.
	// Providers that send a relative duration are converted against the
	// time the response arrived.
	Reset time.Time
}

// Reported reports whether the provider announced this bucket. (A provider
// announcing a limit of 0 with nothing remaining and no reset time is
// indistinguishable from silence; none does.)
func (a Allowance) Reported() bool {
	return a.Limit != 0 || a.Remaining != 0 || !a.Reset.IsZero()
}

// Empty reports whether the provider announced no allowance at all.
func (r RateLimit) Empty() bool {
	return !r.Requests.Reported() && !r.Tokens.Reported() &&
		!r.InputTokens.Reported() && !r.OutputTokens.Reported()
}
