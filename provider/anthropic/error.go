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

// spendLimit marks a spend cap wherever it appears in an error body (seen as
// error.details.error_code): a 429 that waiting does not lift.
const spendLimit = "enforced_spend_limit_reached"

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
	if bytes.Contains(r.Body, []byte(spendLimit)) {
		f.Kind = llm.KindQuota
		if f.Code == "" {
			f.Code = spendLimit
		}
	}
	return p.ep.Redact(f)
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
	case "conflict_error":
		return llm.KindConflict
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
