package openaiwire

import (
	"encoding/json"
	"errors"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/wire"
)

// ErrorObject is the top-level "error" of an error reply,
// {"error":{"message","type","param","code"}}. Compatible servers vary:
// type and code may be numbers, and some send {"error":"message"}, a
// message alone (no Type or Code: the status classifies it).
type ErrorObject struct {
	Type, Code, Message string
}

// apiError is the error object as it is decoded (its name stands in the
// decoder's errors, which a malformed reply quotes).
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

// ParseError reads the error object of body. It fails with what the
// decoder said when body is not JSON or "error" is an object of another
// shape, and with `no "error" object` when "error" is neither an object
// nor a string.
func ParseError(body []byte) (ErrorObject, error) {
	var b struct {
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return ErrorObject{}, err
	}
	switch e := b.Error; {
	case len(e) > 0 && e[0] == '"':
		var msg string
		_ = json.Unmarshal(e, &msg) // valid JSON string: cannot fail
		return ErrorObject{Message: msg}, nil
	case len(e) > 0 && e[0] == '{':
		var a apiError
		if err := json.Unmarshal(e, &a); err != nil {
			return ErrorObject{}, err
		}
		return ErrorObject{Type: string(a.Type), Code: string(a.Code), Message: a.Message}, nil
	}
	return ErrorObject{}, errors.New(`no "error" object`)
}

// Withheld returns the error for an answer withheld by the content filter
// (finish_reason content_filter) or refused by the model (a refusal text),
// the key redacted by ep; nil for neither. start makes the error of kind
// llm.KindContentFilter for the reply at hand.
func Withheld(ep *wire.Endpoint, start func(llm.Kind) *llm.Error, finishReason, refusal string) *llm.Error {
	var f *llm.Error
	switch {
	case finishReason == "content_filter":
		f = start(llm.KindContentFilter)
		f.Code = finishReason
		f.Message = "the answer was withheld by the content filter (finish_reason content_filter)"
	case refusal != "":
		f = start(llm.KindContentFilter)
		f.Code = "refusal"
		f.Message = "the model refused to answer"
		f.Detail = ep.Detail(refusal)
	default:
		return nil
	}
	return ep.Redact(f)
}
