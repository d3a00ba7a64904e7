package fake_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/backstop-llm/backstop/provider/fake"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testKey is the API key the tests send; it must never be recorded.
const testKey = "sk-test-SECRET-0123456789"

// mode is a way to reach the fake: in-process or over loopback TCP.
type mode struct {
	name  string
	setup func(t *testing.T, s *fake.Server) (*http.Client, string)
}

var modes = []mode{
	{"in-process", func(t *testing.T, s *fake.Server) (*http.Client, string) {
		return s.Client(), s.URL()
	}},
	{"loopback", func(t *testing.T, s *fake.Server) (*http.Client, string) {
		return startLoopback(t, s), s.URL()
	}},
}

// startLoopback starts s on loopback and returns a client with a transport
// of its own; both are closed when the test ends.
func startLoopback(t *testing.T, s *fake.Server) *http.Client {
	t.Helper()
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		s.Close()
	})
	return &http.Client{Transport: tr}
}

func forEachMode(t *testing.T, f func(t *testing.T, s *fake.Server, c *http.Client, base string)) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			s := fake.New()
			c, base := m.setup(t, s)
			f(t, s, c, base)
		})
	}
}

func path(f fake.Format) string {
	if f == fake.Anthropic {
		return "/v1/messages"
	}
	return "/v1/chat/completions"
}

// validBody is a minimal valid request body for model in format f.
func validBody(f fake.Format, model string) string {
	if f == fake.Anthropic {
		return fmt.Sprintf(`{"model":%q,"max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`, model)
	}
	return fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}]}`, model)
}

// newRequest builds a request as a well-behaved adapter would.
func newRequest(t *testing.T, ctx context.Context, base string, f fake.Format, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path(f), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if f == fake.Anthropic {
		req.Header.Set("X-Api-Key", testKey)
		req.Header.Set("Anthropic-Version", "2023-06-01")
	} else {
		req.Header.Set("Authorization", "Bearer "+testKey)
	}
	return req
}

type result struct {
	status int
	header http.Header
	body   string
}

func do(t *testing.T, c *http.Client, req *http.Request) result {
	t.Helper()
	r, err := tryDo(c, req)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// tryDo is do for goroutines other than the test's.
func tryDo(c *http.Client, req *http.Request) (result, error) {
	resp, err := c.Do(req)
	if err != nil {
		return result{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return result{}, fmt.Errorf("reading body: %w", err)
	}
	return result{resp.StatusCode, resp.Header, string(b)}, nil
}

// call sends a valid request for model in format f and returns the result.
func call(t *testing.T, c *http.Client, base string, f fake.Format, model string) result {
	t.Helper()
	return do(t, c, newRequest(t, context.Background(), base, f, validBody(f, model)))
}

// tokens is the fake's documented usage estimate for n bytes.
func tokens(n int) int { return max(1, (n+3)/4) }

var created = regexp.MustCompile(`"created":\d+`)

// The usage fields of an Anthropic message around output_tokens.
const (
	anthropicUsageMid  = `"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":0},`
	anthropicUsageTail = `"output_tokens_details":{"thinking_tokens":0},"server_tool_use":{"web_search_requests":0,"web_fetch_requests":0},` +
		`"service_tier":"standard","inference_geo":"global","speed":"standard"}}`
)

// openaiUsageDetails is the details of an OpenAI usage with cached tokens.
func openaiUsageDetails(cached int) string {
	return fmt.Sprintf(`"prompt_tokens_details":{"cached_tokens":%d,"audio_tokens":0},`+
		`"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}`, cached)
}

