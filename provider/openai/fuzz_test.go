package openai

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/backstop-llm/backstop/internal/classify"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/openaiwire"
	"github.com/backstop-llm/backstop/provider/internal/suite"
	"github.com/backstop-llm/backstop/provider/internal/wire"
)

func fuzzReply(status int, body []byte) *wire.Reply {
	return &wire.Reply{Status: status, Body: body, Received: time.Now(), Header: http.Header{
		"X-Request-Id":               {"req_1"},
		"Retry-After-Ms":             {"1500"},
		"X-Should-Retry":             {"true"},
		"X-Ratelimit-Reset-Requests": {"1s"},
	}}
}

func FuzzParseError(f *testing.F) {
	p := newProvider(f, "http://127.0.0.1")
	suite.FuzzParseError(f, suite.ErrorFuzz{Provider: "openai", Key: testKey,
		Seeds: []suite.Reply{
			{Status: 429, Body: `{"error":{"message":"Rate limit reached. Please try again in 1.574s.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`},
			{Status: 429, Body: `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`},
			{Status: 400, Body: `{"error":{"message":"maximum context length","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`},
			{Status: 400, Body: `{"error":{"message":"m","type":1,"code":-2.5e3}}`},
			{Status: 404, Body: `{"error":"model not found"}`},
			{Status: 502, Body: "<html><head><title>502 Bad Gateway</title></head></html>"},
			{Status: 200, Body: `{"error":{"code":"content_filter"}}`},
			{Status: 500, Body: ""},
			{Status: 0, Body: `{"error":null}`},
		},
		Parse: func(status int, body []byte) *llm.Error { return p.parseError(fuzzReply(status, body)) },
		Check: func(t *testing.T, e *llm.Error, body []byte) {
			if e.RequestID != "req_1" || e.RetryAfter != 1500*time.Millisecond || e.ShouldRetry == nil || !*e.ShouldRetry ||
				!e.RateLimit.Requests.Reported() {
				t.Fatalf("headers lost: %#v", e)
			}
		}})
}

func FuzzParseResponse(f *testing.F) {
	p := newProvider(f, "http://127.0.0.1")
	suite.FuzzParseResponse(f, suite.ResponseFuzz{Provider: "openai", Key: testKey,
		Seeds: []string{
			okBody,
			`{"choices":[{"message":{"content":null,"refusal":"no"},"finish_reason":"stop"}]}`,
			`{"choices":[{"message":{"content":"x"},"finish_reason":"content_filter"}],"usage":{"prompt_tokens":-1}}`,
			`{"choices":[],"error":{"message":"x","code":"rate_limit_exceeded"}}`,
			`{"choices":null}`, `[]`, `"text"`, ``,
			`{"choices":[{"message":{"content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}}]},"finish_reason":"tool_calls"}]}`,
			`{"choices":[{"message":{"tool_calls":[{"id":"` + translated + `","function":{"name":"f","arguments":"{"}},{"function":{"name":"g","arguments":{"a":[1]}}},{"id":"c","function":{"name":"","arguments":null}}]}}]}`,
			`{"choices":[{"message":{"tool_calls":[{"id":1,"function":{"name":"f"}}]}}]}`,
			`{"choices":[{"message":{"tool_calls":{}}}]}`,
		},
		Parse: func(body []byte) (*llm.Response, error) {
			ids := openaiwire.ToolIDs()
			ids.Out(historyID)
			calls := wire.NewCallIDs(history, &ids)
			return p.parse(fuzzReply(200, body), &calls)
		},
		Check: func(t *testing.T, body []byte, res *llm.Response) {
			if !json.Valid(body) || res.RequestID != "req_1" || !res.RateLimit.Requests.Reported() || res.Finish != classify.FinishOf(res.FinishReason) {
				t.Fatalf("accepted %q as %+v", body, res)
			}
			for _, c := range res.ToolCalls {
				if c.ID == "" || c.ID == translated || c.Name == "" || !json.Valid(c.Arguments) {
					t.Fatalf("tool call %q %q %s from %q", c.ID, c.Name, c.Arguments, body)
				}
			}
			suite.CheckToolIDs(t, history, res.ToolCalls)
		}})
}

// historyID is a tool-call id of a history that OpenAI would refuse;
// translated is the id it goes out as, which an answer echoing it must
// turn back into historyID (then renamed, since history holds it).
const historyID = "functions.get_weather:0"

var history = []llm.Message{{Role: llm.RoleAssistant, Parts: []llm.Part{llm.ToolCallPart(historyID, "get_weather", nil)}}}

var translated = func() string { ids := openaiwire.ToolIDs(); return ids.Out(historyID) }()
