package anthropicsdk

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/backstop-llm/backstop/internal/classify"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/anthropicwire"
)

// answer translates the SDK's Message into the answer, or the error it
// carries: an error body sent with a 2xx (as gateways do), a body without
// a content array, a refusal.
func (c *call) answer(raw *http.Response, msg *anthropic.Message) (*llm.Response, error) {
	r := c.reply(raw)
	if msg == nil {
		return nil, c.redact(c.p.ep.Malformed(r, errors.New("no message")))
	}
	if !msg.JSON.Content.Valid() || msg.JSON.Type.Raw() == `"error"` {
		body := r.Body
		if len(body) == 0 {
			body = []byte(msg.RawJSON())
		}
		var b struct {
			Type  string          `json:"type"`
			Error json.RawMessage `json:"error"`
		}
		if json.Unmarshal(body, &b) == nil && (b.Type == "error" || len(b.Error) > 0 && !bytes.Equal(b.Error, []byte("null"))) {
			return nil, c.apiError(r.Status, r.Header, body) // an error sent with a 2xx
		}
		if !msg.JSON.Content.Valid() {
			return nil, c.redact(c.p.ep.Malformed(r, errors.New(`no "content" array`)))
		}
	}
	if f := c.refused(r.Status, r.Header, string(msg.StopReason)); f != nil {
		return nil, f
	}
	u := msg.Usage
	return c.clean(&llm.Response{
		Text:         text(msg.Content),
		Model:        string(msg.Model),
		ID:           msg.ID,
		RequestID:    requestID(r.Header),
		FinishReason: string(msg.StopReason),
		Usage: llm.Usage{
			InputTokens:      int(u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens),
			OutputTokens:     int(u.OutputTokens),
			CacheReadTokens:  int(u.CacheReadInputTokens),
			CacheWriteTokens: int(u.CacheCreationInputTokens),
		},
		RateLimit: classify.VendorAnthropic.RateLimit(r.Header, r.Received),
		ToolCalls: c.toolCalls(msg.Content),
		Finish:    classify.FinishOf(string(msg.StopReason)),
	}), nil
}

// refused returns the error for an answer the model declined to give
// (stop_reason refusal), as the native adapter returns it; nil for any
// other stop reason.
func (c *call) refused(status int, h http.Header, stopReason string) *llm.Error {
	if stopReason != "refusal" {
		return nil
	}
	r := c.reply(nil)
	r.Status, r.Header = status, h
	f := c.p.ep.Failure(r, llm.KindContentFilter)
	if f.RequestID == "" {
		f.RequestID = requestID(h)
	}
	f.Code = stopReason
	f.Message = "the model declined to answer (stop_reason refusal)"
	return c.redact(f)
}

// toolCalls returns the calls of the tool_use blocks, in order (the blocks
// of server tools, which the API runs itself, are skipped); nil when there
// are none. An id the request translated comes back as the caller's, one
// the conversation holds already is renamed (see wire.CallIDs); a call
// without input has the arguments {}.
func (c *call) toolCalls(blocks []anthropic.ContentBlockUnion) []llm.ToolCall {
	var calls []llm.ToolCall
	for i := range blocks {
		if bl := &blocks[i]; bl.Type == "tool_use" {
			calls = append(calls, anthropicwire.ToolCall(&c.calls, bl.ID, bl.Name, bl.Input))
		}
	}
	return calls
}

// text concatenates the text blocks, ignoring the others.
func text(blocks []anthropic.ContentBlockUnion) string {
	n, last := 0, -1
	for i := range blocks {
		if blocks[i].Type == "text" {
			n += len(blocks[i].Text)
			last = i
		}
	}
	switch {
	case last < 0:
		return ""
	case n == len(blocks[last].Text):
		return blocks[last].Text
	}
	var sb strings.Builder
	sb.Grow(n)
	for i := range blocks {
		if blocks[i].Type == "text" {
			sb.WriteString(blocks[i].Text)
		}
	}
	return sb.String()
}
