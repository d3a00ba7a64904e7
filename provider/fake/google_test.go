package fake_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/backstop-llm/backstop/provider/fake"
)

const geminiModel = "gemini-2.5-flash"

func geminiURL(base, method string) string {
	return base + "/v1beta/models/" + geminiModel + ":" + method
}

func vertexGeminiURL(base, method string) string {
	return base + "/v1/projects/p/locations/us-central1/publishers/google/models/" + geminiModel + ":" + method
}

const geminiBody = `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":64,"temperature":0.5}}`

type geminiResp struct {
	Candidates []struct {
		Content *struct {
			Role  string
			Parts []struct {
				Text         *string
				FunctionCall *struct {
					ID   string
					Name string
					Args map[string]any
				}
			}
		}
		FinishReason string
		Index        int
	}
	UsageMetadata struct {
		PromptTokenCount, CandidatesTokenCount, TotalTokenCount int
	}
	ModelVersion, ResponseID string
}

func TestGeminiGenerateContent(t *testing.T) {
	forEachMode(t, func(t *testing.T, s *fake.Server, c *http.Client, base string) {
		s.Script(geminiModel, fake.Answer("Hello from Gemini.").Usage(5, 3),
			fake.CallTools(fake.ToolCall{Name: "get_weather", Arguments: `{"city":"Paris"}`}),
			fake.Answer("x").Finish("MAX_TOKENS"))
		for i, tc := range []struct{ url, key string }{
			{geminiURL(base, "generateContent"), "X-Goog-Api-Key"},
			{geminiURL(base, "generateContent") + "?key=abc", ""},
			{vertexGeminiURL(base, "generateContent"), "Authorization"},
			{base + "/v1beta1/publishers/google/models/" + geminiModel + ":generateContent", "X-Goog-Api-Key"}, // express mode
		} {
			var hdr []string
			switch tc.key {
			case "X-Goog-Api-Key":
				hdr = []string{tc.key, "AIza-test"}
			case "Authorization":
				hdr = []string{tc.key, "Bearer ya29.t"}
			}
			r := post(t, c, tc.url, geminiBody, hdr...)
			var g geminiResp
			if err := json.Unmarshal([]byte(r.body), &g); err != nil || r.status != 200 || len(g.Candidates) != 1 {
				t.Fatalf("%d: %v %d %s", i, err, r.status, r.body)
			}
			cand := g.Candidates[0]
			switch i {
			case 0:
				if cand.Content.Role != "model" || *cand.Content.Parts[0].Text != "Hello from Gemini." || cand.FinishReason != "STOP" ||
					g.UsageMetadata.PromptTokenCount != 5 || g.UsageMetadata.CandidatesTokenCount != 3 || g.UsageMetadata.TotalTokenCount != 8 ||
					g.ModelVersion != geminiModel || g.ResponseID != "resp_fake_1" {
					t.Errorf("answer %s", r.body)
				}
			case 1:
				fc := cand.Content.Parts[0].FunctionCall
				if fc == nil || fc.Name != "get_weather" || fc.Args["city"] != "Paris" || fc.ID != "" || cand.FinishReason != "STOP" {
					t.Errorf("tool call %s", r.body)
				}
			case 2, 3:
				if cand.FinishReason != "MAX_TOKENS" {
					t.Errorf("finish %s", r.body)
				}
			}
		}
		calls := s.Calls(geminiModel)
		if len(calls) != 4 || calls[0].Format != fake.Gemini || calls[2].Format != fake.VertexGemini || calls[3].Format != fake.VertexGemini ||
			calls[0].Header.Get("X-Goog-Api-Key") != "[redacted]" {
			t.Errorf("calls %+v", calls)
		}
	})
}

func TestGeminiToolRoundTrip(t *testing.T) {
	s := fake.New()
	body := `{"contents":[{"role":"user","parts":[{"text":"weather?"}]},
		{"role":"model","parts":[{"functionCall":{"name":"get_weather","args":{"city":"Paris"}}}]},
		{"role":"user","parts":[{"functionResponse":{"name":"get_weather","response":{"temp": 21}}}]}],
		"tools":[{"functionDeclarations":[{"name":"get_weather","parameters":{"type":"object"}}]}],
		"system_instruction":{"parts":[{"text":"be brief"}]}}`
	r := post(t, s.Client(), geminiURL(s.URL(), "generateContent"), body, "X-Goog-Api-Key", "k")
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	c := s.Calls(geminiModel)[0]
	if len(c.Tools) != 1 || c.Tools[0] != "get_weather" || len(c.ToolResults) != 1 ||
		c.ToolResults[0] != (fake.ToolResult{ID: "get_weather", Content: `{"temp":21}`}) {
		t.Errorf("call %+v", c)
	}
}

