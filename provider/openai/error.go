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
		// One table for every adapter of OpenAI's models (llm.Classify).
		f = p.ep.Failure(r, llm.VendorOpenAI.Kind(r.Status, string(e.Type), string(e.Code), e.Message, nil))
		f.Type, f.Code, f.Detail = string(e.Type), string(e.Code), p.ep.Detail(e.Message)
	default:
		f = p.ep.Malformed(r, errors.New(`no "error" object`))
	}
	return p.ep.Redact(f)
}
