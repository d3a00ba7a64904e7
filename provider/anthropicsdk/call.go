package anthropicsdk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/wire"
)

// call is the state of one Complete or Stream: the tool-call ids it
// translated, the secrets its request carried, and what its innermost
// middleware (observe) saw of the exchange.
type call struct {
	p      *Provider
	stream bool
	ids    wire.ToolIDs
	// calls names the answer's tool calls (see wire.CallIDs); params
	// sets it.
	calls wire.CallIDs
	// eps redact the secrets: the provider's endpoint (Options.APIKey)
	// and one per other key or token the request carried.
	eps []*wire.Endpoint
	// sent counts the requests that reached the HTTP client: exactly one
	// for every call that is sent.
	sent int
	// resp is the response the HTTP client returned, at when it arrived.
	resp *http.Response
	at   time.Time
	// body is the response body observe read (nil for a streamed 2xx).
	body []byte
	// epsBuf holds eps without an allocation of its own.
	epsBuf [2]*wire.Endpoint
}

// received returns when the response arrived, as the call recorded it.
func (c *call) received() time.Time {
	if c.at.IsZero() {
		return time.Now()
	}
	return c.at
}

func (p *Provider) newCall(stream bool) *call {
	c := &call{p: p, stream: stream, ids: wire.ToolIDs{Valid: validToolID, Prefix: "toolu_"}}
	c.eps = append(c.epsBuf[:0], &p.ep)
	return c
}

// validToolID reports whether the Messages API takes id as a tool_use id
// (^[a-zA-Z0-9_-]+$, at most 64 bytes), as the native adapter judges it.
func validToolID(id string) bool { return wire.IDChars(id, 64) }

// bodyError is a response body observe could not read whole: cut short
// (Err), or longer than Options.MaxResponseBytes (tooLarge).
type bodyError struct {
	err      error
	tooLarge bool
}

func (e *bodyError) Error() string {
	if e.tooLarge {
		return "response body too large"
	}
	return "reading the response body: " + e.err.Error()
}

func (e *bodyError) Unwrap() error { return e.err }

// observe is the innermost middleware of every request the provider sends
// (it runs after the client's own, Bedrock's signing and Vertex's rewriting
// included, right before the HTTP client). It learns the secrets the
// request carries, counts the request, and reads a response body that is
// not a streamed answer under the cap, so that an unreadable body can be
// quoted and classified.
func (c *call) observe(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	c.capture(r.Header)
	c.sent++
	res, err := next(r)
	c.at = time.Now()
	if err != nil || res == nil {
		return res, err
	}
	c.resp = res
	if res.Request != nil && res.Request != r {
		// The request the transport sent, which can carry what the HTTP
		// client's own RoundTripper added (Vertex's OAuth token).
		c.capture(res.Request.Header)
	}
	if res.StatusCode >= 300 && res.StatusCode <= 399 {
		// A redirect the HTTP client did not follow (its CheckRedirect
		// refused it): the endpoint is not where the client says.
		io.Copy(io.Discard, io.LimitReader(res.Body, 4<<10))
		res.Body.Close()
		return nil, &redirectError{status: res.StatusCode, location: res.Header.Get("Location")}
	}
	if c.stream && res.StatusCode >= 200 && res.StatusCode <= 299 && !isJSON(res.Header) {
		return res, nil
	}
	body, err := wire.ReadCapped(res.Body, res.ContentLength, c.p.ep.MaxBytes)
	res.Body.Close()
	if err != nil {
		return nil, &bodyError{err: err, tooLarge: err == wire.ErrTooLarge}
	}
	c.body = body
	res.Body = io.NopCloser(bytes.NewReader(body))
	if res.StatusCode >= 200 && res.StatusCode <= 299 && !isJSON(res.Header) && json.Valid(body) {
		// The SDK decodes only a body declared JSON; the native adapter
		// reads any 2xx body as the answer it should be.
		res.Header = res.Header.Clone()
		res.Header.Set("Content-Type", "application/json")
	}
	return res, nil
}

// redirectError is a 3xx that came back to observe.
type redirectError struct {
	status   int
	location string
}

func (e *redirectError) Error() string {
	return fmt.Sprintf("the server answered %d, pointing to %q", e.status, e.location)
}

// capture records the key or token h carries, to redact it.
func (c *call) capture(h http.Header) {
	if v := h.Get("X-Api-Key"); v != "" {
		c.secret(v)
	}
	if v := h.Get("Authorization"); len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
		c.secret(strings.TrimSpace(v[7:]))
	}
	if v := h.Get("X-Amz-Security-Token"); v != "" {
		c.secret(v)
	}
}

// secret adds s to the secrets redacted, once. The provider remembers the
// last one it saw, so that a client sending the same key every time costs
// no allocation per call.
func (c *call) secret(s string) {
	for _, ep := range c.eps {
		if ep.Secret == s {
			return
		}
	}
	if ep := c.p.seen.Load(); ep != nil && ep.Secret == s {
		c.eps = append(c.eps, ep)
		return
	}
	ep := c.p.ep
	ep.Secret = s
	c.p.seen.Store(&ep)
	c.eps = append(c.eps, &ep)
}

// redact removes every secret from f and returns it.
func (c *call) redact(f *llm.Error) *llm.Error {
	for _, ep := range c.eps {
		ep.Redact(f)
	}
	return f
}

