package anthropic

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/backstop-llm/backstop/internal/classify"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/anthropicwire"
	"github.com/backstop-llm/backstop/provider/internal/wire"
)

// reply is the Messages API response body. An error body has Type "error"
// and Error set; a 2xx is expected to have a content array.
type reply struct {
	Type       string  `json:"type"`
	ID         string  `json:"id"`
	Model      string  `json:"model"`
	Content    []block `json:"content"`
	StopReason string  `json:"stop_reason"`
	Usage      struct {
		InputTokens              int `json:"input_tokens"`
		OutputTokens             int `json:"output_tokens"`
		CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	} `json:"usage"`
	Error *json.RawMessage `json:"error"`
}

// block is one content block of an answer: text, tool_use, or a type the
// adapter skips (thinking, server tools, …).
type block struct {
	Type string `json:"type"`
	Text string `json:"text"`
	// tool_use
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// parse turns a reply into the answer or an *llm.Error, the key redacted.
// ids names the tool calls as the caller is given them: the ids the
// request sent translated back into the caller's, none twice in the
// conversation.
func (p *Provider) parse(r *wire.Reply, ids *wire.CallIDs) (*llm.Response, error) {
	var b reply
	if f := p.ep.Decode(r, &b, p.parseError); f != nil {
		return nil, f
	}
	if b.Type == "error" || b.Error != nil && b.Content == nil {
		return nil, p.parseError(r) // an error sent with a 2xx, as gateways do
	}
	if b.Content == nil {
		return nil, p.ep.Redact(p.ep.Malformed(r, errors.New(`no "content" array`)))
	}
	if f := p.refused(r, b.StopReason); f != nil {
		return nil, f
	}
	u := b.Usage
	return p.ep.Clean(&llm.Response{
		Text:         text(b.Content),
		Model:        b.Model,
		ID:           b.ID,
		RequestID:    r.Header.Get(p.ep.RequestID),
		FinishReason: b.StopReason,
		Usage: llm.Usage{
			InputTokens:      u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens,
			OutputTokens:     u.OutputTokens,
			CacheReadTokens:  u.CacheReadInputTokens,
			CacheWriteTokens: u.CacheCreationInputTokens,
		},
		RateLimit: rateLimit(r.Header, r.Received),
		ToolCalls: toolCalls(b.Content, ids),
		Finish:    classify.FinishOf(b.StopReason),
	}), nil
}

// toolCalls returns the calls of the tool_use blocks, in order; nil when
// there are none. An id the request translated comes back as the caller's,
// one the conversation holds already is renamed (see wire.CallIDs); a call
// without input has the arguments {}.
func toolCalls(blocks []block, ids *wire.CallIDs) []llm.ToolCall {
	var calls []llm.ToolCall
	for i := range blocks {
		if bl := &blocks[i]; bl.Type == "tool_use" {
			calls = append(calls, anthropicwire.ToolCall(ids, bl.ID, bl.Name, bl.Input))
		}
	}
	return calls
}

// refused returns the error for an answer the model declined to give
// (stop_reason refusal), the key redacted; nil for any other stop reason.
func (p *Provider) refused(r *wire.Reply, stopReason string) *llm.Error {
	if stopReason != "refusal" {
		return nil
	}
	f := p.ep.Failure(r, llm.KindContentFilter)
	f.Code = stopReason
	f.Message = "the model declined to answer (stop_reason refusal)"
	return p.ep.Redact(f)
}

// text concatenates the text blocks, ignoring the others (tool_use,
// thinking, …).
func text(blocks []block) string {
	n, last := 0, -1
	for i, bl := range blocks {
		if bl.Type == "text" {
			n += len(bl.Text)
			last = i
		}
	}
	switch {
	case last < 0:
		return ""
	case n == len(blocks[last].Text):
		return blocks[last].Text // one text block (or the others empty): no copy
	}
	var sb strings.Builder
	sb.Grow(n)
	for _, bl := range blocks {
		if bl.Type == "text" {
			sb.WriteString(bl.Text)
		}
	}
	return sb.String()
}

// rateLimit reads the anthropic-ratelimit-* headers, as every adapter of
// Anthropic's API reads them (classify.Vendor.RateLimit).
func rateLimit(h http.Header, received time.Time) llm.RateLimit {
	return classify.VendorAnthropic.RateLimit(h, received)
}
