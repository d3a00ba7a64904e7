package wire

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf8"

	"github.com/backstop-llm/backstop/llm"
)

const key = "sk-secret-0123456789"

func TestReadCapped(t *testing.T) {
	body := strings.Repeat("x", 100)
	tests := []struct {
		size, max int64
		want      error
	}{
		{100, 100, nil},
		{-1, 100, nil},
		{-1, 99, ErrTooLarge},
		{1000, 100, ErrTooLarge}, // announced too much: refused before reading
		{10, 1000, nil},          // the size is only a capacity hint
	}
	for _, tt := range tests {
		b, err := ReadCapped(iotest.OneByteReader(strings.NewReader(body)), tt.size, tt.max)
		if err != tt.want || err == nil && string(b) != body {
			t.Errorf("ReadCapped(size %d, max %d) = %d bytes, %v; want %v", tt.size, tt.max, len(b), err, tt.want)
		}
	}
	boom := errors.New("boom")
	if _, err := ReadCapped(iotest.ErrReader(boom), -1, 100); err != boom {
		t.Errorf("read error = %v; want boom", err)
	}
}

func TestQuote(t *testing.T) {
	e := &Endpoint{Secret: key}
	long := strings.Repeat("é", 150) // 300 bytes: the cut falls inside a rune
	q := e.quote([]byte(long))
	if !strings.HasPrefix(q, `"éé`) || !strings.HasSuffix(q, `"… (300 bytes)`) || strings.Contains(q, `\x`) {
		t.Errorf("quote = %s", q)
	}
	for i := 0; i < 250; i++ { // the key at every position around the cut
		body := []byte(strings.Repeat("a", i) + key + strings.Repeat("b", 50))
		q := e.quote(body)
		if strings.Contains(q, key[:5]) {
			t.Fatalf("key at %d: quote %s leaks it", i, q)
		}
	}
	if q := e.quote([]byte("line\nbreak\x00")); q != `"line\nbreak\x00"` {
		t.Errorf("quote = %s", q)
	}
}

func TestRedact(t *testing.T) {
	e := &Endpoint{Secret: key}
	cause := fmt.Errorf("dial https://h/?key=%s: %w", key, io.ErrUnexpectedEOF)
	f := e.Redact(&llm.Error{Type: key, Code: "c" + key, Message: "m " + key + key, RequestID: key, Err: cause})
	if s := fmt.Sprintf("%v %+v %s %s %s", f, *f, f.Err, f.Type, f.RequestID); strings.Contains(s, key) {
		t.Errorf("redacted error still quotes the key: %s", s)
	}
	if !errors.Is(f, io.ErrUnexpectedEOF) || f.Message != "m [redacted][redacted]" {
		t.Errorf("redaction lost the cause or mangled the message: %#v", f)
	}
	plain := errors.New("plain")
	if f := e.Redact(&llm.Error{Err: plain}); f.Err != plain {
		t.Errorf("a cause without the key was wrapped")
	}
	if f := (&Endpoint{}).Redact(&llm.Error{Message: "x"}); f.Message != "x" {
		t.Errorf("no secret: %#v", f)
	}
	if res := (&Endpoint{}).Clean(&llm.Response{RequestID: "x"}); res.RequestID != "x" {
		t.Errorf("no secret: %+v", res)
	}
	if d, q := (&Endpoint{}).Detail("x y"), (&Endpoint{}).quote([]byte("x y")); d != "x y" || q != `"x y"` {
		t.Errorf("no secret: Detail %q, quote %s", d, q)
	}
}

func TestURL(t *testing.T) {
	for _, tt := range []struct{ base, want string }{
		{"", "https://def/v1/x"},
		{"http://localhost:8080", "http://localhost:8080/v1/x"},
		{"https://gw.example/prefix/", "https://gw.example/prefix/v1/x"},
	} {
		if got, err := URL(tt.base, "https://def", "/v1/x"); err != nil || got != tt.want {
			t.Errorf("URL(%q) = %q, %v; want %q", tt.base, got, err, tt.want)
		}
	}
	for _, base := range []string{"h", "localhost:80", "ftp://h", "https://", "https://h?q", "https://h#f", "https://h:x", "http://h\x7f"} {
		if _, err := URL(base, "https://def", "/v1/x"); err == nil {
			t.Errorf("URL(%q) accepted", base)
		}
	}
	if _, err := URL("https://h", "", "v1"); err == nil {
		t.Error("a relative path was accepted")
	}
	if _, err := URL("https://user:"+key+"@h:bad", "", "/v1"); err == nil || strings.Contains(err.Error(), key) {
		t.Errorf("error %v quotes the URL's password", err)
	}
}

