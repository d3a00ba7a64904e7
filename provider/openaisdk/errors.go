package openaisdk

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/openaiwire"
	"github.com/backstop-llm/backstop/provider/internal/wire"
	"github.com/openai/openai-go/v3"
)

// maxErrorBody caps how much of an error body is read for classification.
const maxErrorBody = 1 << 20

// fail turns what a call returned (err, and raw, the response if one
// arrived) into an *llm.Error, the key redacted:
//
//   - an *openai.Error (a status of 400 or more with an error object) is
//     classified by llm.Classify with the VendorOpenAI table, exactly as
//     the native adapter classifies the same reply;
//   - a status of 400 or more whose body is not an error object (a proxy's
//     HTML page), or a 2xx whose body the SDK could not decode, is
//     classified by status and quotes the start of the body;
//   - anything else is the transport: KindCanceled or KindTimeout when ctx
//     is done, else llm.KindOf (a net error the request never got past is
//     KindConnection).
func (p *Provider) fail(ctx context.Context, err error, raw *http.Response, received time.Time) *llm.Error {
	var ae *openai.Error
	if errors.As(err, &ae) && ae != nil {
		resp := ae.Response
		if resp == nil {
			resp = raw
		}
		r := llm.Reply{Status: ae.StatusCode, Type: ae.Type, Code: ae.Code, Message: ae.Message, Received: received}
		if resp != nil {
			r.Header = resp.Header
			r.Body = body(resp)
		}
		if len(r.Body) == 0 {
			r.Body = []byte(ae.RawJSON())
		}
		lenient, ok := errorObject(r.Body)
		if !ok && r.Type == "" && r.Code == "" && r.Message == "" {
			// Not an error object (a proxy's HTML page): classified by
			// status, its start quoted.
			return p.classified(r, errors.New(`no "error" object`))
		}
		// Numbers as codes, as the native adapter reads them.
		r.Type, r.Code, r.Message = cmp.Or(r.Type, lenient.Type), cmp.Or(r.Code, lenient.Code), cmp.Or(r.Message, lenient.Message)
		return p.classified(r, nil)
	}
	if ctx.Err() != nil {
		return p.transport(ctx, err, raw, received)
	}
	if raw != nil && raw.StatusCode != 0 {
		// An error object the SDK could not decode, or sent with a 2xx.
		return p.bodyError(llm.Reply{Status: raw.StatusCode, Header: raw.Header, Body: body(raw), Received: received}, err)
	}
	return p.transport(ctx, err, raw, received)
}

// bodyError classifies r by the error object its body holds; by its
// status when it holds none, cause saying what was wrong.
func (p *Provider) bodyError(r llm.Reply, cause error) *llm.Error {
	if e, ok := errorObject(r.Body); ok {
		r.Type, r.Code, r.Message = e.Type, e.Code, e.Message
		return p.classified(r, nil)
	}
	return p.classified(r, cause)
}

// classified is llm.Classify's error for r, with the provider's message
// (cut, redacted) as Detail; a non-nil cause means the body was not the
// expected JSON, quoted instead.
func (p *Provider) classified(r llm.Reply, cause error) *llm.Error {
	f := llm.Classify(p.Name(), llm.VendorOpenAI, r)
	f.Detail = p.ep.Detail(r.Message)
	if r.Status >= 300 && r.Status <= 399 { // a redirect not followed: the URL is wrong
		f.Kind = llm.KindNotFound
		f.Message = "the server answered with a redirect (HTTP " + fmt.Sprint(r.Status) + "), which is not followed"
		if loc := r.Header.Get("Location"); loc != "" {
			if u, err := url.Parse(loc); err == nil {
				f.Message += " to " + u.Redacted()
			}
		}
	}
	if cause != nil {
		m := p.ep.Malformed(&wire.Reply{Status: r.Status, Header: r.Header, Body: r.Body, Received: r.Received}, cause)
		if len(bytes.TrimSpace(r.Body)) == 0 && r.Status >= 200 && r.Status <= 299 {
			// The SDK read the body and kept only its complaint.
			m.Message = fmt.Sprintf("the response body could not be decoded (%v)", cause)
		}
		if f.Message == "" {
			f.Message = m.Message
		}
		f.Detail, f.Err = m.Detail, cause
	}
	return p.ep.Redact(f)
}

// transport is the error of a call that got no usable response.
func (p *Provider) transport(ctx context.Context, err error, raw *http.Response, received time.Time) *llm.Error {
	f := &llm.Error{Provider: p.Name(), Err: err}
	if raw != nil {
		f.Status = raw.StatusCode
		f.RequestID = llm.VendorOpenAI.RequestID(raw.Header)
		f.RateLimit = llm.VendorOpenAI.RateLimit(raw.Header, received)
	}
	var ue *url.Error
	switch {
	case ctx.Err() != nil:
		f.Kind = llm.KindOf(ctx.Err())
		if !errors.Is(err, ctx.Err()) {
			f.Err = errors.Join(ctx.Err(), err)
		}
	default:
		f.Kind = llm.KindOf(err)
		if f.Kind == llm.KindUnknown && errors.As(err, &ue) {
			f.Kind = llm.KindConnection // the exchange failed in transit
		}
	}
	if f.Kind == llm.KindUnknown {
		// Neither the network nor the provider: the SDK refused the request
		// (its configuration, a middleware's error).
		f.Message = "the OpenAI SDK failed the request: " + err.Error()
	}
	return p.ep.Redact(f)
}

// body reads the body of an error response (the SDK leaves it readable
// after reading it) and puts it back.
func body(resp *http.Response) []byte {
	if resp == nil || resp.Body == nil || resp.Body == http.NoBody {
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return b
}

// errorObject reads the top-level "error" of body, an object or a string.
func errorObject(body []byte) (openaiwire.ErrorObject, bool) {
	e, err := openaiwire.ParseError(body)
	return e, err == nil
}

// withheld returns the error for an answer withheld by the content filter
// (finish_reason content_filter) or refused by the model (a refusal text),
// as the native adapter reports them; nil for neither.
func (p *Provider) withheld(r llm.Reply, finishReason, refusal string) *llm.Error {
	return openaiwire.Withheld(&p.ep, func(k llm.Kind) *llm.Error { return p.answerFailure(r, k) }, finishReason, refusal)
}

// answerFailure starts the error for an answer that arrived but cannot be
// used: the status and what the headers say.
func (p *Provider) answerFailure(r llm.Reply, kind llm.Kind) *llm.Error {
	f := llm.Classify(p.Name(), llm.VendorOpenAI, r)
	f.Kind = kind
	return f
}

// replyOf is what an answer is read with: the header and the status of
// the response that carried it (none and 200 when the SDK handed back
// none), and when it arrived; no body.
func replyOf(raw *http.Response, received time.Time) llm.Reply {
	r := llm.Reply{Header: http.Header{}, Status: 200, Received: received}
	if raw != nil {
		r.Header, r.Status = raw.Header, raw.StatusCode
	}
	return r
}

// withBody is r with body, for classification.
func withBody(r llm.Reply, body []byte) llm.Reply {
	r.Body = body
	return r
}
