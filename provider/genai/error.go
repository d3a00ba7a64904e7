package genai

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	gg "google.golang.org/genai"

	"github.com/backstop-llm/backstop/llm"
)

// sdkError turns an error the SDK returned into an *llm.Error, the secrets
// redacted: an APIError (an error status, or an error event in a stream)
// through llm.Classify with Google's vocabulary; anything else by its cause.
func (p *Provider) sdkError(ctx context.Context, err error) *llm.Error {
	var ae gg.APIError
	var aep *gg.APIError
	switch {
	case errors.As(err, &ae):
		return p.apiError(ae)
	case errors.As(err, &aep) && aep != nil:
		return p.apiError(*aep)
	}
	f := &llm.Error{Provider: p.name, Err: err}
	msg := err.Error()
	switch {
	case ctx.Err() != nil:
		// Trust the context over the error it happened to produce: a
		// canceled call is KindCanceled even when it surfaced as a closed
		// connection.
		f.Kind = llm.KindOf(ctx.Err())
	case llm.KindOf(err) != llm.KindUnknown:
		f.Kind = llm.KindOf(err)
	case strings.HasPrefix(msg, "doRequest:"):
		f.Kind = llm.KindConnection // the exchange failed in transit
	case strings.HasPrefix(msg, "deserializeUnaryResponse:"), strings.HasPrefix(msg, "mapToStruct:"),
		strings.HasPrefix(msg, "iterateResponseStream:"):
		// The SDK quotes the body it could not read: keep it in Detail,
		// out of Error().
		f.Kind, f.Err = llm.KindServer, nil
		f.Message = "response body is not the expected JSON"
		f.Detail = p.detail(msg)
	default:
		// The SDK refused the request before sending it, or failed in a
		// way it does not name.
		f.Err = nil
		f.Message = "the genai SDK failed"
		f.Detail = p.detail(msg)
	}
	return p.redact(f)
}

// apiError classifies an APIError: its code (the HTTP status), its status
// name (RESOURCE_EXHAUSTED, …) as Type, its message as Detail, and its
// details re-marshalled as a google.rpc.Status body, from which Classify
// reads RetryInfo's retryDelay.
func (p *Provider) apiError(ae gg.APIError) *llm.Error {
	typ := ae.Status
	plain := !statusName(typ) // the SDK puts "502 Bad Gateway" here for a body that is not JSON
	if plain {
		typ = ""
	}
	var body []byte
	if len(ae.Details) > 0 {
		body, _ = json.Marshal(map[string]any{"error": map[string]any{
			"code": ae.Code, "status": typ, "details": ae.Details}})
	}
	f := llm.Classify(p.name, llm.VendorGoogle, llm.Reply{Status: ae.Code, Type: typ, Message: ae.Message, Body: body})
	f.Detail = p.detail(ae.Message)
	if plain && ae.Message != "" {
		f.Message = "error body is not a google.rpc.Status"
	}
	return p.redact(f)
}

// statusName reports whether s looks like a google.rpc.Code name:
// upper-case letters and underscores.
func statusName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'A' && c <= 'Z' || c == '_') {
			return false
		}
	}
	return true
}

// redact removes every secret from f's text and returns f.
func (p *Provider) redact(f *llm.Error) *llm.Error {
	for i := range p.secrets {
		f = p.secrets[i].Redact(f)
	}
	return f
}

// detail returns s for llm.Error.Detail: cut to 512 bytes, secrets
// redacted.
func (p *Provider) detail(s string) string {
	s = p.secrets[0].Detail(s)
	for i := 1; i < len(p.secrets); i++ {
		s = p.secrets[i].Redact(&llm.Error{Detail: s}).Detail
	}
	return s
}

// clean removes every secret from res's metadata and returns res.
func (p *Provider) clean(res *llm.Response) *llm.Response {
	for i := range p.secrets {
		res = p.secrets[i].Clean(res)
	}
	return res
}