func TestAnswerShapes(t *testing.T) {
	forEachMode(t, func(t *testing.T, s *fake.Server, c *http.Client, base string) {
		// Anthropic: the exact Messages body.
		ab := validBody(fake.Anthropic, "claude-test")
		r := do(t, c, newRequest(t, context.Background(), base, fake.Anthropic, ab))
		text := "fake answer from claude-test"
		want := fmt.Sprintf(`{"id":"msg_fake_1","type":"message","role":"assistant","model":"claude-test",`+
			`"content":[{"type":"text","text":%q,"citations":null}],"stop_reason":"end_turn","stop_sequence":null,`+
			`"stop_details":null,"container":null,"diagnostics":null,`+
			`"usage":{"input_tokens":%d,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,`+anthropicUsageMid+`"output_tokens":%d,`+anthropicUsageTail,
			text, tokens(len(ab)), tokens(len(text)))
		if r.status != 200 || r.body != want {
			t.Errorf("anthropic answer:\n got %d %s\nwant 200 %s", r.status, r.body, want)
		}
		checkHeaders(t, r.header, map[string]string{
			"Content-Type": "application/json", "Request-Id": "req_fake_1",
			"Content-Length": fmt.Sprint(len(want)), "X-Request-Id": "",
		})

		// OpenAI: the exact chat.completion body.
		ob := validBody(fake.OpenAI, "gpt-test")
		r = do(t, c, newRequest(t, context.Background(), base, fake.OpenAI, ob))
		text = "fake answer from gpt-test"
		want = fmt.Sprintf(`{"id":"chatcmpl-fake-2","object":"chat.completion","created":0,"model":"gpt-test",`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":%q,"refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,`+openaiUsageDetails(0)+`},"service_tier":"default","system_fingerprint":"fp_fake"}`,
			text, tokens(len(ob)), tokens(len(text)), tokens(len(ob))+tokens(len(text)))
		if got := created.ReplaceAllString(r.body, `"created":0`); r.status != 200 || got != want {
			t.Errorf("openai answer:\n got %d %s\nwant 200 %s", r.status, got, want)
		}
		var v struct{ Created int64 }
		if err := json.Unmarshal([]byte(r.body), &v); err != nil || time.Since(time.Unix(v.Created, 0)) > time.Minute {
			t.Errorf("created = %d (%v), want about now", v.Created, err)
		}
		checkHeaders(t, r.header, map[string]string{
			"Content-Type": "application/json", "X-Request-Id": "req_fake_2", "Request-Id": "",
		})
	})
}

// checkHeaders checks each header's value; "" means absent.
func checkHeaders(t *testing.T, h http.Header, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
}

func TestAnswerModifiers(t *testing.T) {
	s := fake.New()
	c := s.Client()
	o := fake.Answer(`{"a":"<b>"}`).Model("served-1").ID("custom-id").Usage(7, 3).Finish("max_tokens").
		RequestID("req_custom").Header("anthropic-ratelimit-requests-remaining", "4")
	s.Script("m", o)

	r := call(t, c, s.URL(), fake.Anthropic, "m")
	want := `{"id":"custom-id","type":"message","role":"assistant","model":"served-1",` +
		`"content":[{"type":"text","text":"{\"a\":\"<b>\"}","citations":null}],"stop_reason":"max_tokens","stop_sequence":null,` +
		`"stop_details":null,"container":null,"diagnostics":null,` +
		`"usage":{"input_tokens":7,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,` + anthropicUsageMid + `"output_tokens":3,` + anthropicUsageTail
	if r.body != want {
		t.Errorf("anthropic:\n got %s\nwant %s", r.body, want)
	}
	checkHeaders(t, r.header, map[string]string{"Request-Id": "req_custom", "Anthropic-Ratelimit-Requests-Remaining": "4"})

	r = call(t, c, s.URL(), fake.OpenAI, "m")
	want = `{"id":"custom-id","object":"chat.completion","created":0,"model":"served-1",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"{\"a\":\"<b>\"}","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"max_tokens"}],` +
		`"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10,` + openaiUsageDetails(0) + `},"service_tier":"default","system_fingerprint":"fp_fake"}`
	if got := created.ReplaceAllString(r.body, `"created":0`); got != want {
		t.Errorf("openai:\n got %s\nwant %s", got, want)
	}
	checkHeaders(t, r.header, map[string]string{"X-Request-Id": "req_custom"})

	// A stop_sequence finish quotes the request's first stop sequence.
	s.Script("stop", fake.Answer("x").Finish("stop_sequence"))
	body := `{"model":"stop","max_tokens":5,"stop_sequences":["END","FIN"],"messages":[{"role":"user","content":"hi"}]}`
	r = do(t, c, newRequest(t, context.Background(), s.URL(), fake.Anthropic, body))
	if !strings.Contains(r.body, `"stop_reason":"stop_sequence","stop_sequence":"END"`) {
		t.Errorf("stop sequence body: %s", r.body)
	}

	// Answer("") is an empty answer; the zero Outcome is the default answer.
	s.Script("empty", fake.Answer(""), fake.Outcome{})
	if r := call(t, c, s.URL(), fake.Anthropic, "empty"); !strings.Contains(r.body, `"content":[{"type":"text","text":"","citations":null}]`) {
		t.Errorf("empty answer: %s", r.body)
	}
	if r := call(t, c, s.URL(), fake.Anthropic, "empty"); !strings.Contains(r.body, `"text":"fake answer from empty"`) {
		t.Errorf("zero outcome: %s", r.body)
	}
}

func TestErrorShapes(t *testing.T) {
	tests := []struct {
		name    string
		o       fake.Outcome
		format  fake.Format
		status  int
		body    string
		headers map[string]string
	}{
		{"anthropic 529", fake.Overloaded(), fake.Anthropic, 529,
			`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_fake_1"}`, nil},
		{"openai overloaded", fake.Overloaded(), fake.OpenAI, 503,
			`{"error":{"message":"The server is overloaded or not ready yet.","type":"server_error","param":null,"code":null}}`, nil},
		{"anthropic rate limited", fake.RateLimited("2"), fake.Anthropic, 429,
			`{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization of 50 requests per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits."},"request_id":"req_fake_1"}`,
			map[string]string{"Retry-After": "2", "Request-Id": "req_fake_1"}},
		{"openai rate limited", fake.RateLimited("2"), fake.OpenAI, 429,
			`{"error":{"message":"Rate limit reached for m in organization org-fake on requests per min (RPM): Limit 60, Used 60, Requested 1. Please try again in 2s.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
			map[string]string{"Retry-After": "2", "X-Request-Id": "req_fake_1"}},
		{"openai rate limited without retry-after", fake.RateLimited(""), fake.OpenAI, 429,
			`{"error":{"message":"Rate limit reached for m in organization org-fake on requests per min (RPM): Limit 60, Used 60, Requested 1.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
			map[string]string{"Retry-After": ""}},
		{"anthropic spend cap", fake.SpendCap(), fake.Anthropic, 429,
			`{"type":"error","error":{"type":"rate_limit_error","message":"You have reached your specified API usage limits. You will regain access when the limit resets.","details":{"error_code":"enforced_spend_limit_reached"}},"request_id":"req_fake_1"}`,
			map[string]string{"Retry-After": ""}},
		{"openai spend cap", fake.SpendCap(), fake.OpenAI, 429,
			`{"error":{"message":"You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`,
			map[string]string{"Retry-After": ""}},
		{"anthropic context", fake.ContextTooLong(), fake.Anthropic, 400,
			`{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"},"request_id":"req_fake_1"}`, nil},
		{"openai context", fake.ContextTooLong(), fake.OpenAI, 400,
			`{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 208310 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, nil},
		{"anthropic bad request", fake.BadRequest("temperature: out of range"), fake.Anthropic, 400,
			`{"type":"error","error":{"type":"invalid_request_error","message":"temperature: out of range"},"request_id":"req_fake_1"}`, nil},
		{"openai server error", fake.ServerError(), fake.OpenAI, 500,
			`{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`, nil},
		{"anthropic not found", fake.Status(404), fake.Anthropic, 404,
			`{"type":"error","error":{"type":"not_found_error","message":"model: m"},"request_id":"req_fake_1"}`, nil},
		{"openai not found", fake.Status(404), fake.OpenAI, 404,
			`{"error":{"message":"The model ` + "`m`" + ` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`, nil},
		{"anthropic modifiers", fake.Status(503).Type("my_type").Code("my_code").Message("hello").RequestID("req_x").Header("X-Should-Retry", "false"),
			fake.Anthropic, 503,
			`{"type":"error","error":{"type":"my_type","message":"hello","details":{"error_code":"my_code"}},"request_id":"req_x"}`,
			map[string]string{"Request-Id": "req_x", "X-Should-Retry": "false"}},
		{"openai modifiers", fake.Status(429).Type("tokens").Code("").Message("slow down").RetryAfter("Wed, 21 Oct 2015 07:28:00 GMT"),
			fake.OpenAI, 429,
			`{"error":{"message":"slow down","type":"tokens","param":null,"code":null}}`,
			map[string]string{"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}},
		{"raw body", fake.Status(502).Body("<html>Bad Gateway</html>").Header("Content-Type", "text/html"), fake.Anthropic, 502,
			`<html>Bad Gateway</html>`, map[string]string{"Content-Type": "text/html"}},
		{"no request id", fake.Status(500).Header("request-id", ""), fake.Anthropic, 500,
			`{"type":"error","error":{"type":"api_error","message":"Internal server error"},"request_id":"req_fake_1"}`,
			map[string]string{"Request-Id": ""}},
		{"malformed", fake.Malformed(`{"id":"msg_1","content":[`), fake.Anthropic, 200,
			`{"id":"msg_1","content":[`, map[string]string{"Content-Type": "application/json", "Request-Id": "req_fake_1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := fake.New()
			s.Script("m", tt.o)
			r := call(t, s.Client(), s.URL(), tt.format, "m")
			if r.status != tt.status || r.body != tt.body {
				t.Errorf("\n got %d %s\nwant %d %s", r.status, r.body, tt.status, tt.body)
			}
			checkHeaders(t, r.header, tt.headers)
		})
	}
}

func TestStatusDefaultTypes(t *testing.T) {
	anthropic := map[int]string{
		400: "invalid_request_error", 401: "authentication_error", 402: "billing_error",
		403: "permission_error", 404: "not_found_error", 409: "conflict_error",
		413: "request_too_large", 422: "invalid_request_error", 429: "rate_limit_error",
		500: "api_error", 502: "api_error", 504: "timeout_error", 529: "overloaded_error",
	}
	openai := map[int][2]string{
		400: {"invalid_request_error", ""}, 401: {"invalid_request_error", "invalid_api_key"},
		404: {"invalid_request_error", "model_not_found"}, 409: {"invalid_request_error", ""},
		429: {"requests", "rate_limit_exceeded"}, 500: {"server_error", ""},
		503: {"server_error", ""}, 529: {"server_error", ""},
	}
	s := fake.New()
	c := s.Client()
	for status, typ := range anthropic {
		s.Script("a", fake.Status(status))
		r := call(t, c, s.URL(), fake.Anthropic, "a")
		var e struct {
			Type  string
			Error struct{ Type, Message string }
		}
		if err := json.Unmarshal([]byte(r.body), &e); err != nil || r.status != status || e.Type != "error" ||
			e.Error.Type != typ || e.Error.Message == "" {
			t.Errorf("anthropic %d: got %d %s, want type %s", status, r.status, r.body, typ)
		}
	}
	for status, tc := range openai {
		s.Script("o", fake.Status(status))
		r := call(t, c, s.URL(), fake.OpenAI, "o")
		var e struct {
			Error struct {
				Type, Message string
				Code          *string
			}
		}
		code := ""
		if err := json.Unmarshal([]byte(r.body), &e); err == nil && e.Error.Code != nil {
			code = *e.Error.Code
		}
		if r.status != status || e.Error.Type != tc[0] || code != tc[1] || e.Error.Message == "" {
			t.Errorf("openai %d: got %d %s, want type %s code %q", status, r.status, r.body, tc[0], tc[1])
		}
	}
}

func text(t *testing.T, r result) string {
	t.Helper()
	if r.status != 200 {
		return fmt.Sprint(r.status)
	}
	var v struct {
		Content []struct{ Text string }
		Choices []struct{ Message struct{ Content string } }
	}
	if err := json.Unmarshal([]byte(r.body), &v); err != nil {
		t.Fatalf("answer %s: %v", r.body, err)
	}
	if len(v.Content) > 0 {
		return v.Content[0].Text
	}
	if len(v.Choices) > 0 {
		return v.Choices[0].Message.Content
	}
	t.Fatalf("no text in %s", r.body)
	return ""
}

func TestScript(t *testing.T) {
	forEachMode(t, func(t *testing.T, s *fake.Server, c *http.Client, base string) {
		s.Script("m", fake.Overloaded(), fake.Answer("one"))
		s.Script("m", fake.Answer("two"))
		var got []string
		for i, f := range []fake.Format{fake.Anthropic, fake.OpenAI, fake.Anthropic, fake.OpenAI, fake.Anthropic} {
			got = append(got, text(t, call(t, c, base, f, "m")))
			if i == 3 {
				s.Script("m", fake.Answer("three")) // appended after the script was used up
			}
		}
		if want := []string{"529", "one", "two", "two", "three"}; !slices.Equal(got, want) {
			t.Errorf("script: got %v, want %v", got, want)
		}
		// The last outcome repeats.
		for range 3 {
			if got := text(t, call(t, c, base, fake.OpenAI, "m")); got != "three" {
				t.Errorf("repeat: got %q, want three", got)
			}
		}
		// A model never scripted gets the default answer.
		if got := text(t, call(t, c, base, fake.OpenAI, "other")); got != "fake answer from other" {
			t.Errorf("default: got %q", got)
		}
		if n := s.Requests("m"); n != 8 {
			t.Errorf("Requests(m) = %d, want 8", n)
		}
		if n := s.Requests("never"); n != 0 || s.Arrivals("never") != nil || s.Calls("never") != nil {
			t.Errorf("unknown model: %d requests", n)
		}
	})
}

func TestHandle(t *testing.T) {
	forEachMode(t, func(t *testing.T, s *fake.Server, c *http.Client, base string) {
		s.Script("m", fake.ServerError())
		var seen []fake.Call
		var mu sync.Mutex
		s.Handle("m", func(call fake.Call) fake.Outcome {
			mu.Lock()
			seen = append(seen, call)
			mu.Unlock()
			if call.Context().Err() != nil {
				t.Error("handler context already done")
			}
			if call.N%2 == 1 {
				return fake.RateLimited("1")
			}
			return fake.Answer(fmt.Sprintf("n=%d %s", call.N, call.Format))
		})
		var got []string
		for _, f := range []fake.Format{fake.Anthropic, fake.OpenAI, fake.OpenAI, fake.Anthropic} {
			got = append(got, text(t, call(t, c, base, f, "m")))
		}
		if want := []string{"429", "n=2 openai", "429", "n=4 anthropic"}; !slices.Equal(got, want) {
			t.Errorf("handle: got %v, want %v", got, want)
		}
		if len(seen) != 4 || seen[1].Model != "m" || seen[1].Format != fake.OpenAI ||
			string(seen[1].Body) != validBody(fake.OpenAI, "m") {
			t.Errorf("calls seen by the handler: %+v", seen)
		}
		// Script replaces Handle; Handle(nil) restores the default.
		s.Script("m", fake.Answer("scripted"))
		if got := text(t, call(t, c, base, fake.OpenAI, "m")); got != "scripted" {
			t.Errorf("after Script: %q", got)
		}
		s.Handle("m", nil)
		if got := text(t, call(t, c, base, fake.OpenAI, "m")); got != "fake answer from m" {
			t.Errorf("after Handle(nil): %q", got)
		}
	})
}

func TestCallsRecorded(t *testing.T) {
	forEachMode(t, func(t *testing.T, s *fake.Server, c *http.Client, base string) {
		before := time.Now()
		call(t, c, base, fake.Anthropic, "m")
		call(t, c, base, fake.OpenAI, "x")
		call(t, c, base, fake.OpenAI, "m")
		after := time.Now()

		calls := s.Calls("m")
		if len(calls) != 2 || s.Requests("m") != 2 || s.Requests("x") != 1 {
			t.Fatalf("calls: %d, requests m %d x %d", len(calls), s.Requests("m"), s.Requests("x"))
		}
		a, o := calls[0], calls[1]
		if a.Model != "m" || a.Format != fake.Anthropic || a.N != 1 || a.Seq != 1 ||
			o.Format != fake.OpenAI || o.N != 2 || o.Seq != 3 {
			t.Errorf("calls: %+v %+v", a, o)
		}
		if string(a.Body) != validBody(fake.Anthropic, "m") || string(o.Body) != validBody(fake.OpenAI, "m") {
			t.Errorf("bodies: %s / %s", a.Body, o.Body)
		}
		if got := a.Header.Get("X-Api-Key"); got != "[redacted]" {
			t.Errorf("x-api-key recorded as %q", got)
		}
		if got := a.Header.Get("Anthropic-Version"); got != "2023-06-01" {
			t.Errorf("anthropic-version recorded as %q", got)
		}
		if got := o.Header.Get("Authorization"); got != "Bearer [redacted]" {
			t.Errorf("authorization recorded as %q", got)
		}
		for _, cl := range append(calls, s.Calls("x")...) {
			for k, vs := range cl.Header {
				for _, v := range vs {
					if strings.Contains(v, "SECRET") {
						t.Errorf("key stored in header %s", k)
					}
				}
			}
		}
		arr := s.Arrivals("m")
		if len(arr) != 2 || !arr[0].Equal(a.Time) || !arr[1].Equal(o.Time) ||
			arr[0].Before(before) || arr[1].Before(arr[0]) || arr[1].After(after) {
			t.Errorf("arrivals %v, not within [%v, %v]", arr, before, after)
		}
		// Calls returns copies.
		calls[0].Body[0] = 'X'
		calls[0].Header.Set("Anthropic-Version", "changed")
		if c := s.Calls("m")[0]; c.Body[0] != '{' || c.Header.Get("Anthropic-Version") != "2023-06-01" {
			t.Error("Calls shares memory with the server")
		}
		if s.Calls("m")[0].Context() != context.Background() {
			t.Error("recorded Call.Context is not Background")
		}
	})
}

func TestValidation(t *testing.T) {
	type check struct {
		name   string
		format fake.Format
		edit   func(*http.Request)
		body   string
		status int
		typ    string
		msg    string
	}
	del := func(k string) func(*http.Request) { return func(r *http.Request) { r.Header.Del(k) } }
	setH := func(k, v string) func(*http.Request) { return func(r *http.Request) { r.Header.Set(k, v) } }
	A, O := fake.Anthropic, fake.OpenAI
	checks := []check{
		{"anthropic no key", A, del("X-Api-Key"), "", 401, "authentication_error", "x-api-key header is required"},
		{"anthropic empty key", A, setH("X-Api-Key", ""), "", 401, "authentication_error", ""},
		{"anthropic basic auth is not enough", A, func(r *http.Request) { r.Header.Del("X-Api-Key"); r.Header.Set("Authorization", "Basic k") }, "", 401, "authentication_error", ""},
		{"anthropic empty bearer", A, func(r *http.Request) { r.Header.Del("X-Api-Key"); r.Header.Set("Authorization", "Bearer ") }, "", 401, "authentication_error", ""},
		{"anthropic no version", A, del("Anthropic-Version"), "", 400, "invalid_request_error", "anthropic-version: header is required"},
		{"anthropic not json", A, nil, `{"model":`, 400, "invalid_request_error", ""},
		{"anthropic null body", A, nil, `null`, 400, "invalid_request_error", ""},
		{"anthropic no model", A, nil, `{"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "model: Field required"},
		{"anthropic no max_tokens", A, nil, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "max_tokens: Field required"},
		{"anthropic negative max_tokens", A, nil, `{"model":"m","max_tokens":-1,"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", ""},
		{"anthropic no messages", A, nil, `{"model":"m","max_tokens":5}`, 400, "invalid_request_error", "messages: Field required"},
		{"anthropic empty messages", A, nil, `{"model":"m","max_tokens":5,"messages":[]}`, 400, "invalid_request_error", ""},
		{"anthropic system role", A, nil, `{"model":"m","max_tokens":5,"messages":[{"role":"system","content":"be nice"}]}`, 400, "invalid_request_error", "messages.0.role: Input should be 'user' or 'assistant'"},
		{"anthropic stream not a boolean", A, nil, `{"model":"m","max_tokens":5,"stream":"yes","messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "stream: Input should be a valid boolean"},
		{"openai no auth", O, del("Authorization"), "", 401, "invalid_request_error", ""},
		{"openai empty bearer", O, setH("Authorization", "Bearer "), "", 401, "invalid_request_error", "Incorrect API key provided."},
		{"openai basic auth", O, setH("Authorization", "Basic abc"), "", 401, "invalid_request_error", ""},
		{"openai x-api-key is not enough", O, func(r *http.Request) { r.Header.Del("Authorization"); r.Header.Set("X-Api-Key", "k") }, "", 401, "invalid_request_error", ""},
		{"openai not json", O, nil, `nope`, 400, "invalid_request_error", ""},
		{"openai no model", O, nil, `{"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "you must provide a model parameter"},
		{"openai no messages", O, nil, `{"model":"m"}`, 400, "invalid_request_error", "Missing required parameter: 'messages'."},
		{"openai stream not a boolean", O, nil, `{"model":"m","stream":1,"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "Invalid type for 'stream': expected a boolean, but got an integer instead."},
		{"openai stream_options without stream", O, nil, `{"model":"m","stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "The 'stream_options' parameter is only allowed when 'stream' is enabled."},
		{"openai stream_options with stream false", O, nil, `{"model":"m","stream":false,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", ""},
		{"openai bad role", O, nil, `{"model":"m","messages":[{"role":"robot","content":"hi"}]}`, 400, "invalid_request_error", ""},
	}
	for _, ck := range checks {
		t.Run(ck.name, func(t *testing.T) {
			s := fake.New()
			s.Script("m", fake.ServerError(), fake.Answer("ok"))
			body := ck.body
			if body == "" {
				body = validBody(ck.format, "m")
			}
			req := newRequest(t, context.Background(), s.URL(), ck.format, body)
			if ck.edit != nil {
				ck.edit(req)
			}
			r := do(t, s.Client(), req)
			var e struct {
				Error struct{ Type, Message string }
			}
			_ = json.Unmarshal([]byte(r.body), &e)
			if r.status != ck.status || e.Error.Type != ck.typ || (ck.msg != "" && e.Error.Message != ck.msg) {
				t.Errorf("got %d %s, want %d %s %q", r.status, r.body, ck.status, ck.typ, ck.msg)
			}
			if strings.Contains(r.body, "SECRET") {
				t.Error("the key is echoed in the error")
			}
			// A rejected request is recorded but takes no outcome.
			var recorded int
			for _, m := range []string{"m", ""} {
				recorded += s.Requests(m)
			}
			if recorded != 1 {
				t.Errorf("rejected request recorded %d times", recorded)
			}
			if got := text(t, call(t, s.Client(), s.URL(), ck.format, "m")); got != "500" {
				t.Errorf("first valid request after a rejected one got %s, want the script's first outcome", got)
			}
		})
	}
}

func TestRoutes(t *testing.T) {
	forEachMode(t, func(t *testing.T, s *fake.Server, c *http.Client, base string) {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/completions", strings.NewReader("{}"))
		r := do(t, c, req)
		if r.status != 404 || !strings.Contains(r.body, `"type":"not_found_error"`) || !strings.Contains(r.body, "/v1/chat/completions") {
			t.Errorf("unknown path: %d %s", r.status, r.body)
		}
		req, _ = http.NewRequest(http.MethodGet, base+"/v1/messages", nil)
		r = do(t, c, req)
		if r.status != 405 || r.header.Get("Allow") != "POST" {
			t.Errorf("GET: %d %v", r.status, r.header)
		}
	})
}

func TestHangEndsOnCancel(t *testing.T) {
	forEachMode(t, func(t *testing.T, s *fake.Server, c *http.Client, base string) {
		arrived, done := make(chan struct{}), make(chan struct{})
		s.Handle("m", func(fake.Call) fake.Outcome {
			close(arrived)
			return fake.Hang().OnDone(func() { close(done) })
		})
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			<-arrived
			cancel()
		}()
		_, err := c.Do(newRequest(t, ctx, base, fake.Anthropic, validBody(fake.Anthropic, "m")))
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
		waitDone(t, done, "the hanging handler did not end after the client canceled")
	})
}

// waitDone fails the test with msg unless done is closed within 10s.
func waitDone(t *testing.T, done <-chan struct{}, msg string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal(msg)
	}
}

func TestCloseReleasesHangingRequests(t *testing.T) {
	s := fake.New()
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	arrived := make(chan struct{})
	s.Handle("m", func(fake.Call) fake.Outcome {
		close(arrived)
		return fake.Hang()
	})
	errc := make(chan error, 1)
	go func() {
		resp, err := (&http.Client{Transport: tr}).Do(newRequest(t, context.Background(), s.URL(), fake.OpenAI, validBody(fake.OpenAI, "m")))
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-arrived
	s.Close() // must not wait forever for the hanging handler
	if err := <-errc; err == nil {
		t.Error("the hanging request succeeded after Close")
	}
	if s.URL() != fake.InProcessURL {
		t.Errorf("URL after Close = %s", s.URL())
	}
}

func TestStartClose(t *testing.T) {
	s := fake.New()
	if s.URL() != fake.InProcessURL {
		t.Errorf("URL before Start = %s", s.URL())
	}
	s.Close() // no-op
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	u := s.URL()
	if !strings.HasPrefix(u, "http://127.0.0.1:") {
		t.Errorf("URL after Start = %s", u)
	}
	if err := s.Start(); err == nil {
		t.Error("second Start succeeded")
	}
	// The in-process client still works while the loopback server runs.
	if r := call(t, s.Client(), u, fake.OpenAI, "m"); r.status != 200 {
		t.Errorf("in-process while started: %d", r.status)
	}
	s.Close()
	if _, err := net.Dial("tcp", strings.TrimPrefix(u, "http://")); err == nil {
		t.Error("the loopback server still accepts connections after Close")
	}
	if err := s.Start(); err != nil {
		t.Fatalf("Start after Close: %v", err)
	}
	tr := &http.Transport{}
	if r := call(t, &http.Client{Transport: tr}, s.URL(), fake.Anthropic, "m"); r.status != 200 || r.header.Get("Request-Id") != "req_fake_2" {
		t.Errorf("after restart: %d %v", r.status, r.header)
	}
	tr.CloseIdleConnections()
	s.Close()
	if s.Requests("m") != 2 {
		t.Errorf("requests = %d, want 2 (kept across Close)", s.Requests("m"))
	}
}

func TestConnReset(t *testing.T) {
	forEachMode(t, func(t *testing.T, s *fake.Server, c *http.Client, base string) {
		s.Script("m", fake.ConnReset(), fake.ConnReset().After(time.Millisecond), fake.Answer("recovered"))
		for _, f := range []fake.Format{fake.Anthropic, fake.OpenAI} {
			resp, err := c.Do(newRequest(t, context.Background(), base, f, validBody(f, "m")))
			if err == nil {
				resp.Body.Close()
				t.Fatalf("got %s, want a connection reset", resp.Status)
			}
			if !errors.Is(err, syscall.ECONNRESET) {
				t.Errorf("err = %v, want ECONNRESET", err)
			}
			var op *net.OpError
			if !errors.As(err, &op) || op.Op != "read" {
				t.Errorf("err = %#v, want a *net.OpError from a read", err)
			}
		}
		if got := text(t, call(t, c, base, fake.OpenAI, "m")); got != "recovered" {
			t.Errorf("after reset: %q", got)
		}
	})
}

func TestAfterVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := fake.New()
		c := s.Client()
		s.Script("m", fake.Answer("late").After(3*time.Second))
		start := time.Now()

		r := call(t, c, s.URL(), fake.OpenAI, "m")
		if got := time.Since(start); got != 3*time.Second {
			t.Errorf("first response after %v, want 3s", got)
		}
		// created is virtual time too: synctest starts at 2000-01-01 00:00:00 UTC.
		if !strings.Contains(r.body, fmt.Sprintf(`"created":%d,`, start.Add(3*time.Second).Unix())) {
			t.Errorf("body %s", r.body)
		}

		// Staggered concurrent requests: each waits 3s from its own arrival.
		var wg sync.WaitGroup
		done := make([]time.Duration, 3)
		for i := range 3 {
			wg.Go(func() {
				time.Sleep(time.Duration(i) * time.Second)
				call(t, c, s.URL(), fake.Anthropic, "m")
				done[i] = time.Since(start)
			})
		}
		wg.Wait()
		if want := []time.Duration{6 * time.Second, 7 * time.Second, 8 * time.Second}; !slices.Equal(done, want) {
			t.Errorf("responses at %v, want %v", done, want)
		}
		var arr []time.Duration
		for _, a := range s.Arrivals("m") {
			arr = append(arr, a.Sub(start))
		}
		if want := []time.Duration{0, 3 * time.Second, 4 * time.Second, 5 * time.Second}; !slices.Equal(arr, want) {
			t.Errorf("arrivals at %v, want %v", arr, want)
		}
	})
}

func TestDelayAndHangCutShortInVirtualTime(t *testing.T) {
	for _, o := range []fake.Outcome{fake.Answer("late").After(time.Hour), fake.Hang(), fake.ServerError().After(time.Minute)} {
		synctest.Test(t, func(t *testing.T) {
			s := fake.New()
			var ended time.Time
			s.Script("m", o.OnDone(func() { ended = time.Now() }))
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, err := s.Client().Do(newRequest(t, ctx, s.URL(), fake.Anthropic, validBody(fake.Anthropic, "m")))
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("err = %v, want DeadlineExceeded", err)
			}
			if got := time.Since(start); got != 2*time.Second {
				t.Errorf("gave up after %v, want 2s", got)
			}
			synctest.Wait() // the handler goroutine ends at once
			if got := ended.Sub(start); got != 2*time.Second {
				t.Errorf("handler ended after %v, want 2s", got)
			}
		})
	}
}

func TestAbandonedBodiesLeakNothing(t *testing.T) {
	s := fake.New()
	c := s.Client()
	for range 10 {
		// Never read, never closed.
		resp, err := c.Do(newRequest(t, context.Background(), s.URL(), fake.Anthropic, validBody(fake.Anthropic, "m")))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp
		// Closed unread.
		resp, err = c.Do(newRequest(t, context.Background(), s.URL(), fake.OpenAI, validBody(fake.OpenAI, "m")))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		// Canceled before the response.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := c.Do(newRequest(t, ctx, s.URL(), fake.OpenAI, validBody(fake.OpenAI, "m"))); !errors.Is(err, context.Canceled) {
			t.Errorf("canceled request: %v", err)
		}
	}
	goleak.VerifyNone(t)

	// Over loopback: a body closed unread, then Close.
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	for range 5 {
		resp, err := (&http.Client{Transport: tr}).Do(newRequest(t, context.Background(), s.URL(), fake.Anthropic, validBody(fake.Anthropic, "m")))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	tr.CloseIdleConnections()
	s.Close()
	goleak.VerifyNone(t)
}

func TestConcurrency(t *testing.T) {
	forEachMode(t, func(t *testing.T, s *fake.Server, c *http.Client, base string) {
		const clients, each, failures = 100, 5, 50
		script := make([]fake.Outcome, 0, failures+1)
		for range failures {
			script = append(script, fake.RateLimited("1"))
		}
		s.Script("m", append(script, fake.Answer("ok"))...)
		var inflight, peak atomic.Int64
		s.Handle("h", func(c fake.Call) fake.Outcome {
			n := inflight.Add(1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			return fake.Answer("h").OnDone(func() { inflight.Add(-1) })
		})

		var limited, ok, handled atomic.Int64
		var wg sync.WaitGroup
		for i := range clients {
			wg.Go(func() {
				for j := range each {
					f := fake.Format(1 + (i+j)%2)
					r, err := tryDo(c, newRequest(t, context.Background(), base, f, validBody(f, "m")))
					switch {
					case err != nil:
						t.Error(err)
					case r.status == 429:
						limited.Add(1)
					case r.status == 200:
						ok.Add(1)
					default:
						t.Errorf("status %d", r.status)
					}
					r, err = tryDo(c, newRequest(t, context.Background(), base, f, validBody(f, "h")))
					if err == nil && r.status == 200 && strings.Contains(r.body, `"h"`) {
						handled.Add(1)
					}
				}
			})
		}
		wg.Wait()
		if limited.Load() != failures || ok.Load() != clients*each-failures || handled.Load() != clients*each {
			t.Errorf("429s %d, 200s %d, handled %d", limited.Load(), ok.Load(), handled.Load())
		}
		if s.Requests("m") != clients*each || len(s.Arrivals("h")) != clients*each || inflight.Load() != 0 {
			t.Errorf("requests %d / %d, in flight %d", s.Requests("m"), len(s.Arrivals("h")), inflight.Load())
		}
		// N is dense per model, Seq unique across models, arrivals in order.
		seqs := map[int]bool{}
		for _, m := range []string{"m", "h"} {
			calls := s.Calls(m)
			for i, cl := range calls {
				if cl.N != i+1 || seqs[cl.Seq] || (i > 0 && cl.Time.Before(calls[i-1].Time)) {
					t.Fatalf("%s call %d: N %d Seq %d", m, i, cl.N, cl.Seq)
				}
				seqs[cl.Seq] = true
			}
		}
		if len(seqs) != 2*clients*each {
			t.Errorf("%d distinct Seq", len(seqs))
		}
	})
}

func TestFormatString(t *testing.T) {
	if fake.Anthropic.String() != "anthropic" || fake.OpenAI.String() != "openai" || fake.Format(9).String() != "Format(9)" {
		t.Error("Format.String")
	}
}

// mountedTLS serves s from an httptest TLS server of the caller's (over
// HTTP/2 if h2) and returns it with its client; both are closed when the
// test ends.
func mountedTLS(t *testing.T, s *fake.Server, h2 bool) (*httptest.Server, *http.Client) {
	t.Helper()
	ts := httptest.NewUnstartedServer(s)
	ts.EnableHTTP2 = h2
	ts.StartTLS()
	t.Cleanup(ts.Close)
	c := ts.Client()
	t.Cleanup(c.CloseIdleConnections)
	return ts, c
}

func TestMountedInHTTPTest(t *testing.T) {
	// ServeHTTP works in a server of the caller's: over TLS a reset still
	// reaches the client as ECONNRESET; over HTTP/2 it aborts the stream.
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("http2=%v", h2), func(t *testing.T) {
			s := fake.New()
			s.Script("m", fake.ConnReset(), fake.Answer("ok"))
			ts, c := mountedTLS(t, s, h2)
			_, err := c.Do(newRequest(t, context.Background(), ts.URL, fake.OpenAI, validBody(fake.OpenAI, "m")))
			switch {
			case err == nil:
				t.Error("reset request succeeded")
			case !h2 && !errors.Is(err, syscall.ECONNRESET):
				t.Errorf("err = %v, want ECONNRESET", err)
			}
			if got := text(t, call(t, c, ts.URL, fake.OpenAI, "m")); got != "ok" {
				t.Errorf("after reset: %q", got)
			}
		})
	}
}

func TestRequestTooLarge(t *testing.T) {
	s := fake.New()
	const limit = 32 << 20
	big := bytes.Repeat([]byte("x"), limit+1)
	// Announced by its Content-Length (refused unread) and in chunks
	// (refused once the limit is passed).
	for i, length := range []int64{limit + 1, -1} {
		req := newRequest(t, context.Background(), s.URL(), fake.Anthropic, "")
		req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(big)), length
		if length < 0 && testing.Short() {
			continue // reading 32 MiB takes seconds under -race
		}
		r := do(t, s.Client(), req)
		if r.status != 413 || !strings.Contains(r.body, `"type":"request_too_large"`) || r.header.Get("Request-Id") != fmt.Sprint("req_fake_", i+1) {
			t.Errorf("got %d %s %v", r.status, r.body, r.header)
		}
	}
	if s.Requests("m") != 0 {
		t.Error("a request too large to read was recorded")
	}
}

func TestOnDoneOrderAndValueSemantics(t *testing.T) {
	s := fake.New()
	var order []string
	base := fake.Answer("x").OnDone(func() { order = append(order, "a") })
	withB := base.OnDone(func() { order = append(order, "b") })
	headerA := base.Header("X-A", "1")
	headerB := headerA.Header("X-B", "2")
	_ = headerA.Header("X-C", "3") // must not alias into headerB
	s.Script("m", withB, headerB)
	r := call(t, s.Client(), s.URL(), fake.OpenAI, "m")
	if !slices.Equal(order, []string{"a", "b"}) {
		t.Errorf("OnDone order %v", order)
	}
	r = call(t, s.Client(), s.URL(), fake.OpenAI, "m")
	if r.header.Get("X-A") != "1" || r.header.Get("X-B") != "2" || r.header.Get("X-C") != "" {
		t.Errorf("headers %v", r.header)
	}
	if !slices.Equal(order, []string{"a", "b", "a"}) {
		t.Errorf("OnDone order %v", order)
	}
}
