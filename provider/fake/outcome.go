package fake

import (
	"slices"
	"time"
)

// kind is what an Outcome does with a request.
type kind uint8

const (
	kindAnswer kind = iota // a 200 answer (or a raw body)
	kindError              // an error response in the request's format
	kindHang               // block until the request's context ends
	kindReset              // reset the connection
)

// preset names the canned failures whose status, type, code and message
// depend on the request's wire format.
type preset uint8

const (
	presetNone preset = iota
	presetRateLimited
	presetOverloaded
	presetSpendCap
	presetContextTooLong
)

// optString is a string that may be deliberately set to "".
type optString struct {
	v  string
	ok bool
}

func set(v string) optString { return optString{v: v, ok: true} }

func (o optString) or(def string) string {
	if o.ok {
		return o.v
	}
	return def
}

// header is one response header an Outcome sets (or removes, when v is "").
type header struct{ k, v string }

// Outcome is what the fake does with one request: answer, fail with an HTTP
// error in the request's wire format, hang, reset the connection or send a
// malformed body, optionally after a delay.
//
// Build one with Answer, Status, Hang, ConnReset, Malformed or one of the
// canned failures (RateLimited, Overloaded, ServerError, SpendCap,
// ContextTooLong, BadRequest), then refine it with the chainable modifiers.
// Modifiers have value receivers and return a modified copy, so an Outcome can
// be shared and reused freely. A modifier that does not apply to the
// outcome's kind (Usage on an error, Type on an answer) is ignored.
//
// The zero Outcome is the default answer: "fake answer from <model>".
type Outcome struct {
	kind   kind
	preset preset
	status int

	text      optString
	model     string
	id        string
	usageSet  bool
	usageIn   int
	usageOut  int
	finish    string
	body      optString
	errType   optString
	code      optString
	message   optString
	param     optString // OpenAI error.param; set only by request validation
	requestID string
	headers   []header
	delay     time.Duration
	onDone    func()
}

// Answer is a successful completion whose text is text: a 200 with the
// Anthropic message or OpenAI chat.completion body, shaped like the real one.
//
// By default the served model is the model requested, the finish reason is
// end_turn (Anthropic) or stop (OpenAI), and usage is estimated at one token
// per four bytes of the request body (input) and of text (output), at
// least one each.
func Answer(text string) Outcome {
	return Outcome{kind: kindAnswer, text: set(text)}
}

// Status is an error response with HTTP status code, in the wire format of
// the request's API, with that provider's error type for the status by
// default.
//
// Anthropic: {"type":"error","error":{"type":…,"message":…},"request_id":…}
// with 400 invalid_request_error, 401 authentication_error, 402
// billing_error, 403 permission_error, 404 not_found_error, 409
// conflict_error, 413 request_too_large, 429 rate_limit_error, 500
// api_error, 504 timeout_error, 529 overloaded_error (other 4xx
// invalid_request_error, other 5xx api_error).
//
// OpenAI: {"error":{"message":…,"type":…,"param":…,"code":…}} with type
// invalid_request_error for 4xx (401 code invalid_api_key, 404 code
// model_not_found), type requests and code rate_limit_exceeded for 429, and
// type server_error for 5xx.
//
// Refine it with Type, Code, Message, Body, Header, RetryAfter and
// RequestID.
func Status(code int) Outcome {
	return Outcome{kind: kindError, status: code}
}

// RateLimited is a 429 rate-limit error (Anthropic rate_limit_error, OpenAI
// rate_limit_exceeded) with a retry-after header of retryAfter, or none when
// retryAfter is "". On OpenAI, a retryAfter in seconds is also quoted at the
// end of the message ("Please try again in 2s."), as the real API does.
func RateLimited(retryAfter string) Outcome {
	o := Outcome{kind: kindError, status: 429, preset: presetRateLimited}
	if retryAfter != "" {
		o = o.RetryAfter(retryAfter)
	}
	return o
}

// Overloaded is the provider shedding load: 529 overloaded_error on
// Anthropic, 503 server_error on OpenAI.
func Overloaded() Outcome {
	return Outcome{kind: kindError, status: 529, preset: presetOverloaded}
}

// ServerError is a 500: Anthropic api_error, OpenAI server_error.
func ServerError() Outcome { return Status(500) }

// SpendCap is a spend limit that waiting does not lift. On Anthropic it is a
// 429 rate_limit_error whose body carries error.details.error_code
// "enforced_spend_limit_reached" and no retry-after; on OpenAI a 429 whose
// type and code are insufficient_quota.
func SpendCap() Outcome {
	return Outcome{kind: kindError, status: 429, preset: presetSpendCap}
}

