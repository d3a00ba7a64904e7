package validate

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestExtract(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       string // "" means ErrNoJSON
	}{
		// Rule 1: the whole text.
		{"bare object", `{"a": 1}`, `{"a": 1}`},
		{"bare array", `[1, 2, 3]`, `[1, 2, 3]`},
		{"white space around", " \n\t{\"a\": 1}\r\n ", `{"a": 1}`},
		{"bare scalar number", `42`, `42`},
		{"bare scalar string", ` "hi" `, `"hi"`},
		{"bare null", `null`, `null`},

		// Rule 2: fences.
		{"json fence with prose", "Here you go:\n```json\n{\"a\": 1}\n```\nHope it helps.", `{"a": 1}`},
		{"bare fence", "Result:\n```\n[1, 2]\n```", `[1, 2]`},
		{"upper-case info word", "```JSON\n{\"a\": 1}\n```", `{"a": 1}`},
		{"inline fence", "Answer: ```json {\"a\": 1}``` done.", `{"a": 1}`},
		{"inline bare fence", "Answer: ```{\"a\": 1}``` done.", `{"a": 1}`},
		{"fence without info word holds a scalar", "The count:\n```\n42\n```", `42`},
		{"unclosed fence (truncated answer)", "Here:\n```json\n{\"a\": 1}\n", `{"a": 1}`},
		{"info line with attributes", "```json title=\"answer\"\n{\"a\": 1}\n```", `{"a": 1}`},
		{"non-JSON fence skipped", "```python\nx = {}\n```\nand\n```json\n{\"a\": 2}\n```", `{"a": 2}`},
		{"two fences: the first JSON one", "```json\n{\"first\": 1}\n```\n```json\n{\"second\": 2}\n```", `{"first": 1}`},
		{"fence wins over an earlier bare object", "Draft {\"bare\": 1}, final:\n```json\n{\"fenced\": 2}\n```", `{"fenced": 2}`},
		{"invalid fence falls back to rule 3", "```json\n{\"a\": 1,}\n```\nsorry, I meant {\"a\": 1}", `{"a": 1}`},

		// Rule 3: brackets.
		{"prose before and after", `Sure! {"a": 1} Let me know if you need more.`, `{"a": 1}`},
		{"array in prose", `The ids are [1, 2, 3].`, `[1, 2, 3]`},
		{"two bare objects: the first", `A: {"a": 1} B: {"b": 2}`, `{"a": 1}`},
		{"braces inside strings", `Result: {"text": "use } and { and ] freely"} ok`, `{"text": "use } and { and ] freely"}`},
		{"escaped quotes", `Result: {"q": "she said \"}\" loudly", "b": "\\"} end`, `{"q": "she said \"}\" loudly", "b": "\\"}`},
		{"nested: the outer span", `Text {"a": {"b": [1, {"c": 2}]}} more`, `{"a": {"b": [1, {"c": 2}]}}`},
		{"invalid outer, valid inner", `{ note: {"a": 1} }`, `{"a": 1}`},
		{"prose brackets before the JSON", `Use {curly} and [square] brackets: {"a": 1}`, `{"a": 1}`},
		{"unclosed bracket before the JSON", `(see [note: {"a": 1}`, `{"a": 1}`},
		{"mismatched closer before the JSON", `[1, 2} then {"a": 1}`, `{"a": 1}`},
		{"stray quote in bracketed prose", `[he said "x] and {"a": "]"}`, `{"a": "]"}`},
		{"stray quote swallowing to the end", `[it's "quoted, then {"a": 1}`, `{"a": 1}`},
		{"non-ASCII", `Voilà : {"prix": "12 €", "note": "très bien"} !`, `{"prix": "12 €", "note": "très bien"}`},
		{"empty object in prose", `Nothing to report: {}.`, `{}`},
		{"a citation is JSON too (documented)", `As noted in [1], the answer is {"a": 1}`, `[1]`},
		{"prose brace without a quote after it", `Set {x} to {"a": 1}`, `{"a": 1}`},

		// Nothing.
		{"empty", ``, ``},
		{"white space only", " \n\t\r ", ``},
		{"prose", `I cannot help with that.`, ``},
		{"quoted prose", `He said "hello" and left.`, ``},
		{"JSON-looking but not JSON", `I think {a: 1} is it`, ``},
		{"trailing comma", `{"a": 1,}`, ``},
		{"single quotes", `{'a': 1}`, ``},
		{"truncated", `{"a": [1, 2`, ``},
		{"unclosed string", `{"a": "b}`, ``},
		{"empty fence", "```json\n```", ``},
		{"lone fence marker", "```", ``},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Extract(tc.text)
			if tc.want == "" {
				if err == nil {
					t.Fatalf("Extract(%q) = %q, want ErrNoJSON", tc.text, got)
				}
				if !errors.Is(err, ErrNoJSON) || !errors.Is(err, ErrInvalid) {
					t.Fatalf("Extract(%q) error %v does not match ErrNoJSON and ErrInvalid", tc.text, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Extract(%q): %v", tc.text, err)
			}
			if got != tc.want {
				t.Fatalf("Extract(%q) = %q, want %q", tc.text, got, tc.want)
			}
		})
	}
}

