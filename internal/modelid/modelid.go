// Package modelid holds backstop's model identity rule: which model ids
// name one model across platforms (the Anthropic API, Bedrock, Vertex,
// OpenAI, Azure, Gemini), and what a Bedrock inference profile or a
// resource path wraps, and when a target's Serves contradicts its Model.
// chain uses it to check tiers, residency to find a Bedrock profile's
// geography, catalog to find a model's entry; all must agree, so it lives
// here once.
package modelid

import (
	"regexp"
	"slices"
	"strings"
)

// Canonical reduces a model id to what identifies the model: its
// family and its snapshot date ("" for an alias). known reports whether id
// is a recognisable model id, as opposed to a name of the user's own (an
// Azure deployment name) or of an unknown server.
//
// Claude ids are recognised in every platform's form, all reduced to the
// Anthropic API's (family "claude-sonnet-4-5", date "20250929"):
//
//	claude-sonnet-4-5-20250929                       Anthropic API
//	claude-sonnet-4-5, claude-3-5-sonnet-latest      aliases (no date)
//	claude-sonnet-4-0                                alias of claude-sonnet-4
//	anthropic.claude-sonnet-4-5-20250929-v1:0        Bedrock model id
//	eu.anthropic.claude-sonnet-4-5-20250929-v1:0     Bedrock cross-region inference profile (us., eu., apac., global., us-gov., jp., au.)
//	arn:aws:bedrock:…:inference-profile/eu.anthropic.… Bedrock ARN ending in one of those
//	claude-sonnet-4-5@20250929                       Vertex
//	publishers/anthropic/models/claude-…             Vertex resource path
//
// The Bedrock version suffix after the date (-v1:0, -v2:0, a :200k
// context suffix) is dropped: the date names the snapshot
// (anthropic.claude-3-5-sonnet-20241022-v2:0 is claude-3-5-sonnet-20241022). Any other id passes through lowercased,
// with a leading "models/" (Gemini) or a resource path up to ".../models/"
// (Vertex) removed, and a Bedrock profile prefix removed from another
// vendor's Bedrock id (us.amazon.nova-pro-v1:0 is amazon.nova-pro-v1:0);
// it is known when it starts with a known OpenAI or Gemini family and a
// version (gpt-4o, chatgpt-4o-latest, gemini-2.5-pro; o1, o3, o4 alone or
// followed by "-"). A known id's snapshot is split off as a Claude id's
// date is (snapshotOf): gpt-4o-mini-2024-07-18 is family gpt-4o-mini,
// date 20240718. The family is the whole name before the snapshot, never
// a prefix of it: gpt-4o-mini is not gpt-4o.
func Canonical(id string) (family, date string, known bool) {
	s := strings.ToLower(strings.TrimSpace(id))
	s = StripPath(s)
	if _, rest, ok := BedrockProfile(s); ok {
		s = rest
	}
	if c, ok := strings.CutPrefix(s, "anthropic."); ok && strings.HasPrefix(c, "claude-") {
		s = c
	}
	if !strings.HasPrefix(s, "claude-") {
		if !knownFamily(s) {
			return s, "", false
		}
		family, date = snapshotOf(s)
		return family, date, true
	}
	s = bedrockVersion.ReplaceAllString(s, "$1")
	if f, d, ok := strings.Cut(s, "@"); ok { // Vertex
		s, date = f, d
		if date == "latest" {
			date = ""
		}
	} else if i := strings.LastIndexByte(s, '-'); i >= 0 && isDate(s[i+1:]) {
		s, date = s[:i], s[i+1:]
	} else {
		s = strings.TrimSuffix(s, "-latest")
	}
	if m := zeroMinor.FindStringSubmatch(s); m != nil { // claude-sonnet-4-0 is claude-sonnet-4
		s = m[1]
	}
	return s, date, true
}

// Same reports whether model ids a and b name one model: the same
// family (Canonical), and the same date unless either is an alias
// (no date), which matches any snapshot of its family.
func Same(a, b string) bool {
	fa, da, _ := Canonical(a)
	fb, db, _ := Canonical(b)
	return fa == fb && (da == "" || db == "" || da == db)
}

var (
	// bedrockVersion is a Bedrock model id's version suffix after its
	// date: -v1:0, -v2:0, -v1, and provisioned throughput's context suffix
	// (:200k). Legacy ids without a date (anthropic.claude-v2:1, Claude
	// 2.1) keep theirs: there it names the model.
	bedrockVersion = regexp.MustCompile(`(-\d{8})-v\d+(:\d+)?(:\d+k)?$`)
	// openAIDate is an OpenAI dated snapshot: the model's name, then
	// -YYYY-MM-DD.
	openAIDate = regexp.MustCompile(`^(.+)-(\d{4})-(\d{2})-(\d{2})$`)
	// zeroMinor is a family whose minor version is 0 (claude-opus-4-0).
	zeroMinor = regexp.MustCompile(`^(claude-[a-z]+-\d+)-0$`)
	// profileID is a Bedrock cross-region inference profile id: a
	// geography prefix, then a vendor's Bedrock model id (vendor.model).
	profileID = regexp.MustCompile(`^(us|eu|apac|global|us-gov|jp|au)\.([a-z][a-z0-9]*\..+)$`)
)

