package fake

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
)

// ToolCall is one tool call an answer makes (see CallTools).
type ToolCall struct {
	// ID is the call's id. By default the fake generates one in the format's
	// style: toolu_fake_N_I on Anthropic, call_fake_N_I on OpenAI, where N is
	// the server's request sequence number and I the call's 0-based index.
	// Gemini function calls carry an id only when ID is set.
	ID string
	// Name is the tool's name.
	Name string
	// Arguments is the call's input, a JSON object as text; "" means {}.
	// It is the tool_use block's input on Anthropic and function.arguments
	// (a string) on OpenAI.
	Arguments string
}

// ToolResult is one tool result a request sent back: an Anthropic
// tool_result content block, an OpenAI message with role "tool" or a Gemini
// functionResponse part.
type ToolResult struct {
	// ID is the id of the call it answers: tool_use_id or tool_call_id (for
	// Gemini, the functionResponse's id, else its name).
	ID string
	// Content is the result's text: the content string, or its text blocks
	// (parts) concatenated (for Gemini, the response object as compact JSON).
	Content string
	// IsError is Anthropic's is_error (always false on OpenAI).
	IsError bool
}

// CallTools is an answer that calls tools: Anthropic tool_use content blocks
// with stop_reason tool_use, or an OpenAI message whose content is null and
// whose tool_calls list the calls, with finish_reason tool_calls. Add text
// before the calls with Answer(text).ToolCalls(calls...) instead.
//
// Streamed, each Anthropic call is a content_block_start (tool_use, input
// {}), input_json_delta events carrying its arguments in several pieces and
// a content_block_stop; each OpenAI call is a delta.tool_calls entry at its
// index with its id, type and name, then deltas of function.arguments in
// several pieces. The calls come after the text, so a stream fault
// (ErrorAfter, StallAfter, CutAfter) strikes before them.
//
// CallTools panics if an Arguments is neither "" nor a JSON object.
func CallTools(calls ...ToolCall) Outcome {
	return Answer("").ToolCalls(calls...)
}

// ToolCalls adds tool calls to an answer, after its text (see CallTools), and
// makes its default finish reason tool_use (Anthropic) or tool_calls
// (OpenAI). It panics if an Arguments is neither "" nor a JSON object.
func (o Outcome) ToolCalls(calls ...ToolCall) Outcome {
	for _, c := range calls {
		if c.Arguments == "" {
			continue
		}
		var m map[string]json.RawMessage
		if json.Unmarshal([]byte(c.Arguments), &m) != nil || m == nil {
			panic("fake: ToolCall " + strconv.Quote(c.Name) + ": Arguments must be a JSON object, not " + c.Arguments)
		}
	}
	o.tools = append(slices.Clip(o.tools), calls...)
	return o
}

// Refusal is an answer in which the model declines. On OpenAI it is a
// message whose refusal is text and whose content is null, with
// finish_reason stop (streamed as delta.refusal chunks). On Anthropic it is
// the text as a text block with stop_reason refusal and stop_details
// {"type":"refusal","category":null,"explanation":null}.
func Refusal(text string) Outcome {
	o := Answer(text)
	o.refusal = true
	return o
}

// Cached sets how many of an answer's input tokens were read from the prompt
// cache, as llm.Usage.CacheReadTokens reports them: OpenAI
// usage.prompt_tokens_details.cached_tokens, Gemini
// cachedContentTokenCount (both counted within the prompt tokens, as those
// APIs count them) and Anthropic usage.cache_read_input_tokens (on
// Anthropic, Bedrock and Vertex; input_tokens is then what is left of
// Usage's in, as Anthropic counts them apart). The default is 0; a stream
// reports them from its first event, so a stream cut short still does.
func (o Outcome) Cached(n int) Outcome {
	o.cached = n
	return o
}

// CacheWrite sets how many of an answer's input tokens were written to the
// prompt cache, as llm.Usage.CacheWriteTokens reports them: Anthropic
// usage.cache_creation_input_tokens and cache_creation's
// ephemeral_5m_input_tokens (on Anthropic, Bedrock and Vertex;
// input_tokens is then what is left of Usage's in). OpenAI and Gemini
// report no cache writes: there they stay plain prompt tokens. The default
// is 0.
func (o Outcome) CacheWrite(n int) Outcome {
	o.written = n
	return o
}

// toolCall is a ToolCall with its id resolved.
type toolCall struct {
	id, name string
	args     string // a JSON object, compact
}

func resolveTools(calls []ToolCall, f Format, seq int) []toolCall {
	out := make([]toolCall, len(calls))
	for i, c := range calls {
		id := c.ID
		if id == "" {
			prefix := "call_fake_"
			if f == Anthropic {
				prefix = "toolu_fake_"
			}
			id = prefix + strconv.Itoa(seq) + "_" + strconv.Itoa(i)
		}
		args := []byte("{}")
		if c.Arguments != "" {
			var b bytes.Buffer
			if json.Compact(&b, []byte(c.Arguments)) == nil {
				args = b.Bytes()
			}
		}
		out[i] = toolCall{id: id, name: c.Name, args: string(args)}
	}
	return out
}

// splitArgs cuts a call's arguments into the pieces a stream sends: the
// empty string first, as the real APIs start, then up to three pieces.
func splitArgs(args string) []string {
	parts := []string{""}
	n := max(1, (len(args)+2)/3)
	for len(args) > 0 {
		k := min(n, len(args))
		parts = append(parts, args[:k])
		args = args[k:]
	}
	return parts
}