// TestExtractBounded feeds a megabyte of adversarial text and checks that
// the bracket search looks at no more than its documented budget: one
// scan plus max(64 KiB, 8*len) bytes of checks and extra scans.
func TestExtractBounded(t *testing.T) {
	const mb = 1 << 20
	deep := strings.Repeat("[", 20000) + "1," + strings.Repeat("]", 20000)
	for _, tc := range []struct {
		name, text string
		want       string // "" means ErrNoJSON
	}{
		{"open braces", strings.Repeat("{", mb), ""},
		{"open brackets", strings.Repeat("[", mb), ""},
		{"close brackets", strings.Repeat("]", mb), ""},
		{"braces then JSON", strings.Repeat("{", mb) + `{"a": 1}`, `{"a": 1}`},
		{"brackets then JSON", strings.Repeat("[", mb) + `{"a": 1}`, `{"a": 1}`},
		{"invalid spans", strings.Repeat("[1,]", mb/4), ""},
		{"invalid spans then JSON", strings.Repeat("[1,]", mb/4) + `{"a": 1}`, `{"a": 1}`},
		{"invalid objects", strings.Repeat(`{"a":}`, mb/6), ""},
		{"deep invalid nesting", strings.Repeat(deep, mb/len(deep)+1), ""},
		{"nested invalid", strings.Repeat("[", mb/2) + "1," + strings.Repeat("]", mb/2), ""},
		{"quotes in brackets", strings.Repeat(`["a" "b"] `, mb/10), ""},
		{"open strings", strings.Repeat(`["`, mb/2), ""},
		{"stray quotes", strings.Repeat(`[a "b] `, mb/7), ""},
		{"fences", strings.Repeat("```", mb/3), ""},
		{"fences with braces", strings.Repeat("```{", mb/4), ""},
		{"escapes", "[\"" + strings.Repeat(`\\\"`, mb/4), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Extract(tc.text)
			if tc.want == "" {
				if !errors.Is(err, ErrNoJSON) {
					t.Fatalf("Extract = %.40q, %v; want ErrNoJSON", got, err)
				}
			} else if err != nil || got != tc.want {
				t.Fatalf("Extract = %.40q, %v; want %q", got, err, tc.want)
			}
			s := search{text: tc.text}
			s.run()
			n := len(tc.text)
			if limit := n + max(minSearchWork, searchWorkFactor*n); s.examined > limit {
				t.Errorf("the bracket search examined %d bytes of a %d-byte text; the bound is %d", s.examined, n, limit)
			}
			if c := cap(s.spans); strings.HasPrefix(tc.name, "open") && c > 8*maxNesting {
				t.Errorf("the bracket search kept %d spans for unclosed brackets; want at most %d", c, 8*maxNesting)
			}
		})
	}
}

