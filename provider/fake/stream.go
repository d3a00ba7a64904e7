package fake

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
	"unicode"
	"unicode/utf8"
)

// maxChunk is the longest piece, in bytes, of the default chunking.
const maxChunk = 16

// split is the default chunking of a streamed answer: words, each with the
// whitespace before it, with pieces longer than maxChunk bytes cut at UTF-8
// boundaries. The pieces concatenate to text.
func split(text string) []string {
	var parts []string
	start, prevSpace := 0, false
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		space := unicode.IsSpace(r)
		if i > start && ((space && !prevSpace) || i+size-start > maxChunk) {
			parts = append(parts, text[start:i])
			start = i
		}
		prevSpace = space
		i += size
	}
	if start < len(text) {
		parts = append(parts, text[start:])
	}
	return parts
}

// event is one server-sent event: an optional event name and its data.
type event struct {
	name string
	data []byte
}

// sseWriter writes server-sent events, flushing after each batch so that
// the client sees them at once, over loopback as in-process.
type sseWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// send writes evs and flushes them. It reports false once a write fails:
// the client has gone.
func (s sseWriter) send(evs ...event) bool {
	var b []byte
	for _, e := range evs {
		if e.name != "" {
			b = append(b, "event: "...)
			b = append(b, e.name...)
			b = append(b, '\n')
		}
		b = append(b, "data: "...)
		b = append(b, e.data...)
		b = append(b, "\n\n"...)
	}
	if _, err := s.w.Write(b); err != nil {
		return false
	}
	_ = s.rc.Flush()
	return true
}

// eventSender sends a stream's events: as server-sent events, or (Bedrock)
// as AWS event-stream messages.
type eventSender interface {
	send(evs ...event) bool
}

// streamContentType is the Content-Type of a streamed answer in format f.
func streamContentType(f Format) string {
	if f == Bedrock {
		return "application/vnd.amazon.eventstream"
	}
	return "text/event-stream; charset=utf-8"
}

// streamer encodes a streamed answer's events in one wire format.
type streamer interface {
	head() []event             // the opening events, sent with the headers
	delta(text string) []event // one chunk of text
	tail() []event             // the terminal events of a complete answer, tool calls first
	fail(o Outcome) []event    // the in-stream error of ErrorAfter
}

func newStreamer(ex exchange, a answer) streamer {
	switch ex.format.family() {
	case Anthropic:
		if ex.format == Bedrock {
			return bedrockStream{anthropicStream{a}}
		}
		return anthropicStream{a}
	case Gemini:
		return geminiStream{a}
	}
	return openaiStream{a: a, created: time.Now().Unix(), usage: ex.usage}
}

// streamAnswer serves answer outcome o to a request that asked for a stream:
// the headers and opening events at once, then the chunks, FirstChunkAfter
// and Every apart, then the terminal events, or the outcome's fault.
func streamAnswer(ctx context.Context, w http.ResponseWriter, ex exchange, o Outcome, rid string) {
	a := answerOf(o, ex)
	parts := o.parts
	if !o.chunked {
		parts = split(a.text)
	}
	h := w.Header()
	h.Set("Content-Type", streamContentType(ex.format))
	h.Set("Cache-Control", "no-cache")
	setRequestID(h, ex.format, rid)
	setHeaders(h, ex.limits)
	setHeaders(h, o.headers)
	w.WriteHeader(http.StatusOK)

	var s eventSender = sseWriter{w: w, rc: http.NewResponseController(w)}
	if ex.format == Bedrock {
		s = &bedrockWriter{w: w, rc: http.NewResponseController(w)}
	}
	enc := newStreamer(ex, a)
	if !s.send(enc.head()...) {
		return
	}
	n := len(parts)
	if o.fault != faultNone {
		n = min(max(o.faultAfter, 0), n)
	}
	// gap is the wait before chunk i (0-based), or before the fault that
	// takes the place of chunk n.
	gap := func(i int) time.Duration {
		d := o.every
		if i == 0 {
			d = o.firstChunk
		}
		if o.pause > 0 && i == min(max(o.pauseAfter, 0), n) {
			d += o.pause
		}
		return d
	}
	bad := -1 // the chunks sent before the malformed event
	if o.bad.ok {
		bad = min(max(o.badAfter, 0), n)
	}
	for i, p := range parts[:n] {
		if i == bad && !s.send(event{data: []byte(o.bad.v)}) {
			return
		}
		if !wait(ctx, gap(i)) || !s.send(enc.delta(p)...) {
			return
		}
	}
	if n == bad && !s.send(event{data: []byte(o.bad.v)}) {
		return
	}
	switch o.fault {
	case faultNone:
		if o.pause > 0 && min(max(o.pauseAfter, 0), n) == n && !wait(ctx, o.pause) {
			return
		}
		tail := enc.tail()
		if o.noSentinel {
			tail = withoutSentinel(tail)
		}
		s.send(tail...)
	case faultStall:
		<-ctx.Done()
	case faultError:
		if wait(ctx, gap(n)) {
			s.send(enc.fail(o)...)
		}
	case faultCut:
		if wait(ctx, gap(n)) {
			cutConn(w)
		}
	}
}

