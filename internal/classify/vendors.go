package classify

// The vendors' error vocabularies (Vendor.Kind): the tables backstop's
// adapters and any adapter over an official SDK classify with.

import (
	"bytes"
	"strings"

	"github.com/backstop-llm/backstop/llm"
)

// spendLimits are the spend caps: a 429 (or 402) that waiting does not
// lift. Each is recognised wherever it appears in an error body (it is sent
// as error.details.error_code), so that a gateway's rewrapping or a proxy's
// page quoting it is still never retried.
var spendLimits = [...]string{
	"enforced_spend_limit_reached",            // the monthly threshold of the API tier
	"contract_spend_limit_reached",            // the spend limit of the organization's contract
	"linked_organization_spend_limit_reached", // the organization billed for a user profile
}

// codeKinds classifies the error codes (error.details.error_code) that say
// more than their type and status: the cause decides what helps. The spend
// caps are spendLimits, found anywhere in the body; codes in neither are
// classified by type, then status (anthropicType). TestErrorCodes covers every
// code anthropic-sdk-go v2.15.0 documents.
var anthropicCodes = map[string]llm.Kind{
	// Billing the API cannot do: never retried, the breaker opens at once.
	"linked_organization_billing_unavailable": llm.KindQuota,
	// An acceleration limit: waiting (Retry-After) lifts it.
	"ramp_limit_exceeded": llm.KindRateLimited,
	// 400s that say the target (its organization, workspace or key), not
	// the request, is wrong: not retried, counted by the breaker, and the
	// next target tried, where a bad request would stop the chain.
	"organization_on_hold":               llm.KindAuth, // disabled for trust and safety
	"organization_not_enrolled_in_beta":  llm.KindAuth,
	"organization_not_eligible":          llm.KindAuth,
	"claude_code_key_creator_not_member": llm.KindAuth, // the key no longer works
	"cmek_key_disabled":                  llm.KindAuth, // the workspace's encryption key
	"cmek_key_network_blocked":           llm.KindAuth,
	"cmek_not_approved":                  llm.KindAuth,
	"user_profile_not_found":             llm.KindNotFound, // an anthropic-user-profile-id header
	// 400s that a second try can get past.
	"request_body_timeout":              llm.KindTimeout, // the body arrived too slowly
	"external_key_validation_timed_out": llm.KindTimeout,
}

// SpendLimit returns the Anthropic spend cap that body names anywhere
// (enforced_spend_limit_reached, contract_spend_limit_reached,
// linked_organization_spend_limit_reached), or "".
func SpendLimit(body []byte) string {
	for _, code := range spendLimits {
		if bytes.Contains(body, []byte(code)) {
			return code
		}
	}
	return ""
}

// anthropicKind classifies an Anthropic error: a spend cap named anywhere
// in the body, then the code (error.details.error_code), then the type.
func anthropicKind(typ, code, message string, body []byte) (llm.Kind, bool) {
	if SpendLimit(body) != "" || SpendLimit([]byte(code)) != "" {
		return llm.KindQuota, true
	}
	if k, ok := anthropicCodes[code]; ok {
		return k, true
	}
	return anthropicType(typ, message)
}

// anthropicType maps an Anthropic error type onto a Kind; ok is false for
// a type it does not know (classified by status).
func anthropicType(typ, msg string) (llm.Kind, bool) {
	switch typ {
	case "invalid_request_error":
		return refusedRequest(msg, "prompt is too long")
	case "authentication_error", "permission_error":
		return llm.KindAuth, true
	case "billing_error":
		return llm.KindQuota, true
	case "not_found_error":
		return llm.KindNotFound, true
	case "conflict_error", "memory_path_conflict_error":
		return llm.KindConflict, true
	case "memory_precondition_failed_error":
		return llm.KindBadRequest, true
	case "request_too_large":
		return llm.KindBadRequest, true
	case "rate_limit_error":
		return llm.KindRateLimited, true
	case "api_error":
		return llm.KindServer, true
	case "timeout_error":
		return llm.KindTimeout, true
	case "overloaded_error":
		return llm.KindOverloaded, true
	}
	return llm.KindUnknown, false
}

