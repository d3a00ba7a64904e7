package classify

import (
	"fmt"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/backstop-llm/backstop/llm"
)

// TestClassify: one table per vendor, as every adapter (backstop's own and
// those over the official SDKs) reads a failed attempt.
func TestClassify(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1])
		}
		return out
	}
	retryInfo := []byte(`{"error":{"code":429,"message":"Quota exceeded for requests per minute","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"30s"}]}}`)
	for _, tc := range []struct {
		name  string
		v     Vendor
		r     Reply
		kind  llm.Kind
		wait  time.Duration
		reqID string
	}{
		{"anthropic 429", VendorAnthropic, Reply{Status: 429, Type: "rate_limit_error", Header: h("Retry-After", "7", "Request-Id", "req_1")}, llm.KindRateLimited, 7 * time.Second, "req_1"},
		{"anthropic 529", VendorAnthropic, Reply{Status: 529, Type: "overloaded_error"}, llm.KindOverloaded, 0, ""},
		{"anthropic spend cap in the body", VendorAnthropic, Reply{Status: 429, Type: "rate_limit_error", Body: []byte(`{"error":{"details":{"error_code":"contract_spend_limit_reached"}}}`)}, llm.KindQuota, 0, ""},
		{"anthropic spend cap as the code", VendorAnthropic, Reply{Status: 429, Type: "rate_limit_error", Code: "enforced_spend_limit_reached"}, llm.KindQuota, 0, ""},
		{"anthropic ramp limit", VendorAnthropic, Reply{Status: 429, Type: "rate_limit_error", Code: "ramp_limit_exceeded"}, llm.KindRateLimited, 0, ""},
		{"anthropic prompt too long", VendorAnthropic, Reply{Status: 400, Type: "invalid_request_error", Message: "prompt is too long: 208310 tokens > 200000 maximum"}, llm.KindContextLength, 0, ""},
		{"anthropic bad request", VendorAnthropic, Reply{Status: 400, Type: "invalid_request_error", Message: "messages: field required"}, llm.KindBadRequest, 0, ""},
		{"anthropic organization on hold", VendorAnthropic, Reply{Status: 400, Type: "invalid_request_error", Code: "organization_on_hold"}, llm.KindAuth, 0, ""},
		{"anthropic unknown type by status", VendorAnthropic, Reply{Status: 503, Type: "brand_new_error"}, llm.KindOverloaded, 0, ""},
		{"openai quota", VendorOpenAI, Reply{Status: 429, Type: "insufficient_quota", Code: "whatever"}, llm.KindQuota, 0, ""},
		{"openai rate limit, retry-after-ms first", VendorOpenAI, Reply{Status: 429, Code: "rate_limit_exceeded", Header: h("Retry-After-Ms", "1500", "Retry-After", "9", "X-Request-Id", "req_o")}, llm.KindRateLimited, 1500 * time.Millisecond, "req_o"},
		{"openai context", VendorOpenAI, Reply{Status: 400, Code: "context_length_exceeded"}, llm.KindContextLength, 0, ""},
		{"azure request id", VendorOpenAI, Reply{Status: 500, Header: h("Apim-Request-Id", "az_1")}, llm.KindServer, 0, "az_1"},
		{"google rate limit with RetryInfo", VendorGoogle, Reply{Status: 429, Type: "RESOURCE_EXHAUSTED", Message: "Quota exceeded for requests per minute", Body: retryInfo}, llm.KindRateLimited, 30 * time.Second, ""},
		{"google per-minute limit worded as a quota", VendorGoogle, Reply{Status: 429, Type: "RESOURCE_EXHAUSTED", Message: "You exceeded your current quota, please check your plan and billing details.",
			Body: []byte(`{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"7s"}]}}`)}, llm.KindRateLimited, 7 * time.Second, ""},
		{"google billing, no wait", VendorGoogle, Reply{Status: 429, Type: "RESOURCE_EXHAUSTED", Message: "You exceeded your current quota, please check your plan and billing details."}, llm.KindQuota, 0, ""},
		{"google daily quota", VendorGoogle, Reply{Status: 429, Type: "RESOURCE_EXHAUSTED", Message: "Quota exceeded for metric: generate_content_free_tier_requests, limit: 50 per day"}, llm.KindQuota, 0, ""},
		{"google unavailable", VendorGoogle, Reply{Status: 503, Type: "UNAVAILABLE"}, llm.KindOverloaded, 0, ""},
		{"google token count", VendorGoogle, Reply{Status: 400, Type: "INVALID_ARGUMENT", Message: "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."}, llm.KindContextLength, 0, ""},
		{"google permission", VendorGoogle, Reply{Status: 403, Type: "PERMISSION_DENIED"}, llm.KindAuth, 0, ""},
		{"google Retry-After header wins", VendorGoogle, Reply{Status: 429, Type: "RESOURCE_EXHAUSTED", Body: retryInfo, Header: h("Retry-After", "3")}, llm.KindRateLimited, 3 * time.Second, ""},
		{"bedrock throttling", VendorBedrock, Reply{Status: 429, Type: "ThrottlingException", Header: h("X-Amzn-Requestid", "aws_1")}, llm.KindRateLimited, 0, "aws_1"},
		{"bedrock exception with its URL", VendorBedrock, Reply{Status: 503, Type: "ServiceUnavailableException:http://internal.amazon.com/coral/com.amazon.bedrock/"}, llm.KindOverloaded, 0, ""},
		{"bedrock stream exception", VendorBedrock, Reply{Status: 200, Type: "throttlingException"}, llm.KindRateLimited, 0, ""},
		{"bedrock too long", VendorBedrock, Reply{Status: 400, Type: "ValidationException", Message: "Input is too long for requested model."}, llm.KindContextLength, 0, ""},
		{"bedrock model timeout", VendorBedrock, Reply{Status: 408, Type: "ModelTimeoutException"}, llm.KindTimeout, 0, ""},
		{"other by status", VendorOther, Reply{Status: 502}, llm.KindServer, 0, ""},
		{"a 2xx that is not an answer", VendorOther, Reply{Status: 200}, llm.KindServer, 0, ""},
		{"retry-after as a date", VendorOther, Reply{Status: 503, Header: h("Retry-After", "Tue, 01 Dec 2026 12:00:30 GMT")}, llm.KindOverloaded, 30 * time.Second, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.r.Received = now
			e := Classify("p", tc.v, tc.r)
			if e.Kind != tc.kind || e.RetryAfter != tc.wait || e.RequestID != tc.reqID || e.Provider != "p" || e.Status != tc.r.Status {
				t.Fatalf("Classify = kind %v wait %v id %q; want %v %v %q", e.Kind, e.RetryAfter, e.RequestID, tc.kind, tc.wait, tc.reqID)
			}
			if e.Detail != tc.r.Message || e.Type != tc.r.Type {
				t.Fatalf("Detail %q Type %q", e.Detail, e.Type)
			}
		})
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

