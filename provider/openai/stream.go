package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"

	"github.com/backstop-llm/backstop/llm"
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
// parses it: its answer is delivered as one chunk, its error returned here.
//
// The returned llm.Stream reads the server-sent events on the caller's
// goroutine: the delta content of choice 0 is a Chunk; its finish_reason,
// the id, the model and the usage of the last chunk are recorded;
// "data: [DONE]" ends the answer with io.EOF. Next fails with an *llm.Error
// on an event carrying a top-level "error" (classified as Complete
// classifies error bodies, with HTTP status 200), a content_filter finish
// or a refusal (KindContentFilter, at [DONE]), an event that is not the
// expected JSON (KindServer), a stream that ends before [DONE]
// (KindConnection) or a canceled ctx (KindCanceled). A line, an event or
// the assembled text longer than Config.MaxResponseBytes fails with
// KindServer.
func (p *Provider) Stream(ctx context.Context, req llm.Request) (llm.Stream, error) {
	body, err := p.ep.Encode(streamRequest{request: *p.newRequest(req), Stream: true,
		StreamOptions: streamOptions{IncludeUsage: true}}, req.Params.Extra)
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
	return p.ep.NewStream(ctx, r, rc, (&eventState{p: p, r: r}).handle), nil
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
		} `json:"delta"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// eventState is what one stream has learned across events.
type eventState struct {
	p       *Provider
	r       *wire.Reply
	refusal strings.Builder // the refusal text, up to MaxBytes
}

// done is the data of the event that ends the stream.
var done = []byte("[DONE]")

// handle reads one event; see Stream.
func (s *eventState) handle(ev wire.Event, res *llm.Response) (string, bool, error) {
	data := bytes.TrimSpace(ev.Data)
	switch {
	case bytes.Equal(data, done):
		if f := s.p.withheld(s.r, res.FinishReason, s.refusal.String()); f != nil {
			return "", false, f
		}
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
		res.Usage = llm.Usage{InputTokens: c.Usage.PromptTokens, OutputTokens: c.Usage.CompletionTokens}
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue // another of n choices
		}
		if ch.FinishReason != "" {
			res.FinishReason = ch.FinishReason
		}
		if ch.Delta.Refusal != "" && int64(s.refusal.Len()+len(ch.Delta.Refusal)) <= s.p.ep.MaxBytes {
			s.refusal.WriteString(ch.Delta.Refusal)
		}
		return ch.Delta.Content, false, nil
	}
	return "", false, nil
}
