package genai

import (
	"encoding/json"
	"strings"

	gg "google.golang.org/genai"

	"github.com/backstop-llm/backstop/internal/classify"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/wire"
)

// answer assembles a response: a whole one, or a stream's chunks one by
// one.
type answer struct {
	text       strings.Builder
	calls      []llm.ToolCall
	ids        wire.CallIDs // names the calls (see toolCall)
	model, id  string
	requestID  string
	finish     string // the first candidate's finishReason as sent
	finishMsg  string
	usage      llm.Usage
	candidates int // responses that carried a candidate
	feedback   *gg.GenerateContentResponsePromptFeedback
}

// add folds one response in and returns the text and the tool calls it
// added. Thought parts (the model's reasoning summaries) are left out.
func (a *answer) add(r *gg.GenerateContentResponse) (string, []llm.ToolCall) {
	if r == nil {
		return "", nil
	}
	if r.ModelVersion != "" {
		a.model = r.ModelVersion
	}
	if r.ResponseID != "" {
		a.id = r.ResponseID
	}
	if a.requestID == "" && r.SDKHTTPResponse != nil && r.SDKHTTPResponse.Headers != nil {
		a.requestID = classify.VendorGoogle.RequestID(r.SDKHTTPResponse.Headers)
	}
	if u := r.UsageMetadata; u != nil {
		// A stream's usage is a running total: the latest replaces it.
		a.usage = llm.Usage{
			InputTokens:  int(u.PromptTokenCount) + int(u.ToolUsePromptTokenCount),
			OutputTokens: int(u.CandidatesTokenCount) + int(u.ThoughtsTokenCount),
			// promptTokenCount counts the cached content too.
			CacheReadTokens: int(u.CachedContentTokenCount),
		}
	}
	if f := r.PromptFeedback; f != nil && f.BlockReason != "" && f.BlockReason != gg.BlockedReasonUnspecified {
		a.feedback = f
	}
	if len(r.Candidates) == 0 || r.Candidates[0] == nil {
		return "", nil
	}
	a.candidates++
	c := r.Candidates[0]
	if c.FinishReason != "" && c.FinishReason != gg.FinishReasonUnspecified {
		a.finish, a.finishMsg = string(c.FinishReason), c.FinishMessage
	}
	if c.Content == nil {
		return "", nil
	}
	var text strings.Builder
	first := len(a.calls)
	for _, part := range c.Content.Parts {
		switch {
		case part == nil:
		case part.FunctionCall != nil:
			if tc, ok := a.toolCall(part.FunctionCall, part.ThoughtSignature); ok {
				a.calls = append(a.calls, tc)
			}
		case part.Thought:
		case part.Text != "":
			text.WriteString(part.Text)
		}
	}
	a.text.WriteString(text.String())
	return text.String(), a.calls[first:]
}

// toolCall returns the llm.ToolCall of a call the model made: its id
// named by a.ids (a stable call_<n> when Gemini sent none, n counting the
// calls of the conversation; one the conversation holds already, ignoring
// signatures, renamed <id>_2: see wire.CallIDs) with its thought signature
// appended (see joinID), and its arguments as a JSON object. A call
// without a name is dropped.
func (a *answer) toolCall(fc *gg.FunctionCall, sig []byte) (llm.ToolCall, bool) {
	if fc.Name == "" {
		return llm.ToolCall{}, false
	}
	id := a.ids.ID(fc.ID)
	args := json.RawMessage("{}")
	if len(fc.Args) > 0 {
		if b, err := json.Marshal(fc.Args); err == nil {
			args = b
		}
	}
	return llm.ToolCall{ID: joinID(id, sig), Name: fc.Name, Arguments: args}, true
}

// blocked returns the error of a blocked prompt (promptFeedback.blockReason)
// or of a candidate a content filter stopped (SAFETY, PROHIBITED_CONTENT,
// BLOCKLIST, SPII, RECITATION, …) in attempt at, or nil.
func (a *answer) blocked(p *Provider, at *attempt) *llm.Error {
	switch {
	case a.feedback != nil:
		reason := string(a.feedback.BlockReason)
		if !statusName(reason) || len(reason) > 64 {
			reason = "" // not an enum value: the provider's words, kept out of Error()
		}
		return at.x.Redact(&llm.Error{Provider: p.name, Kind: llm.KindContentFilter, RequestID: a.requestID,
			Type: reason, Message: "the prompt was blocked (" + reason + ")",
			Detail: at.x.Detail(a.feedback.BlockReasonMessage)})
	case classify.FinishOf(a.finish) == llm.FinishContentFilter:
		return at.x.Redact(&llm.Error{Provider: p.name, Kind: llm.KindContentFilter, RequestID: a.requestID,
			Type: a.finish, Message: "the answer was blocked (" + a.finish + ")", Detail: at.x.Detail(a.finishMsg)})
	}
	return nil
}

// response returns the answer assembled so far. Gemini ends a turn that
// calls tools with STOP: with tool calls, Finish is FinishToolUse.
func (a *answer) response() *llm.Response {
	r := &llm.Response{
		Text:         a.text.String(),
		Model:        a.model,
		ID:           a.id,
		RequestID:    a.requestID,
		FinishReason: a.finish,
		Usage:        a.usage,
		Finish:       classify.FinishOf(a.finish),
	}
	if len(a.calls) > 0 {
		r.ToolCalls = append([]llm.ToolCall(nil), a.calls...)
		if r.Finish == llm.FinishStop {
			r.Finish = llm.FinishToolUse
		}
	}
	return r
}
