package anthropic

// The request body of a whole conversation: parts, tools, tool choice,
// native structured output and tool-call ids. The expected shapes are the
// ones anthropic-sdk-go v2.15.0 marshals (ImageBlockParam,
// DocumentBlockParam, ToolUseBlockParam, ToolResultBlockParam, ToolParam,
// ToolChoiceUnionParam, OutputConfigParam) and its test fixtures show.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/suite"
)

// sentBody sends req with Complete and returns the body the server got.
func sentBody(t *testing.T, req llm.Request) []byte {
	t.Helper()
	s := suite.NewServer(t, suite.Respond(200, okBody))
	if _, err := newProvider(t, s.URL).Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	return s.Last().Body
}

// sentField returns the JSON of the top-level field key of the body req
// is sent as, compacted; "" when absent.
func sentField(t *testing.T, req llm.Request, key string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(sentBody(t, req), &m); err != nil {
		t.Fatal(err)
	}
	return compact(t, m[key])
}

func compact(t *testing.T, b []byte) string {
	t.Helper()
	if len(b) == 0 {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatalf("not JSON: %v: %s", err, b)
	}
	return buf.String()
}

// oldRequest and oldMessage are the request body as the adapter sent it
// before conversations had parts: a text-only request must still be sent
// byte for byte as they marshal.
type oldRequest struct {
	Model         string       `json:"model"`
	MaxTokens     int          `json:"max_tokens"`
	System        string       `json:"system,omitempty"`
	Messages      []oldMessage `json:"messages"`
	Temperature   *float64     `json:"temperature,omitempty"`
	TopP          *float64     `json:"top_p,omitempty"`
	StopSequences []string     `json:"stop_sequences,omitempty"`
}

type oldMessage struct {
	Role    llm.Role `json:"role"`
	Content string   `json:"content"`
}

func TestTextOnlyBodyUnchanged(t *testing.T) {
	for name, req := range map[string]llm.Request{
		"minimal": userReq,
		"every param": {Model: "claude-test", System: "Be <brief> & kind.", Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "Hi \"there\" <b>"}, {Role: llm.RoleAssistant, Content: "Hello"}, {Role: llm.RoleUser, Content: ""},
		}, Params: llm.Params{MaxTokens: 300, Temperature: llm.Float(0), TopP: llm.Float(0.9), Stop: []string{"END"}}},
	} {
		t.Run(name, func(t *testing.T) {
			old := oldRequest{Model: req.Model, MaxTokens: req.Params.MaxTokens, System: req.System,
				Temperature: req.Params.Temperature, TopP: req.Params.TopP, StopSequences: req.Params.Stop}
			if old.MaxTokens == 0 {
				old.MaxTokens = defaultMaxTokens
			}
			for _, m := range req.Messages {
				old.Messages = append(old.Messages, oldMessage{Role: m.Role, Content: m.Content})
			}
			var want bytes.Buffer
			enc := json.NewEncoder(&want)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(old); err != nil {
				t.Fatal(err)
			}
			if got := sentBody(t, req); string(got) != strings.TrimSuffix(want.String(), "\n") {
				t.Errorf("body\n got %s\nwant %s", got, want.String())
			}
		})
	}
	const golden = `{"model":"claude-test","max_tokens":1024,"messages":[{"role":"user","content":"Hi"}]}`
	if got := sentBody(t, userReq); string(got) != golden {
		t.Errorf("body %s; want %s", got, golden)
	}
}

func TestRequestParts(t *testing.T) {
	pdf := []byte("%PDF-1.7 fake")
	req := llm.Request{Model: "claude-test", Messages: []llm.Message{
		{Role: llm.RoleUser, Content: "Look:", Parts: []llm.Part{
			llm.TextPart("and this"),
			llm.ImagePart("image/png", []byte{0x89, 'P', 'N', 'G'}),
			llm.ImageURLPart("https://example.com/cat.jpg"),
			llm.DocumentPart("application/pdf", pdf),
			llm.DocumentURLPart("https://example.com/paper.pdf"),
			llm.DocumentPart("text/plain; charset=utf-8", []byte("plain <text> & \"quotes\"")),
		}},
		{Role: llm.RoleAssistant, Parts: []llm.Part{
			llm.TextPart("Let me check."),
			llm.ToolCallPart("toolu_01A", "get_weather", json.RawMessage(`{"city": "Paris"}`)),
			llm.ToolCallPart("toolu_01B", "get_time", nil),
		}},
		{Role: llm.RoleUser, Parts: []llm.Part{
			llm.ToolResultPart("toolu_01A", "15 degrees", false),
			llm.ToolResultPart("toolu_01B", "clock broken", true),
			llm.TextPart("Thanks"),
		}},
	}}
	want := `[` +
		`{"role":"user","content":[` +
		`{"type":"text","text":"Look:"},` +
		`{"type":"text","text":"and this"},` +
		`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw=="}},` +
		`{"type":"image","source":{"type":"url","url":"https://example.com/cat.jpg"}},` +
		`{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0xLjcgZmFrZQ=="}},` +
		`{"type":"document","source":{"type":"url","url":"https://example.com/paper.pdf"}},` +
		`{"type":"document","source":{"type":"text","media_type":"text/plain","data":"plain <text> & \"quotes\""}}]},` +
		`{"role":"assistant","content":[` +
		`{"type":"text","text":"Let me check."},` +
		`{"type":"tool_use","id":"toolu_01A","name":"get_weather","input":{"city":"Paris"}},` +
		`{"type":"tool_use","id":"toolu_01B","name":"get_time","input":{}}]},` +
		`{"role":"user","content":[` +
		`{"type":"tool_result","tool_use_id":"toolu_01A","content":"15 degrees"},` +
		`{"type":"tool_result","tool_use_id":"toolu_01B","content":"clock broken","is_error":true},` +
		`{"type":"text","text":"Thanks"}]}]`
	if got := sentField(t, req, "messages"); got != want {
		t.Errorf("messages\n got %s\nwant %s", got, want)
	}
}

