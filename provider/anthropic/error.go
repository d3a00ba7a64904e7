package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/wire"
)

// errorBody is the Messages API error body:
// {"type":"error","error":{"type":…,"message":…,"details":…},"request_id":…}.
type errorBody struct {
	Error *struct {
		Type    string          `json:"type"`
		Message string          `json:"message"`
		Details json.RawMessage `json:"details"`
	} `json:"error"`
	RequestID string `json:"request_id"`
}

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
// classified by type, then status (kindOf). TestErrorCodes covers every
// code anthropic-sdk-go v2.15.0 documents.
var codeKinds = map[string]llm.Kind{
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

// parseError turns an error reply into an *llm.Error, the key redacted. It
// never fails: a body it cannot read is classified by status and quoted.
func (p *Provider) parseError(r *wire.Reply) *llm.Error {
	var b errorBody
	var f *llm.Error
	switch err := json.Unmarshal(r.Body, &b); {
	case err != nil:
		f = p.ep.Malformed(r, err)
	case b.Error == nil:
		f = p.ep.Malformed(r, errors.New(`no "error" object`))
	default:
		e := b.Error
		f = p.ep.Failure(r, kindOf(e.Type, e.Message, r.Status))
		f.Type, f.Detail = e.Type, p.ep.Detail(e.Message)
		if f.RequestID == "" {
			f.RequestID = b.RequestID
		}
		if len(e.Details) > 0 {
			var d struct {
				ErrorCode string `json:"error_code"`
			}
			if json.Unmarshal(e.Details, &d) == nil {
				f.Code = d.ErrorCode
			}
		}
	}
	if code := spendLimit(r.Body); code != "" {
		f.Kind = llm.KindQuota
		if f.Code == "" {
			f.Code = code
		}
	} else if k, ok := codeKinds[f.Code]; ok {
		f.Kind = k
	}
	return p.ep.Redact(f)
}

// spendLimit returns the spend cap that body names, or "".
func spendLimit(body []byte) string {
	for _, code := range spendLimits {
		if bytes.Contains(body, []byte(code)) {
			return code
		}
	}
	return ""
}

// kindOf maps an Anthropic error type onto a Kind; types it does not know
// are classified by status.
func kindOf(typ, msg string, status int) llm.Kind {
	switch typ {
	case "invalid_request_error":
		if strings.Contains(strings.ToLower(msg), "prompt is too long") {
			return llm.KindContextLength
		}
		return llm.KindBadRequest
	case "authentication_error", "permission_error":
		return llm.KindAuth
	case "billing_error":
		return llm.KindQuota
	case "not_found_error":
		return llm.KindNotFound
	case "conflict_error", "memory_path_conflict_error":
		return llm.KindConflict
	case "memory_precondition_failed_error":
		return llm.KindBadRequest
	case "request_too_large":
		return llm.KindBadRequest
	case "rate_limit_error":
		return llm.KindRateLimited
	case "api_error":
		return llm.KindServer
	case "timeout_error":
		return llm.KindTimeout
	case "overloaded_error":
		return llm.KindOverloaded
	}
	return wire.StatusKind(status)
}
