package openaisdk

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/wire"
)

// maxToolCallID is the longest tool-call id OpenAI accepts (40 bytes).
const maxToolCallID = 40

// errorPrefix starts the content of a tool result that reports a failure:
// neither API has a field to say so.
const errorPrefix = "Error: "

// schemaName is the name every response format is sent with.
const schemaName = "response"

// newToolIDs returns the tool-call id translation of one request, as the
// native adapter's: ids of at most 40 letters, digits, _ and - go out as
// they are; any other goes out as call_ and 24 hex digits, and comes back
// as the caller's.
func newToolIDs() wire.ToolIDs {
	return wire.ToolIDs{Valid: func(id string) bool { return wire.IDChars(id, maxToolCallID) }, Prefix: "call_"}
}

// toolCall returns the llm.ToolCall of a call the answer made: its id
// translated back through ids (an id the server left out replaced by a
// fresh call_ id, so that the call can be answered), its name, and its
// arguments as JSON (see argumentsJSON).
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
// the text itself when it is valid JSON; {} when it is empty; otherwise the
// text as a JSON string, so that Arguments is always valid JSON.
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

// rawArguments returns a call's arguments as the SDK decoded them, or the
// raw JSON when a compatible server sent an object instead of a string.
func rawArguments(decoded, raw string) string {
	if decoded == "" {
		if r := bytes.TrimSpace([]byte(raw)); len(r) > 0 && r[0] == '{' {
			return string(r)
		}
	}
	return decoded
}

// newCallID returns a fresh id for a call the server sent without one.
func newCallID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "call_" + hex.EncodeToString(b[:])
}

// callArguments returns the arguments of a call to replay: its JSON text,
// "{}" when empty.
func callArguments(args json.RawMessage) string {
	if len(bytes.TrimSpace(args)) == 0 {
		return "{}"
	}
	return string(args)
}

// toolResultText returns a tool result's content, prefixed when it reports
// a failure.
func toolResultText(tr *llm.ToolResult) string {
	if tr.IsError {
		return errorPrefix + tr.Content
	}
	return tr.Content
}

// dataURL returns data as a data: URL of mediaType, base64-encoded.
func dataURL(mediaType string, data []byte) string {
	return "data:" + mediaType + ";base64," + base64.StdEncoding.EncodeToString(data)
}

// jsonObject decodes an object schema into the map the SDK's params take,
// each value kept as the JSON text it was (numbers, key order within
// values and all).
func jsonObject(b json.RawMessage) (map[string]any, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errors.New("not a JSON object")
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out, nil
}
