package genai

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/backstop-llm/backstop/llm"
)

// jsonOf decodes s for comparing with a decoded request body.
func jsonOf(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%v: %s", err, s)
	}
	return v
}

func eq(t *testing.T, what string, got any, want string) {
	t.Helper()
	if w := jsonOf(t, want); !reflect.DeepEqual(got, w) {
		g, _ := json.Marshal(got)
		t.Errorf("%s:\n got %s\nwant %s", what, g, want)
	}
}

func TestRequestShape(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, _ seen) { writeJSON(w, 200, okBody) })
	p := newProvider(t, geminiClient(t, s.URL, s.Client()), Config{})
	png := []byte{0x89, 'P', 'N', 'G'}
	pdf := []byte("%PDF-1.7")
	req := llm.Request{
		Model:  "gemini-2.5-flash",
		System: "Be brief.",
		Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "Look:", Parts: []llm.Part{
				llm.ImagePart("image/png", png),
				llm.DocumentPart("application/pdf", pdf),
				llm.ImageURLPart("gs://bucket/cat.jpg"),
				llm.DocumentURLPart("https://example.com/a.pdf"),
				llm.TextPart("What are these?"),
			}},
			{Role: llm.RoleAssistant, Parts: []llm.Part{
				llm.TextPart("Let me check."),
				llm.ToolCallPart("toolu_01", "lookup", json.RawMessage(`{"q":"cat","n":12345678901234567890}`)),
				llm.ToolCallPart("toolu_02", "noargs", nil),
			}},
			{Role: llm.RoleUser, Parts: []llm.Part{
				llm.ToolResultPart("toolu_01", `{"found":true}`, false),
				llm.ToolResultPart("toolu_02", "timeout", true),
			}},
		},
		Params: llm.Params{MaxTokens: 256, Temperature: llm.Float(0), TopP: llm.Float(0.5), Stop: []string{"END"},
			Extra: map[string]any{"generationConfig": map[string]any{"topK": 3}, "safetySettings": []any{map[string]any{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}}}},
		Tools: []llm.Tool{
			{Name: "lookup", Description: "Looks things up.", InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`)},
			{Name: "noargs"},
		},
		ToolChoice:     llm.UseTool("lookup"),
		ResponseSchema: json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string"}}}`),
	}
	if _, err := p.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	b := s.only(t).Body
	b64 := base64.StdEncoding.EncodeToString
	eq(t, "systemInstruction", b["systemInstruction"], `{"role":"user","parts":[{"text":"Be brief."}]}`)
	eq(t, "contents", b["contents"], `[
	 {"role":"user","parts":[{"text":"Look:"},
	   {"inlineData":{"mimeType":"image/png","data":"`+b64(png)+`"}},
	   {"inlineData":{"mimeType":"application/pdf","data":"`+b64(pdf)+`"}},
	   {"fileData":{"fileUri":"gs://bucket/cat.jpg","mimeType":"image/jpeg"}},
	   {"fileData":{"fileUri":"https://example.com/a.pdf","mimeType":"application/pdf"}},
	   {"text":"What are these?"}]},
	 {"role":"model","parts":[{"text":"Let me check."},
	   {"functionCall":{"id":"toolu_01","name":"lookup","args":{"q":"cat","n":12345678901234567890}}},
	   {"functionCall":{"id":"toolu_02","name":"noargs"}}]},
	 {"role":"user","parts":[
	   {"functionResponse":{"id":"toolu_01","name":"lookup","response":{"output":"{\"found\":true}"}}},
	   {"functionResponse":{"id":"toolu_02","name":"noargs","response":{"error":"timeout"}}}]}]`)
	eq(t, "generationConfig", b["generationConfig"], `{"maxOutputTokens":256,"temperature":0,"topP":0.5,"stopSequences":["END"],
	  "responseMimeType":"application/json","responseJsonSchema":{"type":"object","properties":{"answer":{"type":"string"}}},"topK":3}`)
	eq(t, "tools", b["tools"], `[{"functionDeclarations":[
	  {"name":"lookup","description":"Looks things up.","parametersJsonSchema":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}},
	  {"name":"noargs","parametersJsonSchema":{"type":"object","properties":{}}}]}]`)
	eq(t, "toolConfig", b["toolConfig"], `{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["lookup"]}}`)
	eq(t, "safetySettings", b["safetySettings"], `[{"category":"HARM_CATEGORY_HARASSMENT","threshold":"BLOCK_NONE"}]`)
	for k := range b {
		switch k {
		case "contents", "systemInstruction", "generationConfig", "tools", "toolConfig", "safetySettings":
		default:
			t.Errorf("unexpected body key %q", k)
		}
	}
}

func TestToolChoiceModes(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, _ seen) { writeJSON(w, 200, okBody) })
	p := newProvider(t, geminiClient(t, s.URL, s.Client()), Config{})
	for i, tc := range []struct {
		choice llm.ToolChoice
		want   string
	}{
		{llm.ToolChoice{}, `null`},
		{llm.ToolChoice{Mode: llm.ToolNone}, `{"functionCallingConfig":{"mode":"NONE"}}`},
		{llm.ToolChoice{Mode: llm.ToolAny}, `{"functionCallingConfig":{"mode":"ANY"}}`},
		{llm.UseTool("f"), `{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["f"]}}`},
	} {
		req := hello("gemini-2.5-flash")
		req.Tools = []llm.Tool{{Name: "f"}}
		req.ToolChoice = tc.choice
		if _, err := p.Complete(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		eq(t, tc.choice.Mode.String(), s.requests()[i].Body["toolConfig"], tc.want)
	}
}

