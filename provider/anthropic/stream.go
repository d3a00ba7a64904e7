package anthropic

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"

	"github.com/backstop-llm/backstop/internal/classify"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/anthropicwire"
	"github.com/backstop-llm/backstop/provider/internal/wire"
)

var _ llm.StreamProvider = (*Provider)(nil)

// streamRequest is the Messages API request body asking for a stream.
type streamRequest struct {
	request
	Stream bool `json:"stream"`
}

// Stream sends req to the Messages API as exactly one HTTP request with
// "stream": true and returns once the response headers have arrived. The
// body is Complete's plus "stream": true (Params.Extra can still override
// any key).
//
// A failure before the stream starts (a transport error, an error status)
// is the *llm.Error Complete would return. A 2xx with a JSON body instead
// of an event stream (a gateway that does not stream) is parsed as
// Complete parses it: its tool calls are delivered as one chunk each, then
// its text as one chunk; its error is returned here.
//
// The returned llm.Stream reads the server-sent events on the caller's
// goroutine: each text_delta is a Chunk; message_start gives the id, model
// and input usage (cache reads and writes included), message_delta the
// stop reason (FinishReason and Finish) and the output usage; message_stop
// ends the answer with io.EOF. A tool_use block is assembled from its
// content_block_start (id, name) and its input_json_delta pieces, and
// delivered as a Chunk with ToolCall set (Arguments {} when it had none)
// once the block has stopped, before the text that follows it; it is also
// appended to Response().ToolCalls. Blocks may interleave: each is tracked
// by its index. Ids are named as Complete names them.
// Pings, other deltas (thinking, signatures, citations), other blocks and
// unknown events are skipped.
//
// Next fails with an *llm.Error on an error event (classified by its error
// type as Complete classifies error bodies, with HTTP status 200), a
// refusal (KindContentFilter, at message_stop), an event that is not the
// expected JSON (KindServer), a tool call whose assembled arguments are
// not JSON (KindInvalidOutput), a stream that ends before the stop reason
// (KindConnection) or a canceled ctx (KindCanceled). A line, an event, the
// assembled text or the assembled tool calls (ids, names and arguments
// together) longer than Config.MaxResponseBytes fail with KindServer.
func (p *Provider) Stream(ctx context.Context, req llm.Request) (llm.Stream, error) {
	ids := newToolIDs()
	wr, err := p.newRequest(req, &ids)
	if err != nil {
		return nil, err
	}
	body, err := p.ep.Encode(streamRequest{request: *wr, Stream: true}, req.Params.Extra)
	if err != nil {
		return nil, err
	}
	r, rc, err := p.ep.Open(ctx, body)
	if err != nil {
		return nil, err
	}
	calls := wire.NewCallIDs(req.Messages, &ids)
	if rc == nil {
		res, err := p.parse(r, &calls)
		if err != nil {
			return nil, err
		}
		ev := &eventState{ready: append([]llm.ToolCall(nil), res.ToolCalls...)}
		return &stream{Stream: p.ep.Whole(r, res), ev: ev}, nil
	}
	ev := p.events(r, &calls)
	return &stream{Stream: p.ep.NewStream(ctx, r, rc, ev.handle), ev: ev}, nil
}

// stream is the llm.Stream of one answer: wire.Stream reads the events and
// assembles the text; stream adds the tool calls the events finish
// (eventState.ready), returned before whatever wire.Stream returns next.
// A text chunk that arrives behind finished calls is held until they have
// been returned, so the chunks keep the order of the events.
type stream struct {
	*wire.Stream
	ev *eventState
	// held is a text chunk wire.Stream returned while calls were ready:
	// returned after them. It is in wire.Stream's text already.
	held string
	// sent counts the tool calls returned.
	sent int
	// closed is set by Close: what is held or ready is dropped.
	closed atomic.Bool
}

// Next returns the next tool call or piece of text; see Provider.Stream.
func (s *stream) Next() (llm.Chunk, error) {
	if s.closed.Load() {
		return s.Stream.Next() // the end, the failure, or KindCanceled
	}
	if len(s.ev.ready) == 0 {
		if s.held != "" {
			t := s.held
			s.held = ""
			return llm.Chunk{Text: t}, nil
		}
		c, err := s.Stream.Next()
		if len(s.ev.ready) == 0 {
			return c, err // text, the end or a failure: the common case
		}
		// The events read finished calls before c (or the end, or a
		// failure, which wire.Stream returns again on the next call).
		if err == nil {
			s.held = c.Text
		}
	}
	call := s.ev.ready[0]
	s.ev.ready[0] = llm.ToolCall{}
	s.ev.ready = s.ev.ready[1:]
	s.sent++
	return llm.Chunk{ToolCall: &call}, nil
}