func TestGeminiRequests(t *testing.T) {
	s := fake.New()
	c := s.Client()
	u := geminiURL(s.URL(), "generateContent")
	for _, tc := range []struct{ name, body, want string }{
		{"no contents", `{}`, "contents is not specified"},
		{"empty contents", `{"contents":[]}`, "contents is not specified"},
		{"empty parts", `{"contents":[{"role":"user","parts":[]}]}`, "parts must not be empty"},
		{"no parts", `{"contents":[{"role":"user"}]}`, "parts must not be empty"},
		{"bad role", `{"contents":[{"role":"assistant","parts":[{"text":"x"}]}]}`, "valid role: user, model"},
		{"empty part", `{"contents":[{"role":"user","parts":[{}]}]}`, "required oneof field 'data'"},
		{"two data", `{"contents":[{"role":"user","parts":[{"text":"a","inlineData":{"mimeType":"image/png","data":"AA=="}}]}]}`, "already set"},
		{"inline no data", `{"contents":[{"role":"user","parts":[{"inlineData":{"mimeType":"image/png"}}]}]}`, "mime_type and data"},
		{"call no name", `{"contents":[{"role":"model","parts":[{"functionCall":{"args":{}}}]}]}`, "contents[0].parts[0].function_call.name: Name cannot be empty."},
		{"call args not object", `{"contents":[{"role":"model","parts":[{"functionCall":{"name":"f","args":3}}]}]}`, "Invalid value at 'contents[0].parts[0].function_call.args' (type.googleapis.com/google.protobuf.Struct), 3"},
		{"response no name", `{"contents":[{"role":"user","parts":[{"functionResponse":{"response":{}}}]}]}`, "contents[0].parts[0].function_response.name: Name cannot be empty."},
		{"response not object", `{"contents":[{"role":"user","parts":[{"functionResponse":{"name":"f","response":"x"}}]}]}`, "Invalid value at 'contents[0].parts[0].function_response.response' (type.googleapis.com/google.protobuf.Struct), \\\"x\\\""},
		{"unknown field", `{"contents":[{"role":"user","parts":[{"text":"x"}]}],"foo":1}`, `Unknown name \"foo\"`},
		{"temperature", `{"contents":[{"parts":[{"text":"x"}]}],"generationConfig":{"temperature":3}}`, "temperature"},
		{"max tokens", `{"contents":[{"parts":[{"text":"x"}]}],"generationConfig":{"maxOutputTokens":0}}`, "maxOutputTokens"},
		{"mime", `{"contents":[{"parts":[{"text":"x"}]}],"generationConfig":{"responseMimeType":"text/html"}}`, "allowed mimetypes"},
		{"schema without mime", `{"contents":[{"parts":[{"text":"x"}]}],"generationConfig":{"responseSchema":{"type":"OBJECT"}}}`, "response_mime_type"},
		{"tool no name", `{"contents":[{"parts":[{"text":"x"}]}],"tools":[{"functionDeclarations":[{}]}]}`, "Name cannot be empty"},
		{"not json", `{`, "Invalid JSON payload"},
	} {
		r := post(t, c, u, tc.body, "X-Goog-Api-Key", "k")
		if r.status != 400 || !strings.Contains(r.body, `"status":"INVALID_ARGUMENT"`) || !strings.Contains(r.body, tc.want) {
			t.Errorf("%s: %d %s", tc.name, r.status, r.body)
		}
	}
	ok := `{"contents":[{"parts":[{"text":"x"}]}],"generationConfig":{"responseMimeType":"application/json","responseJsonSchema":{"type":"object"},"stopSequences":["END"]}}`
	if r := post(t, c, u, ok, "X-Goog-Api-Key", "k"); r.status != 200 {
		t.Errorf("structured output: %d %s", r.status, r.body)
	}
	if r := post(t, c, u, geminiBody); r.status != 403 || !strings.Contains(r.body, `"status":"PERMISSION_DENIED"`) {
		t.Errorf("no key: %d %s", r.status, r.body)
	}
	if r := post(t, c, vertexGeminiURL(s.URL(), "generateContent"), geminiBody); r.status != 401 || !strings.Contains(r.body, `"UNAUTHENTICATED"`) {
		t.Errorf("vertex no token: %d %s", r.status, r.body)
	}
	if r := post(t, c, geminiURL(s.URL(), "streamGenerateContent"), geminiBody, "X-Goog-Api-Key", "k"); r.status != 400 || !strings.Contains(r.body, "alt=sse") {
		t.Errorf("stream without alt=sse: %d %s", r.status, r.body)
	}
	r := post(t, c, u, `{"contents":[{"parts":[{"text":"x"}]}],"generationConfig":{"candidateCount":2}}`, "X-Goog-Api-Key", "k")
	if strings.Count(r.body, `"finishReason":"STOP"`) != 2 || !strings.Contains(r.body, `"index":1`) {
		t.Errorf("candidateCount: %s", r.body)
	}
}