func TestEncode(t *testing.T) {
	type body struct {
		A int    `json:"a"`
		B string `json:"b,omitempty"`
		C string `json:"c"`
	}
	e := &Endpoint{Provider: "p"}
	b, err := e.Encode(body{A: 1, C: "<&>"}, nil)
	if err != nil || string(b) != `{"a":1,"c":"<&>"}` {
		t.Errorf("Encode = %s, %v", b, err)
	}
	b, err = e.Encode(body{A: 1, C: "x"}, map[string]any{"a": 2.5, "z": []int{1}, "b": nil})
	if err != nil || string(b) != `{"a":2.5,"b":null,"c":"x","z":[1]}` {
		t.Errorf("Encode with extra = %s, %v", b, err)
	}
	_, err = e.Encode(body{}, map[string]any{"bad": make(chan int)})
	var f *llm.Error
	if !errors.As(err, &f) || f.Kind != llm.KindBadRequest || f.Provider != "p" || !strings.Contains(f.Message, `Params.Extra["bad"]`) {
		t.Errorf("Encode with a bad extra = %v", err)
	}
}

func FuzzQuote(f *testing.F) {
	f.Add([]byte("<html>"), uint(3))
	f.Add([]byte(strings.Repeat("é", 120)), uint(199))
	e := &Endpoint{Secret: key}
	f.Fuzz(func(t *testing.T, body []byte, at uint) {
		i := int(at % uint(len(body)+1))
		body = append(append(append([]byte(nil), body[:i]...), key...), body[i:]...)
		q := e.quote(body)
		if strings.Contains(q, key) || !utf8.ValidString(q) || len(q) > 4*quoteMax+40 {
			t.Fatalf("quote(%q) = %s", body, q)
		}
		if !bytes.Contains([]byte(q), []byte(`"`)) {
			t.Fatalf("quote(%q) = %s is not quoted", body, q)
		}
	})
}

// stub is a RoundTripper that answers with a fixed response and records
// whether its body was closed.
type stub struct {
	status int
	size   int64
	body   io.Reader
	closed bool
}

func (s *stub) RoundTrip(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: s.status, Header: http.Header{"Request-Id": {"req_1"}},
		ContentLength: s.size, Body: s}, nil
}
func (s *stub) Read(p []byte) (int, error) { return s.body.Read(p) }
func (s *stub) Close() error               { s.closed = true; return nil }

func TestPostClosesBody(t *testing.T) {
	boom := errors.New("connection reset")
	tests := []struct {
		name string
		s    *stub
		kind llm.Kind // KindUnknown: success
	}{
		{"ok", &stub{status: 200, size: 2, body: strings.NewReader("{}")}, llm.KindUnknown},
		{"error status", &stub{status: 500, size: -1, body: strings.NewReader("{}")}, llm.KindUnknown},
		{"announced too large", &stub{status: 200, size: 1 << 40, body: strings.NewReader("{}")}, llm.KindServer},
		{"too large", &stub{status: 429, size: -1, body: strings.NewReader(strings.Repeat("x", 101))}, llm.KindRateLimited},
		{"cut short 200", &stub{status: 200, size: -1, body: io.MultiReader(strings.NewReader("{"), iotest.ErrReader(io.ErrUnexpectedEOF))}, llm.KindConnection},
		{"cut short 529", &stub{status: 529, size: -1, body: iotest.ErrReader(boom)}, llm.KindOverloaded},
	}
	for _, tt := range tests {
		e := &Endpoint{Provider: "p", URL: "http://h/v1", MaxBytes: 100, RequestID: "Request-Id",
			Client: &http.Client{Transport: tt.s}}
		r, err := e.Post(t.Context(), []byte("{}"))
		if !tt.s.closed {
			t.Errorf("%s: body not closed", tt.name)
		}
		var f *llm.Error
		switch {
		case tt.kind == llm.KindUnknown && (err != nil || r.Status != tt.s.status || string(r.Body) != "{}"):
			t.Errorf("%s: Post = %+v, %v", tt.name, r, err)
		case tt.kind != llm.KindUnknown && (!errors.As(err, &f) || f.Kind != tt.kind || f.Status != tt.s.status || f.RequestID != "req_1"):
			t.Errorf("%s: Post error = %#v; want Kind %v with status and request id", tt.name, err, tt.kind)
		}
	}
}

