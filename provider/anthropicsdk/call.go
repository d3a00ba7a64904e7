package anthropicsdk

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/backstop-llm/backstop/internal/classify"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/wire"
)

// call is the state of one Complete or Stream: the tool-call ids it
// translated, and its Exchange, the innermost layer under the SDK, which
// holds the attempt to one request to the configured origin, caps what it
// reads, and learns every credential the request carries, to redact it.
type call struct {
	p   *Provider
	ids wire.ToolIDs
	// calls names the answer's tool calls (see wire.CallIDs); params
	// sets it.
	calls wire.CallIDs
	x     *wire.Exchange
}

// newCall starts a call; stream says it asks for an event stream.
func (p *Provider) newCall(stream bool) *call {
	return &call{p: p, ids: wire.ToolIDs{Valid: validToolID, Prefix: "toolu_"}, x: p.ep.NewExchange(stream, false)}
}

// validToolID reports whether the Messages API takes id as a tool_use id
// (^[a-zA-Z0-9_-]+$, at most 64 bytes), as the native adapter judges it.
func validToolID(id string) bool { return wire.IDChars(id, 64) }

// received returns when the response arrived (now when none did).
func (c *call) received() time.Time { return c.x.Received() }

// observe is the innermost middleware of every request the provider sends
// (it runs after the client's own, Bedrock's signing and Vertex's rewriting
// included, right before the HTTP client). It refuses a request that shows
// another region than Config.Region, then passes the request through the
// call's Exchange; a 2xx JSON body not declared JSON is declared so, for
// the SDK to decode it as the native adapter would.
func (c *call) observe(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	if sent := c.p.sentRegion(r); sent != "" && !strings.EqualFold(sent, c.p.region) {
		c.x.Fail(&llm.Error{Provider: c.p.ep.Provider, Kind: llm.KindNotFound, Code: "region",
			Message: fmt.Sprintf("the client sends to region %q, but Config.Region is %q; the request was not sent: build the client for the region Config.Region names, or correct Config.Region", sent, c.p.region)})
		return nil, wire.ErrRefused
	}
	res, err := c.x.Middleware(r, next)
	if err != nil || res == nil {
		return res, err
	}
	if body := c.x.Body(); body != nil && res.StatusCode >= 200 && res.StatusCode <= 299 && !isJSON(res.Header) && json.Valid(body) {
		// The SDK decodes only a body declared JSON; the native adapter
		// reads any 2xx body as the answer it should be.
		res.Header = res.Header.Clone()
		res.Header.Set("Content-Type", "application/json")
	}
	return res, nil
}

// refusal returns what the Exchange refused or cut, nil when nothing: the
// error the attempt returns, whatever the SDK made of it, with the request
// id of any platform.
func (c *call) refusal() *llm.Error {
	f := c.x.Failure()
	if f != nil && f.RequestID == "" {
		if res := c.x.Response(); res != nil {
			f.RequestID = requestID(res.Header)
			c.x.Redact(f)
		}
	}
	return f
}

// redact removes every secret from f and returns it.
func (c *call) redact(f *llm.Error) *llm.Error { return c.x.Redact(f) }

// clean removes every secret from the metadata of res and returns it.
func (c *call) clean(res *llm.Response) *llm.Response { return c.x.Clean(res) }

// detail returns the provider's own message for Error.Detail: cut to 512
// bytes, every secret redacted.
func (c *call) detail(msg string) string { return c.x.Detail(msg) }

// reply returns the status, headers, body and arrival of the response for
// the wire helpers: res's status and headers when res is not nil (the
// response as the SDK handed it back), the Exchange's response's otherwise.
func (c *call) reply(res *http.Response) *wire.Reply {
	r := c.x.Reply()
	if res != nil {
		r.Status, r.Header = res.StatusCode, res.Header
		if r.Header == nil {
			r.Header = http.Header{}
		}
	}
	return r
}

