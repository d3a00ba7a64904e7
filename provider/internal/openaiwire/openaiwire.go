// Package openaiwire holds what every adapter of OpenAI's APIs (the native
// provider/openai and provider/openaisdk over the official SDK) must do
// alike: the strict-mode rules a response schema must meet, the
// translation of tool-call ids, a tool call's arguments kept valid JSON,
// the reading of error objects and withheld answers, and the parts of an
// assistant message.
package openaiwire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/wire"
)

// MaxToolCallID is the longest tool-call id OpenAI accepts: 40 bytes (the
// API's string_above_max_length error).
const MaxToolCallID = 40

// ErrorPrefix starts the content of a tool result that reports a failure:
// OpenAI's tool messages have no field to say so.
const ErrorPrefix = "Error: "

// ToolResultText returns a tool result's content as a tool message carries
// it: prefixed with ErrorPrefix when it reports a failure.
func ToolResultText(tr *llm.ToolResult) string {
	if tr.IsError {
		return ErrorPrefix + tr.Content
	}
	return tr.Content
}

// ToolIDs returns the tool-call id translation of one request: ids of at
// most 40 letters, digits, _ and - go out as they are; any other goes out
// as call_ and 24 hex digits, and comes back as the caller's.
func ToolIDs() wire.ToolIDs {
	return wire.ToolIDs{Valid: func(id string) bool { return wire.IDChars(id, MaxToolCallID) }, Prefix: "call_"}
}

// CheckStrict reports whether schema can go out as a strict json_schema
// response format. It returns nil when schema meets the rules of OpenAI's
// Structured Outputs guide (Supported schemas): the root is an object
// schema ("type": "object", not anyOf); every object lists every one of
// its properties in "required" (an optional property is made nullable,
// "type": ["string", "null"], instead) and sets "additionalProperties":
// false; no schema uses allOf, oneOf, not, if, then, else,
// dependentRequired or dependentSchemas. It walks properties, items,
// prefixItems, anyOf, $defs and definitions. Otherwise it returns an error
// naming the JSON pointer at fault and what to change. Limits on size
// (number of properties, nesting, enum values) are left to the API, which
// states them per model.
func CheckStrict(schema []byte) error {
	var root map[string]json.RawMessage
	if err := json.Unmarshal(schema, &root); err != nil || root == nil {
		return fmt.Errorf("the response schema is not a JSON object")
	}
	if _, ok := root["anyOf"]; ok {
		return fmt.Errorf(`the response schema's root is anyOf; OpenAI strict mode needs a root object schema ("type": "object"): wrap the union in a property`)
	}
	if !isObjectSchema(root) {
		return fmt.Errorf(`the response schema's root is not an object schema; OpenAI strict mode needs "type": "object" at the root: wrap the value in a property`)
	}
	return checkStrict(root, "")
}

// unsupported are the keywords OpenAI's strict mode refuses: the guide's
// "Composition: allOf, not, dependentRequired, dependentSchemas, if, then,
// else", and oneOf, which the API refuses ("'oneOf' is not permitted") and
// openai-go's strict-schema helper (NewBetaAgentOutput) rejects too.
var unsupported = []string{"allOf", "oneOf", "not", "if", "then", "else", "dependentRequired", "dependentSchemas"}

// checkStrict checks the schema s found at the JSON pointer at.
func checkStrict(s map[string]json.RawMessage, at string) error {
	where := at
	if where == "" {
		where = "the root"
	}
	for _, k := range unsupported {
		if _, ok := s[k]; ok {
			return fmt.Errorf("%s: %q is not supported in OpenAI strict mode (it takes anyOf, not %s)", where, k, k)
		}
	}
	if isObjectSchema(s) {
		if err := checkObject(s, at, where); err != nil {
			return err
		}
	}
	if err := walkMap(s, "properties", at); err != nil {
		return err
	}
	for _, k := range []string{"$defs", "definitions"} {
		if err := walkMap(s, k, at); err != nil {
			return err
		}
	}
	for _, k := range []string{"anyOf", "prefixItems"} {
		if err := walkList(s, k, at); err != nil {
			return err
		}
	}
	if raw, ok := s["items"]; ok {
		if child, ok := asSchema(raw); ok {
			if err := checkStrict(child, at+"/items"); err != nil {
				return err
			}
		} else if err := walkList(s, "items", at); err != nil { // the older tuple form
			return err
		}
	}
	return nil
}

