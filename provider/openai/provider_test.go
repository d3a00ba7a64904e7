package openai

// What is specific to the Chat Completions wire format: compatible servers'
// variants, the answer's parsing, the error codes. What every adapter must
// do alike (the request's method, path, headers and body as its
// adapters-table entry describes them, statuses, headers on errors,
// unreadable bodies, redaction, one request per call, cancellation,
// configuration) is tested once for all in provider/internal/suite.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/backstop-llm/backstop/internal/problems"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/suite"
)

const testKey = "sk-proj-TESTKEY-0123456789abcdef"

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
	return suite.CompleteErr(t, p, ctx, userReq, testKey)
}

const okBody = `{"id":"chatcmpl-01","object":"chat.completion","created":1,"model":"gpt-test-2026-01-01",
"choices":[{"index":0,"message":{"role":"assistant","content":"Hello, world","refusal":null},"logprobs":null,"finish_reason":"stop"},
{"index":1,"message":{"role":"assistant","content":"second"},"finish_reason":"stop"}],
"usage":{"prompt_tokens":20,"completion_tokens":5,"total_tokens":25,"prompt_tokens_details":{"cached_tokens":10}}}`

func TestCompatibleServer(t *testing.T) {
	s := suite.NewServer(t, suite.Respond(200, okBody))
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
	if s.Last().Path != "/openai/deployments/gpt/chat/completions?api-version=2024-10-21" {
		t.Errorf("path %s", s.Last().Path)
	}
	if s.Last().Header.Get("Api-Key") != testKey || s.Last().Header.Get("Authorization") != "" {
		t.Errorf("headers %v; want the key in api-key alone", s.Last().Header)
	}
	var got map[string]any
	if err := json.Unmarshal(s.Last().Body, &got); err != nil {
		t.Fatal(err)
	}
	if _, ok := got["max_completion_tokens"]; ok || got["max_tokens"] != 50.0 {
		t.Errorf("body %s; want max_tokens alone", s.Last().Body)
	}
	// Errors carry the configured name.
	s2 := suite.NewServer(t, suite.Respond(500, `{"error":{"message":"boom","type":"server_error"}}`))
	p2, err := New(Config{APIKey: testKey, BaseURL: s2.URL, Name: "azure.ai.openai"})
	if err != nil {
		t.Fatal(err)
	}
	if e := completeErr(t, p2, context.Background()); e.Provider != "azure.ai.openai" {
		t.Errorf("Provider = %q", e.Provider)
	}
}

