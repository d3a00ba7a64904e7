package openai

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/backstop-llm/backstop/internal/classify"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/openaiwire"
	"github.com/backstop-llm/backstop/provider/internal/wire"
)

var _ llm.StreamProvider = (*Provider)(nil)

// streamRequest is the Chat Completions request body asking for a stream,
// with the usage in a last chunk.
type streamRequest struct {
	request
	Stream        bool          `json:"stream"`
	StreamOptions streamOptions `json:"stream_options"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// Stream sends req to the Chat Completions endpoint as exactly one HTTP
// request with "stream": true and "stream_options": {"include_usage": true},
// and returns once the response headers have arrived. The body is
// Complete's plus those two keys; Params.Extra can still override any key
// (set "stream_options" to nil for a server that rejects it).
//
// A failure before the stream starts (a transport error, an error status)
// is the *llm.Error Complete would return. A 2xx with a JSON body instead
// of an event stream (a server that does not stream) is parsed as Complete
// parses it: its text is delivered as one chunk, then each of its tool
// calls as one chunk; its error is returned here.
//
// The returned llm.Stream reads the server-sent events on the caller's
// goroutine: the delta content of choice 0 is a text Chunk; its tool_calls
// deltas are assembled by index (the first piece of an index carries the
// call's id and name, every piece a piece of its arguments; for servers
// that omit the index, or give parallel calls one index, a piece with a
// new id opens a new call) and, once the
// choice's finish_reason has arrived (or at "data: [DONE]" when none
// does), each call is one Chunk with ToolCall set, in index order,
// delivered before the next text or the end, and added to
// Response().ToolCalls. A call's id and arguments are translated as
// Complete translates them. Its finish_reason (and Finish), the id, the
// model and the usage of the last chunk are recorded; "data: [DONE]" ends
// the answer with io.EOF, and so does a body that ends cleanly after the
// finish_reason without it (some compatible servers never send it).
//
// Next fails with an *llm.Error on an event carrying a top-level "error"
// (classified as Complete classifies error bodies, with HTTP status 200),
// a content_filter finish or a refusal (KindContentFilter, at [DONE]), an
// event that is not the expected JSON (KindServer), a stream that ends
// before the finish_reason (KindConnection) or a canceled ctx (KindCanceled). A line,
// an event, the assembled text or the assembled tool calls (ids, names and
// arguments together) longer than Config.MaxResponseBytes fail with
// KindServer. Tool calls assembled but not yet delivered when the stream
// fails are not delivered: the answer is incomplete.
func (p *Provider) Stream(ctx context.Context, req llm.Request) (llm.Stream, error) {
	ids := openaiwire.ToolIDs()
	r, err := p.newRequest(req, &ids)
	if err != nil {
		return nil, err
	}
	body, err := p.ep.Encode(streamRequest{request: *r, Stream: true,
		StreamOptions: streamOptions{IncludeUsage: true}}, req.Params.Extra)
	if err != nil {
		return nil, err
	}
	reply, rc, err := p.ep.Open(ctx, body)
	if err != nil {
		return nil, err
	}
	st := &stream{state: eventState{p: p, r: reply, ids: wire.NewCallIDs(req.Messages, &ids)}}
	if rc == nil {
		res, err := p.parse(reply, &st.state.ids)
		if err != nil {
			return nil, err
		}
		st.tail = res.ToolCalls
		st.inner = p.ep.Whole(reply, res)
		return st, nil
	}
	st.inner = p.ep.NewStream(ctx, reply, rc, st.state.handle)
	return st, nil
}

// chunk is one chat.completion.chunk, or an error event.
type chunk struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content string `json:"content"`
			Refusal string `json:"refusal"`
			// ToolCalls is a pointer so that a choice of text alone
			// costs what it did before tool calls were read (64 bytes).
			ToolCalls *[]toolDelta `json:"tool_calls"`
		} `json:"delta"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage          `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// toolDelta is one piece of a streamed tool call.
type toolDelta struct {
	Index    *int   `json:"index"` // nil when a compatible server omits it
	ID       string `json:"id"`
	Function struct {
		Name      string    `json:"name"`
		Arguments arguments `json:"arguments"`
	} `json:"function"`
}

// pendingCall is a streamed tool call being assembled.
type pendingCall struct {
	index    int // the call's index; without one, its position
	id, name string
	args     strings.Builder
}

// callOverhead is what each streamed call counts against MaxResponseBytes
// beyond its id, name and arguments, so that a server sending endless
// empty calls is stopped too.
const callOverhead = 64

// eventState is what one stream has learned across events.
type eventState struct {
	p       *Provider
	r       *wire.Reply
	ids     wire.CallIDs    // names the calls (see parse)
	refusal strings.Builder // the refusal text, up to MaxBytes

	calls   []*pendingCall       // the tool calls being assembled, as they opened
	byIndex map[int]*pendingCall // the call open at each index
	last    *pendingCall         // the call a piece last went to
	size    int64                // bytes of every tool call so far
	ready   []llm.ToolCall       // tool calls assembled, not yet delivered
}

// done is the data of the event that ends the stream.
var done = []byte("[DONE]")

// handle reads one event; see Stream.
func (s *eventState) handle(ev wire.Event, res *llm.Response) (string, bool, error) {
	data := bytes.TrimSpace(ev.Data)
	switch {
	case ev.End && res.FinishReason == "":
		return "", false, nil // cut before the finish
	case bytes.Equal(data, done), ev.End:
		// [DONE], or a clean end after the finish_reason (and usually the
		// usage): the answer is whole without the sentinel.
		if f := s.p.withheld(s.r, res.FinishReason, s.refusal.String()); f != nil {
			return "", false, f
		}
		s.finishCalls()
		return "", true, nil
	case len(data) == 0 && ev.Type != "error":
		return "", false, nil // a keep-alive of some compatible servers
	}
	var c chunk
	if err := json.Unmarshal(data, &c); err != nil && ev.Type != "error" {
		return "", false, err
	}
	if ev.Type == "error" || len(c.Error) > 0 && !bytes.Equal(c.Error, []byte("null")) {
		return "", false, s.p.parseError(&wire.Reply{Status: s.r.Status, Header: s.r.Header,
			Received: s.r.Received, Body: data})
	}
	if c.ID != "" {
		res.ID = c.ID
	}
	if c.Model != "" {
		res.Model = c.Model
	}
	if c.Usage != nil {
		res.Usage = c.Usage.llm()
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue // another of n choices
		}
		if ch.Delta.Refusal != "" && int64(s.refusal.Len()+len(ch.Delta.Refusal)) <= s.p.ep.MaxBytes {
			s.refusal.WriteString(ch.Delta.Refusal)
		}
		if tcs := ch.Delta.ToolCalls; tcs != nil {
			for j := range *tcs {
				if err := s.addDelta(&(*tcs)[j]); err != nil {
					return "", false, err
				}
			}
		}
		if ch.FinishReason != "" {
			res.FinishReason = ch.FinishReason
			res.Finish = classify.FinishOf(ch.FinishReason)
			s.finishCalls()
		}
		return ch.Delta.Content, false, nil
	}
	return "", false, nil
}

// addDelta adds one piece of a tool call. A piece with an index continues
// the call open at that index, unless it carries an id other than that
// call's (a server giving parallel calls one index, as Gemini's
// compatible endpoint does): then, like the first piece of an index, it
// opens a call. A piece without an index (some compatible servers omit
// it) opens a call when it carries a new id, and otherwise continues the
// call opened last. The piece that opens a call gives its id and name; a
// later piece sets them if that one lacked them (a later repeat is
// ignored) and appends its arguments.
func (s *eventState) addDelta(d *toolDelta) error {
	var pc *pendingCall
	switch {
	case d.Index != nil:
		pc = s.byIndex[*d.Index]
	case d.ID == "" || s.last != nil && s.last.id == d.ID:
		pc = s.last
	}
	if pc != nil && d.ID != "" && pc.id != "" && d.ID != pc.id {
		pc = nil // another call
	}
	grow := int64(len(d.Function.Arguments))
	if pc == nil {
		pc = &pendingCall{index: len(s.calls)}
		if d.Index != nil {
			pc.index = *d.Index
			if s.byIndex == nil {
				s.byIndex = map[int]*pendingCall{}
			}
			s.byIndex[pc.index] = pc
		}
		s.calls = append(s.calls, pc)
		grow += callOverhead
	}
	s.last = pc
	if pc.id == "" {
		pc.id = d.ID
		grow += int64(len(d.ID))
	}
	if pc.name == "" {
		pc.name = d.Function.Name
		grow += int64(len(d.Function.Name))
	}
	if s.size += grow; s.size > s.p.ep.MaxBytes {
		f := s.p.ep.Failure(s.r, llm.KindServer)
		f.Message = fmt.Sprintf("the streamed tool calls are longer than %d bytes; raise MaxResponseBytes if calls are meant to be this large",
			s.p.ep.MaxBytes)
		return s.p.ep.Redact(f)
	}
	pc.args.WriteString(string(d.Function.Arguments))
	return nil
}

// finishCalls moves the calls being assembled to ready, in index order
// (calls sharing an index, or without one, in the order they opened). A
// call without a name (no one can run it) is dropped.
func (s *eventState) finishCalls() {
	if len(s.calls) == 0 {
		return
	}
	slices.SortStableFunc(s.calls, func(a, b *pendingCall) int { return cmp.Compare(a.index, b.index) })
	for _, pc := range s.calls {
		s.ready = openaiwire.AppendCall(s.ready, &s.ids, pc.id, pc.name, pc.args.String())
	}
	clear(s.calls)
	s.calls = s.calls[:0]
	clear(s.byIndex)
	s.last = nil
}

// stream is the llm.Stream of Stream: the endpoint's stream of text, with
// the tool calls the events assembled delivered between its chunks.
type stream struct {
	inner llm.Stream
	state eventState
	// tail are the tool calls of an answer that arrived whole, delivered
	// after its text.
	tail []llm.ToolCall
	// calls are the tool calls delivered so far.
	calls  []llm.ToolCall
	closed atomic.Bool
}

// Next returns the next chunk: a tool call assembled, else the next text.
func (s *stream) Next() (llm.Chunk, error) {
	if !s.closed.Load() && len(s.state.ready) > 0 {
		return s.deliver(), nil
	}
	c, err := s.inner.Next()
	switch {
	case err == io.EOF && !s.closed.Load():
		s.state.ready = append(s.state.ready, s.tail...)
		s.tail = nil
		if len(s.state.ready) > 0 {
			return s.deliver(), nil // the inner stream's io.EOF is sticky
		}
	case err != nil: // the answer is incomplete: drop what is not delivered
		s.state.ready, s.tail = nil, nil
	}
	return c, err
}

// deliver returns the first ready tool call as a chunk.
func (s *stream) deliver() llm.Chunk {
	tc := s.state.ready[0]
	s.state.ready = s.state.ready[1:]
	s.calls = append(s.calls, tc)
	return llm.Chunk{ToolCall: &tc}
}

// Response returns the answer assembled so far, with the tool calls
// delivered so far.
func (s *stream) Response() *llm.Response {
	res := s.inner.Response()
	res.ToolCalls = slices.Clone(s.calls)
	return res
}

// Close releases the connection. It is safe to call more than once, and
// from another goroutine to abort a Next that is waiting for the server.
func (s *stream) Close() error {
	s.closed.Store(true)
	return s.inner.Close()
}
