package suite

import (
	"fmt"

	"github.com/backstop-llm/backstop/llm"
)

// Class is one error class of the decision table as a wire format sends
// it: the reply (status, headers, body) and the Kind every adapter of that
// format must classify it as. Classes lists them per format; the native
// adapters' tests and those of the adapters over the official SDKs run the
// same rows, so that every adapter classifies alike.
type Class struct {
	Name   string
	Status int
	Header []string // name, value pairs
	Body   string
	Kind   llm.Kind
	// RetryAfter is the wait the reply asks for (0: none).
	RetryAfterSeconds int
}

// Classes returns the classes of format: "anthropic" (the Messages API,
// also as Bedrock and Vertex pass it through) or "openai" (Chat
// Completions, Azure and compatible servers).
func Classes(format string) []Class {
	switch format {
	case "anthropic":
		e := func(typ, msg, details string) string {
			if details == "" {
				details = "null"
			}
			return fmt.Sprintf(`{"type":"error","error":{"type":%q,"message":%q,"details":%s},"request_id":"req_body"}`, typ, msg, details)
		}
		return []Class{
			{"rate limited", 429, []string{"Retry-After", "7"}, e("rate_limit_error", "Number of requests has exceeded your rate limit", ""), llm.KindRateLimited, 7},
			{"spend cap", 429, nil, e("rate_limit_error", "spend limit", `{"error_code":"enforced_spend_limit_reached"}`), llm.KindQuota, 0},
			{"contract spend cap", 429, nil, e("rate_limit_error", "spend limit", `{"error_code":"contract_spend_limit_reached"}`), llm.KindQuota, 0},
			{"billing", 402, nil, e("billing_error", "credit balance too low", ""), llm.KindQuota, 0},
			{"overloaded", 529, []string{"Retry-After", "2"}, e("overloaded_error", "Overloaded", ""), llm.KindOverloaded, 2},
			{"server", 500, nil, e("api_error", "Internal server error", ""), llm.KindServer, 0},
			{"timeout", 504, nil, e("timeout_error", "Request timed out", ""), llm.KindTimeout, 0},
			{"context length", 400, nil, e("invalid_request_error", "prompt is too long: 208310 tokens > 200000 maximum", ""), llm.KindContextLength, 0},
			{"bad request", 400, nil, e("invalid_request_error", "messages.0.content: field required", ""), llm.KindBadRequest, 0},
			{"too large", 413, nil, e("request_too_large", "Request exceeds the maximum size", ""), llm.KindBadRequest, 0},
			{"auth", 401, nil, e("authentication_error", "invalid x-api-key", ""), llm.KindAuth, 0},
			{"permission", 403, nil, e("permission_error", "not allowed", ""), llm.KindAuth, 0},
			{"not found", 404, nil, e("not_found_error", "model: claude-nope", ""), llm.KindNotFound, 0},
			{"conflict", 409, nil, e("conflict_error", "conflict", ""), llm.KindConflict, 0},
			{"unknown type by status", 503, nil, e("brand_new_error", "what happened", ""), llm.KindOverloaded, 0},
		}
	case "openai":
		e := func(typ, code, msg string) string {
			return fmt.Sprintf(`{"error":{"message":%q,"type":%q,"param":null,"code":%q}}`, msg, typ, code)
		}
		return []Class{
			{"rate limited", 429, []string{"Retry-After-Ms", "1500", "Retry-After", "9"}, e("requests", "rate_limit_exceeded", "Rate limit reached. Please try again in 1.5s."), llm.KindRateLimited, 1},
			{"quota", 429, nil, e("insufficient_quota", "insufficient_quota", "You exceeded your current quota"), llm.KindQuota, 0},
			{"overloaded", 503, nil, e("server_error", "server_overloaded", "The server is overloaded"), llm.KindOverloaded, 0},
			{"server", 500, nil, e("server_error", "", "The server had an error"), llm.KindServer, 0},
			{"context length", 400, nil, e("invalid_request_error", "context_length_exceeded", "maximum context length is 128000 tokens"), llm.KindContextLength, 0},
			{"bad request", 400, nil, e("invalid_request_error", "", "Invalid value for 'messages'"), llm.KindBadRequest, 0},
			{"content filter", 400, nil, e("invalid_request_error", "content_policy_violation", "flagged"), llm.KindContentFilter, 0},
			{"auth", 401, nil, e("invalid_request_error", "invalid_api_key", "Incorrect API key provided"), llm.KindAuth, 0},
			{"not found", 404, nil, e("invalid_request_error", "model_not_found", "The model does not exist"), llm.KindNotFound, 0},
			{"timeout", 408, nil, e("timeout", "", "Request timed out"), llm.KindTimeout, 0},
			{"conflict", 409, nil, e("conflict", "", "conflict"), llm.KindConflict, 0},
		}
	}
	panic("suite: no classes for format " + format)
}