// Close releases the connection; Next then returns no more chunks. It is
// safe to call more than once, and from another goroutine to abort a Next
// that is waiting for the server.
func (s *stream) Close() error {
	s.closed.Store(true)
	return s.Stream.Close()
}

// Response returns the answer assembled so far: the text and the tool
// calls Next has returned, and the metadata the provider has sent.
func (s *stream) Response() *llm.Response {
	res := s.Stream.Response()
	res.Text = res.Text[:len(res.Text)-len(s.held)]
	if s.sent == 0 {
		res.ToolCalls = nil
	} else {
		res.ToolCalls = res.ToolCalls[:s.sent:s.sent]
	}
	return res
}

// streamUsage is the usage of message_start and message_delta. Every count
// is cumulative; an absent one is nil.
type streamUsage struct {
	InputTokens              *int `json:"input_tokens"`
	OutputTokens             *int `json:"output_tokens"`
	CacheCreationInputTokens *int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int `json:"cache_read_input_tokens"`
}

// eventState is what one stream has learned across events.
type eventState struct {
	p *Provider
	r *wire.Reply
	// ids names the calls as the caller is given them (see wire.CallIDs).
	ids *wire.CallIDs
	// The three parts of the input count, kept apart because
	// message_delta may update any of them.
	input, cacheCreation, cacheRead int
	// open are the tool_use blocks started and not yet stopped.
	open []openCall
	// ready are the calls finished and not yet returned by Next.
	ready []llm.ToolCall
	// toolBytes counts the ids, names and arguments of the calls, open
	// and finished, against Config.MaxResponseBytes.
	toolBytes int64
	// delta is the content_block_delta being read.
	delta deltaEvent
}

// deltaEvent is a content_block_delta: a piece of text, of a tool call's
// arguments, or of a block the adapter skips.
type deltaEvent struct {
	Index int `json:"index"`
	Delta struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
	} `json:"delta"`
}

// openCall is a tool_use block being streamed.
type openCall struct {
	index    int
	id, name string
	// input is the block's input at content_block_start, used when no
	// input_json_delta follows.
	input json.RawMessage
	args  []byte
}

func (p *Provider) events(r *wire.Reply, ids *wire.CallIDs) *eventState {
	return &eventState{p: p, r: r, ids: ids}
}

// handle reads one event; see Stream.
func (s *eventState) handle(ev wire.Event, res *llm.Response) (string, bool, error) {
	name := ev.Type
	switch {
	case ev.End && res.FinishReason == "":
		return "", false, nil // cut before message_delta's stop_reason
	case ev.End:
		// A clean end after the stop_reason without message_stop: the
		// answer is whole.
		name = "message_stop"
	case name == "" || name == "message":
		// No "event:" line (a gateway that drops them): the JSON says.
		var t struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(ev.Data, &t); err != nil {
			return "", false, err
		}
		name = t.Type
	}
	switch name {
	case "message_start":
		var e struct {
			Message struct {
				ID    string      `json:"id"`
				Model string      `json:"model"`
				Usage streamUsage `json:"usage"`
			} `json:"message"`
		}
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			return "", false, err
		}
		if e.Message.ID != "" {
			res.ID = e.Message.ID
		}
		if e.Message.Model != "" {
			res.Model = e.Message.Model
		}
		s.usage(&e.Message.Usage, res)
	case "content_block_start":
		var e struct {
			Index        int   `json:"index"`
			ContentBlock block `json:"content_block"`
		}
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			return "", false, err
		}
		switch e.ContentBlock.Type {
		case "text":
			return e.ContentBlock.Text, false, nil
		case "tool_use":
			return "", false, s.start(e.Index, &e.ContentBlock)
		}
	case "content_block_delta":
		// The one event per piece of text: decoded into the stream's own
		// struct, reset, rather than a new one each time.
		e := &s.delta
		*e = deltaEvent{}
		if err := json.Unmarshal(ev.Data, e); err != nil {
			return "", false, err
		}
		switch e.Delta.Type {
		case "text_delta":
			return e.Delta.Text, false, nil
		case "input_json_delta":
			return "", false, s.appendArgs(e.Index, e.Delta.PartialJSON)
		}
	case "content_block_stop":
		if len(s.open) == 0 {
			break // a text or thinking block: nothing to finish
		}
		var e struct {
			Index int `json:"index"`
		}
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			return "", false, err
		}
		for i := range s.open {
			if s.open[i].index == e.Index {
				return "", false, s.finish(i, res)
			}
		}
	case "message_delta":
		var e struct {
			Delta struct {
				StopReason string `json:"stop_reason"`
			} `json:"delta"`
			Usage streamUsage `json:"usage"`
		}
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			return "", false, err
		}
		if e.Delta.StopReason != "" {
			res.FinishReason = e.Delta.StopReason
			res.Finish = classify.FinishOf(e.Delta.StopReason)
		}
		s.usage(&e.Usage, res)
	case "message_stop":
		// A block never stopped (a gateway dropping content_block_stop)
		// ends with the message.
		for len(s.open) > 0 {
			if err := s.finish(0, res); err != nil {
				return "", false, err
			}
		}
		if f := s.p.refused(s.r, res.FinishReason); f != nil {
			return "", false, f
		}
		return "", true, nil
	case "error":
		return "", false, s.p.parseError(&wire.Reply{Status: s.r.Status, Header: s.r.Header,
			Received: s.r.Received, Body: ev.Data})
	}
	// ping, content_block_stop of other blocks, and event types added later.
	return "", false, nil
}

