package openai

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/wire"
)

// withKey returns body with the API key inserted at byte at (modulo its
// length), so that every fuzzed body gives the redaction something to do.
func withKey(body []byte, at uint) []byte {
	i := int(at % uint(len(body)+1))
	return append(append(append([]byte(nil), body[:i]...), testKey...), body[i:]...)
}

func fuzzReply(status int, body []byte) *wire.Reply {
	return &wire.Reply{Status: status, Body: body, Received: time.Now(), Header: http.Header{
		"X-Request-Id":               {"req_1"},
		"Retry-After-Ms":             {"1500"},
		"X-Should-Retry":             {"true"},
		"X-Ratelimit-Reset-Requests": {"1s"},
	}}
}

// checkError fails t unless e is a complete *llm.Error that quotes no key.
func checkError(t *testing.T, err error, status int) *llm.Error {
	t.Helper()
	var e *llm.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %T %v is not an *llm.Error", err, err)
	}
	if e.Provider != "openai" || e.Status != status || e.Kind == llm.KindUnknown && status >= 200 && status <= 299 {
		t.Fatalf("incomplete error for status %d: %#v", status, e)
	}
	for _, s := range []string{e.Error(), e.Type, e.Code, e.Message, e.RequestID} {
		if strings.Contains(s, testKey) {
			t.Fatalf("error quotes the key: %q", s)
		}
	}
	if e.Err != nil && strings.Contains(e.Err.Error(), testKey) {
		t.Fatalf("cause quotes the key: %v", e.Err)
	}
	return e
}

func FuzzParseError(f *testing.F) {
	for _, s := range []struct {
		status int
		body   string
	}{
		{429, `{"error":{"message":"Rate limit reached. Please try again in 1.574s.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`},
		{429, `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`},
		{400, `{"error":{"message":"maximum context length","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`},
		{400, `{"error":{"message":"m","type":1,"code":-2.5e3}}`},
		{404, `{"error":"model not found"}`},
		{502, "<html><head><title>502 Bad Gateway</title></head></html>"},
		{200, `{"error":{"code":"content_filter"}}`},
		{500, ""},
		{0, `{"error":null}`},
	} {
		f.Add(s.status, []byte(s.body), uint(len(s.body)/2))
	}
	p := newProvider(f, "http://127.0.0.1")
	f.Fuzz(func(t *testing.T, status int, body []byte, keyAt uint) {
		body = withKey(body, keyAt)
		e := checkError(t, p.parseError(fuzzReply(status, body)), status)
		if e.RequestID != "req_1" || e.RetryAfter != 1500*time.Millisecond || e.ShouldRetry == nil || !*e.ShouldRetry ||
			!e.RateLimit.Requests.Reported() {
			t.Fatalf("headers lost: %#v", e)
		}
	})
}

func FuzzParseResponse(f *testing.F) {
	for _, s := range []string{
		okBody,
		`{"choices":[{"message":{"content":null,"refusal":"no"},"finish_reason":"stop"}]}`,
		`{"choices":[{"message":{"content":"x"},"finish_reason":"content_filter"}],"usage":{"prompt_tokens":-1}}`,
		`{"choices":[],"error":{"message":"x","code":"rate_limit_exceeded"}}`,
		`{"choices":null}`, `[]`, `"text"`, ``,
	} {
		f.Add([]byte(s), uint(0))
	}
	p := newProvider(f, "http://127.0.0.1")
	f.Fuzz(func(t *testing.T, body []byte, keyAt uint) {
		if keyAt%2 == 1 { // half the runs echo the key somewhere
			body = withKey(body, keyAt/2)
		}
		res, err := p.parse(fuzzReply(200, body))
		if err != nil {
			if res != nil {
				t.Fatal("both a response and an error")
			}
			checkError(t, err, 200)
			return
		}
		if !json.Valid(body) || res.RequestID != "req_1" || !res.RateLimit.Requests.Reported() {
			t.Fatalf("accepted %q as %+v", body, res)
		}
	})
}
