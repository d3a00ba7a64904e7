package validate

import (
	"fmt"
	"strings"
)

// Bounds of the bracket search (rule 3 of Extract).
const (
	// maxNesting is encoding/json's nesting limit: a span nested deeper
	// never parses, so the search forgets a bracket with this many brackets
	// open inside it.
	maxNesting = 10000
	// The search spends at most max(minSearchWork, searchWorkFactor*len(text))
	// bytes on checking candidate spans and on extra passes.
	minSearchWork    = 64 << 10
	searchWorkFactor = 8
)

// errSearchLimit is ErrNoJSON when the bracket search ran out of work.
var errSearchLimit = fmt.Errorf("%w (the search for a {...} or [...] span stopped at its work limit, "+
	"%d times the text's length)", ErrNoJSON, searchWorkFactor)

// Extract returns the JSON in a model's answer: a substring of text that
// json.Valid accepts, found by the first of these rules that matches.
//
//  1. The whole text, trimmed of white space, is one JSON value (of any
//     type): Extract returns it.
//  2. Otherwise, the first ``` fenced block whose content, trimmed, is one
//     JSON value. A fence opens at any "```" (at the start of a line or
//     not), followed by optional spaces and an optional info word that
//     starts with a letter ("json", "JSON", "jsonc"; any word is accepted,
//     so the content decides); the content runs from there to the next
//     "```", or to the end of the text if the fence is never closed. When
//     that content is not JSON but the opening line has more on it after the
//     info word, the content from the next line on is tried. A block that
//     is not JSON (```python ...```) is skipped; the search goes on after
//     its closing fence.
//  3. Otherwise, the first {...} or [...] span that parses as JSON. The text
//     is scanned once, left to right, pairing brackets: outside any bracket
//     quotes are prose; inside one, "..." is a JSON string (backslash
//     escapes honoured) whose brackets do not count. A closing bracket that
//     does not match the innermost open one abandons every open bracket.
//     Of the paired spans that parse, the one that starts first wins: an
//     object wins over the objects nested in it, and over any later one. A
//     scan that finds nothing and met a quote inside a bracket (a stray
//     quote in prose can swallow the JSON that follows) starts again just
//     after the opening bracket of the first stretch that held the quote.
//     Scalars (a bare 42 or "text") are found by rules 1 and 2 only.
//
// So of two JSON values in one answer, the one in a fence wins over a bare
// one, and of two bare ones the first. Beware that a citation such as [1] in
// prose is itself JSON and, before a bare object, wins: ask models for a
// fenced block, or for the JSON alone. Nothing found is ErrNoJSON (which
// matches ErrInvalid).
//
// The result is always a substring of text, trimmed, that json.Valid
// accepts. Extract never panics and does not allocate when rule 1 or 2
// matches. It runs in time linear in the length of text: rules 1 and 2 look
// at each byte a bounded number of times; rule 3 forgets a bracket with
// 10,000 brackets open inside it (encoding/json's nesting limit) and spends
// at most max(64 KiB, 8*len(text)) bytes on checking candidates and on
// extra scans, after which it gives up with ErrNoJSON. A megabyte of
// adversarial text ("{{{{...", "[1,][1,]...", stray quotes) costs tens of
// milliseconds; an ordinary answer, microseconds.
func Extract(text string) (string, error) {
	t := strings.TrimSpace(text)
	if t == "" {
		return "", ErrNoJSON
	}
	if valid(t) {
		return t, nil
	}
	if j, ok := fenced(text); ok {
		return j, nil
	}
	return bracketed(text)
}

// valid reports whether s is one JSON value: validJSON, which json.Valid
// would agree with, without allocating.
func valid(s string) bool { return validJSON(s) }

// fenced is rule 2 of Extract.
func fenced(text string) (string, bool) {
	const fence = "```"
	off := 0
	for {
		i := strings.Index(text[off:], fence)
		if i < 0 {
			return "", false
		}
		open := off + i + len(fence)
		from := open
		for from < len(text) && (text[from] == ' ' || text[from] == '\t') {
			from++
		}
		if from < len(text) && isLetter(text[from]) {
			for from < len(text) && isInfo(text[from]) {
				from++
			}
		} else {
			from = open
		}
		end, next := len(text), -1
		if k := strings.Index(text[from:], fence); k >= 0 {
			end, next = from+k, from+k+len(fence)
		}
		content := text[from:end]
		if c := strings.TrimSpace(content); valid(c) {
			return c, true
		}
		// ```json title="x"\n{...}: try from the next line.
		if nl := strings.IndexByte(content, '\n'); nl >= 0 && strings.TrimSpace(content[:nl]) != "" {
			if c := strings.TrimSpace(content[nl+1:]); valid(c) {
				return c, true
			}
		}
		if next < 0 {
			return "", false
		}
		off = next
	}
}

