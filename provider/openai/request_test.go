package openai

// The request body of whole conversations: parts, tools, tool choices,
// native schemas and tool-call ids. The expected bodies are those openai-go
// v3.98.0 marshals from its own param types (ChatCompletionNewParams) for
// the same conversation.

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/backstop-llm/backstop/internal/capability"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/openaiwire"
	"github.com/backstop-llm/backstop/provider/internal/suite"
	"github.com/backstop-llm/backstop/provider/internal/wire"
)

// sentBody sends req with Complete to a server answering okBody and
// returns the body it received.
func sentBody(t *testing.T, p func(url string) *Provider, req llm.Request) []byte {
	t.Helper()
	s := suite.NewServer(t, suite.Respond(200, okBody))
	if _, err := p(s.URL).Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	return s.Last().Body
}

func defaultProvider(t *testing.T) func(string) *Provider {
	return func(url string) *Provider { return newProvider(t, url) }
}

// sameJSON fails t unless got and want are the same JSON value.
func sameJSON(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("body is not JSON: %v: %s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want is not JSON: %v", err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("body\n got %s\nwant %s", got, want)
	}
}

// TestTextOnlyBodyUnchanged checks that a conversation of text alone goes
// out byte for byte as it did before parts existed.
func TestTextOnlyBodyUnchanged(t *testing.T) {
	req := llm.Request{Model: "gpt-test", System: "Be <brief> & kind.", Messages: []llm.Message{
		{Role: llm.RoleUser, Content: "Hi"}, {Role: llm.RoleAssistant, Content: "Hello"}, {Role: llm.RoleUser, Content: ""}},
		Params: llm.Params{MaxTokens: 300, Temperature: llm.Float(0), TopP: llm.Float(0.9), Stop: []string{"END"}}}
	const before = `{"model":"gpt-test","messages":[{"role":"system","content":"Be <brief> & kind."},{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello"},{"role":"user","content":""}],"max_completion_tokens":300,"temperature":0,"top_p":0.9,"stop":["END"]}`
	if got := sentBody(t, defaultProvider(t), req); string(got) != before {
		t.Errorf("Complete body\n got %s\nwant %s", got, before)
	}
	s := suite.NewServer(t, suite.SSE(happyStream))
	st, err := newProvider(t, s.URL).Stream(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	const streamBefore = `{"model":"gpt-test","messages":[{"role":"system","content":"Be <brief> & kind."},{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello"},{"role":"user","content":""}],"max_completion_tokens":300,"temperature":0,"top_p":0.9,"stop":["END"],"stream":true,"stream_options":{"include_usage":true}}`
	if got := s.Last().Body; string(got) != streamBefore {
		t.Errorf("Stream body\n got %s\nwant %s", got, streamBefore)
	}
}

// conversation holds every part type, tools with and without parameters,
// a tool choice and a response schema.
var conversation = llm.Request{
	Model:  "gpt-test",
	System: "Be brief.",
	Messages: []llm.Message{
		{Role: llm.RoleUser, Content: "Look:", Parts: []llm.Part{
			llm.TextPart("and this"),
			llm.ImagePart("image/png", []byte{0x89, 'P', 'N', 'G'}),
			llm.ImageURLPart("https://example.com/cat.jpg"),
			llm.DocumentPart("application/pdf", []byte("%PDF-")),
			llm.DocumentPart("text/plain", []byte("plain notes")),
		}},
		{Role: llm.RoleAssistant, Content: "Let me look.", Parts: []llm.Part{
			llm.ToolCallPart("call_1", "get_weather", json.RawMessage(`{"city":"Paris"}`)),
			llm.ToolCallPart("call_2", "get_time", nil),
		}},
		{Role: llm.RoleUser, Parts: []llm.Part{
			llm.ToolResultPart("call_1", `{"temp":21}`, false),
			llm.TextPart("Thanks"),
			llm.ToolResultPart("call_2", "clock is broken", true),
		}},
		{Role: llm.RoleAssistant, Parts: []llm.Part{llm.ToolCallPart("call_3", "get_time", json.RawMessage(`{}`))}},
		{Role: llm.RoleUser, Parts: []llm.Part{llm.ToolResultPart("call_3", "12:00", false)}},
	},
	Tools: []llm.Tool{
		{Name: "get_weather", Description: "Weather in a city",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)},
		{Name: "get_time"},
	},
	ToolChoice:     llm.ToolChoice{Mode: llm.ToolAny},
	ResponseSchema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false}`),
}

// sdkConversation is the body openai-go v3.98.0 marshals for conversation
// (json.Marshal of its ChatCompletionNewParams built with SystemMessage,
// UserMessage, TextContentPart, ImageContentPart, FileContentPart, an
// assistant message with ToolCalls, ToolMessage, ChatCompletionFunctionTool,
// tool_choice "required" and a ResponseFormatJSONSchemaParam).
const sdkConversation = `{"messages":[{"content":"Be brief.","role":"system"},{"content":[{"text":"Look:","type":"text"},{"text":"and this","type":"text"},{"image_url":{"url":"data:image/png;base64,iVBORw=="},"type":"image_url"},{"image_url":{"url":"https://example.com/cat.jpg"},"type":"image_url"},{"file":{"file_data":"data:application/pdf;base64,JVBERi0=","filename":"document-1.pdf"},"type":"file"},{"text":"plain notes","type":"text"}],"role":"user"},{"content":"Let me look.","tool_calls":[{"id":"call_1","function":{"arguments":"{\"city\":\"Paris\"}","name":"get_weather"},"type":"function"},{"id":"call_2","function":{"arguments":"{}","name":"get_time"},"type":"function"}],"role":"assistant"},{"content":"{\"temp\":21}","tool_call_id":"call_1","role":"tool"},{"content":"Error: clock is broken","tool_call_id":"call_2","role":"tool"},{"content":[{"text":"Thanks","type":"text"}],"role":"user"},{"tool_calls":[{"id":"call_3","function":{"arguments":"{}","name":"get_time"},"type":"function"}],"role":"assistant"},{"content":"12:00","tool_call_id":"call_3","role":"tool"}],"model":"gpt-test","response_format":{"json_schema":{"name":"response","strict":true,"schema":{"additionalProperties":false,"properties":{"a":{"type":"string"}},"required":["a"],"type":"object"}},"type":"json_schema"},"tool_choice":"required","tools":[{"function":{"name":"get_weather","description":"Weather in a city","parameters":{"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"}},"type":"function"},{"function":{"name":"get_time","parameters":{"properties":{},"type":"object"}},"type":"function"}]}`

// TestConversationBody checks every part type against the SDK's body: text
// and Content first, inline and URL images, an inline PDF, a text
// document, tool calls in assistant messages (content omitted when empty),
// tool results as tool messages placed first, in order, an error result.
func TestConversationBody(t *testing.T) {
	if err := conversation.Validate(); err != nil {
		t.Fatal(err)
	}
	sameJSON(t, sentBody(t, defaultProvider(t), conversation), sdkConversation)
}

// TestNativeSchemaBody checks the response_format, byte for byte.
func TestNativeSchemaBody(t *testing.T) {
	req := userReq
	req.ResponseSchema = json.RawMessage(`{"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": false}`)
	const want = `{"model":"gpt-test","messages":[{"role":"user","content":"Hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"response","schema":{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false},"strict":true}}}`
	if got := sentBody(t, defaultProvider(t), req); string(got) != want {
		t.Errorf("body\n got %s\nwant %s", got, want)
	}
}

func TestToolChoice(t *testing.T) {
	tools := []llm.Tool{{Name: "get_weather"}}
	const tool = `[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{}}}}]`
	for _, tt := range []struct {
		name   string
		tools  []llm.Tool
		choice llm.ToolChoice
		want   string // the tools and tool_choice keys; "" for neither
	}{
		{"auto", tools, llm.ToolChoice{}, `"tools":` + tool},
		{"none", tools, llm.ToolChoice{Mode: llm.ToolNone}, `"tools":` + tool + `,"tool_choice":"none"`},
		{"any", tools, llm.ToolChoice{Mode: llm.ToolAny}, `"tools":` + tool + `,"tool_choice":"required"`},
		// {"function":{"name":"get_weather"},"type":"function"} is what
		// openai-go's ToolChoiceOptionFunctionToolChoice marshals.
		{"named", tools, llm.UseTool("get_weather"), `"tools":` + tool + `,"tool_choice":{"type":"function","function":{"name":"get_weather"}}`},
		{"none without tools", nil, llm.ToolChoice{Mode: llm.ToolNone}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := userReq
			req.Tools, req.ToolChoice = tt.tools, tt.choice
			want := `{"model":"gpt-test","messages":[{"role":"user","content":"Hi"}]`
			if tt.want != "" {
				want += "," + tt.want
			}
			want += "}"
			if got := sentBody(t, defaultProvider(t), req); string(got) != want {
				t.Errorf("body\n got %s\nwant %s", got, want)
			}
		})
	}
}

func TestToolsBody(t *testing.T) {
	req := userReq
	req.Tools = []llm.Tool{
		{Name: "search", Description: "Search the web", InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`)},
		{Name: "now"},
	}
	var got struct {
		Tools []map[string]any `json:"tools"`
	}
	if err := json.Unmarshal(sentBody(t, defaultProvider(t), req), &got); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(got.Tools)
	const want = `[{"function":{"description":"Search the web","name":"search","parameters":{"properties":{"q":{"type":"string"}},"required":["q"],"type":"object"}},"type":"function"},{"function":{"name":"now","parameters":{"properties":{},"type":"object"}},"type":"function"}]`
	if string(b) != want {
		t.Errorf("tools\n got %s\nwant %s", b, want)
	}
}

// TestLegacyWithTools checks LegacyMaxTokens changes max_tokens alone.
func TestLegacyWithTools(t *testing.T) {
	legacy := func(url string) *Provider {
		p, err := New(Config{APIKey: testKey, BaseURL: url, LegacyMaxTokens: true})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	req := conversation
	req.Params.MaxTokens = 50
	var want map[string]any
	json.Unmarshal([]byte(sdkConversation), &want)
	want["max_tokens"] = 50.0
	b, _ := json.Marshal(want)
	sameJSON(t, sentBody(t, legacy, req), string(b))
}

// TestToolIDsOut checks that ids OpenAI would refuse (too long, other
// characters) go out as valid ids, the same for a call and its result,
// while valid ones, Anthropic's included, go out as they are.
func TestToolIDsOut(t *testing.T) {
	long := strings.Repeat("x", 50)
	ids := []string{"toolu_01A09q90qw90lq917835lq9", "functions.get_weather:0", long, "call_ok"}
	req := llm.Request{Model: "gpt-test", Messages: []llm.Message{{Role: llm.RoleUser, Content: "Hi"}}}
	var calls, results []llm.Part
	for _, id := range ids {
		calls = append(calls, llm.ToolCallPart(id, "get_weather", json.RawMessage(`{}`)))
		results = append(results, llm.ToolResultPart(id, "ok", false))
	}
	req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, Parts: calls}, llm.Message{Role: llm.RoleUser, Parts: results})
	if err := req.Validate(); err != nil {
		t.Fatal(err)
	}
	var body struct {
		Messages []struct {
			Role       string `json:"role"`
			ToolCallID string `json:"tool_call_id"`
			ToolCalls  []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(sentBody(t, defaultProvider(t), req), &body); err != nil {
		t.Fatal(err)
	}
	if len(body.Messages) != 2+len(ids) || len(body.Messages[1].ToolCalls) != len(ids) {
		t.Fatalf("messages %+v", body.Messages)
	}
	for i, id := range ids {
		out := body.Messages[1].ToolCalls[i].ID
		if !wire.IDChars(out, 40) || body.Messages[2+i].ToolCallID != out || body.Messages[2+i].Role != "tool" {
			t.Errorf("id %q went out as call %q, result %q", id, out, body.Messages[2+i].ToolCallID)
		}
		if valid := wire.IDChars(id, 40); valid != (out == id) {
			t.Errorf("id %q went out as %q", id, out)
		}
	}
}

// TestToolIDsBack checks that an answer echoing a translated id comes back
// with the caller's id, in Complete and in Stream: renamed, since the
// history holds it, from the caller's id and not from the hash.
func TestToolIDsBack(t *testing.T) {
	orig := "functions.get_weather:0"
	want := orig + "_2"
	ids := openaiwire.ToolIDs()
	out := ids.Out(orig) // what the adapter sends: the translation is deterministic
	req := llm.Request{Model: "gpt-test", Messages: []llm.Message{
		{Role: llm.RoleUser, Content: "Hi"},
		{Role: llm.RoleAssistant, Parts: []llm.Part{llm.ToolCallPart(orig, "get_weather", nil)}},
	}}
	body := `{"id":"c","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"` + out + `","type":"function","function":{"name":"get_weather","arguments":"{}"}},{"id":"call_new","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`
	events := []string{
		data(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"` + out + `","type":"function","function":{"name":"get_weather","arguments":"{}"}}]}}]}`),
		data(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_new","type":"function","function":{"name":"get_weather","arguments":"{}"}}]}}]}`),
		data(`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`), data("[DONE]"),
	}
	s := suite.NewServer(t, suite.StreamOrComplete(events, body))
	p := newProvider(t, s.URL)
	res, err := p.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(s.Last().Body), `"id":"`+out+`"`) {
		t.Errorf("body %s does not carry %s", s.Last().Body, out)
	}
	if len(res.ToolCalls) != 2 || res.ToolCalls[0].ID != want || res.ToolCalls[1].ID != "call_new" {
		t.Errorf("Complete ToolCalls %+v; want ids %q, call_new", res.ToolCalls, want)
	}
	st := suite.OpenStream(t, p, context.Background(), req)
	for range 2 {
		if _, err := st.Next(); err != nil {
			t.Fatal(err)
		}
	}
	if got := st.Response().ToolCalls; len(got) != 2 || got[0].ID != want || got[1].ID != "call_new" {
		t.Errorf("Stream ToolCalls %+v; want ids %q, call_new", got, want)
	}
}

// TestDocumentURLRefused checks a part the wire cannot carry fails before
// anything is sent.
func TestDocumentURLRefused(t *testing.T) {
	s := suite.NewServer(t, suite.Respond(200, okBody))
	req := llm.Request{Model: "gpt-test", Messages: []llm.Message{{Role: llm.RoleUser, Content: "Read",
		Parts: []llm.Part{llm.DocumentURLPart("https://example.com/a.pdf")}}}}
	p := newProvider(t, s.URL)
	e := suite.CompleteErr(t, p, context.Background(), req, testKey)
	if e.Kind != llm.KindBadRequest || !strings.Contains(e.Message, "message 0 (user), part 0") || s.Count.Load() != 0 {
		t.Errorf("got %+v after %d requests; want KindBadRequest naming the part, nothing sent", e, s.Count.Load())
	}
	if _, err := p.Stream(context.Background(), req); err == nil || s.Count.Load() != 0 {
		t.Errorf("Stream: %v after %d requests", err, s.Count.Load())
	}
}

func TestCapabilities(t *testing.T) {
	p := newProvider(t, "http://127.0.0.1")
	c := capability.Of(p)
	if c != llm.CapTools|llm.CapImages|llm.CapImageURLs|llm.CapDocuments|llm.CapNativeSchema {
		t.Errorf("Capabilities = %v", c)
	}
	if need := capability.Needs(&conversation); need&^c != 0 {
		t.Errorf("the conversation needs %v beyond %v", need&^c, c)
	}
	if md := capability.Refused(capability.MediaOf(p), &conversation); md != nil {
		t.Errorf("the conversation carries %q, which the provider does not take", md.MediaType)
	}
}

// TestMediaTypes: Chat Completions takes PDFs (as a file part) and text
// documents (as text), not another document type, which its file_data
// refuses; images are not limited (a compatible server may take more than
// OpenAI's PNG, JPEG, WebP and GIF).
func TestMediaTypes(t *testing.T) {
	m := capability.MediaOf(newProvider(t, "http://127.0.0.1"))
	for mt, want := range map[string]bool{
		"application/pdf": true, "text/plain": true, "text/markdown; charset=utf-8": true,
		"application/zip": false, "application/msword": false, "audio/wav": false,
		"image/png": true, "image/bmp": true, "image/heic": true,
	} {
		if got := capability.Takes(m, &llm.Media{MediaType: mt, Data: []byte("x")}); got != want {
			t.Errorf("%s: taken %v, want %v", mt, got, want)
		}
	}
}
