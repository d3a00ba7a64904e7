package validate

import (
	"os"
	"strings"
	"testing"
)

// supportSchema is a realistic schema for a support answer: required
// fields, a nested array of objects with enums, string formats, lengths and
// patterns, numbers with bounds.
func supportSchema(tb testing.TB) string {
	tb.Helper()
	b, err := os.ReadFile("testdata/support_answer.schema.json")
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// fenced2KB is a valid ~2 KB support answer as a model writes it: a sentence
// of prose, the JSON in a ```json fence, another sentence.
func fenced2KB(tb testing.TB) string {
	tb.Helper()
	b, err := os.ReadFile("testdata/support_answer.json")
	if err != nil {
		tb.Fatal(err)
	}
	return "Here is the resolution for ticket TCK-004217, with the steps in order.\n```json\n" +
		string(b) + "```\nLet me know if anything else comes up."
}

// BenchmarkValidate2KB is the whole healthy path: extraction from a fence,
// decoding with exact numbers, validation, the copy of the JSON returned.
func BenchmarkValidate2KB(b *testing.B) {
	s := mustCompile(b, supportSchema(b))
	text := fenced2KB(b)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Validate(text); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExtract is the extraction alone, by each rule.
func BenchmarkExtract(b *testing.B) {
	text := fenced2KB(b)
	j, err := Extract(text)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct{ name, text string }{
		{"whole", j},
		{"fence", text},
		{"brackets", "Here is the resolution, with the steps in order: " + j + " Let me know if anything else comes up."},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.text)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Extract(bc.text); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkValidateJSON is the validation alone, of JSON already extracted.
func BenchmarkValidateJSON(b *testing.B) {
	s := mustCompile(b, supportSchema(b))
	j, err := Extract(fenced2KB(b))
	if err != nil {
		b.Fatal(err)
	}
	v := []byte(j)
	b.SetBytes(int64(len(v)))
	b.ReportAllocs()
	for b.Loop() {
		if err := s.ValidateJSON(v); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidateInvalid is the failure path: a 2 KB answer with three
// violations, turned into a *ValidationError with its messages.
func BenchmarkValidateInvalid(b *testing.B) {
	s := mustCompile(b, supportSchema(b))
	text := fenced2KB(b)
	text = replaceOnce(b, text, `"status": "resolved"`, `"status": "done"`)
	text = replaceOnce(b, text, `"confidence": 0.87`, `"confidence": 1.5`)
	text = replaceOnce(b, text, `"kind": "wait"`, `"kind": "sleep"`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Validate(text); err == nil {
			b.Fatal("valid")
		}
	}
}

func replaceOnce(tb testing.TB, s, old, new string) string {
	tb.Helper()
	if !strings.Contains(s, old) {
		tb.Fatalf("%q not found", old)
	}
	return strings.Replace(s, old, new, 1)
}