// panicked is the error for a panic of the SDK or of the client's
// middleware: KindUnknown, the panic value (which may quote anything) in
// Detail.
func (c *call) panicked(v any) *llm.Error {
	f := &llm.Error{Provider: c.p.ep.Provider, Kind: llm.KindUnknown,
		Message: "the Anthropic SDK (or the client's middleware) panicked; the panic value is in Detail",
		Detail:  c.detail(fmt.Sprint(v))}
	if res := c.x.Response(); res != nil {
		f.Status = res.StatusCode
		f.RequestID = requestID(res.Header)
	}
	return c.redact(f)
}

// transportError completes f for err, a failure of the exchange (the HTTP
// client's, or reading the body): a failure of the network (a reset, a
// timeout, a body cut short) has its kind (f's when it has none) and its
// text in the Message after what; any other (an error the SDK, Bedrock's
// event-stream decoder or a middleware formatted, which may quote what the
// server sent) keeps f's kind and is opaque, its text in Detail.
func (c *call) transportError(f *llm.Error, what string, err error) *llm.Error {
	if kind := llm.KindOf(err); kind != llm.KindUnknown {
		f.Kind, f.Err = kind, err
		if what != "" {
			f.Message = what + ": " + err.Error()
		}
		return f
	}
	f.Err = wire.Opaque(err)
	f.Message = cmp.Or(what, "the exchange failed") + " (the SDK's error is in Detail)"
	f.Detail = c.detail(err.Error())
	return f
}

// closeResponse closes the body of the response that arrived, if any: what
// a panic leaves open when it strikes before the SDK handed the response
// on.
func (c *call) closeResponse() {
	if res := c.x.Response(); res != nil && res.Body != nil {
		res.Body.Close()
	}
}

// failure turns an error the SDK returned into an *llm.Error, the secrets
// redacted. raw is the response the SDK handed back, if any. What the
// Exchange refused or cut comes first: the SDK's error is then only what
// it made of the refusal.
func (c *call) failure(ctx context.Context, raw *http.Response, err error) *llm.Error {
	if f := c.refusal(); f != nil {
		return f
	}
	var ae *anthropic.Error
	switch {
	case errors.As(err, &ae):
		h := http.Header{}
		if ae.Response != nil {
			h = ae.Response.Header
		} else if r := c.reply(raw); r.Header != nil {
			h = r.Header
		}
		return c.apiError(ae.StatusCode, h, []byte(ae.RawJSON()))
	case ctx.Err() != nil:
		f := c.p.ep.Failure(c.reply(raw), llm.KindOf(ctx.Err()))
		f.Err = err
		if !errors.Is(err, ctx.Err()) {
			f.Err = errors.Join(ctx.Err(), wire.Opaque(err))
		}
		return c.redact(f)
	case c.x.Response() != nil:
		// A response arrived whole, and the SDK could not decode it.
		f := c.p.ep.Malformed(c.reply(raw), wire.Opaque(err))
		f.Message = "response body is not the expected JSON"
		if len(bytes.TrimSpace(c.x.Body())) == 0 {
			f.Message = "empty response body"
		}
		return c.redact(f)
	case c.x.Sent() > 0:
		// The HTTP client failed: the request may have left.
		return c.redact(c.transportError(&llm.Error{Provider: c.p.ep.Provider, Kind: llm.KindConnection}, "", err))
	}
	// Nothing was sent: the SDK or the client's middleware refused the
	// request (an option that failed, credentials it could not get, a
	// non-streaming request it judges too long).
	msg := "the SDK did not send the request"
	if strings.Contains(err.Error(), "streaming is required") {
		msg += "; use Stream, or give the client option.WithRequestTimeout to allow a long Complete"
	}
	return c.redact(&llm.Error{Provider: c.p.ep.Provider, Kind: llm.KindUnknown, Message: msg,
		Detail: c.detail(err.Error()), Err: wire.Opaque(err)})
}

// errorBody is an error body in any of the shapes the platforms send: the
// Messages API's {"type":"error","error":{"type","message","details"},
// "request_id"}, Bedrock's {"message"} (its type in x-amzn-ErrorType), and
// Google's google.rpc.Status {"error":{"code","message","status"}}.
type errorBody struct {
	Error *struct {
		Type    string          `json:"type"`
		Message string          `json:"message"`
		Status  string          `json:"status"`
		Details json.RawMessage `json:"details"`
	} `json:"error"`
	RequestID string `json:"request_id"`
	// Bedrock
	Message string `json:"message"`
	AWSType string `json:"__type"`
}

