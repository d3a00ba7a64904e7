package validate

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

const orderSchema = `{
	"type": "object",
	"description": "SECRET-SCHEMA-TEXT: an order as the model must return it",
	"required": ["id", "items", "status"],
	"additionalProperties": false,
	"properties": {
		"id": {"type": "string", "maxLength": 8},
		"status": {"enum": ["open", "shipped"]},
		"note": {"not": {"const": "forbidden"}},
		"a/b": {"type": "integer"},
		"items": {
			"type": "array",
			"items": {
				"type": "object",
				"required": ["sku", "price"],
				"properties": {
					"sku": {"type": "string"},
					"price": {"type": "number", "minimum": 0}
				}
			}
		},
		"tags": {"type": "array", "contains": {"const": "vip"}}
	}
}`

// TestViolations: several simultaneous errors, each reported once with its
// path and keyword, in the same order every time although the validator
// walks maps.
func TestViolations(t *testing.T) {
	s := mustCompile(t, orderSchema)
	answer := `Here is the order: {
		"id": "ORDER-12345",
		"status": "lost",
		"note": "forbidden",
		"a/b": "x",
		"zeta": 1, "alpha": 2,
		"tags": ["new", "old"],
		"items": [
			{"sku": "a", "price": 1},
			{"sku": "b", "price": 1}, {"sku": "c", "price": 1}, {"sku": "d", "price": 1}, {"sku": "e", "price": 1},
			{"sku": "f", "price": 1}, {"sku": "g", "price": 1}, {"sku": "h", "price": 1}, {"sku": "i", "price": 1},
			{"sku": "j", "price": 1},
			{"sku": 10, "price": -1},
			{"price": "12.50"}
		]
	}`
	want := []Violation{
		{"", "additionalProperties", "additional properties 'alpha', 'zeta' not allowed", "/additionalProperties"},
		{"/a~1b", "type", "got string, want integer", "/properties/a~1b/type"},
		{"/id", "maxLength", "maxLength: got 11, want 8", "/properties/id/maxLength"},
		{"/items/10/price", "minimum", "minimum: got -1, want 0", "/properties/items/items/properties/price/minimum"},
		{"/items/10/sku", "type", "got number, want string", "/properties/items/items/properties/sku/type"},
		{"/items/11", "required", "missing property 'sku'", "/properties/items/items/required"},
		{"/items/11/price", "type", "got string, want number", "/properties/items/items/properties/price/type"},
		{"/note", "not", "'not' failed", "/properties/note"},
		{"/status", "enum", "value must be one of 'open', 'shipped'", "/properties/status/enum"},
		{"/tags", "contains", "no items match contains schema", "/properties/tags/contains"},
	}
	for range 20 { // map order differs from run to run
		_, err := s.Validate(answer)
		wantViolations(t, err, want)
	}
}

// wantViolations fails the test unless err is a *ValidationError holding
// want, in order.
func wantViolations(t *testing.T, err error, want []Violation) {
	t.Helper()
	var verr *ValidationError
	if !errors.As(err, &verr) {
		t.Fatalf("Validate: %v; want a *ValidationError", err)
	}
	if !reflect.DeepEqual(verr.Violations, want) {
		t.Fatalf("violations:\n%s\nwant:\n%s", lines(verr.Violations), lines(want))
	}
}

func lines(vs []Violation) string {
	var b strings.Builder
	for _, v := range vs {
		fmt.Fprintf(&b, "  %+v\n", v)
	}
	return b.String()
}

func TestViolationString(t *testing.T) {
	for _, tc := range []struct {
		v    Violation
		want string
	}{
		{Violation{Path: "/items/0/price", Keyword: "type", Message: "got string, want number"}, "at /items/0/price: type: got string, want number"},
		{Violation{Keyword: "required", Message: "missing property 'total'"}, "at (root): required: missing property 'total'"},
		{Violation{Path: "/name", Keyword: "maxLength", Message: "maxLength: got 90, want 80"}, "at /name: maxLength: got 90, want 80"},
	} {
		if got := tc.v.String(); got != tc.want {
			t.Errorf("String() = %q; want %q", got, tc.want)
		}
	}
}

func TestValidationErrorMessage(t *testing.T) {
	s := mustCompile(t, orderSchema)
	_, err := s.Validate(`{"id": 7, "items": [{"sku": "a", "price": "1"}], "status": "lost", "x": 1}`)
	want := "validate: invalid answer: 4 schema violations: " +
		"at (root): additionalProperties: additional properties 'x' not allowed; " +
		"at /id: type: got number, want string; " +
		"at /items/0/price: type: got string, want number; and 1 more"
	if err == nil || err.Error() != want {
		t.Fatalf("Error() = %v\nwant      %s", err, want)
	}
	_, err = s.Validate(`{"id": "a", "items": [], "status": "open", "x": 1}`)
	if want := "validate: invalid answer: 1 schema violation: at (root): additionalProperties: additional properties 'x' not allowed"; err == nil || err.Error() != want {
		t.Fatalf("Error() = %v\nwant      %s", err, want)
	}
}

