package openai

import (
	"encoding/json"
	"errors"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/wire"
)

// apiError is the error object of {"error":{"message","type","param","code"}}.
// Compatible servers vary: type and code may be numbers, and some send
// {"error":"message"}.
type apiError struct {
	Message string `json:"message"`
	Type    text   `json:"type"`
	Code    text   `json:"code"`
}

// text decodes a JSON string, number or boolean as its text; null and
// anything else as "".
type text string

// UnmarshalJSON implements json.Unmarshaler.
func (t *text) UnmarshalJSON(b []byte) error {
	switch {
	case len(b) == 0:
	case b[0] == '"':
		return json.Unmarshal(b, (*string)(t))
	case b[0] == '-' || b[0] >= '0' && b[0] <= '9' || b[0] == 't' || b[0] == 'f':
		*t = text(b)
	}
	return nil
}

// parseError turns an error reply into an *llm.Error, the key redacted. It
// never fails: a body it cannot read is classified by status and quoted.
func (p *Provider) parseError(r *wire.Reply) *llm.Error {
	var b struct {
		Error json.RawMessage `json:"error"`
	}
	var e apiError
	var f *llm.Error
	switch err := json.Unmarshal(r.Body, &b); {
	case err != nil:
		f = p.ep.Malformed(r, err)
	case len(b.Error) > 0 && b.Error[0] == '"':
		_ = json.Unmarshal(b.Error, &e.Message) // valid JSON string: cannot fail
		f = p.ep.Failure(r, wire.StatusKind(r.Status))
		f.Detail = p.ep.Detail(e.Message)
	case len(b.Error) > 0 && b.Error[0] == '{':
		if err := json.Unmarshal(b.Error, &e); err != nil {
			f = p.ep.Malformed(r, err)
			break
		}
		f = p.ep.Failure(r, kindOf(string(e.Type), string(e.Code), r.Status))
		f.Type, f.Code, f.Detail = string(e.Type), string(e.Code), p.ep.Detail(e.Message)
	default:
		f = p.ep.Malformed(r, errors.New(`no "error" object`))
	}
	return p.ep.Redact(f)
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
var codeKinds = map[string]llm.Kind{
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

// kindOf maps an OpenAI error type and code onto a Kind: a type of
// insufficient_quota is a quota whatever its code (newer accounts show
// other codes under it), then the code when it names a cause (codeKinds),
// otherwise the status.
func kindOf(typ, code string, status int) llm.Kind {
	if typ == "insufficient_quota" {
		return llm.KindQuota
	}
	if k, ok := codeKinds[code]; ok {
		return k
	}
	return wire.StatusKind(status)
}