// withoutSentinel is a complete stream's terminal events without the
// sentinel that follows the finish (NoSentinel): OpenAI's [DONE], the
// Anthropic formats' message_stop.
func withoutSentinel(evs []event) []event {
	if k := len(evs) - 1; k >= 0 && (string(evs[k].data) == "[DONE]" || evs[k].name == "message_stop") {
		return evs[:k]
	}
	return evs
}

// errCut is what the in-process body read fails with after CutAfter.
var errCut = fmt.Errorf("fake: connection closed mid-stream: %w", io.ErrUnexpectedEOF)

// cutConn ends a started response abruptly: in-process by failing the body
// read, over a real server by closing the hijacked connection before the
// chunked body's last chunk, elsewhere (HTTP/2, a writer that cannot be
// hijacked) by aborting the handler.
func cutConn(w http.ResponseWriter) {
	if pw, ok := w.(*pipeWriter); ok {
		pw.fail(errCut)
		return
	}
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}

// Anthropic Messages streaming events.

type anthropicStream struct{ a answer }

type anthropicMessageStart struct {
	Type    string           `json:"type"`
	Message anthropicMessage `json:"message"`
}

type anthropicBlockEvent struct {
	Type         string `json:"type"`
	Index        int    `json:"index"`
	ContentBlock any    `json:"content_block,omitempty"`
	Delta        any    `json:"delta,omitempty"`
}

type anthropicJSONDelta struct {
	Type        string `json:"type"`
	PartialJSON string `json:"partial_json"`
}

type anthropicMessageDelta struct {
	Type  string `json:"type"`
	Delta struct {
		StopReason   string          `json:"stop_reason"`
		StopSequence *string         `json:"stop_sequence"`
		StopDetails  json.RawMessage `json:"stop_details"`
		Container    json.RawMessage `json:"container"`
	} `json:"delta"`
	Usage anthropicUsage `json:"usage"`
}

type anthropicStreamError struct {
	Type  string               `json:"type"`
	Error anthropicErrorDetail `json:"error"`
}

type typeOnly struct {
	Type string `json:"type"`
}

func anthropicEvent(name string, v any) event {
	return event{name: name, data: marshal(v)}
}

// textBlock reports whether the answer has a text block: it has text, or
// it has no tool calls.
func (s anthropicStream) textBlock() bool { return s.a.text != "" || len(s.a.tools) == 0 }

// head is message_start (usage: the input tokens and one output token, as
// the real API reports before generating), content_block_start of the text
// block (if any) and a ping.
func (s anthropicStream) head() []event {
	evs := []event{
		anthropicEvent("message_start", anthropicMessageStart{Type: "message_start", Message: anthropicMessage{
			ID: s.a.id, Type: "message", Role: "assistant", Model: s.a.model, Content: []any{},
			StopDetails: jsonNull, Container: jsonNull, Diagnostics: jsonNull,
			Usage: s.a.anthropicUsage(min(s.a.out, 1)),
		}}),
	}
	if s.textBlock() {
		evs = append(evs, anthropicEvent("content_block_start", anthropicBlockEvent{Type: "content_block_start", Index: 0,
			ContentBlock: anthropicTextBlock{Type: "text", Text: "", Citations: jsonNull}}))
	}
	return append(evs, anthropicEvent("ping", typeOnly{"ping"}))
}

func (s anthropicStream) delta(text string) []event {
	return []event{anthropicEvent("content_block_delta", anthropicBlockEvent{Type: "content_block_delta", Index: 0,
		Delta: anthropicBlock{Type: "text_delta", Text: text}})}
}

// tail is content_block_stop of the text block, each tool_use block
// (content_block_start, input_json_delta pieces, content_block_stop),
// message_delta with the stop reason and the cumulative usage, and
// message_stop.
func (s anthropicStream) tail() []event {
	var evs []event
	i := 0
	if s.textBlock() {
		evs = append(evs, anthropicEvent("content_block_stop", anthropicBlockEvent{Type: "content_block_stop", Index: 0}))
		i++
	}
	for _, t := range s.a.tools {
		evs = append(evs, anthropicEvent("content_block_start", anthropicBlockEvent{Type: "content_block_start", Index: i,
			ContentBlock: anthropicToolUse{Type: "tool_use", ID: t.id, Name: t.name, Input: json.RawMessage("{}"), Caller: typeOnly{"direct"}}}))
		for _, p := range splitArgs(t.args) {
			evs = append(evs, anthropicEvent("content_block_delta", anthropicBlockEvent{Type: "content_block_delta", Index: i,
				Delta: anthropicJSONDelta{Type: "input_json_delta", PartialJSON: p}}))
		}
		evs = append(evs, anthropicEvent("content_block_stop", anthropicBlockEvent{Type: "content_block_stop", Index: i}))
		i++
	}
	md := anthropicMessageDelta{Type: "message_delta", Usage: s.a.anthropicDeltaUsage()}
	md.Delta.StopReason, md.Delta.StopSequence = s.a.finish, s.a.stop
	md.Delta.StopDetails, md.Delta.Container = s.a.stopDetails(), jsonNull
	return append(evs,
		anthropicEvent("message_delta", md),
		anthropicEvent("message_stop", typeOnly{"message_stop"}))
}