// TestRedactShortKey: a key too short to be told apart from ordinary text
// (a placeholder such as "k" or "none" for a local server) is redacted only
// where it stands as a whole token, so that it never corrupts a request id,
// a model name or a message that merely contains its letters, yet is still
// redacted wherever a server echoes it as a value.
func TestRedactShortKey(t *testing.T) {
	e := &Endpoint{Secret: "k"}
	intact := []string{"req_fake_19", "msg_k1", "k-1", "_k", "kk", "claude-k", "ok", "sk-ant-k0"}
	for _, s := range intact {
		f := e.Redact(&llm.Error{RequestID: s, Message: s, Detail: e.Detail(s), Type: s, Code: s})
		if f.RequestID != s || f.Message != s || f.Detail != s || f.Type != s || f.Code != s {
			t.Errorf("%q was corrupted: %#v", s, f)
		}
		if q := e.quote([]byte(s)); q != strconv.Quote(s) {
			t.Errorf("quote(%q) = %s", s, q)
		}
		res := e.Clean(&llm.Response{ID: s, Model: s, RequestID: s, FinishReason: s})
		if res.ID != s || res.Model != s || res.RequestID != s || res.FinishReason != s {
			t.Errorf("Clean corrupted %q: %+v", s, res)
		}
	}
	for in, want := range map[string]string{
		"k":                      "[redacted]",
		"key=k;":                 "key=[redacted];",
		"invalid x-api-key: k":   "invalid x-api-key: [redacted]",
		`{"key":"k"}`:            `{"key":"[redacted]"}`,
		"Bearer k":               "Bearer [redacted]",
		"k k.k,k":                "[redacted] [redacted].[redacted],[redacted]",
		"https://h/?key=k&x=1":   "https://h/?key=[redacted]&x=1",
		"q=%3Dk%26":              "q=%3D[redacted]%26", // percent-encoded: %3D is "="
		`"line\nk"`:              `"line\n[redacted]"`, // a JSON escape before it
		`"\u003ak"`:              `"\u003a[redacted]"`,
		"キーkは無効":                 "キー[redacted]は無効",
		"req_fake_19 with key k": "req_fake_19 with key [redacted]",
	} {
		if f := e.Redact(&llm.Error{Message: in, RequestID: in}); f.Message != want || f.RequestID != want {
			t.Errorf("Redact(%q) = %q, %q; want %q", in, f.Message, f.RequestID, want)
		}
		if got := e.Detail(in); got != want {
			t.Errorf("Detail(%q) = %q; want %q", in, got, want)
		}
		if res := e.Clean(&llm.Response{RequestID: in}); res.RequestID != want {
			t.Errorf("Clean(%q) = %q; want %q", in, res.RequestID, want)
		}
	}
	cause := fmt.Errorf("dial https://h/k: %w", io.ErrUnexpectedEOF)
	if f := e.Redact(&llm.Error{Err: cause}); f.Err.Error() != "dial https://h/[redacted]: unexpected EOF" || !errors.Is(f, io.ErrUnexpectedEOF) {
		t.Errorf("cause = %v", f.Err)
	}
	plain := errors.New("kept for the keeper")
	if f := e.Redact(&llm.Error{Err: plain}); f.Err != plain {
		t.Errorf("a cause holding the key's letters but not the key was wrapped: %v", f.Err)
	}
	// At the cut: a key whose next byte lies past the window is judged on
	// that byte, not on the window's end.
	long := strings.Repeat("a", detailMax-1) + " kx"
	if got := e.Detail(long); strings.Contains(got, redactedMark) {
		t.Errorf("Detail redacted a k followed by x past the cut: %q", got)
	}
	q := e.quote([]byte(strings.Repeat("a", quoteMax-1) + " kx"))
	if strings.Contains(q, redactedMark) {
		t.Errorf("quote redacted a k followed by x past the cut: %s", q)
	}
}

// TestRedactLongKey: a key long enough to be a secret is redacted wherever
// it appears, even glued to other text, so no run of it survives.
func TestRedactLongKey(t *testing.T) {
	e := &Endpoint{Secret: key}
	for in, want := range map[string]string{
		"req_" + key + "_1": "req_[redacted]_1",
		"x" + key + key:     "x[redacted][redacted]",
		"base64:" + key:     "base64:[redacted]",
	} {
		if f := e.Redact(&llm.Error{RequestID: in}); f.RequestID != want {
			t.Errorf("Redact(%q) = %q; want %q", in, f.RequestID, want)
		}
	}
}