// checkObject checks the rules of an object schema: additionalProperties
// false, every property required.
func checkObject(s map[string]json.RawMessage, at, where string) error {
	if ap, ok := s["additionalProperties"]; !ok || !bytes.Equal(bytes.TrimSpace(ap), []byte("false")) {
		return fmt.Errorf(`%s: an object schema without "additionalProperties": false; OpenAI strict mode needs it on every object`, where)
	}
	var props map[string]json.RawMessage
	if raw, ok := s["properties"]; ok {
		if json.Unmarshal(raw, &props) != nil {
			return fmt.Errorf(`%s: "properties" is not an object`, where)
		}
	}
	var required []string
	if raw, ok := s["required"]; ok {
		if json.Unmarshal(raw, &required) != nil {
			return fmt.Errorf(`%s: "required" is not a list of names`, where)
		}
	}
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if !slices.Contains(required, name) {
			return fmt.Errorf(`%s: property %q is not in required; OpenAI strict mode needs every property required (make it nullable instead, "type": [..., "null"]) and additionalProperties false`, where, name)
		}
	}
	return nil
}

// walkMap checks each schema of the object s[key] (properties, $defs).
func walkMap(s map[string]json.RawMessage, key, at string) error {
	raw, ok := s[key]
	if !ok {
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return fmt.Errorf("%s/%s: not an object of schemas", at, key)
	}
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if child, ok := asSchema(m[name]); ok {
			if err := checkStrict(child, at+"/"+key+"/"+pointerToken(name)); err != nil {
				return err
			}
		}
	}
	return nil
}

// walkList checks each schema of the list s[key] (anyOf, prefixItems).
func walkList(s map[string]json.RawMessage, key, at string) error {
	raw, ok := s[key]
	if !ok {
		return nil
	}
	var l []json.RawMessage
	if json.Unmarshal(raw, &l) != nil {
		return fmt.Errorf("%s/%s: not a list of schemas", at, key)
	}
	for i, item := range l {
		if child, ok := asSchema(item); ok {
			if err := checkStrict(child, fmt.Sprintf("%s/%s/%d", at, key, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// asSchema decodes raw as a schema object; false for anything else (true,
// false, a list).
func asSchema(raw json.RawMessage) (map[string]json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return nil, false
	}
	return m, true
}

// isObjectSchema reports whether s describes objects: its type is "object"
// or a list holding it, or it has no type but has properties.
func isObjectSchema(s map[string]json.RawMessage) bool {
	raw, ok := s["type"]
	if !ok {
		_, props := s["properties"]
		return props
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return one == "object"
	}
	var many []string
	return json.Unmarshal(raw, &many) == nil && slices.Contains(many, "object")
}

// pointerToken escapes name as a JSON pointer token (RFC 6901).
func pointerToken(name string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(name)
}

// ToolCall returns the llm.ToolCall of the next call the answer made: its
// id named by ids (translated back into the caller's; one the conversation
// already holds renamed; one the server left out named call_<n>, so that
// the call can be answered), its name, and its arguments (see
// ArgumentsJSON).
func ToolCall(ids *wire.CallIDs, id, name, args string) llm.ToolCall {
	return llm.ToolCall{ID: ids.ID(id), Name: name, Arguments: ArgumentsJSON(args)}
}

// AppendCall appends to calls the ToolCall of a call the answer made,
// unless it has no name: not a call anyone can run (a custom tool's, or a
// nameless one), which is not named either.
func AppendCall(calls []llm.ToolCall, ids *wire.CallIDs, id, name, args string) []llm.ToolCall {
	if name == "" {
		return calls
	}
	return append(calls, ToolCall(ids, id, name, args))
}

// ArgumentsJSON returns the arguments text the model wrote as a JSON value:
// the text itself when it is valid JSON; {} when it is empty; otherwise
// (the model can write broken JSON) the text as a JSON string, so that
// Arguments is always valid JSON and a chain's schema check, not a JSON
// parser, reports the fault.
func ArgumentsJSON(args string) json.RawMessage {
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
