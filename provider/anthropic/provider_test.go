package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backstop-llm/backstop/llm"
)

const testKey = "sk-ant-api03-TESTKEY-0123456789abcdef"

// server is an httptest server that records every request it receives.
type server struct {
	*httptest.Server
	count atomic.Int64

	mu     sync.Mutex
	method string
	path   string
	header http.Header
	body   []byte
}

func newServer(t *testing.T, h http.HandlerFunc) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.count.Add(1)
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.method, s.path, s.header, s.body = r.Method, r.URL.RequestURI(), r.Header.Clone(), b
		s.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// respond answers with status, headers (name, value pairs) and body.
func respond(status int, body string, header ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

func newProvider(t testing.TB, url string) *Provider {
	t.Helper()
	p, err := New(Config{APIKey: testKey, BaseURL: url})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var userReq = llm.Request{Model: "claude-test", Messages: []llm.Message{{Role: llm.RoleUser, Content: "Hi"}}}

// complete runs one request that must fail and returns its *llm.Error.
func completeErr(t *testing.T, p *Provider, ctx context.Context) *llm.Error {
	t.Helper()
	res, err := p.Complete(ctx, userReq)
	if err == nil {
		t.Fatalf("Complete succeeded with %+v; want an error", res)
	}
	if res != nil {
		t.Errorf("Complete returned a response with its error: %+v", res)
	}
	var e *llm.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %T %v is not an *llm.Error", err, err)
	}
	if e.Provider != "anthropic" {
		t.Errorf("Provider = %q; want anthropic", e.Provider)
	}
	if strings.Contains(err.Error(), testKey) {
		t.Errorf("error quotes the API key: %v", err)
	}
	return e
}

const okBody = `{"id":"msg_01","type":"message","role":"assistant","model":"claude-test-20260101",
"content":[{"type":"thinking","thinking":"hmm"},{"type":"text","text":"Hello, "},{"type":"tool_use","id":"t","name":"x","input":{}},{"type":"text","text":"world"}],
"stop_reason":"end_turn","stop_sequence":null,
"usage":{"input_tokens":10,"output_tokens":5,"cache_creation_input_tokens":3,"cache_read_input_tokens":7}}`

func TestRequestShape(t *testing.T) {
	s := newServer(t, respond(200, okBody))
	p, err := New(Config{APIKey: testKey, BaseURL: s.URL + "/", Header: http.Header{"anthropic-beta": {"b1"}}})
	if err != nil {
		t.Fatal(err)
	}
	req := llm.Request{
		Model:  "claude-test",
		System: "Be <brief> & kind.",
		Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "Hi"},
			{Role: llm.RoleAssistant, Content: "Hello"},
			{Role: llm.RoleUser, Content: "Again"},
		},
		Params: llm.Params{
			MaxTokens:   300,
			Temperature: llm.Float(0),
			TopP:        llm.Float(0.9),
			Stop:        []string{"END"},
			Extra:       map[string]any{"metadata": map[string]string{"user_id": "u1"}, "top_p": 0.5},
		},
	}
	if _, err := p.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if s.method != http.MethodPost || s.path != "/v1/messages" {
		t.Errorf("request %s %s; want POST /v1/messages", s.method, s.path)
	}
	for k, want := range map[string]string{
		"X-Api-Key": testKey, "Anthropic-Version": "2023-06-01",
		"Content-Type": "application/json", "Anthropic-Beta": "b1",
	} {
		if got := s.header.Get(k); got != want {
			t.Errorf("header %s = %q; want %q", k, got, want)
		}
	}
	if strings.Contains(string(s.body), `\u003c`) {
		t.Errorf("body escapes HTML: %s", s.body)
	}
	var got map[string]any
	if err := json.Unmarshal(s.body, &got); err != nil {
		t.Fatalf("body is not JSON: %v: %s", err, s.body)
	}
	want := map[string]any{
		"model":      "claude-test",
		"max_tokens": 300.0,
		"system":     "Be <brief> & kind.",
		"messages": []any{
			map[string]any{"role": "user", "content": "Hi"},
			map[string]any{"role": "assistant", "content": "Hello"},
			map[string]any{"role": "user", "content": "Again"},
		},
		"temperature":    0.0,
		"top_p":          0.5, // Extra overrides
		"stop_sequences": []any{"END"},
		"metadata":       map[string]any{"user_id": "u1"},
	}
	if g, w := fmt.Sprint(got), fmt.Sprint(want); g != w {
		t.Errorf("body\n got %s\nwant %s", g, w)
	}
}

