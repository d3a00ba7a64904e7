package validate

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

const draft7 = `"$schema": "http://json-schema.org/draft-07/schema#"`

func mustCompile(t testing.TB, schema string) *Schema {
	t.Helper()
	s, err := Compile([]byte(schema))
	if err != nil {
		t.Fatalf("Compile(%s): %v", schema, err)
	}
	return s
}

// check asserts that answer passes s, or fails it with violations at the
// given path with the given keyword.
func check(t *testing.T, s *Schema, answer string, wantPath, wantKeyword string, valid bool) {
	t.Helper()
	raw, err := s.Validate(answer)
	if valid {
		if err != nil {
			t.Fatalf("Validate(%s): %v; want valid", answer, err)
		}
		if raw == nil {
			t.Fatalf("Validate(%s) returned no JSON", answer)
		}
		return
	}
	var verr *ValidationError
	if !errors.As(err, &verr) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("Validate(%s) = %v; want a *ValidationError matching ErrInvalid", answer, err)
	}
	if raw != nil {
		t.Fatalf("Validate(%s) returned JSON with an error", answer)
	}
	for _, v := range verr.Violations {
		if v.Path == wantPath && v.Keyword == wantKeyword {
			return
		}
	}
	t.Fatalf("Validate(%s): violations %+v; want one at %q with keyword %q", answer, verr.Violations, wantPath, wantKeyword)
}

func TestDrafts(t *testing.T) {
	t.Run("default is 2020-12", func(t *testing.T) {
		if d := mustCompile(t, `{"type": "object"}`).draftOf(); d != 2020 {
			t.Fatalf("Draft() = %d without $schema; want 2020", d)
		}
		if d := mustCompile(t, `{`+draft7+`, "type": "object"}`).draftOf(); d != 7 {
			t.Fatalf("Draft() = %d with the draft-07 $schema; want 7", d)
		}
	})
	t.Run("2020-12 prefixItems and items", func(t *testing.T) {
		s := mustCompile(t, `{"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}], "items": false}`)
		check(t, s, `["a", 1]`, "", "", true)
		check(t, s, `["a", "b"]`, "/1", "type", false)
		check(t, s, `["a", 1, 2]`, "/2", "items", false) // the false schema under items
	})
	t.Run("draft 7 items array and additionalItems", func(t *testing.T) {
		s := mustCompile(t, `{`+draft7+`, "type": "array", "items": [{"type": "string"}, {"type": "number"}], "additionalItems": false}`)
		check(t, s, `["a", 1]`, "", "", true)
		check(t, s, `["a", "b"]`, "/1", "type", false)
		check(t, s, `["a", 1, 2]`, "", "additionalItems", false)
	})
	t.Run("prefixItems means nothing to draft 7", func(t *testing.T) {
		s := mustCompile(t, `{`+draft7+`, "prefixItems": [{"type": "string"}]}`)
		check(t, s, `[1]`, "", "", true)
	})
	t.Run("items array is not 2020-12", func(t *testing.T) {
		_, err := Compile([]byte(`{"items": [{"type": "string"}]}`))
		if !errors.Is(err, ErrBadSchema) {
			t.Fatalf("Compile of a draft-7 items array as 2020-12: %v; want ErrBadSchema", err)
		}
	})
	t.Run("2020-12 $defs, $ref with siblings", func(t *testing.T) {
		s := mustCompile(t, `{"$defs": {"n": {"type": "number"}}, "properties": {"p": {"$ref": "#/$defs/n", "minimum": 10}}}`)
		check(t, s, `{"p": 12}`, "", "", true)
		check(t, s, `{"p": "12"}`, "/p", "type", false)
		check(t, s, `{"p": 5}`, "/p", "minimum", false) // 2020-12 applies $ref's siblings
	})
	t.Run("draft 7 definitions, $ref siblings ignored", func(t *testing.T) {
		s := mustCompile(t, `{`+draft7+`, "definitions": {"n": {"type": "number"}}, "properties": {"p": {"$ref": "#/definitions/n", "minimum": 10}}}`)
		check(t, s, `{"p": 12}`, "", "", true)
		check(t, s, `{"p": "12"}`, "/p", "type", false)
		check(t, s, `{"p": 5}`, "", "", true) // draft 7 ignores $ref's siblings
	})
	t.Run("format is asserted in both drafts", func(t *testing.T) {
		for _, head := range []string{`{`, `{` + draft7 + `, `} {
			s := mustCompile(t, head+`"properties": {"e": {"format": "email"}, "d": {"format": "date-time"}, "x": {"format": "no-such-format"}}}`)
			check(t, s, `{"e": "a@example.com", "d": "2025-03-14T18:22:05Z", "x": "anything"}`, "", "", true)
			check(t, s, `{"e": "not an email"}`, "/e", "format", false)
			check(t, s, `{"d": "yesterday"}`, "/d", "format", false)
		}
	})
	t.Run("boolean schemas", func(t *testing.T) {
		check(t, mustCompile(t, `true`), `{"anything": [1]}`, "", "", true)
		check(t, mustCompile(t, `false`), `{}`, "", "false", false)
	})
}