func TestGeminiErrors(t *testing.T) {
	s := fake.New()
	c := s.Client()
	type status struct {
		Error struct {
			Code    int
			Message string
			Status  string
			Details []map[string]string
		}
	}
	for _, tc := range []struct {
		o      fake.Outcome
		code   int
		status string
		retry  string
	}{
		{fake.RateLimited("30"), 429, "RESOURCE_EXHAUSTED", "30s"},
		{fake.RateLimited("1.5"), 429, "RESOURCE_EXHAUSTED", "1.5s"},
		{fake.RateLimited(""), 429, "RESOURCE_EXHAUSTED", ""},
		{fake.SpendCap(), 429, "RESOURCE_EXHAUSTED", ""},
		{fake.Overloaded(), 503, "UNAVAILABLE", ""},
		{fake.ServerError(), 500, "INTERNAL", ""},
		{fake.BadRequest("bad"), 400, "INVALID_ARGUMENT", ""},
		{fake.ContextTooLong(), 400, "INVALID_ARGUMENT", ""},
		{fake.Status(403), 403, "PERMISSION_DENIED", ""},
		{fake.Status(404), 404, "NOT_FOUND", ""},
		{fake.Status(504), 504, "DEADLINE_EXCEEDED", ""},
	} {
		s.Script(geminiModel, tc.o)
		r := post(t, c, geminiURL(s.URL(), "generateContent"), geminiBody, "X-Goog-Api-Key", "k")
		var g status
		if err := json.Unmarshal([]byte(r.body), &g); err != nil || r.status != tc.code || g.Error.Code != tc.code || g.Error.Status != tc.status || g.Error.Message == "" {
			t.Errorf("%s: %d %s", tc.status, r.status, r.body)
			continue
		}
		got := ""
		if len(g.Error.Details) == 1 && g.Error.Details[0]["@type"] == "type.googleapis.com/google.rpc.RetryInfo" {
			got = g.Error.Details[0]["retryDelay"]
		}
		if got != tc.retry {
			t.Errorf("%s: retryDelay %q, want %q: %s", tc.status, got, tc.retry, r.body)
		}
	}
}

func TestGeminiStream(t *testing.T) {
	forEachMode(t, func(t *testing.T, s *fake.Server, c *http.Client, base string) {
		s.Script(geminiModel, fake.Answer("Hello there").Usage(5, 2),
			fake.Answer("Hello there").ToolCalls(fake.ToolCall{ID: "c1", Name: "f"}),
			fake.Answer("Hello there").ErrorAfter(1),
			fake.Answer("Hello there").CutAfter(1))
		u := geminiURL(base, "streamGenerateContent") + "?alt=sse"
		r := post(t, c, u, geminiBody, "X-Goog-Api-Key", "k")
		if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("%d %v", r.status, r.header)
		}
		events := strings.Split(strings.TrimSuffix(r.body, "\n\n"), "\n\n")
		if len(events) != 3 {
			t.Fatalf("events %q", events)
		}
		var texts []string
		for i, e := range events {
			var g geminiResp
			if err := json.Unmarshal([]byte(strings.TrimPrefix(e, "data: ")), &g); err != nil {
				t.Fatal(err)
			}
			texts = append(texts, *g.Candidates[0].Content.Parts[0].Text)
			if last := i == len(events)-1; last != (g.Candidates[0].FinishReason == "STOP") || (last && g.UsageMetadata.TotalTokenCount != 7) {
				t.Errorf("event %d: %s", i, e)
			}
		}
		if strings.Join(texts, "|") != "Hello| there|" {
			t.Errorf("texts %q", texts)
		}
		r = post(t, c, vertexGeminiURL(base, "streamGenerateContent")+"?alt=sse", geminiBody, "Authorization", "Bearer t")
		if !strings.Contains(r.body, `"functionCall":{"id":"c1","name":"f","args":{}}`) {
			t.Errorf("tool stream %s", r.body)
		}
		r = post(t, c, u, geminiBody, "X-Goog-Api-Key", "k")
		if !strings.HasSuffix(r.body, `data: {"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}`+"\n\n") {
			t.Errorf("ErrorAfter %s", r.body)
		}
		req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(geminiBody))
		req.Header.Set("X-Goog-Api-Key", "k")
		if _, _, err := readStream(t, c, req); err == nil {
			t.Error("CutAfter: no error")
		}
	})
}

func TestGeminiRefusalAndCache(t *testing.T) {
	s := fake.New()
	s.Script(geminiModel, fake.Refusal("no"), fake.Answer("hi").Usage(10, 2).Cached(4), fake.Refusal("no"))
	u := geminiURL(s.URL(), "generateContent")
	r := post(t, s.Client(), u, geminiBody, "X-Goog-Api-Key", "k")
	if !strings.Contains(r.body, `"candidates":[{"finishReason":"SAFETY","index":0}]`) {
		t.Errorf("refusal %s", r.body)
	}
	r = post(t, s.Client(), u, geminiBody, "X-Goog-Api-Key", "k")
	if !strings.Contains(r.body, `"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":2,"totalTokenCount":12,"cachedContentTokenCount":4}`) {
		t.Errorf("cached %s", r.body)
	}
	r = post(t, s.Client(), geminiURL(s.URL(), "streamGenerateContent")+"?alt=sse", geminiBody, "X-Goog-Api-Key", "k")
	if strings.Count(r.body, "data: ") != 1 || !strings.Contains(r.body, `"finishReason":"SAFETY"`) || strings.Contains(r.body, `"content"`) {
		t.Errorf("streamed refusal %s", r.body)
	}
}