func TestRequestDefaults(t *testing.T) {
	s := newServer(t, respond(200, okBody))
	if _, err := newProvider(t, s.URL).Complete(context.Background(), userReq); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(s.body, &got); err != nil {
		t.Fatal(err)
	}
	if got["max_tokens"] != float64(DefaultMaxTokens) {
		t.Errorf("max_tokens = %v; want %d", got["max_tokens"], DefaultMaxTokens)
	}
	for _, k := range []string{"system", "temperature", "top_p", "stop_sequences"} {
		if v, ok := got[k]; ok {
			t.Errorf("unset %s sent as %v", k, v)
		}
	}
}

func TestSuccess(t *testing.T) {
	reset := "2026-11-30T16:00:00Z"
	s := newServer(t, respond(200, okBody,
		"request-id", "req_abc",
		"anthropic-ratelimit-requests-limit", "50",
		"anthropic-ratelimit-requests-remaining", "49",
		"anthropic-ratelimit-requests-reset", reset,
		"anthropic-ratelimit-tokens-remaining", "garbage",
		"anthropic-ratelimit-input-tokens-limit", "40000",
		"anthropic-ratelimit-input-tokens-remaining", "39000",
		"anthropic-ratelimit-input-tokens-reset", "2026-11-30T16:00:00.5+01:00",
		"anthropic-ratelimit-output-tokens-limit", "8000",
	))
	res, err := newProvider(t, s.URL).Complete(context.Background(), userReq)
	if err != nil {
		t.Fatal(err)
	}
	want := llm.Response{
		Text: "Hello, world", Model: "claude-test-20260101", ID: "msg_01", RequestID: "req_abc",
		FinishReason: "end_turn", Usage: llm.Usage{InputTokens: 20, OutputTokens: 5},
	}
	rl := res.RateLimit
	res.RateLimit = llm.RateLimit{}
	if *res != want {
		t.Errorf("response\n got %+v\nwant %+v", *res, want)
	}
	r0, _ := time.Parse(time.RFC3339, reset)
	if a := rl.Requests; !a.Reported() || a.Limit != 50 || a.Remaining != 49 || !a.Reset.Equal(r0) {
		t.Errorf("Requests = %+v", a)
	}
	if rl.Tokens.Reported() {
		t.Errorf("Tokens reported from a garbled header: %+v", rl.Tokens)
	}
	r1 := time.Date(2026, 11, 30, 15, 0, 0, 5e8, time.UTC)
	if a := rl.InputTokens; !a.Reported() || a.Limit != 40000 || a.Remaining != 39000 || !a.Reset.Equal(r1) {
		t.Errorf("InputTokens = %+v", a)
	}
	if a := rl.OutputTokens; !a.Reported() || a.Limit != 8000 || a.Remaining != 0 || !a.Reset.IsZero() {
		t.Errorf("OutputTokens = %+v", a)
	}
}

func TestSuccessEmptyContent(t *testing.T) {
	s := newServer(t, respond(200, `{"id":"m","type":"message","model":"m","content":[],"stop_reason":"max_tokens","usage":{"input_tokens":1,"output_tokens":0,"cache_read_input_tokens":null}}`))
	res, err := newProvider(t, s.URL).Complete(context.Background(), userReq)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "" || res.FinishReason != "max_tokens" || res.Usage.InputTokens != 1 || !res.RateLimit.Empty() {
		t.Errorf("response %+v", res)
	}
}

func errBody(typ, msg string) string {
	return fmt.Sprintf(`{"type":"error","error":{"type":%q,"message":%q},"request_id":"req_body"}`, typ, msg)
}

