package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/backstop-llm/backstop/internal/classify"
	"github.com/backstop-llm/backstop/llm"
)

// quoteMax is how many bytes of an unexpected body an error quotes.
const quoteMax = 200

// redactedMark replaces the API key wherever an error would quote it.
const redactedMark = "[redacted]"

// StatusKind classifies a status whose body says nothing more specific: a
// 2xx that could not be used is KindServer (the provider answered with
// something that is not an answer); any other status is classified by the
// status alone, as classify.Classify does when no vendor table knows the error.
func StatusKind(status int) llm.Kind {
	return classify.VendorOther.Kind(status, "", "", "", nil)
}

// Failure starts the error for reply r: Provider, Status, the request id,
// Retry-After, x-should-retry and the rate limit from the headers, and kind.
// The adapter fills in what the body says; Redact must be its last step.
func (e *Endpoint) Failure(r *Reply, kind llm.Kind) *llm.Error {
	f := &llm.Error{
		Provider:    e.Provider,
		Status:      r.Status,
		Kind:        kind,
		ShouldRetry: classify.ShouldRetry(r.Header),
	}
	if e.RequestID != "" {
		f.RequestID = r.Header.Get(e.RequestID)
	}
	f.RetryAfter, _ = classify.RetryAfter(r.Header, r.Received)
	if e.RateLimit != nil {
		f.RateLimit = e.RateLimit(r.Header, r.Received)
	}
	return f
}

// Malformed is the error for a reply whose body is not the JSON the adapter
// expected (an HTML page from a proxy, truncated JSON, an empty body, JSON
// of another shape): classified by status, quoting at most 200 bytes of the
// body, with cause (what the decoder said) as Err.
func (e *Endpoint) Malformed(r *Reply, cause error) *llm.Error {
	f := e.Failure(r, StatusKind(r.Status))
	f.Err = cause
	if len(bytes.TrimSpace(r.Body)) == 0 {
		f.Message = "empty response body"
	} else {
		f.Message = fmt.Sprintf("response body is not the expected JSON (%v)", cause)
		f.Detail = e.quote(r.Body)
	}
	return f
}

// Decode reads the JSON body of a 2xx reply into v. A reply of any other
// status is an error reply, returned as parseError makes it; a body that is
// not the expected JSON is Malformed, the key redacted.
func (e *Endpoint) Decode(r *Reply, v any, parseError func(*Reply) *llm.Error) *llm.Error {
	if r.Status < 200 || r.Status > 299 {
		return parseError(r)
	}
	if err := json.Unmarshal(r.Body, v); err != nil {
		return e.Redact(e.Malformed(r, err))
	}
	return nil
}

// detailMax is how many bytes of the provider's own message an error keeps
// in its Detail.
const detailMax = 512

// Detail returns msg, the provider's own text for an error (its error
// message), for llm.Error.Detail: cut to at most 512 bytes on a rune
// boundary, the key redacted before the cut so that no prefix of it
// survives.
func (e *Endpoint) Detail(msg string) string {
	n := min(len(msg), detailMax+len(e.Secret))
	s := redactKey(msg, n, e.Secret)
	if len(s) > detailMax || len(msg) > n {
		s = cutRunes(s, detailMax) + "…"
	}
	return s
}

// cutRunes returns s cut to at most n bytes, dropping a rune the cut would
// split.
func cutRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for i := 0; i < utf8.UTFMax-1 && len(s) > 0; i++ {
		if r, size := utf8.DecodeLastRuneInString(s); r != utf8.RuneError || size != 1 {
			break
		}
		s = s[:len(s)-1]
	}
	return s
}

// quote returns the start of body as a Go string literal (one line, no
// control characters), the key redacted before the cut so that no prefix of
// it survives, and the full size when the body was cut.
func (e *Endpoint) quote(body []byte) string {
	n := min(len(body), quoteMax+len(e.Secret))
	s := redactKey(body, n, e.Secret)
	cut := len(s) > quoteMax || len(body) > n
	s = cutRunes(s, quoteMax)
	q := strconv.Quote(s)
	if cut {
		q += fmt.Sprintf("… (%d bytes)", len(body))
	}
	return q
}

