// Package anthropicwire holds what every adapter of Anthropic's Messages
// API (the native provider/anthropic and provider/anthropicsdk over the
// official SDK) must do alike: the limits of structured outputs a response
// schema must meet, and the input of tool_use blocks.
package anthropicwire

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// stringFormats are the string formats structured outputs take, as
// anthropic-sdk-go v2.15.0 lists them (supportedStringFormats).
var stringFormats = []string{"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"}

// unsupportedKeywords are the constraints structured outputs refuse
// (Anthropic's "JSON Schema limitations": numerical, string-length and
// array constraints beyond minItems 0 or 1), each with what to do instead.
// anthropic-sdk-go v2.15.0 strips every one of them before sending.
var unsupportedKeywords = map[string]string{
	"minimum":          "numerical constraints are not supported",
	"maximum":          "numerical constraints are not supported",
	"exclusiveMinimum": "numerical constraints are not supported",
	"exclusiveMaximum": "numerical constraints are not supported",
	"multipleOf":       "numerical constraints are not supported",
	"minLength":        "string length constraints are not supported",
	"maxLength":        "string length constraints are not supported",
	"maxItems":         "array constraints other than minItems 0 or 1 are not supported",
	"uniqueItems":      "array constraints other than minItems 0 or 1 are not supported",
}

// MaxSchemaProblems is how many problems CheckSchema lists.
const MaxSchemaProblems = 10

// CheckSchema reports whether Anthropic's structured outputs
// (output_config.format json_schema) take schema as Request.ResponseSchema:
// nil when they do, else an error listing, by JSON pointer, what they
// refuse and what to change.
//
// It refuses what Anthropic documents as unsupported and the official Go
// SDK (anthropic-sdk-go v2.15.0) strips or rewrites before sending: an
// object schema with properties (or with none and no additionalProperties)
// that does not set "additionalProperties": false; numerical constraints
// (minimum, maximum, exclusiveMinimum, exclusiveMaximum, multipleOf);
// minLength and maxLength; maxItems, uniqueItems and a minItems other than
// 0 or 1; a string format other than date-time, time, date, duration,
// email, hostname, uri, ipv4, ipv6 and uuid; an enum holding objects or
// arrays; a $ref outside the schema; and recursive schemas (a $ref that
// leads back to itself). A schema of the chain's own can keep such
// constraints: the chain validates every answer against its full schema
// all the same, so put the narrower schema in the target's native schema
// and state the constraint in a description instead.
//
// Limits it does not check, because Anthropic's documentation could not be
// confirmed on them: regular-expression features of pattern, oneOf, sibling
// keywords next to a $ref, minProperties and maxProperties, and the caps on
// the number of optional properties or of anyOf unions in one schema.
func CheckSchema(schema []byte) error {
	var root any
	if err := json.Unmarshal(schema, &root); err != nil {
		return fmt.Errorf("the response schema is not JSON: %v", err)
	}
	if _, ok := root.(map[string]any); !ok {
		return errors.New("the response schema is not a JSON object; structured outputs need an object schema")
	}
	c := &schemaCheck{root: root, refs: map[string]refState{"#": refOpen}}
	c.node(root, "#")
	c.refs["#"] = refDone
	// Definitions no $ref reaches are checked too: the API reads them.
	for _, key := range []string{"$defs", "definitions"} {
		defs, _ := root.(map[string]any)[key].(map[string]any)
		for _, name := range sortedKeys(defs) {
			c.ref("#/"+key+"/"+escapePointer(name), "#/"+key+"/"+escapePointer(name))
		}
	}
	if len(c.problems) == 0 {
		return nil
	}
	more := ""
	if c.dropped > 0 {
		more = fmt.Sprintf("; and %d more", c.dropped)
	}
	return fmt.Errorf("structured outputs cannot take this response schema: %s%s", strings.Join(c.problems, "; "), more)
}

// refState is where a $ref is in the walk: being expanded (a $ref to it
// then is recursion) or done.
type refState uint8

const (
	refOpen refState = iota + 1
	refDone
)

// schemaCheck walks one schema, collecting its problems.
type schemaCheck struct {
	root     any
	refs     map[string]refState
	problems []string
	dropped  int
}

func (c *schemaCheck) fail(at, format string, args ...any) {
	if len(c.problems) == MaxSchemaProblems {
		c.dropped++
		return
	}
	c.problems = append(c.problems, "at "+at+": "+fmt.Sprintf(format, args...))
}