// start opens the tool_use block index.
func (s *eventState) start(index int, bl *block) error {
	for i := range s.open {
		if s.open[i].index == index {
			// The same block started twice: the second start wins.
			s.open = append(s.open[:i], s.open[i+1:]...)
			break
		}
	}
	if err := s.grow(len(bl.ID) + len(bl.Name) + len(bl.Input)); err != nil {
		return err
	}
	s.open = append(s.open, openCall{index: index, id: bl.ID, name: bl.Name, input: bl.Input})
	return nil
}

// appendArgs appends a piece of the arguments of the tool_use block index;
// a piece for a block not open (a server tool's input) is skipped.
func (s *eventState) appendArgs(index int, piece string) error {
	for i := range s.open {
		if c := &s.open[i]; c.index == index {
			if err := s.grow(len(piece)); err != nil {
				return err
			}
			c.args = append(c.args, piece...)
			return nil
		}
	}
	return nil
}

// finish closes open call i: it joins res.ToolCalls and ready.
func (s *eventState) finish(i int, res *llm.Response) error {
	c := s.open[i]
	s.open = append(s.open[:i], s.open[i+1:]...)
	args := json.RawMessage(c.args)
	if len(args) == 0 {
		args = anthropicwire.Arguments(c.input)
	}
	if !json.Valid(args) {
		f := s.p.ep.Failure(s.r, llm.KindInvalidOutput)
		f.Message = fmt.Sprintf("the streamed arguments of tool call %d (%s) are not JSON", len(res.ToolCalls), s.p.ep.Detail(c.name))
		return s.p.ep.Redact(f)
	}
	call := llm.ToolCall{ID: s.ids.ID(c.id), Name: c.name, Arguments: args}
	res.ToolCalls = append(res.ToolCalls, call)
	s.ready = append(s.ready, call)
	return nil
}

// grow counts n more bytes of tool calls, failing once they exceed
// Config.MaxResponseBytes.
func (s *eventState) grow(n int) error {
	s.toolBytes += int64(n)
	if limit := s.p.ep.MaxBytes; limit > 0 && s.toolBytes > limit {
		f := s.p.ep.Failure(s.r, llm.KindServer)
		f.Message = fmt.Sprintf("the streamed tool calls are longer than %d bytes; raise MaxResponseBytes if answers are meant to be this large", limit)
		return s.p.ep.Redact(f)
	}
	return nil
}

// usage applies the counts u carries. They are cumulative, so a count never
// goes down: a 0 sent for a count not tracked in that event changes
// nothing.
func (s *eventState) usage(u *streamUsage, res *llm.Response) {
	up := func(n *int, v *int) {
		if v != nil && *v > *n {
			*n = *v
		}
	}
	up(&s.input, u.InputTokens)
	up(&s.cacheCreation, u.CacheCreationInputTokens)
	up(&s.cacheRead, u.CacheReadInputTokens)
	up(&res.Usage.OutputTokens, u.OutputTokens)
	res.Usage.InputTokens = s.input + s.cacheCreation + s.cacheRead
	res.Usage.CacheReadTokens, res.Usage.CacheWriteTokens = s.cacheRead, s.cacheCreation
}
