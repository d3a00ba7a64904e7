package genai

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	gg "google.golang.org/genai"

	"github.com/backstop-llm/backstop/internal/classify"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/wire"
)

// sdkError turns an error the SDK returned for attempt a into the
// attempt's *llm.Error, every secret the attempt knows of redacted: what
// the Exchange refused or cut (a redirect, a body over the cap, a second
// request) first, whatever the SDK made of it; then a failed read the SDK
// was not shown; an APIError (an error status, or an error event in a
// stream) through classify.Classify with Google's vocabulary; anything else by
// its cause. The SDK's text, which may quote the response body and so the
// prompt, goes only to Detail (cut and redacted); Err is the SDK's error
// made opaque (wire.Opaque), so that Error() never shows it.
func (p *Provider) sdkError(ctx context.Context, a *attempt, err error) *llm.Error {
	if f := p.refused(a); f != nil {
		return f
	}
	if rerr := a.readError(); rerr != nil {
		return p.readFailure(ctx, a, rerr)
	}
	var ae gg.APIError
	var aep *gg.APIError
	switch {
	case errors.As(err, &ae):
		return p.apiError(a, ae)
	case errors.As(err, &aep) && aep != nil:
		return p.apiError(a, *aep)
	}
	f := &llm.Error{Provider: p.name}
	if a.x.Response() != nil {
		f = p.ep.Failure(a.x.Reply(), llm.KindUnknown)
	}
	msg := err.Error()
	f.Err = wire.Opaque(err)
	f.Detail = a.x.Detail(msg)
	switch {
	case ctx.Err() != nil:
		// Trust the context over the error it happened to produce: a
		// canceled call is KindCanceled even when it surfaced as a closed
		// connection.
		f.Kind = llm.KindOf(ctx.Err())
		f.Message = "the request was not answered: " + ctx.Err().Error()
	case strings.HasPrefix(msg, "doRequest:"):
		// The exchange failed in transit.
		if f.Kind = llm.KindOf(err); f.Kind == llm.KindUnknown {
			f.Kind = llm.KindConnection
		}
		f.Message = "sending the request failed"
	case strings.HasPrefix(msg, "deserializeUnaryResponse:"), strings.HasPrefix(msg, "mapToStruct:"),
		strings.HasPrefix(msg, "iterateResponseStream:"):
		// The SDK quotes the body it could not read.
		f.Kind = llm.KindServer
		f.Message = "response body is not the expected JSON"
	case llm.KindOf(err) != llm.KindUnknown:
		f.Kind = llm.KindOf(err)
		f.Message = "the genai SDK failed"
	default:
		// The SDK refused the request before sending it, or failed in a
		// way it does not name.
		f.Message = "the genai SDK failed"
	}
	return p.finish(a, f)
}

// apiError classifies an APIError of attempt a: its code (the HTTP
// status), its status name (RESOURCE_EXHAUSTED, …) as Type, its message as
// Detail, the response's headers (the request id, Retry-After) and its
// body as a google.rpc.Status, from which Classify reads RetryInfo's
// retryDelay: the error body as it arrived, or, for an error event in a
// stream, the event's details re-marshalled.
func (p *Provider) apiError(a *attempt, ae gg.APIError) *llm.Error {
	typ := ae.Status
	plain := !statusName(typ) // the SDK puts "502 Bad Gateway" here for a body that is not JSON
	if plain {
		typ = ""
	}
	rep := a.x.Reply()
	status := ae.Code
	if status == 0 && rep.Status >= 300 {
		status = rep.Status
	}
	var body []byte
	switch {
	case rep.Status >= 300 && len(rep.Body) > 0:
		body = rep.Body
	case len(ae.Details) > 0:
		body, _ = json.Marshal(map[string]any{"error": map[string]any{
			"code": ae.Code, "status": typ, "details": ae.Details}})
	}
	f := classify.Classify(p.name, classify.VendorGoogle, classify.Reply{Status: status, Header: rep.Header, Type: typ,
		Message: ae.Message, Body: body, Received: rep.Received})
	f.Detail = a.x.Detail(ae.Message)
	if plain && ae.Message != "" {
		f.Message = "error body is not a google.rpc.Status"
	}
	return p.finish(a, f)
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

// redact removes every secret the provider was given from f's text and
// returns f: for errors raised before an attempt starts (a request it
// cannot translate).
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
