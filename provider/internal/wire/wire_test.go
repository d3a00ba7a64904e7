package wire

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
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
		{-1, 99, errTooLarge},
		{1000, 100, errTooLarge}, // announced too much: refused before reading
		{10, 1000, nil},          // the size is only a capacity hint
	}
	for _, tt := range tests {
		b, err := readCapped(iotest.OneByteReader(strings.NewReader(body)), tt.size, tt.max)
		if err != tt.want || err == nil && string(b) != body {
			t.Errorf("readCapped(size %d, max %d) = %d bytes, %v; want %v", tt.size, tt.max, len(b), err, tt.want)
		}
	}
	boom := errors.New("boom")
	if _, err := readCapped(iotest.ErrReader(boom), -1, 100); err != boom {
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
}

func TestShouldRetry(t *testing.T) {
	for in, want := range map[string]string{"true": "true", "false": "false", " TRUE ": "true", "yes": "<nil>", "": "<nil>"} {
		h := http.Header{}
		if in != "" {
			h.Set("x-should-retry", in)
		}
		got := "<nil>"
		if b := ShouldRetry(h); b != nil {
			got = fmt.Sprint(*b)
		}
		if got != want {
			t.Errorf("ShouldRetry(%q) = %s; want %s", in, got, want)
		}
	}
}

func TestInt(t *testing.T) {
	h := http.Header{"A": {"42"}, "B": {" 7 "}, "C": {"-1"}, "D": {"1e3"}, "E": {"99999999999999999999999"}}
	for name, want := range map[string]int{"A": 42, "B": 7, "C": -1, "D": -1, "E": -1, "F": -1} {
		n, ok := Int(h, name)
		if !ok {
			n = -1
		}
		if n != want {
			t.Errorf("Int(%s) = %d, %v; want %d", name, n, ok, want)
		}
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