func TestErrorTypes(t *testing.T) {
	tests := []struct {
		status   int
		typ, msg string
		want     llm.Kind
	}{
		{400, "invalid_request_error", "messages: Field required", llm.KindBadRequest},
		{400, "invalid_request_error", "prompt is too long: 208310 tokens > 200000 maximum", llm.KindContextLength},
		{401, "authentication_error", "invalid x-api-key", llm.KindAuth},
		{402, "billing_error", "credit balance too low", llm.KindQuota},
		{403, "permission_error", "no access", llm.KindAuth},
		{404, "not_found_error", "model: claude-nope", llm.KindNotFound},
		{409, "conflict_error", "conflict", llm.KindConflict},
		{413, "request_too_large", "Request exceeds the maximum allowed number of bytes.", llm.KindBadRequest},
		{429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit", llm.KindRateLimited},
		{500, "api_error", "Internal server error", llm.KindServer},
		{504, "timeout_error", "Request timed out", llm.KindTimeout},
		{529, "overloaded_error", "Overloaded", llm.KindOverloaded},
		{503, "brand_new_error", "?", llm.KindOverloaded}, // unknown type: by status
		{422, "brand_new_error", "?", llm.KindBadRequest},
		{502, "brand_new_error", "?", llm.KindServer},
		{200, "overloaded_error", "Overloaded", llm.KindOverloaded}, // an error sent with a 200
		{200, "brand_new_error", "?", llm.KindServer},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status, tt.typ), func(t *testing.T) {
			s := newServer(t, respond(tt.status, errBody(tt.typ, tt.msg), "request-id", "req_hdr"))
			e := completeErr(t, newProvider(t, s.URL), context.Background())
			if e.Kind != tt.want || e.Status != tt.status || e.Type != tt.typ || e.Detail != tt.msg || e.RequestID != "req_hdr" {
				t.Errorf("got %+v; want Kind %v, Status %d, Type %s, Detail %q, RequestID req_hdr",
					e, tt.want, tt.status, tt.typ, tt.msg)
			}
			if llm.KindOf(e) != tt.want {
				t.Errorf("KindOf = %v; want %v", llm.KindOf(e), tt.want)
			}
		})
	}
}

func TestErrorDetailsAndRequestIDFallback(t *testing.T) {
	s := newServer(t, respond(529, `{"type":"error","error":{"details":null,"type":"overloaded_error","message":"Overloaded"},"request_id":"req_011CS"}`))
	e := completeErr(t, newProvider(t, s.URL), context.Background())
	if e.Kind != llm.KindOverloaded || e.RequestID != "req_011CS" {
		t.Errorf("got %+v; want overloaded with the body's request id", e)
	}
}

func TestSpendLimit(t *testing.T) {
	tests := map[string]struct {
		status int
		body   string
	}{
		"details": {429, `{"type":"error","error":{"type":"rate_limit_error","message":"You have reached your specified workspace API usage limits.","details":{"error_code":"enforced_spend_limit_reached"}},"request_id":"req_1"}`},
		"message": {400, errBody("invalid_request_error", "enforced_spend_limit_reached for this org")},
		"html":    {429, `<html><body>enforced_spend_limit_reached</body></html>`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			s := newServer(t, respond(tt.status, tt.body, "retry-after", "30"))
			e := completeErr(t, newProvider(t, s.URL), context.Background())
			if e.Kind != llm.KindQuota || e.Code != "enforced_spend_limit_reached" {
				t.Errorf("got %+v; want quota, code enforced_spend_limit_reached", e)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	date := time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)
	tests := []struct {
		name     string
		header   []string
		min, max time.Duration
	}{
		{"seconds", []string{"retry-after", "17"}, 17 * time.Second, 17 * time.Second},
		{"ms", []string{"retry-after-ms", "1574", "retry-after", "2"}, 1574 * time.Millisecond, 1574 * time.Millisecond},
		{"date", []string{"retry-after", date}, 58 * time.Minute, time.Hour},
		{"garbage", []string{"retry-after", "soon"}, 0, 0},
		{"absent", nil, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, respond(429, errBody("rate_limit_error", "slow down"), tt.header...))
			e := completeErr(t, newProvider(t, s.URL), context.Background())
			if e.RetryAfter < tt.min || e.RetryAfter > tt.max || e.Kind != llm.KindRateLimited {
				t.Errorf("RetryAfter = %v, Kind %v; want rate limited, in [%v, %v]", e.RetryAfter, e.Kind, tt.min, tt.max)
			}
		})
	}
}