func TestSuccess(t *testing.T) {
	s := suite.NewServer(t, suite.Respond(200, okBody,
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
		FinishReason: "stop", Finish: llm.FinishStop, Usage: llm.Usage{InputTokens: 20, OutputTokens: 5, CacheReadTokens: 10},
	}
	rl := res.RateLimit
	res.RateLimit = llm.RateLimit{}
	if !reflect.DeepEqual(*res, want) {
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

func TestSuccessNullContent(t *testing.T) {
	s := suite.NewServer(t, suite.Respond(200, `{"id":"c","model":"m","choices":[{"message":{"role":"assistant","content":null,"tool_calls":[]},"finish_reason":"tool_calls"}]}`))
	res, err := newProvider(t, s.URL).Complete(context.Background(), userReq)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "" || res.FinishReason != "tool_calls" || res.Usage != (llm.Usage{}) || res.RateLimit != (llm.RateLimit{}) {
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
			s := suite.NewServer(t, suite.Respond(tt.status, errBody(tt.typ, tt.code, tt.msg), "x-request-id", "req_hdr"))
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

// TestDocumentedErrorCodes classifies every error code openai-go v3.98.0
// documents (ResponseErrorCode, SessionTurnErrorCode, the Assistants' and
// vector stores' last_error codes) beside those the Chat Completions API is
// known to send: a code naming a cause (a spend cap, a policy, an image the
// model cannot read) decides whatever the status, so an error event in a
// stream (status 200) is classified as the same error before it; a code
// naming only a category (server_error, invalid_request) leaves it to the
// status, which says it better.
func TestDocumentedErrorCodes(t *testing.T) {
	tests := []struct {
		status int
		want   llm.Kind
		codes  []string
	}{
		{429, llm.KindQuota, []string{"insufficient_quota", "billing_hard_limit_reached", "billing_not_active", "credit_balance_exhausted",
			"usage_limit_exceeded", "project_spend_limit_exceeded", "organization_spend_limit_exceeded",
			"organization_usage_limit_exceeded", "session_budget_exceeded"}},
		{429, llm.KindRateLimited, []string{"rate_limit_exceeded"}},
		{503, llm.KindOverloaded, []string{"server_overloaded", "flex_unavailable"}},
		{408, llm.KindTimeout, []string{"request_timeout", "vector_store_timeout"}},
		{400, llm.KindContextLength, []string{"context_length_exceeded"}},
		{400, llm.KindContentFilter, []string{"content_filter", "content_policy_violation", "image_content_policy_violation",
			"invalid_prompt", "bio_policy", "cyber_policy", "misalignment_policy_violation"}},
		{401, llm.KindAuth, []string{"invalid_api_key"}},
		{403, llm.KindAuth, []string{"unsupported_country_region_territory"}},
		{404, llm.KindNotFound, []string{"model_not_found"}},
		{400, llm.KindNotFound, []string{"data_residency_mismatch"}}, // the project lives behind another regional URL
		{400, llm.KindBadRequest, []string{"invalid_image", "invalid_image_format", "invalid_base64_image", "invalid_image_url",
			"image_too_large", "image_too_small", "image_parse_error", "invalid_image_mode", "image_file_too_large",
			"unsupported_image_media_type", "empty_image_file", "failed_to_download_image", "image_file_not_found",
			"unsupported_file", "invalid_file", "max_output_tokens", "executor_version_incompatible", "active_turn_not_steerable"}},
	}
	byStatus := []string{"server_error", "internal_error", "sandbox_error", "connection_failed", "invalid_request",
		"authentication_error", "resource_not_found"}
	p := newProvider(t, "http://127.0.0.1")
	for _, tt := range tests {
		for _, code := range tt.codes {
			body := []byte(errBody("invalid_request_error", code, "m"))
			if e := p.parseError(fuzzReply(tt.status, body)); e.Kind != tt.want || e.Code != code {
				t.Errorf("%d %s: Kind %v, Code %q; want %v", tt.status, code, e.Kind, e.Code, tt.want)
			}
			if k := p.parseError(fuzzReply(200, body)).Kind; k != tt.want {
				t.Errorf("%s in a stream: Kind %v; want %v", code, k, tt.want)
			}
		}
	}
	for _, code := range byStatus {
		for status, want := range map[int]llm.Kind{200: llm.KindServer, 400: llm.KindBadRequest, 401: llm.KindAuth,
			404: llm.KindNotFound, 500: llm.KindServer, 503: llm.KindOverloaded} {
			if e := p.parseError(fuzzReply(status, []byte(errBody("server_error", code, "m")))); e.Kind != want {
				t.Errorf("%d %s: Kind %v; want %v, as the status says", status, code, e.Kind, want)
			}
		}
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
		s := suite.NewServer(t, suite.Respond(tt.status, tt.body))
		e := completeErr(t, newProvider(t, s.URL), context.Background())
		if e.Kind != tt.kind || e.Type != tt.typ || e.Code != tt.code || e.Detail != tt.msg {
			t.Errorf("%s: got %#v", tt.body, e)
		}
	}
}

func TestContentFilter(t *testing.T) {
	for _, body := range []string{
		`{"id":"c","model":"m","choices":[{"message":{"role":"assistant","content":"partial"},"finish_reason":"content_filter"}]}`,
		`{"id":"c","model":"m","choices":[{"message":{"role":"assistant","content":null,"refusal":"I can't help with that."},"finish_reason":"stop"}]}`,
	} {
		s := suite.NewServer(t, suite.Respond(200, body, "x-request-id", "req_r"))
		e := completeErr(t, newProvider(t, s.URL), context.Background())
		if e.Kind != llm.KindContentFilter || e.Code == "" || e.RequestID != "req_r" || e.Status != 200 {
			t.Errorf("got %+v; want content filter", e)
		}
	}
}

// TestNew checks what only this adapter's Config has (Path, Name,
// KeyHeader); the suite's TestNew checks the rest.
func TestNew(t *testing.T) {
	tests := []struct {
		cfg  Config
		want string // in the error; "" for success
	}{
		{Config{APIKey: "none", BaseURL: "http://localhost:11434", Path: "/v1/chat/completions"}, ""},
		{Config{APIKey: "k", Path: "chat/completions"}, "must start with /"},
		{Config{APIKey: "k", Name: " openai"}, "Config.Name"},
		{Config{APIKey: "k", KeyHeader: "api key"}, "Config.KeyHeader"},
		{Config{APIKey: "k", KeyHeader: "api(key)"}, "Config.KeyHeader"},
		{Config{APIKey: "k", KeyHeader: "api-key\x00"}, "Config.KeyHeader"},
		{Config{APIKey: "k", Path: "/v1/chat/completions "}, "Config.Path"},
		{Config{APIKey: "k", Path: "/v1/chat/completions#x"}, "fragment"},
		{Config{APIKey: "k", Name: "openai", KeyHeader: "api-key", Path: "/chat/completions?api-version=1"}, ""},
	}
	for _, tt := range tests {
		p, err := New(tt.cfg)
		switch {
		case tt.want == "" && (err != nil || p.Name() != "openai"):
			t.Errorf("New(%+v) = %v, %v", tt.cfg, p, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "openai: ")):
			t.Errorf("New(%+v) = %v; want an error containing %q", tt.cfg, err, tt.want)
		case tt.want != "" && !errors.Is(err, problems.ErrInvalidConfig):
			t.Errorf("New(%+v) = %v; want an error matching the invalid-configuration sentinel", tt.cfg, err)
		}
	}
}

// TestValidate: Validate says what New would, so a configuration read from
// a file can be checked before any provider is built; the zero Config
// lacks only the key.
func TestValidate(t *testing.T) {
	err := Config{}.Validate()
	if !errors.Is(err, problems.ErrInvalidConfig) || err.Error() != `openai: invalid configuration: Config.APIKey is empty; set it to the API key (for a server that checks none, any placeholder such as "none")` {
		t.Fatalf("Config{}.Validate() = %v", err)
	}
	if _, nerr := New(Config{}); nerr == nil || nerr.Error() != err.Error() {
		t.Fatalf("New(Config{}) = %v; want Validate's error", nerr)
	}
	if err := (Config{APIKey: "k"}).Validate(); err != nil {
		t.Fatalf("Config{APIKey: k}.Validate() = %v", err)
	}
	// A bad Path does not hide a bad BaseURL.
	err = Config{APIKey: "k", BaseURL: "ftp://h", Path: "v1"}.Validate()
	if err == nil || !strings.Contains(err.Error(), "Config.Path") || !strings.Contains(err.Error(), `scheme "ftp"`) {
		t.Fatalf("Validate() = %v; want both Path and BaseURL named", err)
	}
}
