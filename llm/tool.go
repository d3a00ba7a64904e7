package llm

import "encoding/json"

// Tool is a tool the model may call.
type Tool struct {
	// Name identifies the tool (letters, digits, _ and -, at most 64
	// bytes: the name every provider accepts).
	Name string
	// Description tells the model what the tool does and when to use it.
	Description string
	// InputSchema is the JSON Schema of the tool's arguments (an object
	// schema). Empty means an object with any properties. A chain validates
	// every call's Arguments against it.
	InputSchema json.RawMessage
}

// ToolCall is a call the model made: in Response.ToolCalls, and replayed in
// an assistant message's parts.
type ToolCall struct {
	// ID identifies the call; the ToolResult that answers it carries it as
	// CallID. A chain hands back the ids the provider issued, and accepts
	// any provider's ids in a history: adapters translate an id their
	// provider would reject, on the way out and back. Every id of an answer
	// is unique in its conversation (the request's messages and the
	// answer's other calls): a call the provider sent without an id, or
	// with one the conversation already holds (another provider's, or
	// twice in one answer), is given a fresh one (call_<n>, <id>_2), which
	// the adapters send as any other id.
	ID string
	// Name is the tool called.
	Name string
	// Arguments is the JSON object of arguments.
	Arguments json.RawMessage
}

// ToolResult is what the caller's tool returned for a ToolCall.
type ToolResult struct {
	// CallID is the ID of the ToolCall it answers.
	CallID string
	// Content is the tool's output, as text.
	Content string
	// IsError is true when the tool failed; Content then says how.
	IsError bool
}

// ToolMode says whether the model must call a tool.
type ToolMode uint8

// The tool modes.
const (
	// ToolAuto (the zero value) lets the model choose: answer, or call any
	// tool.
	ToolAuto ToolMode = iota
	// ToolNone forbids tool calls: the model answers in text.
	ToolNone
	// ToolAny makes the model call at least one tool, of its choice.
	ToolAny
	// ToolNamed makes the model call the tool ToolChoice.Name.
	ToolNamed
)

// String returns the mode's name: auto, none, any, tool.
func (m ToolMode) String() string {
	switch m {
	case ToolAuto:
		return "auto"
	case ToolNone:
		return "none"
	case ToolAny:
		return "any"
	case ToolNamed:
		return "tool"
	}
	return "unknown"
}

// ToolChoice says whether and which tool the model must call. The zero
// value is auto.
type ToolChoice struct {
	Mode ToolMode
	// Name is the tool to call, with ToolNamed; empty otherwise.
	Name string
}

// UseTool returns the choice that makes the model call tool name.
func UseTool(name string) ToolChoice { return ToolChoice{Mode: ToolNamed, Name: name} }