func TestShouldRetry(t *testing.T) {
	for _, tt := range []struct {
		header string
		want   string
	}{{"true", "true"}, {"false", "false"}, {" TRUE ", "true"}, {"yes", "<nil>"}, {"", "<nil>"}} {
		s := newServer(t, respond(500, errBody("api_error", "boom"), "x-should-retry", tt.header))
		e := completeErr(t, newProvider(t, s.URL), context.Background())
		got := "<nil>"
		if e.ShouldRetry != nil {
			got = fmt.Sprint(*e.ShouldRetry)
		}
		if got != tt.want {
			t.Errorf("x-should-retry %q: ShouldRetry = %s; want %s", tt.header, got, tt.want)
		}
	}
}

func TestRateLimitOnError(t *testing.T) {
	s := newServer(t, respond(429, errBody("rate_limit_error", "slow down"),
		"anthropic-ratelimit-tokens-limit", "1000", "anthropic-ratelimit-tokens-remaining", "0",
		"anthropic-ratelimit-tokens-reset", "2026-11-30T16:00:00Z"))
	e := completeErr(t, newProvider(t, s.URL), context.Background())
	if a := e.RateLimit.Tokens; !a.Reported() || a.Limit != 1000 || a.Remaining != 0 || a.Reset.IsZero() {
		t.Errorf("RateLimit.Tokens = %+v", a)
	}
}

func TestRefusal(t *testing.T) {
	s := newServer(t, respond(200, `{"id":"m","type":"message","model":"m","content":[{"type":"text","text":"I can't"}],"stop_reason":"refusal","usage":{}}`, "request-id", "req_r"))
	e := completeErr(t, newProvider(t, s.URL), context.Background())
	if e.Kind != llm.KindContentFilter || e.Code != "refusal" || e.RequestID != "req_r" || e.Status != 200 {
		t.Errorf("got %+v; want content filter", e)
	}
}

func TestUnparseableBodies(t *testing.T) {
	html := "<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head><body>" + strings.Repeat("x", 500) + "</body></html>"
	tests := []struct {
		name   string
		status int
		body   string
		want   llm.Kind
		quote  string // expected in the message
	}{
		{"html 502", 502, html, llm.KindServer, `"<!DOCTYPE html>\n<html>`},
		{"html 503", 503, "<html>busy</html>", llm.KindOverloaded, `"<html>busy</html>"`},
		{"truncated 200", 200, okBody[:60], llm.KindServer, "not the expected JSON"},
		{"truncated 529", 529, `{"type":"error","error":{"type":"overl`, llm.KindOverloaded, "not the expected JSON"},
		{"empty 200", 200, "", llm.KindServer, "empty response body"},
		{"empty 429", 429, "", llm.KindRateLimited, "empty response body"},
		{"array 200", 200, `[1,2]`, llm.KindServer, "not the expected JSON"},
		{"object 200", 200, `{"hello":"world"}`, llm.KindServer, `no "content" array`},
		{"null 200", 200, `null`, llm.KindServer, "not the expected JSON"},
		{"wrong types 200", 200, `{"content":"text","usage":{"input_tokens":"many"}}`, llm.KindServer, "not the expected JSON"},
		{"wrong shape 400", 400, `{"error":"bad"}`, llm.KindBadRequest, "not the expected JSON"},
		{"no error 500", 500, `{"message":"bad"}`, llm.KindServer, `no "error" object`},
		{"binary 500", 500, "\xff\xfe\x00garbage", llm.KindServer, `"\xff\xfe\x00garbage"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, respond(tt.status, tt.body))
			e := completeErr(t, newProvider(t, s.URL), context.Background())
			if e.Kind != tt.want || e.Status != tt.status || !strings.Contains(e.Message+" "+e.Detail, tt.quote) {
				t.Errorf("got %+v\ndetail %q; want Kind %v, a message containing %q", e, e.Detail, tt.want, tt.quote)
			}
			if len(e.Detail) > 400 {
				t.Errorf("message is %d bytes long: %q", len(e.Detail), e.Detail)
			}
		})
	}
}

func TestOversizeBody(t *testing.T) {
	big := `{"type":"message","content":[{"type":"text","text":"` + strings.Repeat("a", 5000) + `"}]}`
	chunked := func(status int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(status)
			for i := 0; i < 100; i++ {
				io.WriteString(w, strings.Repeat("b", 100))
				w.(http.Flusher).Flush()
			}
		}
	}
	tests := []struct {
		name string
		h    http.HandlerFunc
		want llm.Kind
	}{
		{"content-length 200", respond(200, big), llm.KindServer},
		{"content-length 429", respond(429, big), llm.KindRateLimited},
		{"chunked 200", chunked(200), llm.KindServer},
		{"chunked 529", chunked(529), llm.KindOverloaded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, tt.h)
			p, err := New(Config{APIKey: testKey, BaseURL: s.URL, MaxResponseBytes: 1000})
			if err != nil {
				t.Fatal(err)
			}
			e := completeErr(t, p, context.Background())
			if e.Kind != tt.want || !strings.Contains(e.Message, "larger than 1000 bytes") {
				t.Errorf("got %+v; want Kind %v and a message about the cap", e, tt.want)
			}
		})
	}
	// Exactly at the cap is fine.
	s := newServer(t, respond(200, okBody))
	p, err := New(Config{APIKey: testKey, BaseURL: s.URL, MaxResponseBytes: int64(len(okBody))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Complete(context.Background(), userReq); err != nil {
		t.Errorf("body of exactly MaxResponseBytes: %v", err)
	}
}

func TestKeyRedaction(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		header []string
	}{
		{"message", 401, errBody("authentication_error", "invalid x-api-key: "+testKey), nil},
		{"every field", 400, `{"type":"error","error":{"type":"` + testKey + `","message":"` + testKey + `","details":{"error_code":"` + testKey + `"}},"request_id":"` + testKey + `"}`, nil},
		{"header", 429, errBody("rate_limit_error", "x"), []string{"request-id", testKey}},
		{"html", 502, "<html>your key " + testKey + " is wrong</html>", nil},
		{"key across the quote cut", 502, strings.Repeat("<", 190) + testKey + strings.Repeat(">", 100), nil},
		{"200 unparseable", 200, `{"content": "` + testKey, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, respond(tt.status, tt.body, tt.header...))
			e := completeErr(t, newProvider(t, s.URL), context.Background())
			for _, f := range []string{e.Error(), e.Type, e.Code, e.Message, e.Detail, e.RequestID, fmt.Sprintf("%+v %#v", e, e)} {
				if strings.Contains(f, testKey) || strings.Contains(f, testKey[:20]) {
					t.Errorf("error quotes the key: %s", f)
				}
			}
			if u := errors.Unwrap(e); u != nil && strings.Contains(u.Error(), testKey) {
				t.Errorf("cause quotes the key: %v", u)
			}
		})
	}
}

