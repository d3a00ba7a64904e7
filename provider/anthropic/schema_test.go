package anthropic

import (
	"strings"
	"testing"

	"github.com/backstop-llm/backstop/internal/capability"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/anthropicwire"
)

func TestCapabilities(t *testing.T) {
	p := newProvider(t, "http://127.0.0.1")
	if c := capability.Of(p); c != llm.CapAll {
		t.Errorf("Capabilities %v; want all", c)
	}
}

// TestMediaTypesMatchTheTranslation: the document types the provider
// declares are those its translation takes, and the image types are the
// four the Messages API takes.
func TestMediaTypesMatchTheTranslation(t *testing.T) {
	p := newProvider(t, "http://127.0.0.1")
	m := capability.MediaOf(p)
	for _, mt := range []string{"application/pdf", "text/plain", "text/markdown; charset=utf-8", "TEXT/CSV", "application/zip", "application/msword", "application/json"} {
		md := &llm.Media{MediaType: mt, Data: []byte("x")}
		_, err := p.media(md, 0, 0)
		if capability.Takes(m, md) != (err == nil) {
			t.Errorf("%s: declared taken %v, translation error %v", mt, capability.Takes(m, md), err)
		}
	}
	for mt, want := range map[string]bool{"image/jpeg": true, "image/png": true, "image/gif": true, "image/webp": true, "image/bmp": false, "image/tiff": false, "image/heic": false} {
		if got := capability.Takes(m, &llm.Media{MediaType: mt, Data: []byte("x")}); got != want {
			t.Errorf("%s: taken %v, want %v", mt, got, want)
		}
	}
}

func TestCheckResponseSchemaAccepts(t *testing.T) {
	p := newProvider(t, "http://127.0.0.1")
	for name, schema := range map[string]string{
		"flat": `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name","age"],"additionalProperties":false}`,
		"nested and formats": `{"type":"object","additionalProperties":false,"properties":{
			"when":{"type":"string","format":"date-time"},
			"tags":{"type":"array","items":{"type":"string","enum":["a","b",null,1,true]},"minItems":1},
			"owner":{"type":["object","null"],"properties":{"email":{"type":"string","format":"email"}},"additionalProperties":false},
			"kind":{"anyOf":[{"type":"string","const":"x"},{"type":"null"}]},
			"code":{"type":"string","pattern":"^[A-Z]{3}$"}}}`,
		"refs, not recursive": `{"$defs":{"addr":{"type":"object","properties":{"city":{"type":"string"}},"additionalProperties":false}},
			"type":"object","additionalProperties":false,"properties":{"home":{"$ref":"#/$defs/addr"},"work":{"$ref":"#/$defs/addr"}}}`,
		"dictionary":     `{"type":"object","properties":{"m":{"type":"object","additionalProperties":{"type":"integer"}}},"additionalProperties":false}`,
		"not an object":  `{"type":"array","items":{"type":"string"}}`,
		"boolean schema": `{"type":"object","properties":{"x":true},"additionalProperties":false}`,
	} {
		if err := p.CheckResponseSchema([]byte(schema)); err != nil {
			t.Errorf("%s: %v; want accepted", name, err)
		}
	}
}

func TestCheckResponseSchemaRefuses(t *testing.T) {
	p := newProvider(t, "http://127.0.0.1")
	tests := []struct {
		name, schema string
		want         []string // in the error
	}{
		{"no additionalProperties", `{"type":"object","properties":{"a":{"type":"string"}}}`, []string{"at #:", `"additionalProperties": false`}},
		{"additionalProperties true", `{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":true}`, []string{"must be false"}},
		{"nested object", `{"type":"object","additionalProperties":false,"properties":{"a/b":{"type":"object","properties":{}}}}`, []string{"at #/properties/a~1b:"}},
		{"empty object", `{"type":"object"}`, []string{"at #:", "additionalProperties"}},
		{"numbers", `{"type":"object","additionalProperties":false,"properties":{"n":{"type":"integer","minimum":0,"maximum":9,"multipleOf":3}}}`,
			[]string{`"minimum"`, `"maximum"`, `"multipleOf"`, "numerical", "at #/properties/n:"}},
		{"strings", `{"type":"object","additionalProperties":false,"properties":{"s":{"type":"string","minLength":1,"maxLength":9,"format":"ipv5"}}}`,
			[]string{`"minLength"`, `"maxLength"`, `"ipv5"`}},
		{"arrays", `{"type":"array","items":{"type":"string"},"minItems":2,"maxItems":5,"uniqueItems":true}`, []string{`"minItems": 2`, `"maxItems"`, `"uniqueItems"`}},
		{"enum of objects", `{"enum":[{"a":1},"b"]}`, []string{"enum"}},
		{"recursive", `{"$defs":{"node":{"type":"object","additionalProperties":false,"properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}}}},"$ref":"#/$defs/node"}`,
			[]string{"recursive", "#/$defs/node"}},
		{"recursive root", `{"type":"object","additionalProperties":false,"properties":{"next":{"anyOf":[{"$ref":"#"},{"type":"null"}]}}}`, []string{"recursive"}},
		{"external ref", `{"type":"object","additionalProperties":false,"properties":{"a":{"$ref":"https://example.com/a.json"}}}`, []string{"outside the schema"}},
		{"dangling ref", `{"$ref":"#/$defs/nothing"}`, []string{"points to nothing"}},
		{"unreferenced def", `{"$defs":{"x":{"type":"string","maxLength":3}},"type":"string"}`, []string{"at #/$defs/x:", "maxLength"}},
		{"not JSON", `{"type":`, []string{"not JSON"}},
		{"not an object", `[1]`, []string{"not a JSON object"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := p.CheckResponseSchema([]byte(tt.schema))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if !strings.HasPrefix(err.Error(), "anthropic: ") {
				t.Errorf("error %q does not name the provider", err)
			}
		})
	}
}

func TestCheckResponseSchemaManyProblems(t *testing.T) {
	var props []string
	for i := range 15 {
		props = append(props, `"p`+string(rune('a'+i))+`":{"type":"integer","minimum":1}`)
	}
	err := newProvider(t, "http://127.0.0.1").CheckResponseSchema([]byte(`{"type":"object","additionalProperties":false,"properties":{` + strings.Join(props, ",") + `}}`))
	if err == nil || strings.Count(err.Error(), "at #") != anthropicwire.MaxSchemaProblems || !strings.Contains(err.Error(), "and 5 more") {
		t.Errorf("error %v; want %d problems and 5 more", err, anthropicwire.MaxSchemaProblems)
	}
}