func (s anthropicStream) fail(o Outcome) []event {
	e := anthropicStreamError{Type: "error", Error: anthropicErrorDetail{
		Type: o.errType.or("overloaded_error"), Message: o.message.or("Overloaded"),
	}}
	if c := o.code.or(""); c != "" {
		e.Error.Details = &anthropicErrorDetails{ErrorCode: c}
	}
	return []event{anthropicEvent("error", e)}
}

// OpenAI Chat Completions streaming chunks.

type openaiStream struct {
	a       answer
	created int64
	usage   bool // stream_options.include_usage
}

type openaiChunk struct {
	ID                string              `json:"id"`
	Object            string              `json:"object"`
	Created           int64               `json:"created"`
	Model             string              `json:"model"`
	ServiceTier       string              `json:"service_tier"`
	SystemFingerprint string              `json:"system_fingerprint"`
	Choices           []openaiChunkChoice `json:"choices"`
	Usage             json.RawMessage     `json:"usage,omitempty"`
}

type openaiChunkChoice struct {
	Index        int         `json:"index"`
	Delta        openaiDelta `json:"delta"`
	Logprobs     *struct{}   `json:"logprobs"`
	FinishReason *string     `json:"finish_reason"`
}

type openaiDelta struct {
	Role      string           `json:"role,omitempty"`
	Content   json.RawMessage  `json:"content,omitempty"`
	Refusal   json.RawMessage  `json:"refusal,omitempty"`
	ToolCalls []openaiToolCall `json:"tool_calls,omitempty"`
}

var jsonNull = json.RawMessage("null")

// chunk is a chat.completion.chunk with choices; with include_usage every
// such chunk carries "usage":null, as the real API sends it.
func (s openaiStream) chunk(choices []openaiChunkChoice, usage json.RawMessage) event {
	if usage == nil && s.usage {
		usage = jsonNull
	}
	return event{data: marshal(openaiChunk{
		ID: s.a.id, Object: "chat.completion.chunk", Created: s.created, Model: s.a.model,
		ServiceTier: openaiServiceTier, SystemFingerprint: openaiFingerprint,
		Choices: choices, Usage: usage,
	})}
}

// each is one chunk per choice, with delta d.
func (s openaiStream) each(d openaiDelta, finish *string) []event {
	evs := make([]event, s.a.n)
	for i := range evs {
		evs[i] = s.chunk([]openaiChunkChoice{{Index: i, Delta: d, FinishReason: finish}}, nil)
	}
	return evs
}

// head is the chunk with the assistant role and empty content (null content
// for a refusal or an answer of tool calls alone).
func (s openaiStream) head() []event {
	d := openaiDelta{Role: "assistant", Content: json.RawMessage(`""`), Refusal: jsonNull}
	switch {
	case s.a.refusal:
		d.Content, d.Refusal = jsonNull, json.RawMessage(`""`)
	case s.a.text == "" && len(s.a.tools) > 0:
		d.Content = jsonNull
	}
	return s.each(d, nil)
}

func (s openaiStream) delta(text string) []event {
	if s.a.refusal {
		return s.each(openaiDelta{Refusal: marshal(text)}, nil)
	}
	return s.each(openaiDelta{Content: marshal(text)}, nil)
}

// tail is each tool call (a chunk with its index, id, type, name and empty
// arguments, then chunks of its arguments), the chunk with the finish
// reason and an empty delta, the usage chunk (empty choices) when the
// request set stream_options.include_usage, and [DONE].
func (s openaiStream) tail() []event {
	var evs []event
	for i, t := range s.a.tools {
		idx := i
		for k, p := range splitArgs(t.args) {
			tc := openaiToolCall{Index: &idx, Function: openaiToolFunction{Arguments: p}}
			if k == 0 {
				tc.ID, tc.Type, tc.Function.Name = t.id, "function", t.name
			}
			evs = append(evs, s.each(openaiDelta{ToolCalls: []openaiToolCall{tc}}, nil)...)
		}
	}
	finish := s.a.finish
	evs = append(evs, s.each(openaiDelta{}, &finish)...)
	if s.usage {
		evs = append(evs, s.chunk([]openaiChunkChoice{}, marshal(s.a.openaiUsage())))
	}
	return append(evs, event{data: []byte("[DONE]")})
}

func (s openaiStream) fail(o Outcome) []event {
	e := openaiError{Error: openaiErrorDetail{
		Message: o.message.or("The server experienced an error while processing your request. We apologize for the inconvenience!"),
		Type:    o.errType.or("server_error"),
		Code:    nullable(o.code.or("")),
	}}
	return []event{{data: marshal(e)}, {data: []byte("[DONE]")}}
}
