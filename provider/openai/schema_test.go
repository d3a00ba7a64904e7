package openai

import (
	"strings"
	"testing"
)

func TestCheckResponseSchema(t *testing.T) {
	p := newProvider(t, "http://127.0.0.1")
	accept := map[string]string{
		"flat":         `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":["integer","null"]}},"required":["b","a"],"additionalProperties":false}`,
		"empty object": `{"type":"object","additionalProperties":false}`,
		// The Structured Outputs guide's examples: nested anyOf, $defs,
		// recursion by "#" and by a definition, string formats and number
		// bounds (supported for non-fine-tuned models).
		"anyOf": `{"type":"object","properties":{"item":{"anyOf":[
			{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"number"}},"additionalProperties":false,"required":["name","age"]},
			{"type":"object","properties":{"city":{"type":"string"}},"additionalProperties":false,"required":["city"]}]}},
			"additionalProperties":false,"required":["item"]}`,
		"defs": `{"type":"object","properties":{"steps":{"type":"array","items":{"$ref":"#/$defs/step"}},"final_answer":{"type":"string"}},
			"$defs":{"step":{"type":"object","properties":{"explanation":{"type":"string"},"output":{"type":"string"}},"required":["explanation","output"],"additionalProperties":false}},
			"required":["steps","final_answer"],"additionalProperties":false}`,
		"root recursion":  `{"type":"object","properties":{"label":{"type":"string"},"children":{"type":"array","items":{"$ref":"#"}}},"required":["label","children"],"additionalProperties":false}`,
		"linked list":     `{"type":"object","properties":{"linked_list":{"$ref":"#/$defs/node"}},"$defs":{"node":{"type":"object","properties":{"value":{"type":"number"},"next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"additionalProperties":false,"required":["next","value"]}},"additionalProperties":false,"required":["linked_list"]}`,
		"constraints":     `{"type":"object","properties":{"email":{"type":"string","format":"email","pattern":"^.+@.+$"},"n":{"type":"integer","minimum":0,"maximum":9},"l":{"type":"array","items":{"type":"string"},"minItems":1}},"required":["email","n","l"],"additionalProperties":false}`,
		"nullable object": `{"type":"object","properties":{"o":{"type":["object","null"],"properties":{"x":{"type":"string"}},"required":["x"],"additionalProperties":false}},"required":["o"],"additionalProperties":false}`,
	}
	for name, schema := range accept {
		if err := p.CheckResponseSchema([]byte(schema)); err != nil {
			t.Errorf("%s: %v; want accepted", name, err)
		}
	}
	reject := []struct {
		name, schema string
		want         []string // in the error, in order
	}{
		{"not JSON", `{`, []string{"not a JSON object"}},
		{"array root", `{"type":"array","items":{"type":"string"}}`, []string{"root is not an object schema", `"type": "object"`}},
		{"anyOf root", `{"anyOf":[{"type":"object","properties":{},"additionalProperties":false}]}`, []string{"root is anyOf"}},
		{"optional property", `{"type":"object","properties":{"name":{"type":"string"},"zip":{"type":"string"}},"required":["name"],"additionalProperties":false}`,
			[]string{"the root: property \"zip\" is not in required", "make it nullable", "additionalProperties false"}},
		{"no required", `{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}`, []string{`property "a" is not in required`}},
		{"no additionalProperties", `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`, []string{`the root: an object schema without "additionalProperties": false`}},
		{"additionalProperties true", `{"type":"object","properties":{},"additionalProperties":true}`, []string{`"additionalProperties": false`}},
		{"nested optional", `{"type":"object","properties":{"address":{"type":"object","properties":{"street":{"type":"string"},"zip":{"type":"string"}},"required":["street"],"additionalProperties":false}},"required":["address"],"additionalProperties":false}`,
			[]string{`/properties/address: property "zip" is not in required`}},
		{"items", `{"type":"object","properties":{"l":{"type":"array","items":{"type":"object","properties":{"x":{"type":"string"}},"required":["x"]}}},"required":["l"],"additionalProperties":false}`,
			[]string{`/properties/l/items: an object schema without "additionalProperties": false`}},
		{"defs", `{"type":"object","properties":{},"additionalProperties":false,"$defs":{"a/b":{"type":"object","properties":{"x":{"type":"string"}},"additionalProperties":false}}}`,
			[]string{`/$defs/a~1b: property "x" is not in required`}},
		{"definitions", `{"type":"object","properties":{},"additionalProperties":false,"definitions":{"d":{"type":"object"}}}`, []string{`/definitions/d: an object schema`}},
		{"anyOf branch", `{"type":"object","properties":{"v":{"anyOf":[{"type":"string"},{"type":"object","properties":{"y":{"type":"string"}},"required":[]}]}},"required":["v"],"additionalProperties":false}`,
			[]string{`/properties/v/anyOf/1: an object schema without`}},
		{"allOf", `{"type":"object","properties":{"v":{"allOf":[{"type":"string"}]}},"required":["v"],"additionalProperties":false}`, []string{`/properties/v: "allOf" is not supported`}},
		{"oneOf", `{"type":"object","properties":{"v":{"oneOf":[{"type":"string"},{"type":"number"}]}},"required":["v"],"additionalProperties":false}`, []string{`/properties/v: "oneOf" is not supported`, "anyOf"}},
		{"not at root", `{"type":"object","properties":{},"additionalProperties":false,"not":{"required":["x"]}}`, []string{`the root: "not" is not supported`}},
		{"if", `{"type":"object","properties":{"a":{"type":"string","if":{"minLength":1},"then":{}}},"required":["a"],"additionalProperties":false}`, []string{`/properties/a: "if" is not supported`}},
		{"dependentRequired", `{"type":"object","properties":{},"additionalProperties":false,"dependentRequired":{}}`, []string{`"dependentRequired" is not supported`}},
		{"properties not an object", `{"type":"object","properties":[],"additionalProperties":false}`, []string{`"properties" is not an object`}},
	}
	for _, tt := range reject {
		err := p.CheckResponseSchema([]byte(tt.schema))
		if err == nil {
			t.Errorf("%s: accepted", tt.name)
			continue
		}
		msg, at := err.Error(), 0
		if !strings.HasPrefix(msg, "openai: ") {
			t.Errorf("%s: %q does not name the provider", tt.name, msg)
		}
		for _, w := range tt.want {
			i := strings.Index(msg[at:], w)
			if i < 0 {
				t.Errorf("%s: %q; want %q", tt.name, msg, w)
				break
			}
			at += i + len(w)
		}
	}
}