// apiError classifies an error reply, as the native adapter's parseError
// does for the Messages API's bodies: classify.Classify with the vendor whose
// shape the body has (Anthropic's on every platform; Bedrock's and
// Google's own for the errors those platforms raise themselves), the
// provider's message in Detail, the spend cap named anywhere in the body as
// the Code, a body that is not the expected JSON quoted.
func (c *call) apiError(status int, h http.Header, body []byte) *llm.Error {
	var b errorBody
	vendor := classify.VendorAnthropic
	var typ, code, msg string
	var malformed error
	switch err := json.Unmarshal(body, &b); {
	case c.p.platform == PlatformBedrock && (h.Get("X-Amzn-Errortype") != "" || err == nil && b.Error == nil && (b.Message != "" || b.AWSType != "")):
		vendor, typ, msg = classify.VendorBedrock, h.Get("X-Amzn-Errortype"), b.Message
		if typ == "" {
			typ = b.AWSType
		}
	case err != nil:
		malformed = err
	case b.Error == nil:
		malformed = errors.New(`no "error" object`)
	case c.p.platform == PlatformVertex && b.Error.Type == "" && b.Error.Status != "":
		vendor, typ, msg = classify.VendorGoogle, b.Error.Status, b.Error.Message
	default:
		typ, msg = b.Error.Type, b.Error.Message
		if d := b.Error.Details; len(d) > 0 && d[0] == '{' {
			var details struct {
				ErrorCode string `json:"error_code"`
			}
			if json.Unmarshal(d, &details) == nil {
				code = details.ErrorCode
			}
		}
		// Bedrock's exceptions in a stream arrive as error events of the
		// Messages API's shape, the exception name as the type.
		// Their names are the event stream's members, in lowerCamelCase
		// (throttlingException), which llm's table knows capitalized.
		if c.p.platform == PlatformBedrock && classify.VendorAnthropic.Kind(0, typ, code, msg, body) == llm.KindUnknown &&
			classify.VendorBedrock.Kind(0, exceptionName(typ), "", msg, nil) != llm.KindUnknown {
			vendor = classify.VendorBedrock
		}
	}
	sentType := typ
	if vendor == classify.VendorBedrock {
		typ = exceptionName(typ)
	}
	if code == "" && vendor == classify.VendorAnthropic {
		code = classify.SpendLimit(body)
	}
	r := &wire.Reply{Status: status, Header: h, Body: body, Received: c.received()}
	f := classify.Classify(c.p.ep.Provider, vendor, classify.Reply{Status: status, Header: h, Type: typ, Code: code,
		Message: msg, Body: body, Received: r.Received})
	f.Type = sentType
	f.Detail = ""
	if msg != "" {
		f.Detail = c.detail(msg)
	}
	if malformed != nil {
		m := c.p.ep.Malformed(r, malformed)
		f.Message, f.Detail, f.Err = m.Message, m.Detail, m.Err
	}
	if f.RequestID == "" {
		f.RequestID = requestID(h)
	}
	if f.RequestID == "" {
		f.RequestID = b.RequestID
	}
	return c.redact(f)
}

// exceptionName returns a Bedrock exception name as its HTTP errors send
// it: capitalized.
func exceptionName(typ string) string {
	if typ != "" && typ[0] >= 'a' && typ[0] <= 'z' {
		return string(typ[0]-'a'+'A') + typ[1:]
	}
	return typ
}

// requestID reads the request id of any platform: request-id (the
// Anthropic API, and Vertex passing it through), x-amzn-requestid
// (Bedrock), x-request-id.
func requestID(h http.Header) string {
	for _, name := range [...]string{"Request-Id", "X-Amzn-Requestid", "X-Request-Id"} {
		if id := h.Get(name); id != "" {
			return id
		}
	}
	return ""
}

// isJSON reports whether h declares a JSON body.
func isJSON(h http.Header) bool {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	return err == nil && mt == "application/json"
}
