package anthropicsdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"

	"github.com/backstop-llm/backstop/internal/classify"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/anthropicwire"
	"github.com/backstop-llm/backstop/provider/internal/wire"
)

// Stream sends req through the client's Messages.NewStreaming as exactly
// one HTTP request (the body is Complete's, with "stream": true) and
// returns once the response has started. A failure before that is the
// *llm.Error Complete would return. A 2xx with a JSON body instead of an
// event stream (a server that does not stream) is parsed as Complete parses
// it and delivered as its tool calls, one chunk each, then its text as one
// chunk.
//
// The returned llm.Stream reads the SDK's ssestream on the caller's
// goroutine, as the native adapter reads its events: each text delta is a
// Chunk; message_start gives the id, model and input usage (cache reads
// and writes included), message_delta the stop reason and the output
// usage; message_stop ends the answer with io.EOF. A tool_use block is
// assembled from its content_block_start and its input_json_delta pieces
// and delivered as a Chunk with ToolCall set once the block has stopped
// (Arguments {} when it had none; ids named as Complete names them).
// Blocks may interleave: each is tracked by its index.
//
// Next fails with an *llm.Error on an error event (classified as Complete
// classifies error bodies, with HTTP status 200), a refusal
// (KindContentFilter, at message_stop), an event that is not JSON
// (KindServer), a tool call whose arguments are not JSON
// (KindInvalidOutput), an answer longer than Config.MaxResponseBytes
// (KindServer), a stream that ends before the stop reason (KindConnection; a
// clean end after message_delta's stop reason is whole without message_stop), a
// canceled ctx (KindCanceled), Close (KindCanceled) or a panic
// (KindUnknown). On Bedrock the SDK's middleware turns the AWS event
// stream into these events, its exceptions into error events.
func (p *Provider) Stream(ctx context.Context, req llm.Request) (st llm.Stream, err error) {
	c := p.newCall(true)
	var sdk *ssestream.Stream[anthropic.MessageStreamEventUnion]
	defer func() {
		if r := recover(); r != nil {
			if sdk != nil {
				sdk.Close()
			}
			// A panic before the SDK made its stream (the client's
			// middleware, once the response arrived) leaves the body to
			// close.
			c.closeResponse()
			st, err = nil, c.panicked(r)
		}
	}()
	params, opts, lerr := c.params(req)
	if lerr != nil {
		return nil, lerr
	}
	var raw *http.Response
	// Accept as the native adapter sends it (the SDK sends
	// application/json for a stream too).
	opts = append(opts, option.WithHeader("Accept", "text/event-stream"),
		option.WithResponseInto(&raw), option.WithMiddleware(c.observe), option.WithMaxRetries(0))
	sdk = p.messages.NewStreaming(ctx, params, opts...)
	if serr := sdk.Err(); serr != nil {
		sdk.Close()
		c.closeResponse()
		return nil, c.failure(ctx, raw, serr)
	}
	if f := c.refusal(); f != nil {
		sdk.Close()
		return nil, f
	}
	if raw == nil {
		raw = c.x.Response()
	}
	if raw == nil {
		sdk.Close()
		return nil, c.failure(ctx, nil, errors.New("the SDK returned no response"))
	}
	s := &stream{c: c, ctx: ctx, sdk: sdk, raw: raw}
	s.res.RequestID = requestID(raw.Header)
	s.res.RateLimit = classify.VendorAnthropic.RateLimit(raw.Header, c.received())
	if body := c.x.Body(); body != nil || isJSON(raw.Header) {
		// An answer that arrived whole: the Exchange read it.
		sdk.Close()
		var msg anthropic.Message
		if err := json.Unmarshal(body, &msg); err != nil {
			return nil, c.redact(c.p.ep.Malformed(c.reply(raw), err))
		}
		res, err := c.answer(raw, &msg)
		if err != nil {
			return nil, err
		}
		for i := range res.ToolCalls {
			s.pending = append(s.pending, llm.Chunk{ToolCall: &res.ToolCalls[i]})
		}
		if res.Text != "" {
			s.pending = append(s.pending, llm.Chunk{Text: res.Text})
		}
		s.res = *res
		s.res.Text, s.res.ToolCalls = "", nil
		s.err = io.EOF
		s.closed.Store(true)
		s.whole = true
	}
	return s, nil
}

