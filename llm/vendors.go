package llm

// The vendors' error vocabularies (Vendor.Kind): the tables backstop's
// adapters and any adapter over an official SDK classify with.

import (
	"bytes"
	"strings"
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
var anthropicCodes = map[string]Kind{
	// Billing the API cannot do: never retried, the breaker opens at once.
	"linked_organization_billing_unavailable": KindQuota,
	// An acceleration limit: waiting (Retry-After) lifts it.
	"ramp_limit_exceeded": KindRateLimited,
	// 400s that say the target (its organization, workspace or key), not
	// the request, is wrong: not retried, counted by the breaker, and the
	// next target tried, where a bad request would stop the chain.
	"organization_on_hold":               KindAuth, // disabled for trust and safety
	"organization_not_enrolled_in_beta":  KindAuth,
	"organization_not_eligible":          KindAuth,
	"claude_code_key_creator_not_member": KindAuth, // the key no longer works
	"cmek_key_disabled":                  KindAuth, // the workspace's encryption key
	"cmek_key_network_blocked":           KindAuth,
	"cmek_not_approved":                  KindAuth,
	"user_profile_not_found":             KindNotFound, // an anthropic-user-profile-id header
	// 400s that a second try can get past.
	"request_body_timeout":              KindTimeout, // the body arrived too slowly
	"external_key_validation_timed_out": KindTimeout,
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
func anthropicKind(typ, code, message string, body []byte) (Kind, bool) {
	if SpendLimit(body) != "" || SpendLimit([]byte(code)) != "" {
		return KindQuota, true
	}
	if k, ok := anthropicCodes[code]; ok {
		return k, true
	}
	return anthropicType(typ, message)
}

// anthropicType maps an Anthropic error type onto a Kind; ok is false for
// a type it does not know (classified by status).
func anthropicType(typ, msg string) (Kind, bool) {
	switch typ {
	case "invalid_request_error":
		return refusedRequest(msg, "prompt is too long")
	case "authentication_error", "permission_error":
		return KindAuth, true
	case "billing_error":
		return KindQuota, true
	case "not_found_error":
		return KindNotFound, true
	case "conflict_error", "memory_path_conflict_error":
		return KindConflict, true
	case "memory_precondition_failed_error":
		return KindBadRequest, true
	case "request_too_large":
		return KindBadRequest, true
	case "rate_limit_error":
		return KindRateLimited, true
	case "api_error":
		return KindServer, true
	case "timeout_error":
		return KindTimeout, true
	case "overloaded_error":
		return KindOverloaded, true
	}
	return KindUnknown, false
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
var openaiCodes = map[string]Kind{
	// Spend caps and exhausted credit: waiting does not lift them.
	"insufficient_quota":                KindQuota,
	"billing_hard_limit_reached":        KindQuota,
	"billing_not_active":                KindQuota,
	"credit_balance_exhausted":          KindQuota,
	"usage_limit_exceeded":              KindQuota,
	"project_spend_limit_exceeded":      KindQuota,
	"organization_spend_limit_exceeded": KindQuota,
	"organization_usage_limit_exceeded": KindQuota,
	"session_budget_exceeded":           KindQuota,

	"rate_limit_exceeded":  KindRateLimited,
	"server_overloaded":    KindOverloaded,
	"flex_unavailable":     KindOverloaded, // no flex-tier capacity now
	"request_timeout":      KindTimeout,
	"vector_store_timeout": KindTimeout,

	"context_length_exceeded": KindContextLength,

	// Refusals under a usage policy.
	"content_filter":                 KindContentFilter,
	"content_policy_violation":       KindContentFilter,
	"image_content_policy_violation": KindContentFilter,
	"invalid_prompt":                 KindContentFilter, // "flagged as potentially violating our usage policy"
	"bio_policy":                     KindContentFilter,
	"cyber_policy":                   KindContentFilter,
	"misalignment_policy_violation":  KindContentFilter,

	"invalid_api_key":                      KindAuth,
	"unsupported_country_region_territory": KindAuth,
	"model_not_found":                      KindNotFound,
	"data_residency_mismatch":              KindNotFound, // the project is served at another regional URL

	// The request is wrong wherever it goes.
	"invalid_image":                 KindBadRequest,
	"invalid_image_format":          KindBadRequest,
	"invalid_base64_image":          KindBadRequest,
	"invalid_image_url":             KindBadRequest,
	"image_too_large":               KindBadRequest,
	"image_too_small":               KindBadRequest,
	"image_parse_error":             KindBadRequest,
	"invalid_image_mode":            KindBadRequest,
	"image_file_too_large":          KindBadRequest,
	"unsupported_image_media_type":  KindBadRequest,
	"empty_image_file":              KindBadRequest,
	"failed_to_download_image":      KindBadRequest,
	"image_file_not_found":          KindBadRequest,
	"unsupported_file":              KindBadRequest,
	"invalid_file":                  KindBadRequest,
	"max_output_tokens":             KindBadRequest,
	"executor_version_incompatible": KindBadRequest,
	"active_turn_not_steerable":     KindBadRequest,
}

// openaiKind maps an OpenAI error type and code onto a Kind: a type of
// insufficient_quota is a quota whatever its code (newer accounts show
// other codes under it), then the code when it names a cause
// (openaiCodes); ok is false otherwise (classified by status).
func openaiKind(typ, code string) (Kind, bool) {
	if typ == "insufficient_quota" {
		return KindQuota, true
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
func googleKind(status, message string, body []byte) (Kind, bool) {
	switch status {
	case "RESOURCE_EXHAUSTED":
		if bytes.Contains(body, []byte("google.rpc.RetryInfo")) {
			return KindRateLimited, true
		}
		m := strings.ToLower(message)
		if strings.Contains(m, "billing") || strings.Contains(m, "per day") || bytes.Contains(body, []byte("PerDay")) {
			return KindQuota, true
		}
		return KindRateLimited, true
	case "UNAVAILABLE":
		return KindOverloaded, true
	case "INTERNAL", "UNKNOWN", "DATA_LOSS":
		return KindServer, true
	case "DEADLINE_EXCEEDED":
		return KindTimeout, true
	case "INVALID_ARGUMENT", "FAILED_PRECONDITION", "OUT_OF_RANGE":
		return refusedRequest(message, "token count", "exceeds the maximum number of tokens")
	case "UNAUTHENTICATED", "PERMISSION_DENIED":
		return KindAuth, true
	case "NOT_FOUND":
		return KindNotFound, true
	case "ABORTED", "ALREADY_EXISTS":
		return KindConflict, true
	case "CANCELLED":
		return KindUnknown, true // not the caller's: the chain decides about its own context
	}
	return KindUnknown, false
}

// bedrockKind maps a Bedrock exception name (x-amzn-ErrorType, with or
// without its ":http://..." suffix, or an event stream's lowerCamel
// :exception-type) onto a Kind; ok is false for one it
// does not know (classified by status).
func bedrockKind(exception, message string) (Kind, bool) {
	if i := strings.IndexByte(exception, ':'); i >= 0 {
		exception = exception[:i]
	}
	if exception != "" && exception[0] >= 'a' && exception[0] <= 'z' {
		// In an event stream the names are lowerCamel (throttlingException).
		exception = string(exception[0]-'a'+'A') + exception[1:]
	}
	switch exception {
	case "ThrottlingException", "TooManyRequestsException":
		return KindRateLimited, true
	case "ServiceQuotaExceededException":
		return KindQuota, true
	case "ServiceUnavailableException", "ModelNotReadyException":
		return KindOverloaded, true
	case "InternalServerException", "ModelErrorException", "ModelStreamErrorException":
		return KindServer, true
	case "ModelTimeoutException":
		return KindTimeout, true
	case "ValidationException":
		return refusedRequest(message, "too long", "input is too long")
	case "AccessDeniedException", "UnrecognizedClientException", "InvalidSignatureException", "ExpiredTokenException":
		return KindAuth, true
	case "ResourceNotFoundException":
		return KindNotFound, true
	case "ConflictException":
		return KindConflict, true
	}
	return KindUnknown, false
}

// refusedRequest classifies a request the vendor refused: KindContextLength
// when msg says, in any case, one of tooLong (the prompt did not fit),
// KindBadRequest otherwise.
func refusedRequest(msg string, tooLong ...string) (Kind, bool) {
	m := strings.ToLower(msg)
	for _, phrase := range tooLong {
		if strings.Contains(m, phrase) {
			return KindContextLength, true
		}
	}
	return KindBadRequest, true
}
