package modelid_test

import (
	"strings"
	"testing"
	"unicode"

	"github.com/backstop-llm/backstop/internal/modelid"
)

const sonnet45 = "claude-sonnet-4-5-20250929"

// TestSame checks which model ids name one model: one model in every
// platform's form, an alias matching any snapshot, and the near misses
// that are another model. Same must be symmetric.
func TestSame(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		// One Claude model in every platform's form.
		{sonnet45, sonnet45, true},
		{sonnet45, "claude-sonnet-4-5", true},
		{sonnet45, "anthropic.claude-sonnet-4-5-20250929-v1:0", true},
		{sonnet45, "us.anthropic.claude-sonnet-4-5-20250929-v1:0", true},
		{sonnet45, "eu.anthropic.claude-sonnet-4-5-20250929-v1:0", true},
		{sonnet45, "apac.anthropic.claude-sonnet-4-5-20250929-v1:0", true},
		{sonnet45, "global.anthropic.claude-sonnet-4-5-20250929-v1:0", true},
		{sonnet45, "jp.anthropic.claude-sonnet-4-5-20250929-v1:0", true},
		{sonnet45, "arn:aws:bedrock:eu-west-1:123456789012:inference-profile/eu.anthropic.claude-sonnet-4-5-20250929-v1:0", true},
		{sonnet45, "arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-sonnet-4-5-20250929-v1:0", true},
		{sonnet45, "claude-sonnet-4-5@20250929", true},
		{sonnet45, "publishers/anthropic/models/claude-sonnet-4-5@20250929", true},
		{sonnet45, "CLAUDE-SONNET-4-5-20250929", true},
		{"claude-sonnet-4-5", "claude-sonnet-4-5@20250929", true},
		{"claude-sonnet-4-5", "us.anthropic.claude-sonnet-4-5-20250929-v1:0", true},
		{"claude-sonnet-4-5", "claude-sonnet-4-5", true},
		{"claude-sonnet-4-0", "claude-sonnet-4-20250514", true},
		{"claude-opus-4-1@20250805", "claude-opus-4-1-20250805", true},
		{"claude-haiku-4-5", "anthropic.claude-haiku-4-5-20251001-v1:0", true},
		{"claude-3-5-sonnet-latest", "claude-3-5-sonnet-20241022", true},
		{"claude-3-5-sonnet-20241022", "anthropic.claude-3-5-sonnet-20241022-v2:0", true},
		{"claude-3-sonnet-20240229", "anthropic.claude-3-sonnet-20240229-v1:0:200k", true},
		// The Bedrock version is not the snapshot: the date is.
		{sonnet45, "anthropic.claude-sonnet-4-5-20250929-v2:0", true},
		// Near misses: another model.
		{sonnet45, "claude-sonnet-4-5-20250514", false},
		{"claude-sonnet-4-5@20250929", "claude-sonnet-4-5@20251231", false},
		{"claude-3-5-sonnet-20240620", "anthropic.claude-3-5-sonnet-20241022-v2:0", false},
		{"claude-sonnet-4-5", "claude-sonnet-4-20250514", false},
		{"claude-sonnet-4", "claude-sonnet-4-5", false},
		{"claude-sonnet-4-0", "claude-sonnet-4-5", false},
		{"claude-opus-4-1", "claude-opus-4-20250514", false},
		{"claude-haiku-4-5-20251001", sonnet45, false},
		{"claude-haiku-4-5", "eu.anthropic.claude-sonnet-4-5-20250929-v1:0", false},
		{"claude-sonnet-4-5", "claude-3-5-sonnet-20241022", false},
		{sonnet45, "claude-sonnet-4-5-2025092", false},
		{sonnet45, "eu.claude-sonnet-4-5-20250929", false}, // no vendor: not a profile
		// Other vendors pass through, compared without case.
		{"gpt-4o", "GPT-4o", true},
		{"gpt-4o", "gpt-4o-mini", false},
		{"o3", "o3-mini", false},
		// A dated snapshot is the model its name without the date names
		// (an alias matches any snapshot, two dates are two models); a
		// model whose name merely starts with another's is another model.
		{"gpt-4o", "gpt-4o-2024-08-06", true},
		{"GPT-4o-2024-08-06", "gpt-4o-2024-08-06", true},
		{"gpt-4o-mini", "gpt-4o-mini-2024-07-18", true},
		{"gpt-4o-2024-05-13", "gpt-4o-2024-08-06", false},
		{"gpt-4o", "gpt-4o-mini-2024-07-18", false},
		{"gpt-4o-2024-08-06", "gpt-4o-mini-2024-07-18", false},
		{"gpt-4", "gpt-4-0613", true},
		{"gpt-4", "gpt-4-32k-0613", false},
		{"o3-mini", "o3-mini-2025-01-31", true},
		{"o3", "o3-mini-2025-01-31", false},
		{"gemini-2.0-flash", "gemini-2.0-flash-001", true},
		{"gemini-2.0-flash", "gemini-2.0-flash-lite-001", false},
		{"claude-sonnet-4", "claude-sonnet-4-5-20250929", false},
		{"models/gemini-2.5-pro", "gemini-2.5-pro", true},
		{"projects/p/locations/us-central1/publishers/google/models/gemini-2.5-pro", "gemini-2.5-pro", true},
		{"gemini-2.5-pro", "gemini-2.5-flash", false},
		{"us.amazon.nova-pro-v1:0", "eu.amazon.nova-pro-v1:0", true},
		{"my-gpt-eu", "gpt-4o", false},
		// Legacy Bedrock ids without a date: the version names the model.
		{"anthropic.claude-v2", "anthropic.claude-v2:1", false},
		{"anthropic.claude-v2:1", "ANTHROPIC.claude-v2:1", true},
	} {
		if got := modelid.Same(tc.a, tc.b); got != tc.same {
			t.Errorf("Same(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.same)
		}
		if got := modelid.Same(tc.b, tc.a); got != tc.same {
			t.Errorf("Same(%q, %q) = %v, want %v", tc.b, tc.a, got, tc.same)
		}
	}
}