// stream is the llm.Stream of one answer.
type stream struct {
	c   *call
	ctx context.Context
	sdk *ssestream.Stream[anthropic.MessageStreamEventUnion]
	raw *http.Response

	res  llm.Response
	text strings.Builder
	// The three parts of the input count, kept apart because
	// message_delta may update any of them.
	input, cacheCreation, cacheRead int
	// open are the tool_use blocks started and not yet stopped.
	open []openCall
	// pending are the chunks ready and not yet returned (finished tool
	// calls; an answer that arrived whole).
	pending []llm.Chunk
	// bytes counts the text and the tool calls, against the cap.
	bytes int64
	// err is sticky: io.EOF at the end (once pending is empty), or the
	// failure.
	err error
	// whole is set for an answer that arrived whole.
	whole  bool
	closed atomic.Bool
}

// openCall is a tool_use block being streamed.
type openCall struct {
	index    int64
	id, name string
	// input is the block's input at content_block_start, used when no
	// input_json_delta follows.
	input string
	args  []byte
}

// Next returns the next piece of the answer; see Provider.Stream.
func (s *stream) Next() (ch llm.Chunk, err error) {
	if s.closed.Load() && !s.whole && (s.err == nil || len(s.pending) > 0) {
		s.pending = nil
		s.err = s.closedError()
	}
	defer func() {
		if r := recover(); r != nil {
			ch, err = llm.Chunk{}, s.fail(s.c.panicked(r))
		}
	}()
	for {
		if len(s.pending) > 0 {
			ch = s.pending[0]
			s.pending[0] = llm.Chunk{}
			s.pending = s.pending[1:]
			if ch.ToolCall != nil {
				s.res.ToolCalls = append(s.res.ToolCalls, *ch.ToolCall)
			}
			s.text.WriteString(ch.Text)
			return ch, nil
		}
		if s.err != nil {
			return llm.Chunk{}, s.err
		}
		if !s.sdk.Next() {
			if !s.wholeWithoutStop() {
				return llm.Chunk{}, s.fail(s.endFailure())
			}
			// A clean end after the stop reason: message_stop is all
			// that is missing, and the answer is whole, as the native
			// adapter reads it.
			if _, err := s.handle(&anthropic.MessageStreamEventUnion{Type: "message_stop"}); err != nil {
				s.pending = nil
				return llm.Chunk{}, s.fail(err)
			}
			continue
		}
		ev := s.sdk.Current()
		text, err := s.handle(&ev)
		if err != nil {
			s.pending = nil
			return llm.Chunk{}, s.fail(err)
		}
		if text != "" {
			if err := s.grow(len(text), "answer"); err != nil {
				return llm.Chunk{}, s.fail(err)
			}
			s.text.WriteString(text)
			return llm.Chunk{Text: text}, nil
		}
	}
}

// Response returns the answer assembled so far: the text and the tool
// calls Next has returned, and the metadata the provider has sent.
func (s *stream) Response() *llm.Response {
	res := s.res
	res.Text = s.text.String()
	res.ToolCalls = res.ToolCalls[:len(res.ToolCalls):len(res.ToolCalls)]
	if len(res.ToolCalls) == 0 {
		res.ToolCalls = nil
	}
	return s.c.clean(&res)
}

// Close releases the connection; Next then returns no more chunks. It is
// safe to call more than once, and from another goroutine to abort a Next
// that is waiting for the server.
func (s *stream) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	return s.sdk.Close()
}

// fail records f as the stream's outcome and releases the connection.
func (s *stream) fail(f error) error {
	s.err = f
	if s.closed.CompareAndSwap(false, true) {
		s.sdk.Close()
	}
	return f
}

