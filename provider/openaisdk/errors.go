package openaisdk

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/backstop-llm/backstop/internal/classify"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/openaiwire"
	"github.com/backstop-llm/backstop/provider/internal/wire"
	"github.com/openai/openai-go/v3"
)

// fail turns what a call returned (err, and the response the Exchange
// saw, if one arrived) into an *llm.Error, every credential redacted:
//
//   - what the Exchange refused or cut (a redirect, a body or an event
//     over the cap, a second request) is its Failure, whatever the SDK
//     made of it;
//   - an *openai.Error (a status of 400 or more with an error object) is
//     classified by classify.Classify with the VendorOpenAI table, exactly as
//     the native adapter classifies the same reply;
//   - a status of 400 or more whose body is not an error object (a proxy's
//     HTML page), or a 2xx whose body the SDK could not decode, is
//     classified by status and quotes the start of the body in Detail;
//   - anything else is the transport: KindCanceled or KindTimeout when ctx
//     is done, else llm.KindOf (a net error the request never got past is
//     KindConnection).
func (a *attempt) fail(ctx context.Context, err error) *llm.Error {
	if f := a.x.Failure(); f != nil {
		return f
	}
	rp := a.reply()
	rp.Body = a.x.Body()
	var ae *openai.Error
	if errors.As(err, &ae) && ae != nil {
		r := rp
		r.Status, r.Type, r.Code, r.Message = ae.StatusCode, ae.Type, ae.Code, ae.Message
		if len(r.Body) == 0 {
			r.Body = []byte(ae.RawJSON())
		}
		lenient, ok := errorObject(r.Body)
		if !ok && r.Type == "" && r.Code == "" && r.Message == "" {
			// Not an error object (a proxy's HTML page): classified by
			// status, its start quoted.
			return a.classified(r, `no "error" object`, nil)
		}
		// Numbers as codes, as the native adapter reads them.
		r.Type, r.Code, r.Message = cmp.Or(r.Type, lenient.Type), cmp.Or(r.Code, lenient.Code), cmp.Or(r.Message, lenient.Message)
		return a.classified(r, "", nil)
	}
	if ctx.Err() != nil || a.x.Response() == nil {
		return a.transport(ctx, err)
	}
	// An error object the SDK could not decode, or sent with a 2xx.
	return a.bodyError(rp, "the SDK could not decode it", err)
}

// bodyError classifies r by the error object its body holds; by its
// status when it holds none, why (the adapter's words) saying what was
// wrong and cause (the SDK's error, if any) kept as Err.
func (a *attempt) bodyError(r classify.Reply, why string, cause error) *llm.Error {
	if e, ok := errorObject(r.Body); ok {
		r.Type, r.Code, r.Message = e.Type, e.Code, e.Message
		return a.classified(r, "", nil)
	}
	return a.classified(r, why, cause)
}

// classified is classify.Classify's error for r, with the provider's message
// (cut, redacted) as Detail. A non-empty why means the body was not the
// expected JSON: the message says so in the adapter's words, Detail quotes
// the body instead, and cause, whose text may quote the body, is kept as
// Err behind wire.Opaque.
func (a *attempt) classified(r classify.Reply, why string, cause error) *llm.Error {
	f := classify.Classify(a.p.Name(), classify.VendorOpenAI, r)
	f.Detail = a.x.Detail(r.Message)
	if why != "" {
		if f.Message == "" {
			f.Message = fmt.Sprintf("response body is not the expected JSON (%s)", why)
			if len(bytes.TrimSpace(r.Body)) == 0 {
				f.Message = fmt.Sprintf("empty response body (%s)", why)
			}
		}
		f.Detail = a.quote(r.Body)
		if cause != nil {
			f.Err = wire.Opaque(cause)
		}
	}
	return a.x.Redact(f)
}

// quote returns the start of body for Detail: every credential redacted,
// cut to 512 bytes, as one line.
func (a *attempt) quote(body []byte) string {
	if len(bytes.TrimSpace(body)) == 0 {
		return ""
	}
	const room = 4 << 10 // Detail keeps 512 bytes; this leaves the secrets room
	return strconv.Quote(a.x.Detail(string(body[:min(len(body), room)]))) + fmt.Sprintf(" (%d bytes)", len(body))
}

// transport is the error of a call that got no usable response.
func (a *attempt) transport(ctx context.Context, err error) *llm.Error {
	f := &llm.Error{Provider: a.p.Name(), Err: err}
	if res := a.x.Response(); res != nil {
		rp := a.reply()
		f.Status = rp.Status
		f.RequestID = classify.VendorOpenAI.RequestID(rp.Header)
		f.RateLimit = classify.VendorOpenAI.RateLimit(rp.Header, rp.Received)
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
		// (its configuration, a middleware's error, an Azure identity
		// that could not get a token, whose error may quote what the
		// identity endpoint answered): its text goes to Detail.
		f.Message = fmt.Sprintf("the OpenAI SDK failed the request (%T; its text is in Detail)", err)
		f.Detail, f.Err = a.x.Detail(err.Error()), wire.Opaque(err)
	}
	return a.x.Redact(f)
}

// errorObject reads the top-level "error" of body, an object or a string.
func errorObject(body []byte) (openaiwire.ErrorObject, bool) {
	e, err := openaiwire.ParseError(body)
	return e, err == nil
}

// withheld returns the error for an answer withheld by the content filter
// (finish_reason content_filter) or refused by the model (a refusal text),
// as the native adapter reports them; nil for neither.
func (a *attempt) withheld(r classify.Reply, finishReason, refusal string) *llm.Error {
	f := openaiwire.Withheld(&a.p.ep, func(k llm.Kind) *llm.Error { return a.answerFailure(r, k) }, finishReason, refusal)
	if f == nil {
		return nil
	}
	if refusal != "" && f.Code == "refusal" {
		f.Detail = a.x.Detail(refusal)
	}
	return a.x.Redact(f)
}

// answerFailure starts the error for an answer that arrived but cannot be
// used: the status and what the headers say. The caller redacts it.
func (a *attempt) answerFailure(r classify.Reply, kind llm.Kind) *llm.Error {
	f := classify.Classify(a.p.Name(), classify.VendorOpenAI, r)
	f.Kind = kind
	return f
}

// reply is what an answer is read with: the header and the status of the
// response the Exchange saw (none and 200 when none arrived), and when it
// arrived; no body.
func (a *attempt) reply() classify.Reply {
	r := a.x.Reply()
	rp := classify.Reply{Header: r.Header, Status: r.Status, Received: r.Received}
	if rp.Header == nil {
		rp.Header = http.Header{}
	}
	if a.x.Response() == nil {
		rp.Status = 200
	}
	return rp
}

// withBody is r with body, for classification.
func withBody(r classify.Reply, body []byte) classify.Reply {
	r.Body = body
	return r
}
