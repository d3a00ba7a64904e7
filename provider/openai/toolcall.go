package openai

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/wire"
)

// arguments decodes a tool call's function.arguments: a JSON string (as
// OpenAI sends it) as its text; an object or any other JSON value (as some
// compatible servers send it) as its JSON text; null as "".
type arguments string

// UnmarshalJSON implements json.Unmarshaler.
func (a *arguments) UnmarshalJSON(b []byte) error {
	switch {
	case len(b) > 0 && b[0] == '"':
		return json.Unmarshal(b, (*string)(a))
	case bytes.Equal(b, []byte("null")):
		*a = ""
	default:
		*a = arguments(b)
	}
	return nil
}

// toolCall returns the llm.ToolCall of a call the answer made: its id
// translated back through ids (an id the server left out replaced by a
// fresh call_ id, so that the call can be answered), its name, and its
// arguments (see argumentsJSON).
func toolCall(ids *wire.ToolIDs, id, name, args string) llm.ToolCall {
	switch {
	case id == "":
		id = newCallID()
	case ids != nil:
		id = ids.Back(id)
	}
	return llm.ToolCall{ID: id, Name: name, Arguments: argumentsJSON(args)}
}

// argumentsJSON returns the arguments text the model wrote as a JSON value:
// the text itself when it is valid JSON; {} when it is empty; otherwise
// (the model can write broken JSON) the text as a JSON string, so that
// Arguments is always valid JSON and a chain's schema check, not a JSON
// parser, reports the fault.
func argumentsJSON(args string) json.RawMessage {
	b := bytes.TrimSpace([]byte(args))
	switch {
	case len(b) == 0:
		return json.RawMessage("{}")
	case json.Valid(b):
		return json.RawMessage(b)
	}
	q, _ := json.Marshal(args) // a string always marshals
	return json.RawMessage(q)
}

// newCallID returns a fresh id for a call the server sent without one:
// call_ and 24 random hex digits.
func newCallID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "call_" + hex.EncodeToString(b[:])
}