// codeKinds classifies the error codes that name a cause: each decides
// whatever the status, so an error event in a stream (status 200) is
// classified as the same error before the stream. Codes that name only a
// category (server_error, internal_error, sandbox_error, connection_failed,
// invalid_request, authentication_error, resource_not_found) are left to
// the status, which says it better. The codes are those openai-go v3.98.0
// documents (ResponseErrorCode, SessionTurnErrorCode, the Assistants' and
// vector stores' last_error codes) and those the Chat Completions API is
// known to send.
var openaiCodes = map[string]llm.Kind{
	// Spend caps and exhausted credit: waiting does not lift them.
	"insufficient_quota":                llm.KindQuota,
	"billing_hard_limit_reached":        llm.KindQuota,
	"billing_not_active":                llm.KindQuota,
	"credit_balance_exhausted":          llm.KindQuota,
	"usage_limit_exceeded":              llm.KindQuota,
	"project_spend_limit_exceeded":      llm.KindQuota,
	"organization_spend_limit_exceeded": llm.KindQuota,
	"organization_usage_limit_exceeded": llm.KindQuota,
	"session_budget_exceeded":           llm.KindQuota,

	"rate_limit_exceeded":  llm.KindRateLimited,
	"server_overloaded":    llm.KindOverloaded,
	"flex_unavailable":     llm.KindOverloaded, // no flex-tier capacity now
	"request_timeout":      llm.KindTimeout,
	"vector_store_timeout": llm.KindTimeout,

	"context_length_exceeded": llm.KindContextLength,

	// Refusals under a usage policy.
	"content_filter":                 llm.KindContentFilter,
	"content_policy_violation":       llm.KindContentFilter,
	"image_content_policy_violation": llm.KindContentFilter,
	"invalid_prompt":                 llm.KindContentFilter, // "flagged as potentially violating our usage policy"
	"bio_policy":                     llm.KindContentFilter,
	"cyber_policy":                   llm.KindContentFilter,
	"misalignment_policy_violation":  llm.KindContentFilter,

	"invalid_api_key":                      llm.KindAuth,
	"unsupported_country_region_territory": llm.KindAuth,
	"model_not_found":                      llm.KindNotFound,
	"data_residency_mismatch":              llm.KindNotFound, // the project is served at another regional URL

	// The request is wrong wherever it goes.
	"invalid_image":                 llm.KindBadRequest,
	"invalid_image_format":          llm.KindBadRequest,
	"invalid_base64_image":          llm.KindBadRequest,
	"invalid_image_url":             llm.KindBadRequest,
	"image_too_large":               llm.KindBadRequest,
	"image_too_small":               llm.KindBadRequest,
	"image_parse_error":             llm.KindBadRequest,
	"invalid_image_mode":            llm.KindBadRequest,
	"image_file_too_large":          llm.KindBadRequest,
	"unsupported_image_media_type":  llm.KindBadRequest,
	"empty_image_file":              llm.KindBadRequest,
	"failed_to_download_image":      llm.KindBadRequest,
	"image_file_not_found":          llm.KindBadRequest,
	"unsupported_file":              llm.KindBadRequest,
	"invalid_file":                  llm.KindBadRequest,
	"max_output_tokens":             llm.KindBadRequest,
	"executor_version_incompatible": llm.KindBadRequest,
	"active_turn_not_steerable":     llm.KindBadRequest,
}

// openaiKind maps an OpenAI error type and code onto a Kind: a type of
// insufficient_quota is a quota whatever its code (newer accounts show
// other codes under it), then the code when it names a cause
// (openaiCodes); ok is false otherwise (classified by status).
func openaiKind(typ, code string) (llm.Kind, bool) {
	if typ == "insufficient_quota" {
		return llm.KindQuota, true
	}
	k, ok := openaiCodes[code]
	return k, ok
}

