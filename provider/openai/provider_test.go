package openai

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

const testKey = "sk-proj-TESTKEY-0123456789abcdef"

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

var userReq = llm.Request{Model: "gpt-test", Messages: []llm.Message{{Role: llm.RoleUser, Content: "Hi"}}}

// completeErr runs one request that must fail and returns its *llm.Error.
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
	if e.Provider != p.Name() {
		t.Errorf("Provider = %q; want %q", e.Provider, p.Name())
	}
	if strings.Contains(err.Error(), testKey) {
		t.Errorf("error quotes the API key: %v", err)
	}
	return e
}

const okBody = `{"id":"chatcmpl-01","object":"chat.completion","created":1,"model":"gpt-test-2026-01-01",
"choices":[{"index":0,"message":{"role":"assistant","content":"Hello, world","refusal":null},"logprobs":null,"finish_reason":"stop"},
{"index":1,"message":{"role":"assistant","content":"second"},"finish_reason":"stop"}],
"usage":{"prompt_tokens":20,"completion_tokens":5,"total_tokens":25,"prompt_tokens_details":{"cached_tokens":10}}}`

func TestRequestShape(t *testing.T) {
	s := newServer(t, respond(200, okBody))
	p, err := New(Config{APIKey: testKey, BaseURL: s.URL + "/", Header: http.Header{"OpenAI-Project": {"proj_1"}}})
	if err != nil {
		t.Fatal(err)
	}
	req := llm.Request{
		Model:  "gpt-test",
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
			Extra:       map[string]any{"seed": 7, "temperature": 1.5, "response_format": map[string]string{"type": "json_object"}},
		},
	}
	if _, err := p.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if s.method != http.MethodPost || s.path != "/v1/chat/completions" {
		t.Errorf("request %s %s; want POST /v1/chat/completions", s.method, s.path)
	}
	for k, want := range map[string]string{
		"Authorization": "Bearer " + testKey, "Content-Type": "application/json", "Openai-Project": "proj_1",
	} {
		if got := s.header.Get(k); got != want {
			t.Errorf("header %s = %q; want %q", k, got, want)
		}
	}
	var got map[string]any
	if err := json.Unmarshal(s.body, &got); err != nil {
		t.Fatalf("body is not JSON: %v: %s", err, s.body)
	}
	want := map[string]any{
		"model": "gpt-test",
		"messages": []any{
			map[string]any{"role": "system", "content": "Be <brief> & kind."},
			map[string]any{"role": "user", "content": "Hi"},
			map[string]any{"role": "assistant", "content": "Hello"},
			map[string]any{"role": "user", "content": "Again"},
		},
		"max_completion_tokens": 300.0,
		"temperature":           1.5, // Extra overrides
		"top_p":                 0.9,
		"stop":                  []any{"END"},
		"seed":                  7.0,
		"response_format":       map[string]any{"type": "json_object"},
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
	want := map[string]any{"model": "gpt-test", "messages": []any{map[string]any{"role": "user", "content": "Hi"}}}
	if g, w := fmt.Sprint(got), fmt.Sprint(want); g != w {
		t.Errorf("body\n got %s\nwant %s", g, w)
	}
}