// TestRequestPartsSDKShapes checks each block against the JSON
// anthropic-sdk-go's fixtures and param types give for it.
func TestRequestPartsSDKShapes(t *testing.T) {
	tests := []struct {
		name string
		role llm.Role
		part llm.Part
		want string
	}{
		// message_test.go: {"type":"tool_result","content":"error message","tool_use_id":"123"}
		{"tool result", llm.RoleUser, llm.ToolResultPart("123", "error message", false), `{"type":"tool_result","content":"error message","tool_use_id":"123"}`},
		// messageutil_test.go: {"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}
		{"tool result without content", llm.RoleUser, llm.ToolResultPart("123", "", false), `{"type":"tool_result","tool_use_id":"123"}`},
		{"tool use", llm.RoleAssistant, llm.ToolCallPart("toolu_1", "get_weather", json.RawMessage(`{}`)), `{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}`},
		{"image url", llm.RoleUser, llm.ImageURLPart("https://x.test/a.png"), `{"type":"image","source":{"type":"url","url":"https://x.test/a.png"}}`},
		{"pdf url", llm.RoleUser, llm.DocumentURLPart("https://x.test/a.pdf"), `{"source":{"url":"https://x.test/a.pdf","type":"url"},"type":"document"}`},
		{"plain text", llm.RoleUser, llm.DocumentPart("text/plain", []byte("hi")), `{"source":{"data":"hi","media_type":"text/plain","type":"text"},"type":"document"}`},
		{"pdf", llm.RoleUser, llm.DocumentPart("application/pdf", []byte("x")), `{"source":{"data":"eA==","media_type":"application/pdf","type":"base64"},"type":"document"}`},
		{"image", llm.RoleUser, llm.ImagePart("image/webp", []byte("x")), `{"source":{"data":"eA==","media_type":"image/webp","type":"base64"},"type":"image"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs := []llm.Message{{Role: tt.role, Parts: []llm.Part{tt.part}}}
			if tt.part.ToolResult != nil {
				msgs = append([]llm.Message{{Role: llm.RoleAssistant, Parts: []llm.Part{llm.ToolCallPart("123", "f", nil)}}}, msgs...)
			}
			var got []struct {
				Content []json.RawMessage `json:"content"`
			}
			if err := json.Unmarshal([]byte(sentField(t, llm.Request{Model: "m", Messages: msgs}, "messages")), &got); err != nil {
				t.Fatal(err)
			}
			if g, w := canonical(t, got[len(got)-1].Content[0]), canonical(t, []byte(tt.want)); g != w {
				t.Errorf("block %s; want %s", g, w)
			}
		})
	}
}

// canonical returns b re-marshalled with sorted keys.
func canonical(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %v: %s", err, b)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

func TestRequestUnsupportedDocument(t *testing.T) {
	s := suite.NewServer(t, suite.Respond(200, okBody))
	p := newProvider(t, s.URL)
	req := llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{
		llm.DocumentPart("application/msword", []byte("doc"))}}}}
	for name, call := range map[string]func() error{
		"Complete": func() error { _, err := p.Complete(context.Background(), req); return err },
		"Stream":   func() error { _, err := p.Stream(context.Background(), req); return err },
	} {
		err := call()
		var e *llm.Error
		if !errors.As(err, &e) || e.Kind != llm.KindBadRequest || e.Provider != "anthropic" || !strings.Contains(e.Message, "application/msword") {
			t.Errorf("%s: %v; want a KindBadRequest naming the type", name, err)
		}
	}
	if n := s.Count.Load(); n != 0 {
		t.Errorf("%d requests sent; want none", n)
	}
}

func TestRequestTools(t *testing.T) {
	tools := []llm.Tool{
		{Name: "get_weather", Description: "Get the weather.", InputSchema: json.RawMessage(`{"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}`)},
		{Name: "now"},
	}
	req := llm.Request{Model: "m", Messages: userReq.Messages, Tools: tools}
	want := `[{"name":"get_weather","description":"Get the weather.","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}},` +
		`{"name":"now","input_schema":{"type":"object"}}]`
	if got := sentField(t, req, "tools"); got != want {
		t.Errorf("tools\n got %s\nwant %s", got, want)
	}
	if got := sentField(t, userReq, "tools"); got != "" {
		t.Errorf("tools sent without tools: %s", got)
	}
}

func TestRequestToolChoice(t *testing.T) {
	tools := []llm.Tool{{Name: "get_weather"}}
	tests := []struct {
		name   string
		tools  []llm.Tool
		choice llm.ToolChoice
		want   string
	}{
		{"auto with tools", tools, llm.ToolChoice{}, `{"type":"auto"}`},
		{"auto without tools", nil, llm.ToolChoice{}, ``},
		{"any", tools, llm.ToolChoice{Mode: llm.ToolAny}, `{"type":"any"}`},
		{"named", tools, llm.UseTool("get_weather"), `{"type":"tool","name":"get_weather"}`},
		{"none", tools, llm.ToolChoice{Mode: llm.ToolNone}, `{"type":"none"}`},
		{"none without tools", nil, llm.ToolChoice{Mode: llm.ToolNone}, `{"type":"none"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := llm.Request{Model: "m", Messages: userReq.Messages, Tools: tt.tools, ToolChoice: tt.choice}
			if got := sentField(t, req, "tool_choice"); got != tt.want {
				t.Errorf("tool_choice %s; want %s", got, tt.want)
			}
		})
	}
}

func TestRequestResponseSchema(t *testing.T) {
	schema := `{"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"], "additionalProperties": false}`
	req := llm.Request{Model: "claude-test", Messages: userReq.Messages, ResponseSchema: json.RawMessage(schema)}
	want := `{"model":"claude-test","max_tokens":1024,"messages":[{"role":"user","content":"Hi"}],` +
		`"output_config":{"format":{"type":"json_schema","schema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"],"additionalProperties":false}}}}`
	if got := string(sentBody(t, req)); got != want {
		t.Errorf("body\n got %s\nwant %s", got, want)
	}
	if got := sentField(t, userReq, "output_config"); got != "" {
		t.Errorf("output_config sent without a schema: %s", got)
	}
}

// foreignHistory is a conversation whose tool-call ids another provider
// issued: OpenAI's call_… (valid for Anthropic as they are), and Kimi's
// "functions.get:0" and a 70-byte id, which Anthropic refuses.
func foreignHistory() llm.Request {
	long := strings.Repeat("x", 70)
	return llm.Request{Model: "m", Tools: []llm.Tool{{Name: "get"}}, Messages: []llm.Message{
		{Role: llm.RoleUser, Content: "Go"},
		{Role: llm.RoleAssistant, Parts: []llm.Part{
			llm.ToolCallPart("call_abc123", "get", json.RawMessage(`{"n":1}`)),
			llm.ToolCallPart("functions.get:0", "get", json.RawMessage(`{"n":2}`)),
			llm.ToolCallPart(long, "get", json.RawMessage(`{"n":3}`)),
		}},
		{Role: llm.RoleUser, Parts: []llm.Part{
			llm.ToolResultPart("call_abc123", "one", false),
			llm.ToolResultPart("functions.get:0", "two", false),
			llm.ToolResultPart(long, "three", false),
		}},
	}}
}

// sentIDs returns the tool_use ids and tool_use_ids of a body, in order.
func sentIDs(t *testing.T, body []byte) (uses, results []string) {
	t.Helper()
	var b struct {
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatal(err)
	}
	for _, m := range b.Messages {
		var blocks []struct {
			Type      string `json:"type"`
			ID        string `json:"id"`
			ToolUseID string `json:"tool_use_id"`
		}
		if json.Unmarshal(m.Content, &blocks) != nil {
			continue // a string
		}
		for _, bl := range blocks {
			switch bl.Type {
			case "tool_use":
				uses = append(uses, bl.ID)
			case "tool_result":
				results = append(results, bl.ToolUseID)
			}
		}
	}
	return uses, results
}

func TestRequestForeignToolIDs(t *testing.T) {
	uses, results := sentIDs(t, sentBody(t, foreignHistory()))
	if len(uses) != 3 || len(results) != 3 {
		t.Fatalf("ids %q %q", uses, results)
	}
	if uses[0] != "call_abc123" {
		t.Errorf("valid id %q translated", uses[0])
	}
	for i := range uses {
		if !validToolID(uses[i]) || uses[i] != results[i] {
			t.Errorf("call %d went out as %q, its result as %q: want the same valid id", i, uses[i], results[i])
		}
	}
	for _, id := range uses[1:] {
		if !strings.HasPrefix(id, "toolu_") {
			t.Errorf("translated id %q; want toolu_…", id)
		}
	}
	if uses[1] == uses[2] {
		t.Errorf("two ids translated alike: %q", uses[1])
	}
}
