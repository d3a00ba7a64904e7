package fake_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/backstop-llm/backstop/provider/fake"
)

const azureDeployment = "my-gpt-4o"

func azureURL(base, version string) string {
	u := base + "/openai/deployments/" + azureDeployment + "/chat/completions"
	if version != "" {
		u += "?api-version=" + version
	}
	return u
}

const azureBody = `{"messages":[{"role":"user","content":"hi"}]}`

func TestAzureChatCompletions(t *testing.T) {
	forEachMode(t, func(t *testing.T, s *fake.Server, c *http.Client, base string) {
		s.Script(azureDeployment, fake.Answer("Hello from Azure."), fake.Answer("Hello there"),
			fake.CallTools(fake.ToolCall{Name: "f", Arguments: `{"a":1}`}))
		r := post(t, c, azureURL(base, "2024-10-21"), azureBody, "Api-Key", "azkey")
		if r.status != 200 || !strings.Contains(r.body, `"object":"chat.completion"`) || !strings.Contains(r.body, `"content":"Hello from Azure."`) ||
			!strings.Contains(r.body, `"model":"`+azureDeployment+`"`) || r.header.Get("X-Ratelimit-Limit-Requests") == "" {
			t.Fatalf("%d %v %s", r.status, r.header, r.body)
		}
		r = post(t, c, azureURL(base, "2025-04-01-preview"), `{"model":"x","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			"Authorization", "Bearer entra-token")
		if r.status != 200 || !strings.Contains(r.body, `"content":" there"`) || !strings.HasSuffix(r.body, "data: [DONE]\n\n") {
			t.Fatalf("%d %s", r.status, r.body)
		}
		r = post(t, c, azureURL(base, "2024-10-21"), azureBody, "Api-Key", "azkey")
		if !strings.Contains(r.body, `"tool_calls":[{"id":"call_fake_3_0","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]`) ||
			!strings.Contains(r.body, `"finish_reason":"tool_calls"`) {
			t.Errorf("tools %s", r.body)
		}
		calls := s.Calls(azureDeployment)
		if len(calls) != 3 || calls[0].Format != fake.Azure || calls[0].Header.Get("Api-Key") != "[redacted]" {
			t.Errorf("calls %+v", calls)
		}
	})
}

func TestAzureV1(t *testing.T) {
	s := fake.New()
	s.Script("gpt-4o-mini", fake.Answer("v1"))
	r := post(t, s.Client(), s.URL()+"/openai/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`, "Api-Key", "k")
	if r.status != 200 || !strings.Contains(r.body, `"content":"v1"`) || s.Calls("gpt-4o-mini")[0].Format != fake.Azure {
		t.Fatalf("%d %s", r.status, r.body)
	}
	r = post(t, s.Client(), s.URL()+"/openai/v1/chat/completions", azureBody, "Api-Key", "k")
	if r.status != 400 || !strings.Contains(r.body, "model parameter") {
		t.Errorf("no model: %d %s", r.status, r.body)
	}
}

func TestAzureRequests(t *testing.T) {
	s := fake.New()
	c := s.Client()
	for _, tc := range []struct {
		name, url, body string
		headers         []string
		status          int
		want            string
	}{
		{"no api-version", azureURL(s.URL(), ""), azureBody, []string{"Api-Key", "k"}, 404, `{"error":{"code":"404","message":"Resource not found"}}`},
		{"bad api-version", azureURL(s.URL(), "latest"), azureBody, []string{"Api-Key", "k"}, 400, `"code":"BadRequest","message":"API version not supported"`},
		{"old api-version", azureURL(s.URL(), "2022-03-01-preview"), azureBody, []string{"Api-Key", "k"}, 400, "API version not supported"},
		{"no key", azureURL(s.URL(), "2024-10-21"), azureBody, nil, 401, `"code":"401","message":"Access denied`},
		{"bad body", azureURL(s.URL(), "2024-10-21"), `{"messages":[]}`, []string{"Api-Key", "k"}, 400, "empty array"},
		{"unknown field", azureURL(s.URL(), "2024-10-21"), `{"foo":1,"messages":[{"role":"user","content":"hi"}]}`, []string{"Api-Key", "k"}, 400, "Unrecognized request argument supplied: foo"},
		{"data_sources", azureURL(s.URL(), "2024-10-21"), `{"data_sources":[],"messages":[{"role":"user","content":"hi"}]}`, []string{"Api-Key", "k"}, 200, ""},
	} {
		r := post(t, c, tc.url, tc.body, tc.headers...)
		if r.status != tc.status || !strings.Contains(r.body, tc.want) {
			t.Errorf("%s: %d %s", tc.name, r.status, r.body)
		}
	}
}

func TestAzureErrors(t *testing.T) {
	s := fake.New()
	c := s.Client()
	for _, tc := range []struct {
		o      fake.Outcome
		status int
		want   string
	}{
		{fake.RateLimited("7"), 429, `"code":"429","message":"Requests to the ChatCompletions_Create Operation`},
		{fake.Overloaded(), 503, `"type":"server_error"`},
		{fake.ServerError(), 500, `"type":"server_error"`},
		{fake.BadRequest("nope"), 400, `"message":"nope"`},
		{fake.ContextTooLong(), 400, `"code":"context_length_exceeded"`},
		{fake.SpendCap(), 429, `"insufficient_quota"`},
		{fake.Status(404), 404, `"code":"DeploymentNotFound"`},
	} {
		s.Script(azureDeployment, tc.o)
		r := post(t, c, azureURL(s.URL(), "2024-10-21"), azureBody, "Api-Key", "k")
		if r.status != tc.status || !strings.Contains(r.body, tc.want) {
			t.Errorf("%d: %d %s", tc.status, r.status, r.body)
		}
	}
	s.Script(azureDeployment, fake.RateLimited("7"))
	r := post(t, c, azureURL(s.URL(), "2024-10-21"), azureBody, "Api-Key", "k")
	if !strings.Contains(r.body, "Please retry after 7 seconds.") || r.header.Get("Retry-After") != "7" {
		t.Errorf("retry: %v %s", r.header, r.body)
	}
}
