package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/backstop-llm/backstop/llm"
)

var (
	_ llm.CapableProvider = (*Provider)(nil)
	_ llm.SchemaChecker   = (*Provider)(nil)
)

// Capabilities returns what Chat Completions carries: tools, images
// (inline and by URL), inline documents (a PDF as a file part's file_data,
// plain text as text) and native schemas (response_format json_schema),
// but no document by URL: a file part has file_data and file_id, no URL.
func (p *Provider) Capabilities() llm.Capabilities {
	return llm.CapAll &^ llm.CapDocumentURLs
}

// CheckResponseSchema reports whether schema can be sent as
// llm.Request.ResponseSchema, which goes out as a strict json_schema
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
func (p *Provider) CheckResponseSchema(schema []byte) error {
	var root map[string]json.RawMessage
	if err := json.Unmarshal(schema, &root); err != nil || root == nil {
		return fmt.Errorf("openai: the response schema is not a JSON object")
	}
	if _, ok := root["anyOf"]; ok {
		return fmt.Errorf(`openai: the response schema's root is anyOf; OpenAI strict mode needs a root object schema ("type": "object"): wrap the union in a property`)
	}
	if !isObjectSchema(root) {
		return fmt.Errorf(`openai: the response schema's root is not an object schema; OpenAI strict mode needs "type": "object" at the root: wrap the value in a property`)
	}
	if err := checkStrict(root, ""); err != nil {
		return fmt.Errorf("openai: %w", err)
	}
	return nil
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
