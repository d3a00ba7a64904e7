package fake_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/backstop-llm/backstop/provider/fake"
)

const vertexModel = "claude-sonnet-4-5@20250929"

func vertexURL(base, model, method string) string {
	return base + "/v1/projects/my-proj/locations/us-east5/publishers/anthropic/models/" + model + ":" + method
}

func vertexBody(stream bool) string {
	s := ""
	if stream {
		s = `"stream":true,`
	}
	return `{"anthropic_version":"vertex-2023-10-16",` + s + `"max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`
}

func vertexPost(t *testing.T, c *http.Client, base, method, body string) result {
	t.Helper()
	return post(t, c, vertexURL(base, vertexModel, method), body, "Authorization", "Bearer ya29.token")
}

func TestVertexRawPredict(t *testing.T) {
	forEachMode(t, func(t *testing.T, s *fake.Server, c *http.Client, base string) {
		s.Script(vertexModel, fake.Answer("Hello from Vertex."), fake.Answer("Hello there"),
			fake.CallTools(fake.ToolCall{Name: "lookup", Arguments: `{"q":"x"}`}))
		r := vertexPost(t, c, base, "rawPredict", vertexBody(false))
		if r.status != 200 || !strings.Contains(r.body, `"text":"Hello from Vertex."`) || !strings.Contains(r.body, `"model":"`+vertexModel+`"`) ||
			r.header.Get("Request-Id") != "req_fake_1" {
			t.Fatalf("%d %v %s", r.status, r.header, r.body)
		}
		r = vertexPost(t, c, base, "streamRawPredict", vertexBody(true))
		if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream") ||
			!strings.Contains(r.body, "event: message_start") || !strings.Contains(r.body, `"text":" there"`) ||
			!strings.HasSuffix(r.body, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n") {
			t.Fatalf("%d %v %s", r.status, r.header, r.body)
		}
		r = vertexPost(t, c, base, "rawPredict", vertexBody(false))
		if r.status != 200 || !strings.Contains(r.body, `"type":"tool_use"`) || !strings.Contains(r.body, `"stop_reason":"tool_use"`) {
			t.Fatalf("%d %s", r.status, r.body)
		}
		calls := s.Calls(vertexModel)
		if len(calls) != 3 || calls[0].Format != fake.Vertex || calls[0].Header.Get("Authorization") != "Bearer [redacted]" {
			t.Errorf("calls %+v", calls)
		}
	})
}

func TestVertexRequests(t *testing.T) {
	s := fake.New()
	c := s.Client()
	for _, tc := range []struct {
		name, body, want string
		status           int
	}{
		{"sdk version", strings.Replace(vertexBody(false), "vertex-2023-10-16", "2026-10-21", 1), "", 200},
		{"no version", `{"max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`, "anthropic_version", 400},
		{"bad field", strings.Replace(vertexBody(false), `"max_tokens"`, `"foo":1,"max_tokens"`, 1), "foo: Extra inputs are not permitted", 400},
		{"not json", "{", `"status":"INVALID_ARGUMENT"`, 400},
	} {
		r := vertexPost(t, c, s.URL(), "rawPredict", tc.body)
		if r.status != tc.status || !strings.Contains(r.body, tc.want) {
			t.Errorf("%s: %d %s", tc.name, r.status, r.body)
		}
	}
	r := post(t, c, vertexURL(s.URL(), vertexModel, "rawPredict"), vertexBody(false))
	if r.status != 401 || !strings.Contains(r.body, `"status":"UNAUTHENTICATED"`) {
		t.Errorf("no token: %d %s", r.status, r.body)
	}
	r = post(t, c, vertexURL(s.URL(), vertexModel, "countTokens"), vertexBody(false), "Authorization", "Bearer t")
	if r.status != 404 {
		t.Errorf("unknown method: %d", r.status)
	}
}

func TestVertexErrors(t *testing.T) {
	s := fake.New()
	c := s.Client()
	s.Script(vertexModel, fake.RateLimited("30"), fake.Overloaded(), fake.ServerError(), fake.BadRequest("nope"), fake.Status(404))
	r := vertexPost(t, c, s.URL(), "rawPredict", vertexBody(false))
	var g struct {
		Error struct {
			Code    int
			Message string
			Status  string
			Details []map[string]string
		}
	}
	if err := json.Unmarshal([]byte(r.body), &g); err != nil || r.status != 429 || g.Error.Code != 429 || g.Error.Status != "RESOURCE_EXHAUSTED" ||
		len(g.Error.Details) != 1 || g.Error.Details[0]["@type"] != "type.googleapis.com/google.rpc.RetryInfo" ||
		g.Error.Details[0]["retryDelay"] != "30s" || r.header.Get("Retry-After") != "30" {
		t.Errorf("rate limit: %d %v %s", r.status, r.header, r.body)
	}
	r = vertexPost(t, c, s.URL(), "rawPredict", vertexBody(false))
	if r.status != 529 || !strings.Contains(r.body, `"type":"overloaded_error"`) {
		t.Errorf("overloaded: %d %s", r.status, r.body)
	}
	r = vertexPost(t, c, s.URL(), "rawPredict", vertexBody(false))
	if r.status != 500 || !strings.Contains(r.body, `"type":"api_error"`) {
		t.Errorf("server error: %d %s", r.status, r.body)
	}
	r = vertexPost(t, c, s.URL(), "streamRawPredict", vertexBody(true))
	if r.status != 400 || !strings.Contains(r.body, `"message":"nope"`) || !strings.Contains(r.body, `"invalid_request_error"`) {
		t.Errorf("bad request: %d %s", r.status, r.body)
	}
	r = vertexPost(t, c, s.URL(), "rawPredict", vertexBody(false))
	if r.status != 404 || !strings.Contains(r.body, `"status":"NOT_FOUND"`) {
		t.Errorf("not found: %d %s", r.status, r.body)
	}
}
