package anthropicwire

import (
	"encoding/json"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/wire"
)

// EmptySchema is the input_schema of a tool without one: an object with
// any properties.
var EmptySchema = json.RawMessage(`{"type":"object"}`)

// emptyInput is the input of a tool call without arguments.
var emptyInput = json.RawMessage(`{}`)

// Input returns the input of the tool_use block sent for a tool call with
// the arguments args: args, or {} when there are none.
func Input(args json.RawMessage) json.RawMessage {
	if len(args) == 0 {
		return emptyInput
	}
	return args
}

// Arguments returns the arguments of a tool call the API sent with the
// input input: input, or {} when it is empty or null.
func Arguments(input json.RawMessage) json.RawMessage {
	if len(input) == 0 || string(input) == "null" {
		return emptyInput
	}
	return input
}

// ToolCall returns the next call of the answer, a tool_use block with the
// id id, the name name and the input input: its id named by ids (an id the
// request translated comes back as the caller's, one the conversation
// already holds is renamed), a call without input has the arguments {}.
func ToolCall(ids *wire.CallIDs, id, name string, input json.RawMessage) llm.ToolCall {
	return llm.ToolCall{ID: ids.ID(id), Name: name, Arguments: Arguments(input)}
}
