package openai

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/backstop-llm/backstop/internal/classify"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/openaiwire"
	"github.com/backstop-llm/backstop/provider/internal/wire"
)

// reply is the Chat Completions response body. A 2xx is expected to carry
// at least one choice; some compatible servers send an error object instead.
type reply struct {
	ID      string           `json:"id"`
	Model   string           `json:"model"`
	Choices []choice         `json:"choices"`
	Usage   usage            `json:"usage"`
	Error   *json.RawMessage `json:"error"`
}

// usage is the Chat Completions usage object, of a reply and of a stream's
// last chunk. The cached prompt tokens are counted within prompt_tokens.
type usage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

// llm returns u as the caller reads it.
func (u *usage) llm() llm.Usage {
	return llm.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens,
		CacheReadTokens: u.PromptTokensDetails.CachedTokens}
}

type choice struct {
	Message struct {
		Content   string          `json:"content"`
		Refusal   string          `json:"refusal"`
		ToolCalls []replyToolCall `json:"tool_calls"`
	} `json:"message"`
	FinishReason string `json:"finish_reason"`
}

// replyToolCall is a call in the answer's tool_calls.
type replyToolCall struct {
	ID       string `json:"id"`
	Function struct {
		Name      string    `json:"name"`
		Arguments arguments `json:"arguments"`
	} `json:"function"`
}

// parse turns a reply into the answer or an *llm.Error, the key redacted.
// ids names the tool calls of the answer as the caller is given them:
// translated back into the caller's ids (those of the request it
// answers), none twice in the conversation (see wire.CallIDs).
func (p *Provider) parse(r *wire.Reply, ids *wire.CallIDs) (*llm.Response, error) {
	var b reply
	if f := p.ep.Decode(r, &b, p.parseError); f != nil {
		return nil, f
	}
	if len(b.Choices) == 0 {
		if b.Error != nil {
			return nil, p.parseError(r) // an error sent with a 2xx
		}
		return nil, p.ep.Redact(p.ep.Malformed(r, errors.New(`no "choices"`)))
	}
	c := &b.Choices[0]
	if f := p.withheld(r, c.FinishReason, c.Message.Refusal); f != nil {
		return nil, f
	}
	var calls []llm.ToolCall
	for _, tc := range c.Message.ToolCalls {
		calls = openaiwire.AppendCall(calls, ids, tc.ID, tc.Function.Name, string(tc.Function.Arguments))
	}
	return p.ep.Clean(&llm.Response{
		Text:         c.Message.Content,
		Model:        b.Model,
		ID:           b.ID,
		RequestID:    r.Header.Get(p.ep.RequestID),
		FinishReason: c.FinishReason,
		Finish:       classify.FinishOf(c.FinishReason),
		ToolCalls:    calls,
		Usage:        b.Usage.llm(),
		RateLimit:    rateLimit(r.Header, r.Received),
	}), nil
}

// withheld returns the error for an answer withheld by the content filter
// (finish_reason content_filter) or refused by the model (a refusal text),
// the key redacted; nil for neither.
func (p *Provider) withheld(r *wire.Reply, finishReason, refusal string) *llm.Error {
	return openaiwire.Withheld(&p.ep, func(k llm.Kind) *llm.Error { return p.ep.Failure(r, k) }, finishReason, refusal)
}

// rateLimit reads the x-ratelimit-* headers, as every adapter of OpenAI's
// API reads them (classify.Vendor.RateLimit).
func rateLimit(h http.Header, received time.Time) llm.RateLimit {
	return classify.VendorOpenAI.RateLimit(h, received)
}