func TestVendorRateLimit(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	a := VendorAnthropic.RateLimit(http.Header{
		"Anthropic-Ratelimit-Requests-Limit":     {"50"},
		"Anthropic-Ratelimit-Requests-Remaining": {" 49 "},
		"Anthropic-Ratelimit-Requests-Reset":     {"2026-12-01T12:00:05Z"},
		"Anthropic-Ratelimit-Tokens-Limit":       {"99999999999"}, // past int32: clamped
		"Anthropic-Ratelimit-Tokens-Remaining":   {"-1"},          // garbage: unset
	}, now)
	if a.Requests != (llm.Allowance{Limit: 50, Remaining: 49, Reset: now.Add(5 * time.Second)}) || a.Tokens.Limit != math.MaxInt32 || a.Tokens.Remaining != 0 {
		t.Fatalf("anthropic %+v", a)
	}
	o := VendorOpenAI.RateLimit(http.Header{"X-Ratelimit-Limit-Tokens": {"30000"}, "X-Ratelimit-Reset-Tokens": {"6m0s"}, "X-Ratelimit-Reset-Requests": {"2"}}, now)
	if o.Tokens != (llm.Allowance{Limit: 30000, Reset: now.Add(6 * time.Minute)}) || o.Requests.Reset != now.Add(2*time.Second) {
		t.Fatalf("openai %+v", o)
	}
	if g := VendorGoogle.RateLimit(http.Header{"X-Ratelimit-Limit-Tokens": {"1"}}, now); g != (llm.RateLimit{}) {
		t.Fatalf("google %+v", g)
	}
}

func TestResetDuration(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Duration{
		"1s": time.Second, "6m0s": 6 * time.Minute, "12ms": 12 * time.Millisecond,
		"1h2m3.5s": time.Hour + 2*time.Minute + 3500*time.Millisecond, "0": 0, "2": 2 * time.Second, "0.5": 500 * time.Millisecond,
	} {
		if got, ok := resetDuration(in, now); !ok || got.Sub(now) != want {
			t.Errorf("resetDuration(%q) = %v, %v; want now+%v", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "-1s", "soon", "1x"} {
		if got, ok := resetDuration(in, now); ok {
			t.Errorf("resetDuration(%q) = %v; want not ok", in, got)
		}
	}
}