func TestFeedback(t *testing.T) {
	s := mustCompile(t, orderSchema)
	_, err := s.Validate("```json\n" + `{"id": 7, "items": [{"sku": "a", "price": "1"}], "status": "lost"}` + "\n```")
	var verr *ValidationError
	if !errors.As(err, &verr) {
		t.Fatal(err)
	}
	fb := verr.feedback()
	for _, want := range []string{
		"did not match the required JSON schema",
		"- at /id: type: got number, want string\n",
		"- at /items/0/price: type: got string, want number\n",
		"- at /status: enum: value must be one of 'open', 'shipped'\n",
		"corrected JSON only",
	} {
		if !strings.Contains(fb, want) {
			t.Errorf("Feedback lacks %q:\n%s", want, fb)
		}
	}
	if strings.Contains(fb, "SECRET-SCHEMA-TEXT") || strings.Contains(fb, `"properties"`) {
		t.Errorf("Feedback dumps the schema:\n%s", fb)
	}
	if Feedback(err) != fb {
		t.Errorf("Feedback(err) differs from err's Feedback()")
	}

	t.Run("bounded", func(t *testing.T) {
		var items []string
		for i := range 200 {
			items = append(items, fmt.Sprintf(`{"sku": %d, "price": "%s"}`, i, strings.Repeat("x", 300)))
		}
		long := mustCompile(t, `{"type": "array", "items": {"type": "object", "properties": {
			"sku": {"type": "string"}, "price": {"type": "string", "maxLength": 2, "pattern": "^[0-9]+$"}}}}`)
		_, err := long.Validate("[" + strings.Join(items, ",") + "]")
		var verr *ValidationError
		if !errors.As(err, &verr) || len(verr.Violations) != 600 {
			t.Fatalf("Validate: %v; want 600 violations", err)
		}
		fb := verr.feedback()
		if len(fb) > 1024 {
			t.Errorf("Feedback is %d bytes; want at most 1024", len(fb))
		}
		if !strings.Contains(fb, " more\n") || !strings.HasSuffix(fb, "corrected JSON only, no other text.") {
			t.Errorf("Feedback does not count what it left out, or lost its request:\n%s", fb)
		}
		if !strings.Contains(fb, "- at /0/price: pattern: '"+strings.Repeat("x", 100)) || !strings.Contains(fb, "...\n") {
			t.Errorf("Feedback does not cut a long message:\n%s", fb)
		}
	})
}

func TestFeedbackOfOtherErrors(t *testing.T) {
	s := mustCompile(t, `{"type": "object"}`)
	_, noJSON := s.Validate("I don't know.")
	badJSON := s.ValidateJSON([]byte(`{"a": }`))
	_, badSchema := Compile([]byte(`{"type": 1}`))
	for _, tc := range []struct {
		err  error
		want string
	}{
		{noJSON, "contained no JSON"},
		{fmt.Errorf("chain: attempt 2: %w", noJSON), "contained no JSON"},
		{badJSON, "was not valid JSON"},
		{nil, ""},
		{badSchema, ""},
		{errors.New("503"), ""},
	} {
		got := Feedback(tc.err)
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("Feedback(%v) = %q; want %q", tc.err, got, tc.want)
		}
	}
}

func TestFalseSchemaKeywords(t *testing.T) {
	s := mustCompile(t, `{"properties": {"gone": false}, "unevaluatedProperties": false, "prefixItems": [true]}`)
	_, err := s.Validate(`{"gone": 1, "extra": 2}`)
	wantViolations(t, err, []Violation{
		{"/extra", "unevaluatedProperties", "value not allowed here (false schema)", "/unevaluatedProperties"},
		{"/gone", "properties", "value not allowed here (false schema)", "/properties/gone"},
	})
}

func TestAnyOfListsEveryAlternative(t *testing.T) {
	s := mustCompile(t, `{"properties": {"v": {"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 10}]}}}`)
	_, err := s.Validate(`{"v": 3}`)
	wantViolations(t, err, []Violation{
		{"/v", "minimum", "minimum: got 3, want 10", "/properties/v/anyOf/1/minimum"},
		{"/v", "type", "got number, want string", "/properties/v/anyOf/0/type"},
	})
}