// ContextTooLong is a prompt longer than the model's context window: a 400
// invalid_request_error with the message "prompt is too long: 208310 tokens >
// 200000 maximum" on Anthropic, and a 400 with code context_length_exceeded
// on OpenAI.
func ContextTooLong() Outcome {
	return Outcome{kind: kindError, status: 400, preset: presetContextTooLong}
}

// BadRequest is a 400 invalid_request_error with message msg.
func BadRequest(msg string) Outcome { return Status(400).Message(msg) }

// Hang never answers: the request blocks until its context ends (the client
// gives up, its deadline passes, or the connection closes).
func Hang() Outcome { return Outcome{kind: kindHang} }

// ConnReset resets the connection after the request has been read. Over the
// loopback server (Start) the connection is hijacked and closed with
// SO_LINGER 0, so the client reads ECONNRESET. Through the in-process
// Transport, RoundTrip returns the equivalent error:
//
//	&net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
//
// Either way errors.Is(err, syscall.ECONNRESET) holds for the client's error.
func ConnReset() Outcome { return Outcome{kind: kindReset} }

// Malformed is a 200 with Content-Type application/json whose body is body
// as given: truncated JSON, an HTML error page, an empty object, …
func Malformed(body string) Outcome {
	return Outcome{kind: kindAnswer, body: set(body)}
}

// After delays the response by d, measured from the request's arrival. The
// wait ends early, with no response, when the request's context ends. It
// uses a timer, so under testing/synctest the delay passes in virtual time.
// Calling After again replaces the delay.
func (o Outcome) After(d time.Duration) Outcome {
	o.delay = d
	return o
}

// Model sets the model an answer says served it; by default the model
// requested.
func (o Outcome) Model(served string) Outcome {
	o.model = served
	return o
}

// ID sets the message or completion id in an answer's body; by default
// msg_fake_N (Anthropic) or chatcmpl-fake-N (OpenAI), where N is the
// server's request sequence number.
func (o Outcome) ID(id string) Outcome {
	o.id = id
	return o
}

// Usage sets an answer's token counts: Anthropic usage.input_tokens and
// output_tokens, OpenAI usage.prompt_tokens and completion_tokens (and
// total_tokens, their sum).
func (o Outcome) Usage(in, out int) Outcome {
	o.usageSet, o.usageIn, o.usageOut = true, in, out
	return o
}

// Finish sets an answer's stop_reason (Anthropic) or finish_reason (OpenAI),
// sent as given: end_turn, max_tokens, refusal, length, content_filter, …
func (o Outcome) Finish(reason string) Outcome {
	o.finish = reason
	return o
}

// Type sets an error's type (error.type in both formats).
func (o Outcome) Type(t string) Outcome {
	o.errType = set(t)
	return o
}

// Code sets an error's code: error.code on OpenAI ("" sends null), and
// error.details.error_code on Anthropic ("" sends no details).
func (o Outcome) Code(c string) Outcome {
	o.code = set(c)
	return o
}

// Message sets an error's message (error.message in both formats).
func (o Outcome) Message(m string) Outcome {
	o.message = set(m)
	return o
}

// Body replaces the generated response body with raw, sent as given with
// Content-Type application/json, whatever the outcome's status.
func (o Outcome) Body(raw string) Outcome {
	o.body = set(raw)
	return o
}

// Header sets response header k to v, overriding a generated value (a
// request id, a retry-after, the Content-Type). An empty v removes the
// header, to test a response without it. A later Header for the same key
// wins.
func (o Outcome) Header(k, v string) Outcome {
	o.headers = append(slices.Clip(o.headers), header{k, v})
	return o
}

// RetryAfter sets the retry-after response header to v, sent as given
// (delay-seconds or an HTTP-date).
func (o Outcome) RetryAfter(v string) Outcome {
	return o.Header("Retry-After", v)
}

// RequestID sets the response's request id (the request-id or x-request-id
// header and, on Anthropic errors, the body's request_id); by default
// req_fake_N, where N is the server's request sequence number.
func (o Outcome) RequestID(id string) Outcome {
	o.requestID = id
	return o
}

// OnDone registers f to run once the request has been dealt with: after the
// response has been written, the connection reset, or the request's context
// ended. A test can use it to count requests in flight or to learn that a
// hanging request has been released. Calling OnDone again adds f after the
// functions already registered.
func (o Outcome) OnDone(f func()) Outcome {
	if prev := o.onDone; prev != nil {
		o.onDone = func() { prev(); f() }
	} else {
		o.onDone = f
	}
	return o
}