// node checks the subschema v at pointer at.
func (c *schemaCheck) node(v any, at string) {
	s, ok := v.(map[string]any)
	if !ok {
		return // true, false: nothing to check
	}
	if r, ok := s["$ref"]; ok {
		ref, _ := r.(string)
		switch {
		case !strings.HasPrefix(ref, "#"):
			c.fail(at, "$ref %q points outside the schema; only local references (#/$defs/…) are supported: inline it", ref)
		default:
			c.ref(ref, at)
		}
	}
	for _, k := range sortedKeys(s) {
		if why, bad := unsupportedKeywords[k]; bad {
			c.fail(at, "%q: %s; remove it (and state the constraint in the description)", k, why)
		}
	}
	if n, ok := s["minItems"].(float64); ok && n != 0 && n != 1 {
		c.fail(at, `"minItems": %v: only 0 or 1 is supported; use 0 or 1 (and state the minimum in the description)`, n)
	}
	if f, ok := s["format"].(string); ok && hasType(s, "string") && !slices.Contains(stringFormats, f) {
		c.fail(at, "string format %q is not supported; use one of %s, or none", f, strings.Join(stringFormats, ", "))
	}
	if e, ok := s["enum"].([]any); ok && slices.ContainsFunc(e, composite) {
		c.fail(at, "an enum holds an object or an array; enums may hold only strings, numbers, booleans and null")
	}
	c.object(s, at)
	for _, k := range []string{"anyOf", "allOf", "oneOf", "prefixItems"} {
		if list, ok := s[k].([]any); ok {
			for i, sub := range list {
				c.node(sub, at+"/"+k+"/"+strconv.Itoa(i))
			}
		}
	}
	switch items := s["items"].(type) {
	case map[string]any:
		c.node(items, at+"/items")
	case []any:
		for i, sub := range items {
			c.node(sub, at+"/items/"+strconv.Itoa(i))
		}
	}
}

// object checks the object keywords of s: additionalProperties must be
// false, except in a dictionary (no properties, additionalProperties a
// schema of the values, which the SDK passes through).
func (c *schemaCheck) object(s map[string]any, at string) {
	props, hasProps := s["properties"].(map[string]any)
	if !hasProps && !hasType(s, "object") {
		return
	}
	ap, hasAP := s["additionalProperties"]
	switch {
	case ap == false:
	case !hasProps && hasAP && ap != true:
		c.node(ap, at+"/additionalProperties") // a dictionary
	case !hasAP:
		c.fail(at, `an object schema needs "additionalProperties": false; add it (list every property the answer may have)`)
	default:
		c.fail(at, `"additionalProperties" must be false; set it to false and list every property the answer may have`)
	}
	for _, name := range sortedKeys(props) {
		c.node(props[name], at+"/properties/"+escapePointer(name))
	}
}

// ref checks the target of the local reference ref, met at pointer at.
func (c *schemaCheck) ref(ref, at string) {
	switch c.refs[ref] {
	case refOpen:
		c.fail(at, "$ref %q leads back to itself; recursive schemas are not supported: unroll the recursion to a fixed depth", ref)
		return
	case refDone:
		return
	}
	target, ok := resolvePointer(c.root, ref)
	if !ok {
		c.fail(at, "$ref %q points to nothing in the schema; fix the reference", ref)
		c.refs[ref] = refDone
		return
	}
	c.refs[ref] = refOpen
	c.node(target, ref)
	c.refs[ref] = refDone
}

// composite reports whether a JSON value is an object or an array.
func composite(v any) bool {
	switch v.(type) {
	case map[string]any, []any:
		return true
	}
	return false
}

// hasType reports whether s declares type t, alone or in a list.
func hasType(s map[string]any, t string) bool {
	switch v := s["type"].(type) {
	case string:
		return v == t
	case []any:
		return slices.Contains(v, any(t))
	}
	return false
}

// resolvePointer returns the value the JSON pointer fragment ref ("#",
// "#/$defs/a") names in root.
func resolvePointer(root any, ref string) (any, bool) {
	ptr := strings.TrimPrefix(ref, "#")
	if ptr == "" {
		return root, true
	}
	if !strings.HasPrefix(ptr, "/") {
		return nil, false // an anchor ("#name"): not resolved
	}
	v := root
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch n := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = n[tok]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(n) {
				return nil, false
			}
			v = n[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// escapePointer escapes a key as a JSON pointer token.
func escapePointer(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
