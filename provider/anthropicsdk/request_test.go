package anthropicsdk

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/suite"
)

// fullReq carries every kind of part, tools, a tool choice, a response
// schema, every parameter and Extra.
func fullReq() llm.Request {
	return llm.Request{
		Model:  "claude-test",
		System: "Be brief.",
		Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "Hi"},
			{Role: llm.RoleUser, Content: "Look:", Parts: []llm.Part{
				llm.TextPart("and"),
				llm.ImagePart("image/png", []byte("png")),
				llm.ImageURLPart("https://x.test/a.png"),
				llm.DocumentPart("application/pdf", []byte("%PDF")),
				llm.DocumentURLPart("https://x.test/a.pdf"),
				llm.DocumentPart("text/markdown; charset=utf-8", []byte("# notes")),
			}},
			{Role: llm.RoleAssistant, Parts: []llm.Part{
				llm.TextPart("Checking."),
				llm.ToolCallPart("toolu_01", "get_weather", json.RawMessage(`{"city": "Paris"}`)),
				llm.ToolCallPart("functions.get_time:1", "get_time", nil),
			}},
			{Role: llm.RoleUser, Parts: []llm.Part{
				llm.ToolResultPart("toolu_01", `{"temp": 21}`, false),
				llm.ToolResultPart("functions.get_time:1", "clock broken", true),
				llm.ToolResultPart("toolu_01", "", false),
			}},
		},
		Params: llm.Params{MaxTokens: 300, Temperature: llm.Float(0), TopP: llm.Float(0.9), Stop: []string{"END"},
			Extra: map[string]any{"metadata": map[string]string{"user_id": "u1"}, "top_k": 5, "max_tokens": 301, "a.b": true}},
		Tools: []llm.Tool{
			{Name: "get_weather", Description: "Weather of a city", InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)},
			{Name: "get_time"},
		},
		ToolChoice:     llm.UseTool("get_weather"),
		ResponseSchema: json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"],"additionalProperties":false}`),
	}
}

// normalize rewrites the native adapter's body into the SDK's equivalent
// forms: a system prompt and a text-only message content as arrays of one
// text block, a tool result's content as an array of one text block.
func normalize(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	block := func(s string) []any { return []any{map[string]any{"type": "text", "text": s}} }
	if s, ok := m["system"].(string); ok {
		m["system"] = block(s)
	}
	for _, msg := range m["messages"].([]any) {
		msg := msg.(map[string]any)
		if s, ok := msg["content"].(string); ok {
			msg["content"] = block(s)
			continue
		}
		for _, b := range msg["content"].([]any) {
			b := b.(map[string]any)
			if s, ok := b["content"].(string); ok && b["type"] == "tool_result" {
				b["content"] = block(s)
			}
		}
	}
	return m
}

// TestBodyMatchesNative sends the same request through this adapter and
// the native one: the bodies are the same JSON, but for the SDK's array
// forms of text, for Complete and Stream alike.
func TestBodyMatchesNative(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  llm.Request
	}{{"text only", userReq}, {"everything", fullReq()}, {"tool choice none", withChoice(llm.ToolChoice{Mode: llm.ToolNone})},
		{"tool choice any", withChoice(llm.ToolChoice{Mode: llm.ToolAny})}, {"tool choice auto", withChoice(llm.ToolChoice{})}} {
		t.Run(tc.name, func(t *testing.T) {
			sdk := suite.NewServer(t, suite.StreamOrComplete(happyStream, okBody))
			nat := suite.NewServer(t, suite.StreamOrComplete(happyStream, okBody))
			gotC, gotS := suite.Bodies(t, newProvider(t, sdk.URL), sdk, tc.req)
			wantC, wantS := suite.Bodies(t, nativeProvider(t, nat.URL), nat, tc.req)
			for _, pair := range [][2]map[string]any{{gotC, wantC}, {gotS, wantS}} {
				b, _ := json.Marshal(pair[1])
				want := normalize(t, b)
				if !reflect.DeepEqual(pair[0], want) {
					g, _ := json.Marshal(pair[0])
					w, _ := json.Marshal(want)
					t.Errorf("body\n got %s\nwant %s (native, normalized)", g, w)
				}
			}
			if gotS["stream"] != true {
				t.Errorf("stream body without stream: true")
			}
		})
	}
}

