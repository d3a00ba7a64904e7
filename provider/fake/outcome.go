package fake

import (
	"slices"
	"strings"
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

// fault is how a streamed answer fails part-way (ErrorAfter, StallAfter,
// CutAfter).
type fault uint8

const (
	faultNone  fault = iota
	faultError       // an in-stream error event, then the end of the body
	faultStall       // no more events; the connection stays open
	faultCut         // the body ends abruptly, without its terminal events
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
// Build one with Answer, CallTools, Refusal, Status, Hang, ConnReset,
// Malformed or one of the canned failures (RateLimited, Overloaded, ServerError, SpendCap,
// ContextTooLong, BadRequest), then refine it with the chainable modifiers.
// Modifiers have value receivers and return a modified copy, so an Outcome can
// be shared and reused freely. A modifier that does not apply to the
// outcome's kind (Usage on an error, Every on a Hang) is ignored.
//
// An Answer serves both kinds of request: a request with "stream": true gets
// it as server-sent events, any other request as one JSON body. The stream
// modifiers (Chunks, Every, FirstChunkAfter, PauseAfter, ErrorAfter,
// StallAfter, CutAfter, MalformedEventAfter, NoSentinel) shape the stream and are ignored for a request that did not ask
// for one. Every other outcome (a Status error, a Hang, a ConnReset) answers
// a streamed request exactly as it answers any other: the failure comes
// before the stream starts.
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
	tools     []ToolCall // the answer's tool calls (CallTools, ToolCalls)
	refusal   bool       // Refusal
	cached    int        // Cached
	written   int        // CacheWrite
	body      optString
	errType   optString
	code      optString
	message   optString
	param     optString // OpenAI error.param; set only by request validation
	platform  bool      // Vertex, Azure: the platform's own error body, not the provider's; set only by request validation
	requestID string
	headers   []header
	delay     time.Duration
	onDone    func()

	// Streaming, for a request with "stream": true.
	parts      []string // the chunks, when set by Chunks
	chunked    bool     // Chunks was called
	every      time.Duration
	firstChunk time.Duration
	fault      fault
	faultAfter int           // chunks sent before the fault
	pauseAfter int           // chunks sent before the pause (PauseAfter)
	pause      time.Duration // the pause's length; 0 for none
	badAfter   int           // chunks sent before the malformed event (MalformedEventAfter)
	bad        optString     // the malformed event's data; unset for none
	noSentinel bool          // NoSentinel
}

// Answer is a successful completion whose text is text: a 200 with the
// Anthropic message or OpenAI chat.completion body, shaped like the real one.
//
// By default the served model is the model requested, the finish reason is
// end_turn (Anthropic) or stop (OpenAI) (tool_use or tool_calls with
// ToolCalls), and usage is estimated at one token per four bytes of the
// request body (input) and of text and tool calls (output), at least one
// each.
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
// The cloud platforms render it in their own error bodies (Bedrock's
// x-amzn-ErrorType, Google's google.rpc.Status, Azure's string codes; see
// the package documentation).
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

// withID sets the message or completion id in an answer's body; by default
// msg_fake_N (Anthropic, Bedrock, Vertex), chatcmpl-fake-N (OpenAI, Azure)
// or resp_fake_N (Gemini's responseId), where N is the server's request
// sequence number.
func (o Outcome) withID(id string) Outcome {
	o.id = id
	return o
}

// Usage sets an answer's token counts: in is every input token, those
// read from or written to the prompt cache (Cached, CacheWrite) included,
// as llm.Usage.InputTokens counts them on every wire format: OpenAI
// usage.prompt_tokens, Gemini promptTokenCount, and on Anthropic the sum of
// input_tokens, cache_read_input_tokens and cache_creation_input_tokens;
// out is OpenAI completion_tokens, Anthropic output_tokens, Gemini
// candidatesTokenCount.
func (o Outcome) Usage(in, out int) Outcome {
	o.usageSet, o.usageIn, o.usageOut = true, in, out
	return o
}

// Finish sets an answer's stop_reason (Anthropic) or finish_reason (OpenAI),
// or Gemini's finishReason, sent as given: end_turn, max_tokens, refusal,
// length, content_filter, MAX_TOKENS, SAFETY, …
func (o Outcome) Finish(reason string) Outcome {
	o.finish = reason
	return o
}

// Type sets an error's type (error.type in both formats): the type of a
// Status error, or of the in-stream error event an Answer sends with
// ErrorAfter.
func (o Outcome) Type(t string) Outcome {
	o.errType = set(t)
	return o
}

// Code sets an error's code: error.code on OpenAI ("" sends null), and
// error.details.error_code on Anthropic ("" sends no details). Like Type, it
// applies to a Status error or to the in-stream error of ErrorAfter.
func (o Outcome) Code(c string) Outcome {
	o.code = set(c)
	return o
}

// Message sets an error's message (error.message in both formats), of a
// Status error or of the in-stream error of ErrorAfter.
func (o Outcome) Message(m string) Outcome {
	o.message = set(m)
	return o
}

// Body replaces the generated response body with raw, sent as given with
// Content-Type application/json, whatever the outcome's status. An answer
// (Malformed, or Answer with Body) to a request with "stream": true is sent
// as given in one piece with Content-Type text/event-stream; charset=utf-8
// instead, to test a client on malformed events; Header can override it.
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
// response has been written (for a stream, its last event or its cut), the
// connection reset, or the request's context ended. A test can use it to count requests in flight or to learn that a
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

// Chunks sets an answer's text to the concatenation of parts, and makes a
// streamed answer send each part as one chunk, in order: one Anthropic
// content_block_delta, or one OpenAI chat.completion.chunk. Empty parts are
// sent as empty deltas; Chunks() with no parts is an empty answer streamed
// without deltas. A request that did not ask for a stream gets the whole
// text in one body, as from Answer.
//
// Without Chunks, a streamed answer is split into words, each with the
// whitespace before it ("Hello world, hi" streams as "Hello", " world,",
// " hi"), and any piece longer than 16 bytes is cut into pieces of at most 16
// bytes at UTF-8 boundaries. The empty text streams no deltas.
func (o Outcome) Chunks(parts ...string) Outcome {
	o.parts = slices.Clone(parts)
	o.chunked = true
	o.text = set(strings.Join(parts, ""))
	return o
}

// Every spaces a streamed answer's chunks d apart: chunk i+1 is sent d after
// chunk i. The wait uses a timer, so under testing/synctest it passes in
// virtual time, and it ends the stream, with nothing more sent, when the
// request's context ends (the client gave up or closed the body). The
// default, 0, sends the chunks back to back.
func (o Outcome) Every(d time.Duration) Outcome {
	o.every = d
	return o
}

// FirstChunkAfter delays a streamed answer's first chunk by d: the status,
// the headers and the opening events (Anthropic message_start,
// content_block_start and a ping; OpenAI's chunk with the assistant role and
// empty content) are sent at once, and the first chunk of text d later, to
// test a time-to-first-chunk timeout. After delays the whole response
// instead (nothing is sent until it has passed); FirstChunkAfter counts from
// the headers, so the two add up. Like Every, the wait is a timer that the
// request's context cuts short.
func (o Outcome) FirstChunkAfter(d time.Duration) Outcome {
	o.firstChunk = d
	return o
}

// ErrorAfter makes a streamed answer fail with an in-stream error after n
// chunks (n is clamped to [0, number of chunks]), as the real APIs report
// a failure after the 200 has been sent. The error comes when chunk n+1 would
// have: Every after chunk n, or FirstChunkAfter after the headers when n is 0.
//
// Anthropic: the event
//
//	event: error
//	data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}
//
// and the body ends, with no content_block_stop, message_delta or
// message_stop. OpenAI: the line
//
//	data: {"error":{"message":"The server experienced an error while processing your request. We apologize for the inconvenience!","type":"server_error","param":null,"code":null}}
//
// then data: [DONE], as OpenAI has been seen to send it (a client that
// ignores the error sees a stream that ends normally), with no finish_reason
// or usage chunk. Type, Code and Message set the error's fields.
//
// Bedrock sends an event-stream exception message instead, and Gemini a
// data: {"error": …} chunk (see the package documentation).
//
// ErrorAfter, StallAfter and CutAfter are exclusive: the last one called
// wins.
func (o Outcome) ErrorAfter(n int) Outcome {
	o.fault, o.faultAfter = faultError, n
	return o
}

// StallAfter makes a streamed answer stop sending after n chunks (clamped to
// [0, number of chunks]) and hold the connection open, sending nothing more,
// not even a ping, until the request's context ends: the client gives up,
// closes the body, or (over loopback) the server is closed. It tests an idle
// timeout between chunks. The handler waits on the context alone, so under
// testing/synctest a reader blocked on the stalled body is durably blocked
// and virtual time moves on to its deadline.
//
// ErrorAfter, StallAfter and CutAfter are exclusive: the last one called
// wins.
func (o Outcome) StallAfter(n int) Outcome {
	o.fault, o.faultAfter = faultStall, n
	return o
}

// CutAfter makes a streamed answer end abruptly after n chunks (clamped to
// [0, number of chunks]), without its terminal events (Anthropic
// content_block_stop, message_delta, message_stop; OpenAI finish_reason,
// usage and [DONE]), as when a connection drops mid-stream. The cut comes
// when chunk n+1 would have (see ErrorAfter).
//
// Over loopback (Start) the connection is closed before the chunked body's
// last chunk, so the client's read fails with io.ErrUnexpectedEOF. Through
// the in-process Transport the body's read fails with an error that wraps
// io.ErrUnexpectedEOF. Either way errors.Is(err, io.ErrUnexpectedEOF) holds
// for the client's read.
//
// ErrorAfter, StallAfter and CutAfter are exclusive: the last one called
// wins.
func (o Outcome) CutAfter(n int) Outcome {
	o.fault, o.faultAfter = faultCut, n
	return o
}

// PauseAfter makes a streamed answer wait d more after n chunks (n is
// clamped to [0, number of chunks]), then go on as scripted: chunk n+1 (or
// the fault, or the terminal events, when n is the number of chunks) comes
// d after it otherwise would (Every, or FirstChunkAfter when n is 0). It
// tests a stream that stalls mid-answer and recovers, where StallAfter
// never does. Like Every, the wait is a timer that the request's context
// cuts short. Calling PauseAfter again replaces the pause.
func (o Outcome) PauseAfter(n int, d time.Duration) Outcome {
	o.pauseAfter, o.pause = n, d
	return o
}

// MalformedEventAfter makes a streamed answer send one extra event whose
// data is data as given, after n chunks (n is clamped to [0, number of
// chunks]) and before whatever comes next, then go on as scripted: nothing
// of the answer is left out. Over server-sent events it is the line
// "data: " + data, with no event name; on Bedrock an event-stream chunk
// whose payload bytes are data. Use it for truncated JSON
// (`{"choices":[{"delta":{"content":"Hel`), a stray HTML line, an event of
// an unknown shape. Calling it again replaces the event.
func (o Outcome) MalformedEventAfter(n int, data string) Outcome {
	o.badAfter, o.bad = n, set(data)
	return o
}

// NoSentinel ends a complete streamed answer without its last event, the
// sentinel that follows the finish: OpenAI's (and Azure's) data: [DONE]
// line, Anthropic's (Bedrock's, Vertex's) message_stop event. Everything
// before it is sent (the finish reason, the usage) and the body ends
// cleanly, as some compatible servers and gateways end their streams.
// Gemini's streams have no sentinel; there it changes nothing. It does not
// apply to a stream that ends in a fault.
func (o Outcome) NoSentinel() Outcome {
	o.noSentinel = true
	return o
}