func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

func isInfo(c byte) bool {
	return isLetter(c) || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '+' || c == '.'
}

// span is a bracket of the current pass: the offsets of its opening and
// closing bytes; end is -1 while it is open, and stays -1 if it never closes.
type span struct{ start, end int }

// search is rule 3 of Extract.
type search struct {
	text      string
	work      int    // bytes left for candidate checks and extra passes
	exhausted bool   // work ran out
	examined  int    // bytes scanned or checked, for the tests
	stack     []int  // open brackets, as indices into spans
	spans     []span // brackets not yet checked, in order of start
}

func bracketed(text string) (string, error) {
	var stack [32]int
	var spans [64]span
	s := search{text: text, stack: stack[:0], spans: spans[:0]}
	return s.run()
}

func (s *search) run() (string, error) {
	text := s.text
	s.work = max(minSearchWork, searchWorkFactor*len(text))
	from := 0
	for {
		j, ok, again := s.pass(from)
		switch {
		case ok:
			return j, nil
		case s.exhausted:
			return "", errSearchLimit
		case again < 0:
			return "", ErrNoJSON
		}
		if s.work -= len(text) - again; s.work < 0 {
			return "", errSearchLimit
		}
		from = again
	}
}

// pass scans text[from:] and returns the first span that parses, or, when
// there is none, where a new pass should start (-1: nowhere).
func (s *search) pass(from int) (json string, ok bool, again int) {
	text := s.text
	s.examined += len(text) - from
	s.stack, s.spans = s.stack[:0], s.spans[:0]
	region, quoted := -1, -1 // start of the current stretch of brackets; of the first one with a quote
	inString, escaped := false, false
	for i := from; i < len(text); i++ {
		c := text[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			if len(s.stack) > 0 {
				inString = true
				if quoted < 0 {
					quoted = region
				}
			}
		case '{', '[':
			if len(s.stack) == 0 {
				region = i
			}
			s.spans = append(s.spans, span{i, -1})
			s.stack = append(s.stack, len(s.spans)-1)
			if len(s.stack) > 2*maxNesting {
				if j, ok := s.shed(); ok || s.exhausted {
					return j, ok, -1
				}
			}
		case '}', ']':
			n := len(s.stack)
			if n == 0 {
				continue
			}
			top := &s.spans[s.stack[n-1]]
			if text[top.start] == c-2 { // '{'+2 == '}', '['+2 == ']'
				top.end = i
				if s.stack = s.stack[:n-1]; n > 1 {
					continue
				}
			} else {
				s.stack = s.stack[:0] // no span open here can parse
			}
			if j, ok := s.flush(len(s.spans)); ok || s.exhausted {
				return j, ok, -1
			}
		}
	}
	if j, ok := s.flush(len(s.spans)); ok || s.exhausted {
		return j, ok, -1
	}
	if quoted >= 0 {
		return "", false, quoted + 1
	}
	return "", false, -1
}

// flush checks the closed spans among spans[:n], in order, and forgets them
// all: no span found later can start before them.
func (s *search) flush(n int) (string, bool) {
	for _, sp := range s.spans[:n] {
		if sp.end < 0 {
			continue
		}
		c := s.text[sp.start : sp.end+1]
		if !plausible(c) {
			continue
		}
		if s.work -= len(c); s.work < 0 {
			s.exhausted = true
			return "", false
		}
		s.examined += len(c)
		if valid(c) {
			return c, true
		}
	}
	s.spans = s.spans[:copy(s.spans, s.spans[n:])]
	return "", false
}

// shed forgets the brackets with maxNesting or more brackets open inside
// them (no span of theirs can parse), and checks the closed spans that start
// before the first bracket still open.
func (s *search) shed() (string, bool) {
	d := len(s.stack) - maxNesting
	cut := s.stack[d]
	if j, ok := s.flush(cut); ok || s.exhausted {
		return j, ok
	}
	s.stack = s.stack[:copy(s.stack, s.stack[d:])]
	for i := range s.stack {
		s.stack[i] -= cut
	}
	return "", false
}

// plausible rejects, for free, an object span whose first token cannot
// start an object ("{curly braces}" in prose).
func plausible(c string) bool {
	if c[0] != '{' {
		return true
	}
	for i := 1; i < len(c); i++ {
		switch c[i] {
		case ' ', '\t', '\n', '\r':
			continue
		case '"', '}':
			return true
		}
		return false
	}
	return false
}