// StripPath removes what surrounds a model id in a resource name: a
// Bedrock ARN up to its last "/", a leading "models/" (Gemini) or a path
// up to ".../models/" (Vertex).
func StripPath(s string) string {
	if strings.HasPrefix(s, "arn:") {
		if i := strings.LastIndexByte(s, '/'); i >= 0 {
			return s[i+1:]
		}
		return s
	}
	if r, ok := strings.CutPrefix(s, "models/"); ok {
		return r
	}
	if i := strings.LastIndex(s, "/models/"); i >= 0 {
		return s[i+len("/models/"):]
	}
	return s
}

// BedrockProfile splits a Bedrock cross-region inference profile id (s
// lowercased, its ARN stripped) into its prefix ("eu") and the model id it
// routes ("anthropic.claude-…"); ok is false for any other id.
func BedrockProfile(s string) (prefix, rest string, ok bool) {
	m := profileID.FindStringSubmatch(s)
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}

// isDate reports whether s is a snapshot date: eight digits.
func isDate(s string) bool { return len(s) == 8 && isDigits(s) }

// isDigits reports whether s is one or more decimal digits.
func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// snapshotOf splits a known OpenAI or Gemini id (lowercased) into its
// family and its snapshot ("" for an alias): OpenAI's dated snapshots
// (gpt-4o-2024-08-06, o3-mini-2025-01-31: date 20240806, 20250131) and
// its older four-digit ones (gpt-4-0613: 0613), Gemini's stable versions
// (gemini-2.0-flash-001: 001).
func snapshotOf(s string) (family, snapshot string) {
	if m := openAIDate.FindStringSubmatch(s); m != nil {
		return m[1], m[2] + m[3] + m[4]
	}
	i := strings.LastIndexByte(s, '-')
	if i < 0 || !isDigits(s[i+1:]) {
		return s, ""
	}
	switch tail := s[i+1:]; {
	case len(tail) == 4 && (strings.HasPrefix(s, "gpt-") || strings.HasPrefix(s, "chatgpt-")),
		len(tail) == 3 && strings.HasPrefix(s, "gemini-"):
		return s[:i], tail
	}
	return s, ""
}

// knownFamily reports whether s (lowercased) starts with a known OpenAI or
// Gemini model family and a version: gpt-4o, chatgpt-4o-latest,
// gemini-2.5-pro; not gpt-eu, a deployment name of someone's own.
func knownFamily(s string) bool {
	for _, p := range []string{"gpt-", "chatgpt-", "gemini-"} {
		if r, ok := strings.CutPrefix(s, p); ok && r != "" && r[0] >= '0' && r[0] <= '9' {
			return true
		}
	}
	for _, p := range []string{"o1", "o3", "o4"} {
		if r, ok := strings.CutPrefix(s, p); ok && (r == "" || r[0] == '-') {
			return true
		}
	}
	return false
}

// Contradicts reports whether serves, the model a target says it serves,
// contradicts its model: model is itself a recognisable model id
// (Canonical), of another model than serves, and not a deployment name
// made from serves' id (NamedAfter). A model that is no model id (an
// Azure deployment name, "prod") contradicts nothing: serves is taken on
// trust.
func Contradicts(model, serves string) bool {
	if _, _, known := Canonical(model); !known {
		return false
	}
	return !Same(model, serves) && !NamedAfter(model, serves)
}

// NamedAfter reports whether the deployment name model is the id serves
// with a suffix of its own ("gpt-4o-prod" serving gpt-4o): a name, not a
// contradiction. A suffix that names a model is no name of one's own: a
// part of it that starts with a digit (a version, a date, a context size:
// claude-sonnet-4-5 is not claude-sonnet-4 named "5") or that is a word
// the vendors tell their models apart by (gpt-4o-mini is not gpt-4o
// named "mini").
func NamedAfter(model, serves string) bool {
	m, s := strings.ToLower(strings.TrimSpace(model)), strings.ToLower(strings.TrimSpace(serves))
	suffix, ok := strings.CutPrefix(m, s+"-")
	if !ok {
		return false
	}
	for part := range strings.SplitSeq(suffix, "-") {
		if part != "" && part[0] >= '0' && part[0] <= '9' || slices.Contains(modelWords, part) {
			return false
		}
	}
	return true
}

// modelWords are the words OpenAI and Google put after a model's name to
// name another model (gpt-4o-mini, o3-pro, gemini-2.5-flash-lite,
// gpt-4o-realtime-preview): a deployment name ending in one names that
// model, not its own.
var modelWords = []string{"mini", "nano", "turbo", "pro", "max", "ultra", "lite", "flash", "audio", "realtime",
	"search", "transcribe", "tts", "codex", "chat", "instruct", "vision", "image", "preview", "exp", "latest", "thinking"}
