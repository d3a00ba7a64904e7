package openaisdk

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// CheckResponseSchema reports whether schema can be sent as
// llm.Request.ResponseSchema, which goes out as a strict json_schema
// format (response_format on Chat Completions, text.format on the
// Responses API). It returns nil when schema meets OpenAI's strict-mode
// rules: the root is an object schema; every object schema lists each of
// its properties in "required" and sets "additionalProperties": false; no
// schema uses allOf, oneOf, not, if, then, else, dependentRequired or
// dependentSchemas. It walks properties, items, prefixItems, anyOf, $defs
// and definitions; an error names the JSON pointer at fault and what to
// change.
func (p *Provider) CheckResponseSchema(schema []byte) error {
	root, ok := asSchema(schema)
	if !ok {
		return fmt.Errorf("%s: the response schema is not a JSON object", p.Name())
	}
	if _, ok := root["anyOf"]; ok || !isObjectSchema(root) {
		return fmt.Errorf(`%s: the response schema's root is not an object schema; OpenAI strict mode needs "type": "object" at the root: wrap the value in a property`, p.Name())
	}
	if err := checkStrict(root, ""); err != nil {
		return fmt.Errorf("%s: %w", p.Name(), err)
	}
	return nil
}

// unsupported are the keywords strict mode refuses.
var unsupported = []string{"allOf", "oneOf", "not", "if", "then", "else", "dependentRequired", "dependentSchemas"}

// checkStrict checks the schema s found at the JSON pointer at, and every
// schema below it.
func checkStrict(s map[string]json.RawMessage, at string) error {
	where := at
	if where == "" {
		where = "the root"
	}
	for _, k := range unsupported {
		if _, ok := s[k]; ok {
			return fmt.Errorf("%s: %q is not supported in OpenAI strict mode (use anyOf)", where, k)
		}
	}
	if isObjectSchema(s) {
		if ap, ok := s["additionalProperties"]; !ok || strings.TrimSpace(string(ap)) != "false" {
			return fmt.Errorf(`%s: an object schema without "additionalProperties": false; OpenAI strict mode needs it on every object`, where)
		}
		var required []string
		if raw, ok := s["required"]; ok && json.Unmarshal(raw, &required) != nil {
			return fmt.Errorf(`%s: "required" is not a list of names`, where)
		}
		props, err := schemaMap(s, "properties", at)
		if err != nil {
			return err
		}
		for _, name := range sortedKeys(props) {
			if !slices.Contains(required, name) {
				return fmt.Errorf(`%s: property %q is not in required; OpenAI strict mode needs every property required (make it nullable instead, "type": [..., "null"])`, where, name)
			}
		}
	}
	// The schemas below s, each with its pointer.
	var children []string
	below := map[string]map[string]json.RawMessage{}
	for _, key := range []string{"properties", "$defs", "definitions"} {
		m, err := schemaMap(s, key, at)
		if err != nil {
			return err
		}
		for _, name := range sortedKeys(m) {
			if c, ok := asSchema(m[name]); ok {
				ptr := at + "/" + key + "/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(name)
				children, below[ptr] = append(children, ptr), c
			}
		}
	}
	for _, key := range []string{"items", "anyOf", "prefixItems"} {
		raw, ok := s[key]
		if !ok {
			continue
		}
		if c, ok := asSchema(raw); ok { // items as one schema
			children, below[at+"/"+key] = append(children, at+"/"+key), c
			continue
		}
		var list []json.RawMessage
		if json.Unmarshal(raw, &list) != nil {
			return fmt.Errorf("%s/%s: not a schema or a list of schemas", at, key)
		}
		for i, item := range list {
			if c, ok := asSchema(item); ok {
				ptr := fmt.Sprintf("%s/%s/%d", at, key, i)
				children, below[ptr] = append(children, ptr), c
			}
		}
	}
	for _, ptr := range children {
		if err := checkStrict(below[ptr], ptr); err != nil {
			return err
		}
	}
	return nil
}

// schemaMap decodes s[key], an object of schemas (properties, $defs).
func schemaMap(s map[string]json.RawMessage, key, at string) (map[string]json.RawMessage, error) {
	raw, ok := s[key]
	if !ok {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil, fmt.Errorf("%s/%s: not an object of schemas", at, key)
	}
	return m, nil
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// asSchema decodes raw as a schema object; false for anything else.
func asSchema(raw []byte) (map[string]json.RawMessage, bool) {
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