// TestContradicts checks when a target's Serves contradicts its Model: only
// when Model is itself a model id, of another model, and not a deployment
// name made from Serves' id with a suffix of its own.
func TestContradicts(t *testing.T) {
	for _, tc := range []struct {
		model, serves string
		want          bool
	}{
		// A name that is no model id is taken on trust.
		{"my-gpt-eu", "gpt-4o", false},
		{"prod", sonnet45, false},
		{"gpt-eu", "gpt-4o", false},
		{"arn:aws:bedrock:eu-west-1:123456789012:application-inference-profile/a1b2c3", sonnet45, false},
		// A model id of the same model, in any form.
		{"gpt-4o", "GPT-4o", false},
		{"gpt-4o-2024-08-06", "gpt-4o", false},
		{"gpt-4o-mini-2024-07-18", "gpt-4o-mini", false},
		{"eu.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5", false},
		// A deployment named after its model.
		{"gpt-4o-prod", "gpt-4o", false},
		{"gpt-4o-mini-prod", "gpt-4o-mini", false},
		{"GPT-4o-Prod-EU", " gpt-4o ", false},
		// Another model.
		{"gpt-4o-mini", "gpt-4o", true},
		{"gpt-4o-mini-2024-07-18", "gpt-4o", true},
		{"gpt-4o-mini-prod", "gpt-4o", true},
		{"gpt-4o-realtime-preview", "gpt-4o", true},
		{"o3-mini", "o3", true},
		{"gemini-2.0-flash-lite-001", "gemini-2.0-flash", true},
		{sonnet45, "claude-sonnet-4", true},
		{"eu.anthropic.claude-sonnet-4-5-20250929-v1:0", "eu.anthropic.claude-sonnet-4", true},
		{"gpt-4o", "gpt-4.1", true},
		{"us.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-haiku-4-5", true},
		{"o3", "o4-mini", true},
		{"models/gemini-2.5-pro", "gemini-2.5-flash", true},
		{"gpt-4o-2024-08-06", "gpt-4o-2024-05-13", true},
	} {
		if got := modelid.Contradicts(tc.model, tc.serves); got != tc.want {
			t.Errorf("Contradicts(%q, %q) = %v, want %v", tc.model, tc.serves, got, tc.want)
		}
	}
}

// FuzzCanonical feeds Canonical, Same and Contradicts arbitrary ids (a
// target's Model and Serves come from the user's configuration): none
// panics, an id names its own model and never contradicts itself, Same is
// symmetric, and case and surrounding spaces do not matter.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{sonnet45, "claude-sonnet-4-5@20250929", "eu.anthropic.claude-sonnet-4-5-20250929-v1:0",
		"arn:aws:bedrock:eu-west-1:1:inference-profile/eu.anthropic.claude-sonnet-4-5-20250929-v1:0",
		"publishers/anthropic/models/claude-sonnet-4-5@latest", "anthropic.claude-3-sonnet-20240229-v1:0:200k",
		"gpt-4o-mini-2024-07-18", "gpt-4-0613", "o3", "gemini-2.0-flash-001", "models/gemini-2.5-pro", "my-gpt-eu",
		"", "-", "claude-", "claude-x-0", "arn:", "/models/", "us.a.b"} {
		f.Add(s, "gpt-4o")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		family, date, known := modelid.Canonical(a)
		if !modelid.Same(a, a) {
			t.Errorf("Same(%q, %q) is false; Canonical = %q, %q, %v", a, a, family, date, known)
		}
		if modelid.Contradicts(a, a) {
			t.Errorf("Contradicts(%q, %q) is true", a, a)
		}
		if modelid.Same(a, b) != modelid.Same(b, a) {
			t.Errorf("Same(%q, %q) != Same(%q, %q)", a, b, b, a)
		}
		if !isASCII(a) {
			return // Unicode case mapping can change a string's length
		}
		f2, d2, k2 := modelid.Canonical(" " + strings.ToUpper(a) + "\t")
		if f2 != family || d2 != date || k2 != known {
			t.Errorf("Canonical(%q) = %q, %q, %v but in upper case with spaces %q, %q, %v", a, family, date, known, f2, d2, k2)
		}
	})
}

// isASCII reports whether s holds only ASCII.
func isASCII(s string) bool {
	for _, r := range s {
		if r > unicode.MaxASCII {
			return false
		}
	}
	return true
}