// Redact removes the API key from every text field of f (Detail too),
// including the text of its cause, and returns f. Every error an adapter
// returns passes through it. What counts as the key is as redactKey says:
// a key of MinSecretLen bytes or more wherever it appears, a shorter one
// only where it stands as a whole token.
func (e *Endpoint) Redact(f *llm.Error) *llm.Error {
	if e.Secret == "" {
		return f
	}
	e.redact(&f.Type, &f.Code, &f.Message, &f.Detail, &f.RequestID)
	if f.Err != nil {
		if msg := f.Err.Error(); strings.Contains(msg, e.Secret) {
			if r := redactKey(msg, len(msg), e.Secret); r != msg {
				f.Err = &redactedError{msg: r, err: f.Err}
			}
		}
	}
	return f
}

// Clean removes the API key from the text fields of an answer that come
// from the provider's headers and body beside the answer itself (ID, Model,
// RequestID, FinishReason), as Redact does for errors, and returns res: a
// server that echoes the key in its request-id header must not put it into
// Result.Served, spans or a last-known-good store.
func (e *Endpoint) Clean(res *llm.Response) *llm.Response {
	if e.Secret == "" {
		return res
	}
	e.redact(&res.ID, &res.Model, &res.RequestID, &res.FinishReason)
	return res
}

// redact removes the key from each text that fields point to.
func (e *Endpoint) redact(fields ...*string) {
	for _, s := range fields {
		*s = redactKey(*s, len(*s), e.Secret)
	}
}

// MinSecretLen is the length from which a key is redacted wherever it
// appears. A shorter key (a placeholder such as "k" or "none" for a local
// server, a hand-made password) cannot be told apart from ordinary text:
// redacting every occurrence would corrupt request ids, model names and
// messages that merely contain its letters ("req_fake_19" with the key
// "k"), so it is redacted only where it stands as a whole token. Every
// provider's issued keys are far longer.
const MinSecretLen = 16

// redactKey returns s[:n] with every occurrence of key that lies wholly in
// it replaced by "[redacted]". A key of MinSecretLen bytes or more is
// replaced wherever it appears, glued to other text or not: nothing but
// the key itself holds such a string. A shorter key is replaced only where
// it is a whole token, judged on s whole (not on the cut at n): neither
// neighbour is a byte a key is made of (a letter, a digit, '_' or '-'),
// except that an escape just before it (a JSON escape such as \n or
// \u003d, a percent-encoding such as %3D) counts as a boundary, since a
// body quoting the key in a string or a URL writes it so. It allocates
// only when it replaces something.
func redactKey[T string | []byte](s T, n int, key string) string {
	w := string(s[:n]) // no copy for a string; the caller's copy for bytes
	if key == "" {
		return w
	}
	var b strings.Builder
	done := 0 // w[:done] is written to b, or is w's unchanged prefix
	for from := 0; ; {
		i := strings.Index(w[from:], key)
		if i < 0 {
			break
		}
		i += from
		j := i + len(key)
		if len(key) < MinSecretLen && !wholeToken(s, i, j) {
			from = i + 1
			continue
		}
		if b.Len() == 0 {
			b.Grow(len(w) + len(redactedMark))
		}
		b.WriteString(w[done:i])
		b.WriteString(redactedMark)
		done, from = j, j
	}
	if done == 0 {
		return w
	}
	b.WriteString(w[done:])
	return b.String()
}

// wholeToken reports whether s[i:j] stands as a token of its own: see
// redactKey.
func wholeToken[T string | []byte](s T, i, j int) bool {
	return (i == 0 || !keyByte(s[i-1]) || escapeEndsAt(s, i)) && (j == len(s) || !keyByte(s[j]))
}

// keyByte reports whether c is a byte API keys are made of.
func keyByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}

// escapeEndsAt reports whether s[:i] ends with an escape whose last byte
// is a letter or digit: a JSON \n, \r, \t, \b or \f, a JSON \uXXXX,
// or a percent-encoded %XX.
func escapeEndsAt[T string | []byte](s T, i int) bool {
	switch {
	case i >= 2 && s[i-2] == '\\' && strings.IndexByte("nrtbf", s[i-1]) >= 0:
		return true
	case i >= 3 && s[i-3] == '%' && isHex(s[i-2]) && isHex(s[i-1]):
		return true
	case i >= 6 && s[i-6] == '\\' && s[i-5] == 'u' && isHex(s[i-4]) && isHex(s[i-3]) && isHex(s[i-2]) && isHex(s[i-1]):
		return true
	}
	return false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// redactedError is a cause whose text quoted the key (a URL error for a
// BaseURL carrying it, say). It still unwraps to the cause, so errors.Is and
// errors.As see through it.
type redactedError struct {
	msg string
	err error
}

func (r *redactedError) Error() string { return r.msg }
func (r *redactedError) Unwrap() error { return r.err }