// TestRequestHeaders: the request goes where the client says, with its
// credential, once.
func TestRequestHeaders(t *testing.T) {
	s := suite.NewServer(t, suite.Respond(200, okBody, "Content-Type", "application/json"))
	if _, err := newProvider(t, s.URL).Complete(context.Background(), userReq); err != nil {
		t.Fatal(err)
	}
	r := s.Last()
	if r.Method != "POST" || r.Path != "/v1/messages" || r.Header.Get("Authorization") != "Bearer "+testKey ||
		r.Header.Get("Anthropic-Version") == "" || r.Header.Get("X-Stainless-Retry-Count") != "0" {
		t.Errorf("%s %s %v", r.Method, r.Path, r.Header)
	}
}

func TestSuccess(t *testing.T) {
	reset := time.Now().Add(time.Minute).UTC().Truncate(time.Second)
	s := suite.NewServer(t, suite.Respond(200, okBody, "Content-Type", "application/json", "Request-Id", "req_ok",
		"Anthropic-Ratelimit-Requests-Limit", "50", "Anthropic-Ratelimit-Requests-Remaining", "49",
		"Anthropic-Ratelimit-Requests-Reset", reset.Format(time.RFC3339),
		"Anthropic-Ratelimit-Input-Tokens-Limit", "30000", "Anthropic-Ratelimit-Input-Tokens-Remaining", "29000"))
	res, err := newProvider(t, s.URL).Complete(context.Background(), userReq)
	if err != nil {
		t.Fatal(err)
	}
	want := llm.Response{Text: "Hello, world", Model: "claude-test-20260101", ID: "msg_01", RequestID: "req_ok",
		FinishReason: "end_turn", Finish: llm.FinishStop, Usage: llm.Usage{InputTokens: 20, OutputTokens: 5, CacheReadTokens: 7, CacheWriteTokens: 3},
		RateLimit: llm.RateLimit{Requests: llm.Allowance{Limit: 50, Remaining: 49, Reset: reset},
			InputTokens: llm.Allowance{Limit: 30000, Remaining: 29000}}}
	if !reflect.DeepEqual(*res, want) {
		t.Errorf("\n got %+v\nwant %+v", *res, want)
	}
	nat, err := nativeProvider(t, s.URL).Complete(context.Background(), userReq)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res, nat) {
		t.Errorf("\n got %+v\nwant %+v (native)", *res, *nat)
	}
}

func TestRefusal(t *testing.T) {
	body := strings.Replace(okBody, `"end_turn"`, `"refusal"`, 1)
	s := suite.NewServer(t, suite.Respond(200, body, "Content-Type", "application/json", "Request-Id", "req_r"))
	e := suite.CompleteErr(t, newProvider(t, s.URL), context.Background(), userReq, testKey)
	if e.Kind != llm.KindContentFilter || e.Code != "refusal" || e.RequestID != "req_r" || e.Status != 200 {
		t.Errorf("%#v", e)
	}
	same(t, e, suite.CompleteErr(t, nativeProvider(t, s.URL), context.Background(), userReq, testKey))
}

// toolBody is a whole answer calling two tools between text blocks, one
// of them with an id the request translated.
const toolBody = `{"id":"msg_01","type":"message","role":"assistant","model":"claude-test",
"content":[{"type":"text","text":"Let me check."},
{"type":"tool_use","id":"toolu_01A","name":"get_weather","input":{"city": "Paris", "unit": "c"}},
{"type":"thinking","thinking":"and the time"},
{"type":"tool_use","id":"toolu_01B","name":"get_time"},
{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"x"}}],
"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":5}}`