func TestCompatibleServer(t *testing.T) {
	s := newServer(t, respond(200, okBody))
	p, err := New(Config{
		APIKey:          testKey,
		BaseURL:         s.URL + "/openai",
		Path:            "/deployments/gpt/chat/completions?api-version=2024-10-21",
		Name:            "azure.ai.openai",
		KeyHeader:       "api-key",
		LegacyMaxTokens: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if p.Name() != "azure.ai.openai" {
		t.Errorf("Name = %q", p.Name())
	}
	req := userReq
	req.Params.MaxTokens = 50
	if _, err := p.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if s.path != "/openai/deployments/gpt/chat/completions?api-version=2024-10-21" {
		t.Errorf("path %s", s.path)
	}
	if s.header.Get("Api-Key") != testKey || s.header.Get("Authorization") != "" {
		t.Errorf("headers %v; want the key in api-key alone", s.header)
	}
	var got map[string]any
	if err := json.Unmarshal(s.body, &got); err != nil {
		t.Fatal(err)
	}
	if _, ok := got["max_completion_tokens"]; ok || got["max_tokens"] != 50.0 {
		t.Errorf("body %s; want max_tokens alone", s.body)
	}
	// Errors carry the configured name.
	s2 := newServer(t, respond(500, `{"error":{"message":"boom","type":"server_error"}}`))
	p2, err := New(Config{APIKey: testKey, BaseURL: s2.URL, Name: "azure.ai.openai"})
	if err != nil {
		t.Fatal(err)
	}
	if e := completeErr(t, p2, context.Background()); e.Provider != "azure.ai.openai" {
		t.Errorf("Provider = %q", e.Provider)
	}
}

func TestSuccess(t *testing.T) {
	s := newServer(t, respond(200, okBody,
		"x-request-id", "req_abc",
		"x-ratelimit-limit-requests", "5000",
		"x-ratelimit-remaining-requests", "4999",
		"x-ratelimit-reset-requests", "12ms",
		"x-ratelimit-limit-tokens", "160000",
		"x-ratelimit-remaining-tokens", "159000",
		"x-ratelimit-reset-tokens", "6m0s",
	))
	before := time.Now()
	res, err := newProvider(t, s.URL).Complete(context.Background(), userReq)
	after := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	want := llm.Response{
		Text: "Hello, world", Model: "gpt-test-2026-01-01", ID: "chatcmpl-01", RequestID: "req_abc",
		FinishReason: "stop", Usage: llm.Usage{InputTokens: 20, OutputTokens: 5},
	}
	rl := res.RateLimit
	res.RateLimit = llm.RateLimit{}
	if *res != want {
		t.Errorf("response\n got %+v\nwant %+v", *res, want)
	}
	within := func(t0 time.Time, d time.Duration) bool {
		return !t0.Before(before.Add(d)) && !t0.After(after.Add(d))
	}
	if a := rl.Requests; !a.Reported() || a.Limit != 5000 || a.Remaining != 4999 || !within(a.Reset, 12*time.Millisecond) {
		t.Errorf("Requests = %+v", a)
	}
	if a := rl.Tokens; !a.Reported() || a.Limit != 160000 || a.Remaining != 159000 || !within(a.Reset, 6*time.Minute) {
		t.Errorf("Tokens = %+v", a)
	}
	if rl.InputTokens.Reported() || rl.OutputTokens.Reported() {
		t.Errorf("RateLimit = %+v", rl)
	}
}

func TestParseReset(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Duration{
		"1s": time.Second, "6m0s": 6 * time.Minute, "12ms": 12 * time.Millisecond,
		"1h2m3.5s": time.Hour + 2*time.Minute + 3500*time.Millisecond, "0": 0, "2": 2 * time.Second, "0.5": 500 * time.Millisecond,
	} {
		if got, ok := parseReset(in, now); !ok || got.Sub(now) != want {
			t.Errorf("parseReset(%q) = %v, %v; want now+%v", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "-1s", "soon", "1x"} {
		if got, ok := parseReset(in, now); ok {
			t.Errorf("parseReset(%q) = %v; want not ok", in, got)
		}
	}
}

func TestSuccessNullContent(t *testing.T) {
	s := newServer(t, respond(200, `{"id":"c","model":"m","choices":[{"message":{"role":"assistant","content":null,"tool_calls":[]},"finish_reason":"tool_calls"}]}`))
	res, err := newProvider(t, s.URL).Complete(context.Background(), userReq)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "" || res.FinishReason != "tool_calls" || res.Usage != (llm.Usage{}) || !res.RateLimit.Empty() {
		t.Errorf("response %+v", res)
	}
}

func errBody(typ, code, msg string) string {
	c := "null"
	if code != "" {
		c = fmt.Sprintf("%q", code)
	}
	return fmt.Sprintf(`{"error":{"message":%q,"type":%q,"param":null,"code":%s}}`, msg, typ, c)
}

func TestErrorCodes(t *testing.T) {
	tests := []struct {
		status         int
		typ, code, msg string
		want           llm.Kind
	}{
		{429, "requests", "rate_limit_exceeded", "Rate limit reached for gpt-test. Please try again in 1.574s.", llm.KindRateLimited},
		{429, "insufficient_quota", "insufficient_quota", "You exceeded your current quota", llm.KindQuota},
		{429, "insufficient_quota", "billing_hard_limit_reached", "Billing hard limit", llm.KindQuota},
		{400, "invalid_request_error", "context_length_exceeded", "This model's maximum context length is 128000 tokens.", llm.KindContextLength},
		{400, "invalid_request_error", "content_filter", "The response was filtered", llm.KindContentFilter},
		{400, "invalid_request_error", "content_policy_violation", "Your request was rejected", llm.KindContentFilter},
		{400, "invalid_request_error", "", "Invalid value for 'temperature'", llm.KindBadRequest},
		{401, "invalid_request_error", "invalid_api_key", "Incorrect API key provided: sk-proj-****cdef.", llm.KindAuth},
		{403, "invalid_request_error", "unsupported_country_region_territory", "Country not supported", llm.KindAuth},
		{404, "invalid_request_error", "model_not_found", "The model does not exist", llm.KindNotFound},
		{409, "invalid_request_error", "", "conflict", llm.KindConflict},
		{408, "timeout", "", "timed out", llm.KindTimeout},
		{500, "server_error", "", "The server had an error", llm.KindServer},
		{503, "server_error", "", "The engine is currently overloaded", llm.KindOverloaded},
		{429, "tokens", "", "Rate limit reached", llm.KindRateLimited},
		{200, "server_error", "", "an error sent with a 200", llm.KindServer},
		{200, "requests", "rate_limit_exceeded", "an error sent with a 200", llm.KindRateLimited},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status, tt.typ, tt.code), func(t *testing.T) {
			s := newServer(t, respond(tt.status, errBody(tt.typ, tt.code, tt.msg), "x-request-id", "req_hdr"))
			e := completeErr(t, newProvider(t, s.URL), context.Background())
			if e.Kind != tt.want || e.Status != tt.status || e.Type != tt.typ || e.Code != tt.code ||
				e.Detail != tt.msg || e.RequestID != "req_hdr" {
				t.Errorf("got %+v; want Kind %v, Status %d, Type %s, Code %s, Detail %q, RequestID req_hdr",
					e, tt.want, tt.status, tt.typ, tt.code, tt.msg)
			}
			if llm.KindOf(e) != tt.want {
				t.Errorf("KindOf = %v; want %v", llm.KindOf(e), tt.want)
			}
		})
	}
}

func TestCompatibleErrorShapes(t *testing.T) {
	tests := []struct {
		status    int
		body      string
		kind      llm.Kind
		typ, code string
		msg       string
	}{
		{404, `{"error":"model \"llama9\" not found, try pulling it first"}`, llm.KindNotFound, "", "", `model "llama9" not found, try pulling it first`},
		{400, `{"error":{"message":"bad","type":"BadRequestError","param":null,"code":400}}`, llm.KindBadRequest, "BadRequestError", "400", "bad"},
		{429, `{"error":{"message":"slow","type":null,"code":"rate_limit_exceeded","param":{"x":1}}}`, llm.KindRateLimited, "", "rate_limit_exceeded", "slow"},
		{400, `{"object":"error","error":{"message":"m","code":true}}`, llm.KindBadRequest, "", "true", "m"},
	}
	for _, tt := range tests {
		s := newServer(t, respond(tt.status, tt.body))
		e := completeErr(t, newProvider(t, s.URL), context.Background())
		if e.Kind != tt.kind || e.Type != tt.typ || e.Code != tt.code || e.Detail != tt.msg {
			t.Errorf("%s: got %#v", tt.body, e)
		}
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
			s := newServer(t, respond(429, errBody("requests", "rate_limit_exceeded", "slow down"), tt.header...))
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
	}{{"true", "true"}, {"false", "false"}, {"False", "false"}, {"1", "<nil>"}, {"", "<nil>"}} {
		s := newServer(t, respond(500, errBody("server_error", "", "boom"), "x-should-retry", tt.header))
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
	s := newServer(t, respond(429, errBody("tokens", "rate_limit_exceeded", "slow down"),
		"x-ratelimit-limit-tokens", "1000", "x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens", "1.574s"))
	e := completeErr(t, newProvider(t, s.URL), context.Background())
	if a := e.RateLimit.Tokens; !a.Reported() || a.Limit != 1000 || a.Remaining != 0 || a.Reset.IsZero() {
		t.Errorf("RateLimit.Tokens = %+v", a)
	}
}

func TestContentFilter(t *testing.T) {
	for _, body := range []string{
		`{"id":"c","model":"m","choices":[{"message":{"role":"assistant","content":"partial"},"finish_reason":"content_filter"}]}`,
		`{"id":"c","model":"m","choices":[{"message":{"role":"assistant","content":null,"refusal":"I can't help with that."},"finish_reason":"stop"}]}`,
	} {
		s := newServer(t, respond(200, body, "x-request-id", "req_r"))
		e := completeErr(t, newProvider(t, s.URL), context.Background())
		if e.Kind != llm.KindContentFilter || e.Code == "" || e.RequestID != "req_r" || e.Status != 200 {
			t.Errorf("got %+v; want content filter", e)
		}
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
		{"truncated 429", 429, `{"error":{"message":"Rate limit`, llm.KindRateLimited, "not the expected JSON"},
		{"empty 200", 200, "", llm.KindServer, "empty response body"},
		{"empty 500", 500, "  \n", llm.KindServer, "empty response body"},
		{"array 200", 200, `[1,2]`, llm.KindServer, "not the expected JSON"},
		{"no choices 200", 200, `{"id":"x","choices":[]}`, llm.KindServer, `no "choices"`},
		{"null 200", 200, `null`, llm.KindServer, `no "choices"`},
		{"wrong types 200", 200, `{"choices":[{"message":{"content":["a"]}}]}`, llm.KindServer, "not the expected JSON"},
		{"fastapi 422", 422, `{"detail":[{"loc":["body","model"],"msg":"field required"}]}`, llm.KindBadRequest, `no "error" object`},
		{"error null 500", 500, `{"error":null}`, llm.KindServer, `no "error" object`},
		{"error message number 400", 400, `{"error":{"message":5}}`, llm.KindBadRequest, "not the expected JSON"},
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
	big := `{"choices":[{"message":{"content":"` + strings.Repeat("a", 5000) + `"}}]}`
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
		{"chunked 500", chunked(500), llm.KindServer},
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
}

func TestKeyRedaction(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		header []string
	}{
		{"message", 401, errBody("invalid_request_error", "invalid_api_key", "Incorrect API key provided: "+testKey+"."), nil},
		{"every field", 400, `{"error":{"message":"` + testKey + `","type":"` + testKey + `","param":"` + testKey + `","code":"` + testKey + `"}}`, nil},
		{"string error", 401, `{"error":"bad key ` + testKey + `"}`, nil},
		{"header", 429, errBody("requests", "rate_limit_exceeded", "x"), []string{"x-request-id", testKey}},
		{"html", 502, "<html>your key " + testKey + " is wrong</html>", nil},
		{"key across the quote cut", 502, strings.Repeat("<", 190) + testKey + strings.Repeat(">", 100), nil},
		{"200 unparseable", 200, `{"choices": "` + testKey, nil},
		{"200 refusal", 200, `{"choices":[{"message":{"refusal":"no, ` + testKey + `"}}]}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, respond(tt.status, tt.body, tt.header...))
			e := completeErr(t, newProvider(t, s.URL), context.Background())
			for _, f := range []string{e.Error(), e.Type, e.Code, e.Message, e.Detail, e.RequestID, fmt.Sprintf("%+v %#v", e, e)} {
				if strings.Contains(f, testKey) || strings.Contains(f, testKey[:16]) {
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
	p, err := New(Config{APIKey: testKey, BaseURL: url, Path: "/v1/chat/completions/" + testKey})
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
	if e.Kind != llm.KindCanceled || !errors.Is(e, context.Canceled) || llm.KindOf(e) != llm.KindCanceled {
		t.Errorf("got %+v; want KindCanceled wrapping context.Canceled", e)
	}
}

// cancelAfterHeaders cancels the call as soon as the response headers are in.
type cancelAfterHeaders struct{ cancel context.CancelFunc }

func (c cancelAfterHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	c.cancel()
	return resp, err
}

func TestCanceledMidBody(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000")
		w.WriteHeader(200)
		io.WriteString(w, okBody[:50])
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	ctx, cancel := context.WithCancel(context.Background())
	p, err := New(Config{APIKey: testKey, BaseURL: s.URL, HTTPClient: &http.Client{Transport: cancelAfterHeaders{cancel}}})
	if err != nil {
		t.Fatal(err)
	}
	e := completeErr(t, p, ctx)
	if e.Kind != llm.KindCanceled || e.Status != 200 || !errors.Is(e, context.Canceled) {
		t.Errorf("got %+v; want KindCanceled with the status", e)
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
		case "429":
			respond(429, errBody("requests", "rate_limit_exceeded", "slow"), "retry-after-ms", "10", "x-should-retry", "true")(w, r)
		case "503":
			respond(503, errBody("server_error", "", "overloaded"))(w, r)
		case "reset":
			hangUp(w, r)
		}
	})
	p := newProvider(t, s.URL)
	// The first call leaves a keep-alive connection for the next to reuse.
	if _, err := p.Complete(context.Background(), userReq); err != nil {
		t.Fatal(err)
	}
	want := map[string]llm.Kind{"429": llm.KindRateLimited, "503": llm.KindOverloaded, "reset": llm.KindConnection}
	for _, m := range []string{"429", "reset", "503", "reset", "429"} {
		mode.Store(m)
		before := s.count.Load()
		e := completeErr(t, p, context.Background())
		if n := s.count.Load() - before; n != 1 {
			t.Errorf("%s: %d requests; want exactly 1", m, n)
		}
		if e.Kind != want[m] {
			t.Errorf("%s: got %+v; want %v", m, e, want[m])
		}
	}
}

func TestEncodeError(t *testing.T) {
	s := newServer(t, respond(200, okBody))
	req := userReq
	req.Params.Extra = map[string]any{"bad": func() {}}
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
		{Config{APIKey: "none", BaseURL: "http://localhost:11434", Path: "/v1/chat/completions"}, ""},
		{Config{}, "APIKey is empty"},
		{Config{APIKey: "k\r\n"}, "control character"},
		{Config{APIKey: "k", BaseURL: "api.openai.com"}, "must start with https://"},
		{Config{APIKey: "k", BaseURL: "ws://api.openai.com"}, `got scheme "ws"`},
		{Config{APIKey: "k", BaseURL: "https://"}, "no host"},
		{Config{APIKey: "k", BaseURL: "https://h/#frag"}, "query or fragment"},
		{Config{APIKey: "k", Path: "chat/completions"}, "must start with /"},
		{Config{APIKey: "k", Name: " openai"}, "Config.Name"},
		{Config{APIKey: "k", KeyHeader: "api key"}, "Config.KeyHeader"},
		{Config{APIKey: "k", MaxResponseBytes: -5}, "MaxResponseBytes"},
	}
	for _, tt := range tests {
		p, err := New(tt.cfg)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("New(%+v): %v", tt.cfg, err)
		case tt.want == "" && p.Name() != "openai":
			t.Errorf("Name = %q", p.Name())
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "openai: ")):
			t.Errorf("New(%+v) = %v; want an error containing %q", tt.cfg, err, tt.want)
		}
	}
	p, _ := New(Config{APIKey: "k"})
	if p.ep.URL != "https://api.openai.com/v1/chat/completions" || p.ep.MaxBytes != 8<<20 {
		t.Errorf("defaults: URL %s, MaxBytes %d", p.ep.URL, p.ep.MaxBytes)
	}
}
