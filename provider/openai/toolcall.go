package openai

import (
	"bytes"
	"encoding/json"
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
