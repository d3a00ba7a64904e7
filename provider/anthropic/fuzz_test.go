package anthropic

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/suite"
	"github.com/backstop-llm/backstop/provider/internal/wire"
)

func fuzzReply(status int, body []byte) *wire.Reply {
	return &wire.Reply{Status: status, Body: body, Received: time.Now(), Header: http.Header{
		"Request-Id":     {"req_1"},
		"Retry-After":    {"3"},
		"X-Should-Retry": {"false"},
	}}
}

func FuzzParseError(f *testing.F) {
	for _, s := range []struct {
		status int
		body   string
	}{
		{529, `{"type":"error","error":{"details":null,"type":"overloaded_error","message":"Overloaded"},"request_id":"req_011CS"}`},
		{429, `{"type":"error","error":{"type":"rate_limit_error","message":"limit","details":{"error_code":"enforced_spend_limit_reached"}},"request_id":"req_1"}`},
		{400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}`},
		{401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`},
		{502, "<html><head><title>502 Bad Gateway</title></head></html>"},
		{500, `{"type":"error","error":{"type":"api_error","message":"\u00e9\ud800"}}`},
		{200, `{"type":"error","error":null}`},
		{404, ""},
		{0, `{"error":{"details":"x"}}`},
	} {
		f.Add(s.status, []byte(s.body), uint(len(s.body)/2))
	}
	p := newProvider(f, "http://127.0.0.1")
	f.Fuzz(func(t *testing.T, status int, body []byte, keyAt uint) {
		body = suite.WithKey(body, testKey, keyAt)
		e := suite.CheckError(t, p.parseError(fuzzReply(status, body)), "anthropic", testKey, status)
		for _, code := range []string{"enforced_spend_limit_reached", "contract_spend_limit_reached", "linked_organization_spend_limit_reached"} {
			if bytes.Contains(body, []byte(code)) && e.Kind != llm.KindQuota {
				t.Fatalf("spend limit %s in the body but Kind %v", code, e.Kind)
			}
		}
		if e.RequestID == "" || e.RetryAfter != 3*time.Second || e.ShouldRetry == nil || *e.ShouldRetry {
			t.Fatalf("headers lost: %#v", e)
		}
	})
}

func FuzzParseResponse(f *testing.F) {
	for _, s := range []string{
		okBody,
		`{"id":"m","type":"message","content":[],"stop_reason":"refusal"}`,
		`{"content":[{"type":"text","text":"a"},{"type":"text"},{"text":"b"}],"usage":{"input_tokens":-1}}`,
		`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
		`{"content":null}`, `[]`, `"text"`, ``,
	} {
		f.Add([]byte(s), uint(0))
	}
	p := newProvider(f, "http://127.0.0.1")
	f.Fuzz(func(t *testing.T, body []byte, keyAt uint) {
		if keyAt%2 == 1 { // half the runs echo the key somewhere
			body = suite.WithKey(body, testKey, keyAt/2)
		}
		res, err := p.parse(fuzzReply(200, body))
		if err != nil {
			if res != nil {
				t.Fatal("both a response and an error")
			}
			suite.CheckError(t, err, "anthropic", testKey, 200)
			return
		}
		if !json.Valid(body) || res.RequestID != "req_1" {
			t.Fatalf("accepted %q as %+v", body, res)
		}
	})
}
