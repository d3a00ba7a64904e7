package anthropic

import (
	"encoding/json"
	"errors"

	"github.com/backstop-llm/backstop/internal/classify"
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

// parseError turns an error reply into an *llm.Error, the key redacted. It
// never fails: a body it cannot read is classified by status and quoted.
func (p *Provider) parseError(r *wire.Reply) *llm.Error {
	var b errorBody
	var f *llm.Error
	var msg string
	switch err := json.Unmarshal(r.Body, &b); {
	case err != nil:
		f = p.ep.Malformed(r, err)
	case b.Error == nil:
		f = p.ep.Malformed(r, errors.New(`no "error" object`))
	default:
		e := b.Error
		msg = e.Message
		f = p.ep.Failure(r, 0)
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
	if f.Code == "" {
		f.Code = classify.SpendLimit(r.Body)
	}
	// One table for every adapter of Anthropic's models (classify.Classify).
	f.Kind = classify.VendorAnthropic.Kind(r.Status, f.Type, f.Code, msg, r.Body)
	return p.ep.Redact(f)
}
