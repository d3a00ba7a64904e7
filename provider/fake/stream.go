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

// streamer encodes a streamed answer's events in one wire format.
type streamer interface {
	head() []event           // the opening events, sent with the headers
	delta(text string) event // one chunk of text
	tail() []event           // the terminal events of a complete answer
	fail(o Outcome) []event  // the in-stream error of ErrorAfter
}

func newStreamer(ex exchange, a answer) streamer {
	if ex.format == Anthropic {
		return anthropicStream{a}
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
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set(requestIDHeader(ex.format), rid)
	setHeaders(h, o.headers)
	w.WriteHeader(http.StatusOK)

	s := sseWriter{w: w, rc: http.NewResponseController(w)}
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
		if i == 0 {
			return o.firstChunk
		}
		return o.every
	}
	for i, p := range parts[:n] {
		if !wait(ctx, gap(i)) || !s.send(enc.delta(p)) {
			return
		}
	}
	switch o.fault {
	case faultNone:
		s.send(enc.tail()...)
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

type anthropicStreamMessage struct {
	ID           string           `json:"id"`
	Type         string           `json:"type"`
	Role         string           `json:"role"`
	Model        string           `json:"model"`
	Content      []anthropicBlock `json:"content"`
	StopReason   *string          `json:"stop_reason"`
	StopSequence *string          `json:"stop_sequence"`
	Usage        anthropicUsage   `json:"usage"`
}

type anthropicMessageStart struct {
	Type    string                 `json:"type"`
	Message anthropicStreamMessage `json:"message"`
}

type anthropicBlockEvent struct {
	Type         string          `json:"type"`
	Index        int             `json:"index"`
	ContentBlock *anthropicBlock `json:"content_block,omitempty"`
	Delta        *anthropicBlock `json:"delta,omitempty"`
}

type anthropicMessageDelta struct {
	Type  string `json:"type"`
	Delta struct {
		StopReason   string  `json:"stop_reason"`
		StopSequence *string `json:"stop_sequence"`
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

// head is message_start (usage: the input tokens and one output token, as
// the real API reports before generating), content_block_start and a ping.
func (s anthropicStream) head() []event {
	return []event{
		anthropicEvent("message_start", anthropicMessageStart{Type: "message_start", Message: anthropicStreamMessage{
			ID: s.a.id, Type: "message", Role: "assistant", Model: s.a.model, Content: []anthropicBlock{},
			Usage: anthropicUsage{InputTokens: s.a.in, OutputTokens: min(s.a.out, 1)},
		}}),
		anthropicEvent("content_block_start", anthropicBlockEvent{Type: "content_block_start", Index: 0,
			ContentBlock: &anthropicBlock{Type: "text", Text: ""}}),
		anthropicEvent("ping", typeOnly{"ping"}),
	}
}

func (s anthropicStream) delta(text string) event {
	return anthropicEvent("content_block_delta", anthropicBlockEvent{Type: "content_block_delta", Index: 0,
		Delta: &anthropicBlock{Type: "text_delta", Text: text}})
}

// tail is content_block_stop, message_delta with the stop reason and the
// cumulative usage, and message_stop.
func (s anthropicStream) tail() []event {
	md := anthropicMessageDelta{Type: "message_delta",
		Usage: anthropicUsage{InputTokens: s.a.in, OutputTokens: s.a.out}}
	md.Delta.StopReason, md.Delta.StopSequence = s.a.finish, s.a.stop
	return []event{
		anthropicEvent("content_block_stop", anthropicBlockEvent{Type: "content_block_stop", Index: 0}),
		anthropicEvent("message_delta", md),
		anthropicEvent("message_stop", typeOnly{"message_stop"}),
	}
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
	ID      string              `json:"id"`
	Object  string              `json:"object"`
	Created int64               `json:"created"`
	Model   string              `json:"model"`
	Choices []openaiChunkChoice `json:"choices"`
	Usage   json.RawMessage     `json:"usage,omitempty"`
}

type openaiChunkChoice struct {
	Index        int         `json:"index"`
	Delta        openaiDelta `json:"delta"`
	Logprobs     *struct{}   `json:"logprobs"`
	FinishReason *string     `json:"finish_reason"`
}

type openaiDelta struct {
	Role    string          `json:"role,omitempty"`
	Content *string         `json:"content,omitempty"`
	Refusal json.RawMessage `json:"refusal,omitempty"`
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
		Choices: choices, Usage: usage,
	})}
}

// head is the chunk with the assistant role and empty content.
func (s openaiStream) head() []event {
	empty := ""
	return []event{s.chunk([]openaiChunkChoice{{
		Delta: openaiDelta{Role: "assistant", Content: &empty, Refusal: jsonNull},
	}}, nil)}
}

func (s openaiStream) delta(text string) event {
	return s.chunk([]openaiChunkChoice{{Delta: openaiDelta{Content: &text}}}, nil)
}

// tail is the chunk with the finish reason and an empty delta, the usage
// chunk (empty choices) when the request set stream_options.include_usage,
// and [DONE].
func (s openaiStream) tail() []event {
	finish := s.a.finish
	evs := []event{s.chunk([]openaiChunkChoice{{FinishReason: &finish}}, nil)}
	if s.usage {
		evs = append(evs, s.chunk([]openaiChunkChoice{}, marshal(openaiUsage{
			PromptTokens: s.a.in, CompletionTokens: s.a.out, TotalTokens: s.a.in + s.a.out,
		})))
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
