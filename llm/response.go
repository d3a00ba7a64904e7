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
	// ToolCalls are the calls the model made, in order; answer each with a
	// ToolResult part in the next user message.
	ToolCalls []ToolCall
	// Finish is FinishReason normalized across providers.
	Finish Finish
}

// Finish is why the model stopped, the same for every provider.
type Finish uint8

// The finish reasons.
const (
	// FinishUnknown: the provider sent none, or one not listed here
	// (FinishReason holds it as sent).
	FinishUnknown Finish = iota
	// FinishStop: the model ended its answer (end_turn, stop, a stop
	// sequence).
	FinishStop
	// FinishLength: the answer reached MaxTokens, or the context window
	// (max_tokens, length, model_context_window_exceeded).
	FinishLength
	// FinishToolUse: the model called tools and waits for their results
	// (tool_use, tool_calls, function_call).
	FinishToolUse
	// FinishContentFilter: the provider's filter cut the answer
	// (content_filter). A refusal is returned as an error, not an answer.
	FinishContentFilter
	// FinishPause: the provider paused a long turn; send the conversation
	// back to continue it (Anthropic pause_turn).
	FinishPause
)

// String returns the finish reason's name: unknown, stop, length,
// tool_use, content_filter, pause.
func (f Finish) String() string {
	switch f {
	case FinishStop:
		return "stop"
	case FinishLength:
		return "length"
	case FinishToolUse:
		return "tool_use"
	case FinishContentFilter:
		return "content_filter"
	case FinishPause:
		return "pause"
	}
	return "unknown"
}

// Usage counts the tokens of one call.
type Usage struct {
	// InputTokens includes cached input tokens (read and written), as the
	// OpenTelemetry GenAI conventions count them.
	InputTokens  int
	OutputTokens int
	// CacheReadTokens and CacheWriteTokens are the input tokens read from
	// and written to the provider's prompt cache, counted within
	// InputTokens too (Anthropic's cache_read_input_tokens and
	// cache_creation_input_tokens, OpenAI's cached_tokens, Gemini's
	// cachedContentTokenCount). They are priced apart (catalog.Price), and
	// 0 when the provider reported none.
	CacheReadTokens, CacheWriteTokens int
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
	// Limit is the bucket's size; Remaining what is left of it now. They
	// are per-minute counts of requests or tokens; a header announcing more
	// than math.MaxInt32 is read as math.MaxInt32. (int32 keeps a
	// Response, and so a chain's Result, within the allocator's 512-byte
	// size class.)
	Limit, Remaining int32
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