func TestKeyRedactedFromTransportError(t *testing.T) {
	s := httptest.NewServer(http.NotFoundHandler())
	url := s.URL
	s.Close() // connection refused from now on
	p, err := New(Config{APIKey: testKey, BaseURL: url + "/" + testKey})
	if err != nil {
		t.Fatal(err)
	}
	e := completeErr(t, p, context.Background())
	if e.Kind != llm.KindConnection || e.Status != 0 {
		t.Errorf("got %+v; want a connection error", e)
	}
	var op *net.OpError
	if !errors.As(e, &op) {
		t.Errorf("cause %v does not unwrap to the *net.OpError", e.Err)
	}
}

func TestCanceled(t *testing.T) {
	started := make(chan struct{})
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done()
	})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-started
		cancel()
	}()
	e := completeErr(t, newProvider(t, s.URL), ctx)
	if e.Kind != llm.KindCanceled || !errors.Is(e, context.Canceled) {
		t.Errorf("got %+v; want KindCanceled wrapping context.Canceled", e)
	}
	if llm.KindOf(e) != llm.KindCanceled {
		t.Errorf("KindOf = %v", llm.KindOf(e))
	}
}

func TestCanceledBeforeSend(t *testing.T) {
	s := newServer(t, respond(200, okBody))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	e := completeErr(t, newProvider(t, s.URL), ctx)
	if e.Kind != llm.KindCanceled || s.count.Load() != 0 {
		t.Errorf("got %+v after %d requests; want KindCanceled and none sent", e, s.count.Load())
	}
}

func TestDeadline(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	e := completeErr(t, newProvider(t, s.URL), ctx)
	if e.Kind != llm.KindTimeout || !errors.Is(e, context.DeadlineExceeded) {
		t.Errorf("got %+v; want KindTimeout wrapping context.DeadlineExceeded", e)
	}
}