// googleKind maps a google.rpc.Status code name onto a Kind; ok is false
// for one it does not know (classified by status). RESOURCE_EXHAUSTED is a
// rate limit when the reply says how long to wait (RetryInfo in body): the
// Gemini API words its per-minute limits "You exceeded your current quota,
// please check your plan and billing details" too. Without a wait it is a
// quota when it names a daily limit or billing (QuotaFailure's
// ...PerDay... quota ids, "per day"), else a rate limit.
func googleKind(status, message string, body []byte) (llm.Kind, bool) {
	switch status {
	case "RESOURCE_EXHAUSTED":
		if bytes.Contains(body, []byte("google.rpc.RetryInfo")) {
			return llm.KindRateLimited, true
		}
		m := strings.ToLower(message)
		if strings.Contains(m, "billing") || strings.Contains(m, "per day") || bytes.Contains(body, []byte("PerDay")) {
			return llm.KindQuota, true
		}
		return llm.KindRateLimited, true
	case "UNAVAILABLE":
		return llm.KindOverloaded, true
	case "INTERNAL", "UNKNOWN", "DATA_LOSS":
		return llm.KindServer, true
	case "DEADLINE_EXCEEDED":
		return llm.KindTimeout, true
	case "INVALID_ARGUMENT", "FAILED_PRECONDITION", "OUT_OF_RANGE":
		return refusedRequest(message, "token count", "exceeds the maximum number of tokens")
	case "UNAUTHENTICATED", "PERMISSION_DENIED":
		return llm.KindAuth, true
	case "NOT_FOUND":
		return llm.KindNotFound, true
	case "ABORTED", "ALREADY_EXISTS":
		return llm.KindConflict, true
	case "CANCELLED":
		return llm.KindUnknown, true // not the caller's: the chain decides about its own context
	}
	return llm.KindUnknown, false
}

// bedrockKind maps a Bedrock exception name (x-amzn-ErrorType, with or
// without its ":http://..." suffix, or an event stream's lowerCamel
// :exception-type) onto a Kind; ok is false for one it
// does not know (classified by status).
func bedrockKind(exception, message string) (llm.Kind, bool) {
	if i := strings.IndexByte(exception, ':'); i >= 0 {
		exception = exception[:i]
	}
	if exception != "" && exception[0] >= 'a' && exception[0] <= 'z' {
		// In an event stream the names are lowerCamel (throttlingException).
		exception = string(exception[0]-'a'+'A') + exception[1:]
	}
	switch exception {
	case "ThrottlingException", "TooManyRequestsException":
		return llm.KindRateLimited, true
	case "ServiceQuotaExceededException":
		return llm.KindQuota, true
	case "ServiceUnavailableException", "ModelNotReadyException":
		return llm.KindOverloaded, true
	case "InternalServerException", "ModelErrorException", "ModelStreamErrorException":
		return llm.KindServer, true
	case "ModelTimeoutException":
		return llm.KindTimeout, true
	case "ValidationException":
		return refusedRequest(message, "too long", "input is too long")
	case "AccessDeniedException", "UnrecognizedClientException", "InvalidSignatureException", "ExpiredTokenException":
		return llm.KindAuth, true
	case "ResourceNotFoundException":
		return llm.KindNotFound, true
	case "ConflictException":
		return llm.KindConflict, true
	}
	return llm.KindUnknown, false
}

// refusedRequest classifies a request the vendor refused: KindContextLength
// when msg says, in any case, one of tooLong (the prompt did not fit),
// KindBadRequest otherwise.
func refusedRequest(msg string, tooLong ...string) (llm.Kind, bool) {
	m := strings.ToLower(msg)
	for _, phrase := range tooLong {
		if strings.Contains(m, phrase) {
			return llm.KindContextLength, true
		}
	}
	return llm.KindBadRequest, true
}