// failure starts the error for a stream that started: status, request id,
// rate limit of its response.
func (s *stream) failure(kind llm.Kind) *llm.Error {
	r := s.c.reply(s.raw)
	f := s.c.p.ep.Failure(r, kind)
	if f.RequestID == "" {
		f.RequestID = requestID(r.Header)
	}
	return f
}

// closedError is what Next returns after Close.
func (s *stream) closedError() *llm.Error {
	f := s.failure(llm.KindCanceled)
	f.Message = "the stream was closed before the answer was complete"
	f.Err = http.ErrBodyReadAfterClose
	return s.c.redact(f)
}

// wholeWithoutStop reports whether the stream ended cleanly (no error, no
// cut, not closed, not canceled) after message_delta's stop reason: whole
// though its message_stop never came.
func (s *stream) wholeWithoutStop() bool {
	return s.res.FinishReason != "" && s.sdk.Err() == nil && s.c.refusal() == nil &&
		s.ctx.Err() == nil && !s.closed.Load()
}

// endFailure is the error for a stream the SDK stopped reading before
// message_stop.
func (s *stream) endFailure() *llm.Error {
	if f := s.c.refusal(); f != nil {
		return f // the Exchange cut the stream: the SDK saw only that
	}
	err := s.sdk.Err()
	var ae *anthropic.Error
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &ae):
		return s.c.apiError(s.raw.StatusCode, s.raw.Header, []byte(ae.RawJSON()))
	case s.ctx.Err() != nil:
		f := s.failure(llm.KindOf(s.ctx.Err()))
		f.Err = s.ctx.Err()
		f.Message = "reading the event stream: " + f.Err.Error()
		if err != nil && !errors.Is(err, s.ctx.Err()) {
			f.Err = errors.Join(s.ctx.Err(), wire.Opaque(err))
		}
		return s.c.redact(f)
	case s.closed.Load():
		return s.closedError()
	case err == nil:
		f := s.failure(llm.KindConnection)
		f.Err = io.ErrUnexpectedEOF
		f.Message = "the stream ended before the answer was complete"
		return s.c.redact(f)
	case errors.As(err, &syn), errors.As(err, &typ):
		f := s.failure(llm.KindServer)
		f.Err = err
		f.Message = fmt.Sprintf("an event is not the expected JSON (%v)", err)
		return s.c.redact(f)
	case strings.HasPrefix(err.Error(), "received error while streaming"):
		// An error event the SDK could not read as an API error.
		f := s.failure(llm.KindServer)
		f.Message = "the stream sent an error event that is not the expected JSON"
		f.Detail = s.c.detail(strings.TrimPrefix(err.Error(), "received error while streaming: "))
		return s.c.redact(f)
	}
	return s.c.redact(s.c.transportError(s.failure(llm.KindConnection), "reading the event stream", err))
}

// handle reads one event, returning the text it adds; see Stream.
func (s *stream) handle(ev *anthropic.MessageStreamEventUnion) (string, error) {
	switch ev.Type {
	case "message_start":
		m := &ev.Message
		if m.ID != "" {
			s.res.ID = m.ID
		}
		if m.Model != "" {
			s.res.Model = string(m.Model)
		}
		s.usage(m.Usage.InputTokens, m.Usage.CacheCreationInputTokens, m.Usage.CacheReadInputTokens, m.Usage.OutputTokens)
	case "content_block_start":
		cb := &ev.ContentBlock
		switch cb.Type {
		case "text":
			return cb.Text, nil
		case "tool_use":
			return "", s.start(ev.Index, cb.ID, cb.Name, cb.JSON.Input.Raw())
		}
	case "content_block_delta":
		switch ev.Delta.Type {
		case "text_delta":
			return ev.Delta.Text, nil
		case "input_json_delta":
			return "", s.appendArgs(ev.Index, ev.Delta.PartialJSON)
		}
	case "content_block_stop":
		for i := range s.open {
			if s.open[i].index == ev.Index {
				return "", s.finish(i)
			}
		}
	case "message_delta":
		if r := string(ev.Delta.StopReason); r != "" {
			s.res.FinishReason = r
			s.res.Finish = classify.FinishOf(r)
		}
		u := &ev.Usage
		s.usage(u.InputTokens, u.CacheCreationInputTokens, u.CacheReadInputTokens, u.OutputTokens)
	case "message_stop":
		// A block never stopped (a gateway dropping content_block_stop)
		// ends with the message.
		for len(s.open) > 0 {
			if err := s.finish(0); err != nil {
				return "", err
			}
		}
		if f := s.c.refused(s.raw.StatusCode, s.raw.Header, s.res.FinishReason); f != nil {
			return "", f
		}
		s.err = io.EOF
	case "error":
		// An error event without its "event:" line, which the SDK decodes
		// as an event.
		return "", s.c.apiError(s.raw.StatusCode, s.raw.Header, []byte(ev.RawJSON()))
	}
	// ping, other deltas and blocks, and event types added later.
	return "", nil
}