// TestToolsRoundTrip: a tool_use answer becomes ToolCalls; the history
// answering them (with an id another provider issued) is sent with the
// calls and results paired, the foreign id translated on the way out and
// back.
func TestToolsRoundTrip(t *testing.T) {
	s := suite.NewServer(t, suite.Respond(200, toolBody, "Content-Type", "application/json"))
	p := newProvider(t, s.URL)
	req := userReq
	req.Tools = []llm.Tool{{Name: "get_weather"}, {Name: "get_time"}}
	res, err := p.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	wantCalls := []llm.ToolCall{
		{ID: "toolu_01A", Name: "get_weather", Arguments: json.RawMessage(`{"city": "Paris", "unit": "c"}`)},
		{ID: "toolu_01B", Name: "get_time", Arguments: json.RawMessage(`{}`)},
	}
	if res.Finish != llm.FinishToolUse || res.Text != "Let me check." || !reflect.DeepEqual(res.ToolCalls, wantCalls) {
		t.Fatalf("%+v", res)
	}

	// The history: the first call's id replaced by one of another
	// provider's shape, which the API would refuse.
	foreign := "functions.get_weather:0"
	calls := append([]llm.ToolCall(nil), res.ToolCalls...)
	calls[0].ID = foreign
	req.Messages = append(req.Messages,
		llm.Message{Role: llm.RoleAssistant, Content: res.Text, Parts: []llm.Part{{ToolCall: &calls[0]}, {ToolCall: &calls[1]}}},
		llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.ToolResultPart(foreign, `{"temp":21}`, false), llm.ToolResultPart("toolu_01B", "no clock", true)}})
	// The server answers with the translated id, as the API echoes it.
	var sent struct {
		Messages []struct {
			Role    string `json:"role"`
			Content []struct {
				Type      string          `json:"type"`
				ID        string          `json:"id"`
				Name      string          `json:"name"`
				Input     json.RawMessage `json:"input"`
				ToolUseID string          `json:"tool_use_id"`
				IsError   bool            `json:"is_error"`
				Content   []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"content"`
		} `json:"messages"`
	}
	var echo *suite.Server
	echo = suite.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
		json.Unmarshal(echo.Last().Body, &sent)
		id := sent.Messages[1].Content[1].ID
		suite.Respond(200, strings.Replace(toolBody, "toolu_01A", id, 1), "Content-Type", "application/json")(w, r)
	})
	res2, err := newProvider(t, echo.URL).Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(sent.Messages) != 3 {
		t.Fatalf("sent %d messages", len(sent.Messages))
	}
	a, u := sent.Messages[1], sent.Messages[2]
	out := a.Content[1].ID
	if a.Role != "assistant" || a.Content[0].Type != "text" || a.Content[1].Type != "tool_use" || !strings.HasPrefix(out, "toolu_") || out == foreign ||
		a.Content[1].Name != "get_weather" || canonical(t, a.Content[1].Input) != `{"city":"Paris","unit":"c"}` ||
		a.Content[2].ID != "toolu_01B" || string(a.Content[2].Input) != "{}" {
		t.Errorf("assistant message %+v", a)
	}
	if u.Role != "user" || u.Content[0].Type != "tool_result" || u.Content[0].ToolUseID != out || u.Content[0].IsError ||
		len(u.Content[0].Content) != 1 || u.Content[0].Content[0].Text != `{"temp":21}` ||
		u.Content[1].ToolUseID != "toolu_01B" || !u.Content[1].IsError {
		t.Errorf("tool results %+v", u)
	}
	// Back as the caller's, and renamed since the history holds it (as it
	// holds toolu_01B, the answer's second call).
	if got := callIDs(res2.ToolCalls); !slices.Equal(got, []string{foreign + "_2", "toolu_01B_2"}) {
		t.Errorf("the echoed ids came back as %q; want the caller's %q renamed, and toolu_01B_2", got, foreign)
	}
}

// withChoice is fullReq with tool choice ch.
func withChoice(ch llm.ToolChoice) llm.Request {
	r := fullReq()
	r.ToolChoice = ch
	return r
}