func TestCompileBadSchema(t *testing.T) {
	for _, tc := range []struct {
		name, schema string
		quote        string // a piece of the library's (or encoding/json's) own description
	}{
		{"empty", ``, "the schema is empty"},
		{"not JSON", `{"type": "object"`, "unexpected EOF"},
		{"not JSON at all", `type: object`, "invalid character 'y'"},
		{"two documents", `{} {}`, "invalid character after top-level value"},
		{"not a schema", `42`, "got number, want boolean or object"},
		{"misspelt type", `{"type": "strnig"}`, "value must be one of 'array', 'boolean'"},
		{"minLength not a number", `{"minLength": "3"}`, "at '/minLength'"},
		{"unresolvable $ref", `{"$ref": "#/$defs/missing"}`, `json-pointer in "mem:///schema.json#/$defs/missing" not found`},
		{"remote $ref", `{"$ref": "https://example.com/money.json"}`, `failing loading "https://example.com/money.json"`},
		{"file $ref", `{"$ref": "money.json"}`, `failing loading "mem:///money.json"`},
		{"unknown $schema", `{"$schema": "https://example.com/my-meta"}`, `failing loading "https://example.com/my-meta"`},
		{"lookahead pattern", `{"pattern": "^(?=a)"}`, "is not valid regex"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Compile([]byte(tc.schema))
			if s != nil || err == nil {
				t.Fatalf("Compile(%s) succeeded; want an error", tc.schema)
			}
			if !errors.Is(err, ErrBadSchema) {
				t.Fatalf("error %v does not match ErrBadSchema", err)
			}
			if errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v matches ErrInvalid; a bad schema is not an invalid answer", err)
			}
			var serr *schemaError
			if !errors.As(err, &serr) || serr.Err == nil {
				t.Fatalf("error %v is not a *SchemaError with the cause", err)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.quote) || !strings.Contains(msg, "validate.Compile") {
				t.Fatalf("error %q does not quote %q or say what to fix", msg, tc.quote)
			}
		})
	}
	t.Run("the library's error is reachable", func(t *testing.T) {
		_, err := Compile([]byte(`{"type": "strnig"}`))
		var meta *jsonschema.SchemaValidationError
		if !errors.As(err, &meta) {
			t.Fatalf("errors.As(%v, *jsonschema.SchemaValidationError) failed", err)
		}
		_, err = Compile([]byte(`{"$ref": "https://example.com/money.json"}`))
		var load *jsonschema.LoadURLError
		if !errors.As(err, &load) || !strings.Contains(load.Err.Error(), "never loads") {
			t.Fatalf("a remote $ref: %v; want a *jsonschema.LoadURLError from backstop's loader", err)
		}
	})
}