func TestMinimalRequest(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, _ seen) { writeJSON(w, 200, okBody) })
	p := newProvider(t, geminiClient(t, s.URL, s.Client()), Config{})
	if _, err := p.Complete(context.Background(), hello("gemini-2.5-flash")); err != nil {
		t.Fatal(err)
	}
	eq(t, "body", s.only(t).Body, `{"contents":[{"role":"user","parts":[{"text":"Hello"}]}],"generationConfig":{}}`)
}

func TestRequestsNotSent(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, _ seen) { writeJSON(w, 200, okBody) })
	p := newProvider(t, geminiClient(t, s.URL, s.Client()), Config{})
	bad := map[string]llm.Request{
		"no model":    {Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}}},
		"no messages": {Model: "m"},
		"bad role":    {Model: "m", Messages: []llm.Message{{Role: "system", Content: "x"}}},
		"empty":       {Model: "m", Messages: []llm.Message{{Role: llm.RoleUser}}},
		"orphan result": {Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{
			llm.ToolResultPart("nope", "x", false)}}}},
		"bad args": {Model: "m", Messages: []llm.Message{{Role: llm.RoleAssistant, Parts: []llm.Part{
			llm.ToolCallPart("c", "f", json.RawMessage(`[1]`))}}}},
		"inline without type": {Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{
			{Media: &llm.Media{Data: []byte("x")}}}}}},
		"bad schema": {Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}}, ResponseSchema: json.RawMessage(`{`)},
		"bad tool":   {Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}}, Tools: []llm.Tool{{Name: "f", InputSchema: json.RawMessage(`{`)}}},
	}
	for name, req := range bad {
		_, err := p.Complete(context.Background(), req)
		if f := asError(t, err); f.Kind != llm.KindBadRequest || f.Provider != "gcp.gemini" {
			t.Errorf("%s: kind %v provider %q", name, f.Kind, f.Provider)
		}
		st, err := p.Stream(context.Background(), req)
		if f := asError(t, err); st != nil || f.Kind != llm.KindBadRequest {
			t.Errorf("%s: stream kind %v", name, f.Kind)
		}
	}
	if n := len(s.requests()); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

func TestToolRoundTrip(t *testing.T) {
	sig := []byte{0xde, 0xad, 0xbe, 0xef, 0x01}
	turn := 0
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, got seen) {
		turn++
		if turn == 1 {
			writeJSON(w, 200, `{"candidates":[{"content":{"role":"model","parts":[
			  {"functionCall":{"name":"weather","args":{"city":"Paris"}},"thoughtSignature":"`+base64.StdEncoding.EncodeToString(sig)+`"},
			  {"functionCall":{"name":"time","args":{}}}]},"finishReason":"STOP"}],"responseId":"r1"}`)
			return
		}
		writeJSON(w, 200, `{"candidates":[{"content":{"role":"model","parts":[{"text":"Sunny."},
		  {"functionCall":{"id":"srv-7","name":"time"}}]},"finishReason":"STOP"}]}`)
	})
	p := newProvider(t, geminiClient(t, s.URL, s.Client()), Config{})
	req := hello("gemini-3-pro")
	req.Tools = []llm.Tool{{Name: "weather"}, {Name: "time"}}
	res, err := p.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.ToolCalls) != 2 || res.Finish != llm.FinishToolUse || res.FinishReason != "STOP" {
		t.Fatalf("answer %+v", res)
	}
	c0, c1 := res.ToolCalls[0], res.ToolCalls[1]
	if !strings.HasPrefix(c0.ID, "call_0~sig~") || c0.Name != "weather" || string(c0.Arguments) != `{"city":"Paris"}` {
		t.Errorf("first call %+v", c0)
	}
	if c1.ID != "call_1" || c1.Name != "time" || string(c1.Arguments) != `{}` {
		t.Errorf("second call %+v", c1)
	}

	req.Messages = append(req.Messages,
		llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{{ToolCall: &c0}, {ToolCall: &c1}}},
		llm.Message{Role: llm.RoleUser, Parts: []llm.Part{
			llm.ToolResultPart(c0.ID, "sunny, 21°C", false), llm.ToolResultPart(c1.ID, "12:00", false)}})
	if err := req.Validate(); err != nil {
		t.Fatal(err)
	}
	res, err = p.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "replayed turn", get(t, s.requests()[1].Body, "contents", 1), `{"role":"model","parts":[
	  {"functionCall":{"id":"call_0","name":"weather","args":{"city":"Paris"}},"thoughtSignature":"`+base64.StdEncoding.EncodeToString(sig)+`"},
	  {"functionCall":{"id":"call_1","name":"time"}}]}`)
	eq(t, "results", get(t, s.requests()[1].Body, "contents", 2), `{"role":"user","parts":[
	  {"functionResponse":{"id":"call_0","name":"weather","response":{"output":"sunny, 21°C"}}},
	  {"functionResponse":{"id":"call_1","name":"time","response":{"output":"12:00"}}}]}`)
	if res.Text != "Sunny." || len(res.ToolCalls) != 1 || res.ToolCalls[0].ID != "srv-7" {
		t.Errorf("second answer %+v", res)
	}
}

func TestIDs(t *testing.T) {
	for _, id := range []string{"call_0", "toolu_01~sig~", "x~sig~!!", "a~sig~b~sig~AQID"} {
		got := joinID(splitID(id))
		if got != id {
			t.Errorf("%q -> %q", id, got)
		}
	}
	if id, sig := splitID("c~sig~AQID"); id != "c" || string(sig) != "\x01\x02\x03" {
		t.Errorf("split %q %v", id, sig)
	}
}
