package anthropic

import (
	"context"
	"encoding/json"

	"github.com/backstop-llm/backstop/llm"
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
// Complete parses it: its answer is delivered as one chunk, its error
// returned here.
//
// The returned llm.Stream reads the server-sent events on the caller's
// goroutine: each text_delta is a Chunk; message_start gives the id, model
// and input usage (cache reads and writes included), message_delta the
// stop reason and the output usage; message_stop ends the answer with
// io.EOF. Pings, other deltas (tool input, thinking) and unknown events are
// skipped. Next fails with an *llm.Error on an error event (classified by
// its error type as Complete classifies error bodies, with HTTP status
// 200), a refusal (KindContentFilter, at message_stop), an event that is
// not the expected JSON (KindServer), a stream that ends before
// message_stop (KindConnection) or a canceled ctx (KindCanceled). A line,
// an event or the assembled text longer than Config.MaxResponseBytes fails
// with KindServer.
func (p *Provider) Stream(ctx context.Context, req llm.Request) (llm.Stream, error) {
	body, err := p.ep.Encode(streamRequest{request: *newRequest(req), Stream: true}, req.Params.Extra)
	if err != nil {
		return nil, err
	}
	r, rc, err := p.ep.Open(ctx, body)
	if err != nil {
		return nil, err
	}
	if rc == nil {
		res, err := p.parse(r)
		if err != nil {
			return nil, err
		}
		return p.ep.Whole(r, res), nil
	}
	return p.ep.NewStream(ctx, r, rc, p.events(r).handle), nil
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
	// The three parts of the input count, kept apart because
	// message_delta may update any of them.
	input, cacheCreation, cacheRead int
}

func (p *Provider) events(r *wire.Reply) *eventState {
	return &eventState{p: p, r: r}
}

// handle reads one event; see Stream.
func (s *eventState) handle(ev wire.Event, res *llm.Response) (string, bool, error) {
	name := ev.Type
	if name == "" || name == "message" {
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
			ContentBlock block `json:"content_block"`
		}
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			return "", false, err
		}
		if e.ContentBlock.Type == "text" {
			return e.ContentBlock.Text, false, nil
		}
	case "content_block_delta":
		var e struct {
			Delta struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"delta"`
		}
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			return "", false, err
		}
		if e.Delta.Type == "text_delta" {
			return e.Delta.Text, false, nil
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
		}
		s.usage(&e.Usage, res)
	case "message_stop":
		if f := s.p.refused(s.r, res.FinishReason); f != nil {
			return "", false, f
		}
		return "", true, nil
	case "error":
		return "", false, s.p.parseError(&wire.Reply{Status: s.r.Status, Header: s.r.Header,
			Received: s.r.Received, Body: ev.Data})
	}
	// ping, content_block_stop and event types added later.
	return "", false, nil
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
}