// clean removes every secret from the metadata of res and returns it.
func (c *call) clean(res *llm.Response) *llm.Response {
	for _, ep := range c.eps {
		ep.Clean(res)
	}
	return res
}

// detail returns the provider's own message for Error.Detail: cut to 512
// bytes, the secrets redacted.
func (c *call) detail(msg string) string {
	return c.eps[len(c.eps)-1].Detail(msg)
}

// reply returns the status, headers and arrival of res for the wire
// helpers; body is what observe read.
func (c *call) reply(res *http.Response) *wire.Reply {
	r := &wire.Reply{Received: c.received(), Body: c.body}
	if res == nil {
		res = c.resp
	}
	if res != nil {
		r.Status, r.Header = res.StatusCode, res.Header
	}
	if r.Header == nil {
		r.Header = http.Header{}
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
	if c.resp != nil {
		f.Status = c.resp.StatusCode
		f.RequestID = requestID(c.resp.Header)
	}
	return c.redact(f)
}

// failure turns an error the SDK returned into an *llm.Error, the secrets
// redacted. raw is the response the SDK handed back, if any.
func (c *call) failure(ctx context.Context, raw *http.Response, err error) *llm.Error {
	var ae *anthropic.Error
	var be *bodyError
	var re *redirectError
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
			f.Err = errors.Join(ctx.Err(), err)
		}
		return c.redact(f)
	case errors.As(err, &re):
		f := c.p.ep.Failure(c.reply(raw), llm.KindNotFound)
		f.Code = "redirect"
		f.Message = fmt.Sprintf("the server answered %d %s, pointing to %q; the client did not follow it: give the client the endpoint the platform documents",
			re.status, http.StatusText(re.status), re.location)
		return c.redact(f)
	case errors.As(err, &be):
		r := c.reply(raw)
		if be.tooLarge {
			f := c.p.ep.Failure(r, wire.StatusKind(r.Status))
			f.Message = fmt.Sprintf("response body is larger than %d bytes; raise MaxResponseBytes if answers are meant to be this large", c.p.ep.MaxBytes)
			return c.redact(f)
		}
		// A body cut short: the status still says what the server meant,
		// unless it was a success, whose answer is now lost in transit.
		kind := wire.StatusKind(r.Status)
		if r.Status >= 200 && r.Status <= 299 {
			if kind = llm.KindOf(be.err); kind == llm.KindUnknown {
				kind = llm.KindConnection
			}
		}
		f := c.p.ep.Failure(r, kind)
		f.Err = be.err
		f.Message = "reading the response body: " + be.err.Error()
		return c.redact(f)
	case c.resp != nil:
		// A response arrived whole, and the SDK could not decode it.
		return c.redact(c.p.ep.Malformed(c.reply(raw), err))
	case c.sent > 0:
		// The HTTP client failed: the request may have left.
		kind := llm.KindOf(err)
		if kind == llm.KindUnknown {
			kind = llm.KindConnection
		}
		return c.redact(&llm.Error{Provider: c.p.ep.Provider, Kind: kind, Err: err})
	}
	// Nothing was sent: the SDK or the client's middleware refused the
	// request (an option that failed, credentials it could not get, a
	// non-streaming request it judges too long).
	msg := "the SDK did not send the request: " + err.Error()
	if strings.Contains(err.Error(), "streaming is required") {
		msg += "; use Stream, or give the client option.WithRequestTimeout to allow a long Complete"
	}
	return c.redact(&llm.Error{Provider: c.p.ep.Provider, Kind: llm.KindUnknown, Message: msg, Err: err})
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
// does for the Messages API's bodies: llm.Classify with the vendor whose
// shape the body has (Anthropic's on every platform; Bedrock's and
// Google's own for the errors those platforms raise themselves), the
// provider's message in Detail, the spend cap named anywhere in the body as
// the Code, a body that is not the expected JSON quoted.
func (c *call) apiError(status int, h http.Header, body []byte) *llm.Error {
	var b errorBody
	vendor := llm.VendorAnthropic
	var typ, code, msg string
	var malformed error
	switch err := json.Unmarshal(body, &b); {
	case c.p.platform == PlatformBedrock && (h.Get("X-Amzn-Errortype") != "" || err == nil && b.Error == nil && (b.Message != "" || b.AWSType != "")):
		vendor, typ, msg = llm.VendorBedrock, h.Get("X-Amzn-Errortype"), b.Message
		if typ == "" {
			typ = b.AWSType
		}
	case err != nil:
		malformed = err
	case b.Error == nil:
		malformed = errors.New(`no "error" object`)
	case c.p.platform == PlatformVertex && b.Error.Type == "" && b.Error.Status != "":
		vendor, typ, msg = llm.VendorGoogle, b.Error.Status, b.Error.Message
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
		if c.p.platform == PlatformBedrock && llm.VendorAnthropic.Kind(0, typ, code, msg, body) == llm.KindUnknown &&
			llm.VendorBedrock.Kind(0, exceptionName(typ), "", msg, nil) != llm.KindUnknown {
			vendor = llm.VendorBedrock
		}
	}
	sentType := typ
	if vendor == llm.VendorBedrock {
		typ = exceptionName(typ)
	}
	if code == "" && vendor == llm.VendorAnthropic {
		code = llm.SpendLimit(body)
	}
	r := &wire.Reply{Status: status, Header: h, Body: body, Received: c.received()}
	f := llm.Classify(c.p.ep.Provider, vendor, llm.Reply{Status: status, Header: h, Type: typ, Code: code,
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