func TestNumbersAreExact(t *testing.T) {
	s := mustCompile(t, `{"properties": {
		"id": {"type": "integer", "maximum": 9007199254740993},
		"price": {"type": "number", "multipleOf": 0.01}}}`)
	check(t, s, `{"id": 9007199254740993}`, "", "", true)
	check(t, s, `{"id": 9007199254740994}`, "/id", "maximum", false) // equal as float64
	check(t, s, `{"id": 12345678901234567890123}`, "/id", "maximum", false)
	check(t, s, `{"id": 1.0}`, "", "", true) // an integer, as JSON Schema counts
	check(t, s, `{"id": 1.5}`, "/id", "type", false)
	check(t, s, `{"price": 19.99}`, "", "", true) // 19.99/0.01 is not whole in float64
	check(t, s, `{"price": 19.999}`, "/price", "multipleOf", false)
}

func TestValidateReturnsTheAnswersJSON(t *testing.T) {
	s := mustCompile(t, `{"type": "object"}`)
	raw, err := s.Validate("Sure:\n```json\n{ \"b\": 1,\n  \"a\": [ 2 ] }\n```")
	if err != nil {
		t.Fatal(err)
	}
	if want := "{ \"b\": 1,\n  \"a\": [ 2 ] }"; string(raw) != want {
		t.Fatalf("Validate = %q; want the extracted text as written, %q", raw, want)
	}
}

func TestInvalidAnswers(t *testing.T) {
	s := mustCompile(t, `{"type": "object", "required": ["a"]}`)
	for _, tc := range []struct {
		name, answer string
		want         error
	}{
		{"no JSON", "I'm sorry, I can't help with that.", ErrNoJSON},
		{"empty", "", ErrNoJSON},
		{"broken JSON", `{"a": 1,}`, ErrNoJSON},
		{"schema violation", `{"b": 1}`, nil},
		{"wrong type", `["a"]`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := s.Validate(tc.answer)
			if raw != nil || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate(%q) = %s, %v; want ErrInvalid", tc.answer, raw, err)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Validate(%q): %v; want %v", tc.answer, err, tc.want)
			}
			var verr *ValidationError
			if tc.want == nil && !errors.As(err, &verr) {
				t.Fatalf("Validate(%q): %v; want a *ValidationError", tc.answer, err)
			}
			if Feedback(err) == "" {
				t.Fatalf("Feedback(%v) is empty", err)
			}
		})
	}
}

func TestValidateJSON(t *testing.T) {
	s := mustCompile(t, `{"type": "object", "required": ["a"]}`)
	if err := s.ValidateJSON([]byte(` {"a": 1} `)); err != nil {
		t.Fatalf("ValidateJSON of a valid object: %v", err)
	}
	for _, bad := range []string{``, `{"a": 1,}`, `{"a": 1} trailing`, `{"a": 1} {"a": 2}`, "```json\n{\"a\": 1}\n```"} {
		err := s.ValidateJSON([]byte(bad))
		if !errors.Is(err, ErrBadJSON) || !errors.Is(err, ErrInvalid) {
			t.Errorf("ValidateJSON(%q) = %v; want ErrBadJSON and ErrInvalid", bad, err)
		}
	}
	var verr *ValidationError
	if err := s.ValidateJSON([]byte(`{"b": 1}`)); !errors.As(err, &verr) || verr.Violations[0].Keyword != "required" {
		t.Fatalf("ValidateJSON of an object without a: %v; want a required violation", err)
	}
}

// TestConcurrent shares one Schema between 100 goroutines (run with -race).
func TestConcurrent(t *testing.T) {
	s := mustCompile(t, supportSchema(t))
	good := fenced2KB(t)
	bad := strings.Replace(good, `"status": "resolved"`, `"status": "done"`, 1)
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for g := range 100 {
		wg.Go(func() {
			for i := range 20 {
				if (g+i)%2 == 0 {
					if _, err := s.Validate(good); err != nil {
						errs <- fmt.Errorf("goroutine %d: valid answer: %w", g, err)
						return
					}
					continue
				}
				_, err := s.Validate(bad)
				var verr *ValidationError
				if !errors.As(err, &verr) || len(verr.Violations) != 1 || verr.Violations[0].Path != "/status" {
					errs <- fmt.Errorf("goroutine %d: invalid answer: %v", g, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