// hangUp reads the request and drops the connection with a TCP reset.
func hangUp(w http.ResponseWriter, r *http.Request) {
	c, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

func TestOneRequestPerComplete(t *testing.T) {
	var mode atomic.Value
	mode.Store("ok")
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch mode.Load() {
		case "ok":
			respond(200, okBody)(w, r)
		case "529":
			respond(529, errBody("overloaded_error", "Overloaded"), "retry-after", "1", "x-should-retry", "true")(w, r)
		case "reset":
			hangUp(w, r)
		}
	})
	p := newProvider(t, s.URL)
	// The first call leaves a keep-alive connection for the next to reuse.
	if _, err := p.Complete(context.Background(), userReq); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"529", "reset", "reset", "529"} {
		mode.Store(m)
		before := s.count.Load()
		e := completeErr(t, p, context.Background())
		if n := s.count.Load() - before; n != 1 {
			t.Errorf("%s: %d requests; want exactly 1", m, n)
		}
		want := llm.KindOverloaded
		if m == "reset" {
			want = llm.KindConnection
		}
		if e.Kind != want {
			t.Errorf("%s: got %+v; want %v", m, e, want)
		}
	}
}

// cutShort announces a body longer than it sends, then hangs up.
func TestBodyCutShort(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000")
		w.Header().Set("request-id", "req_cut")
		w.WriteHeader(200)
		io.WriteString(w, okBody[:50])
		w.(http.Flusher).Flush()
		hangUp(w, r)
	})
	e := completeErr(t, newProvider(t, s.URL), context.Background())
	if e.Kind != llm.KindConnection || e.Status != 200 || e.RequestID != "req_cut" || e.Err == nil {
		t.Errorf("got %+v; want a connection error with status and request id", e)
	}
}

func TestEncodeError(t *testing.T) {
	s := newServer(t, respond(200, okBody))
	req := userReq
	req.Params.Extra = map[string]any{"bad": make(chan int)}
	_, err := newProvider(t, s.URL).Complete(context.Background(), req)
	var le *llm.Error
	if !errors.As(err, &le) || le.Kind != llm.KindBadRequest || !strings.Contains(le.Message, `Params.Extra["bad"]`) {
		t.Errorf("got %v; want a bad request naming the Extra key", err)
	}
	if n := s.count.Load(); n != 0 {
		t.Errorf("%d requests; a body that cannot be encoded must not be sent", n)
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		cfg  Config
		want string // in the error; "" for success
	}{
		{Config{APIKey: "k"}, ""},
		{Config{APIKey: "k", BaseURL: "http://localhost:8080/prefix/"}, ""},
		{Config{}, "APIKey is empty"},
		{Config{APIKey: "k\n"}, "control character"},
		{Config{APIKey: " k"}, "spaces"},
		{Config{APIKey: "k", BaseURL: "api.anthropic.com"}, "must start with https://"},
		{Config{APIKey: "k", BaseURL: "ftp://api.anthropic.com"}, `got scheme "ftp"`},
		{Config{APIKey: "k", BaseURL: "localhost:8080"}, "must start with https://"},
		{Config{APIKey: "k", BaseURL: "https://"}, "no host"},
		{Config{APIKey: "k", BaseURL: "https://h/?x=1"}, "query"},
		{Config{APIKey: "k", BaseURL: "https://h:port"}, "not a valid URL"},
		{Config{APIKey: "k", MaxResponseBytes: -1}, "MaxResponseBytes"},
	}
	for _, tt := range tests {
		p, err := New(tt.cfg)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("New(%+v): %v", tt.cfg, err)
		case tt.want == "" && p.Name() != "anthropic":
			t.Errorf("Name = %q", p.Name())
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "anthropic: ")):
			t.Errorf("New(%+v) = %v; want an error containing %q", tt.cfg, err, tt.want)
		}
	}
	p, _ := New(Config{APIKey: "k"})
	if p.ep.URL != "https://api.anthropic.com/v1/messages" || p.ep.MaxBytes != 8<<20 {
		t.Errorf("defaults: URL %s, MaxBytes %d", p.ep.URL, p.ep.MaxBytes)
	}
}

func TestConcurrent(t *testing.T) {
	s := newServer(t, respond(200, okBody))
	p := newProvider(t, s.URL)
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Go(func() {
			if _, err := p.Complete(context.Background(), userReq); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := s.count.Load(); n != 20 {
		t.Errorf("%d requests; want 20", n)
	}
}