// start opens the tool_use block index.
func (s *stream) start(index int64, id, name, input string) error {
	for i := range s.open {
		if s.open[i].index == index {
			s.open = append(s.open[:i], s.open[i+1:]...) // started twice: the second wins
			break
		}
	}
	if err := s.grow(len(id)+len(name)+len(input), "tool calls"); err != nil {
		return err
	}
	s.open = append(s.open, openCall{index: index, id: id, name: name, input: input})
	return nil
}

// appendArgs appends a piece of the arguments of the tool_use block index;
// a piece for a block not open (a server tool's input) is skipped.
func (s *stream) appendArgs(index int64, piece string) error {
	for i := range s.open {
		if c := &s.open[i]; c.index == index {
			if err := s.grow(len(piece), "tool calls"); err != nil {
				return err
			}
			c.args = append(c.args, piece...)
			return nil
		}
	}
	return nil
}

// finish closes open call i: it becomes a pending chunk.
func (s *stream) finish(i int) error {
	oc := s.open[i]
	s.open = append(s.open[:i], s.open[i+1:]...)
	args := json.RawMessage(oc.args)
	if len(args) == 0 {
		args = anthropicwire.Arguments(json.RawMessage(oc.input))
	}
	if !json.Valid(args) {
		f := s.failure(llm.KindInvalidOutput)
		f.Message = fmt.Sprintf("the streamed arguments of tool call %d (%s) are not JSON", len(s.res.ToolCalls)+len(s.pending), s.c.detail(oc.name))
		return s.c.redact(f)
	}
	call := llm.ToolCall{ID: s.c.calls.ID(oc.id), Name: oc.name, Arguments: args}
	s.pending = append(s.pending, llm.Chunk{ToolCall: &call})
	return nil
}

// grow counts n more bytes of the answer, failing once they exceed
// Config.MaxResponseBytes.
func (s *stream) grow(n int, what string) error {
	s.bytes += int64(n)
	if limit := s.c.p.ep.MaxBytes; s.bytes > limit {
		f := s.failure(llm.KindServer)
		f.Message = fmt.Sprintf("the streamed %s is longer than %d bytes; raise MaxResponseBytes if answers are meant to be this large", what, limit)
		return s.c.redact(f)
	}
	return nil
}

// usage applies the cumulative counts an event carries: a count never goes
// down, so a 0 for a count not sent changes nothing.
func (s *stream) usage(input, cacheCreation, cacheRead, output int64) {
	up := func(n *int, v int64) {
		if int(v) > *n {
			*n = int(v)
		}
	}
	up(&s.input, input)
	up(&s.cacheCreation, cacheCreation)
	up(&s.cacheRead, cacheRead)
	up(&s.res.Usage.OutputTokens, output)
	s.res.Usage.InputTokens = s.input + s.cacheCreation + s.cacheRead
	s.res.Usage.CacheReadTokens, s.res.Usage.CacheWriteTokens = s.cacheRead, s.cacheCreation
}