// TestExtractAllocs: rules 1 and 2 return a substring without allocating.
func TestExtractAllocs(t *testing.T) {
	for _, text := range []string{
		`{"a": [1, 2, {"b": "c"}]}`,
		"Here it is:\n```json\n{\"a\": [1, 2, {\"b\": \"c\"}]}\n```\nAnything else?",
	} {
		if n := testing.AllocsPerRun(100, func() {
			if _, err := Extract(text); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("Extract(%q) allocates %v times; want 0", text, n)
		}
	}
}

func FuzzExtract(f *testing.F) {
	for _, s := range []string{
		``, ` `, `{}`, `[]`, `42`, `"x"`, `{"a":1}`, `x {"a":1} y`, "```json\n{\"a\":1}\n```",
		"```\n[1]\n```", "```py\n{}\n```", `{"a":"}"}`, `{"a":"\"}"}`, `[he said "x] and {"a": "]"}`,
		`{{{{`, `[[[[1,]]]]`, `[1, 2} {"a":1}`, `{ note: {"a":1} }`, "```json {\"a\":1}```", `["\`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := Extract(in)
		if err != nil {
			if !errors.Is(err, ErrNoJSON) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Extract(%q) error %v does not match ErrNoJSON and ErrInvalid", in, err)
			}
			if trimmed := strings.TrimSpace(in); json.Valid([]byte(trimmed)) {
				t.Fatalf("Extract(%q) found nothing in valid JSON", in)
			}
			return
		}
		if !json.Valid([]byte(got)) {
			t.Fatalf("Extract(%q) = %q, not valid JSON", in, got)
		}
		if !strings.Contains(in, got) {
			t.Fatalf("Extract(%q) = %q, not a substring of the input", in, got)
		}
		if got != strings.TrimSpace(got) {
			t.Fatalf("Extract(%q) = %q, not trimmed", in, got)
		}
		if trimmed := strings.TrimSpace(in); json.Valid([]byte(trimmed)) && got != trimmed {
			t.Fatalf("Extract(%q) = %q; rule 1 wants the whole text", in, got)
		}
		// A JSON object or array set in bracket-free prose is found whole.
		if t0 := strings.TrimSpace(in); t0 != "" && (t0[0] == '{' || t0[0] == '[') &&
			json.Valid([]byte(t0)) && !strings.Contains(t0, "```") {
			if got, err := Extract("Here it is: " + t0 + " Thanks."); err != nil || got != t0 {
				t.Fatalf("Extract of %q in prose = %q, %v; want it whole", t0, got, err)
			}
		}
	})
}

// FuzzValidJSON holds validJSON to json.Valid.
func FuzzValidJSON(f *testing.F) {
	for _, s := range []string{
		``, ` `, `{}`, `[]`, `{"a":1}`, `[1,2,[3,{"b":null}]]`, `-0.5e+10`, `01`, `1.`, `1e`, `-`, `"\u00e9\n"`,
		`"\x"`, `"\u12"`, "\"\x01\"", "\"\xff\"", `tru`, `true false`, `{"a" 1}`, `{"a":1,}`, `[1,]`, `{,}`,
		` [ 1 , 2 ] `, `{"a":{"b":{"c":[]}}}`, `"a"x`, `nulll`, `[1}`, `{]`,
	} {
		f.Add(s)
	}
	f.Add(strings.Repeat("[", maxNesting) + strings.Repeat("]", maxNesting))
	f.Add(strings.Repeat("[", maxNesting+1) + strings.Repeat("]", maxNesting+1))
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := validJSON(s), json.Valid([]byte(s)); got != want {
			t.Fatalf("validJSON(%q) = %v, json.Valid = %v", s, got, want)
		}
	})
}
