package openaiwire

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/wire"
)

// callArguments returns the arguments of a call to replay: its JSON text,
// "{}" when empty.
func callArguments(args json.RawMessage) string {
	if len(bytes.TrimSpace(args)) == 0 {
		return "{}"
	}
	return string(args)
}

// AssistantParts reads message i, m, an assistant message with parts: its
// text (Content and the text parts) and its tool calls, each made by call
// from its id translated through ids, its name and its callArguments. A
// part an assistant message cannot carry (media, a tool result) is
// badPart's error. The text goes out when it is not empty or there are no
// calls.
func AssistantParts[C any](i int, m *llm.Message, ids *wire.ToolIDs, call func(id, name, args string) C,
	badPart func(i, j int, role llm.Role, why string) *llm.Error) (string, []C, *llm.Error) {
	var text strings.Builder
	text.WriteString(m.Content)
	var calls []C
	for j := range m.Parts {
		part := &m.Parts[j]
		switch {
		case part.ToolCall != nil:
			calls = append(calls, call(ids.Out(part.ToolCall.ID), part.ToolCall.Name, callArguments(part.ToolCall.Arguments)))
		case part.Media != nil, part.ToolResult != nil:
			return "", nil, badPart(i, j, m.Role, "an assistant message carries only text and tool calls")
		default:
			text.WriteString(part.Text)
		}
	}
	return text.String(), calls, nil
}
