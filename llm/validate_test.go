package llm

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	user := func(parts ...Part) Message { return Message{Role: RoleUser, Parts: parts} }
	assistant := func(parts ...Part) Message { return Message{Role: RoleAssistant, Parts: parts} }
	call := ToolCallPart("toolu_1", "get_weather", json.RawMessage(`{"city":"Paris"}`))
	result := ToolResultPart("toolu_1", "18C", false)
	ask := Message{Role: RoleUser, Content: "weather?"}
	tool := Tool{Name: "get_weather", InputSchema: json.RawMessage(`{"type":"object"}`)}
	for _, tc := range []struct {
		name string
		req  Request
		says string // "" for a valid request
	}{
		{"text", Request{Messages: []Message{ask}}, ""},
		{"a tool round trip", Request{Messages: []Message{ask, assistant(TextPart("Let me look."), call), user(result)}, Tools: []Tool{tool}}, ""},
		{"an image and a document", Request{Messages: []Message{{Role: RoleUser, Content: "compare", Parts: []Part{ImagePart("image/png", []byte{1}), DocumentPart("application/pdf", []byte{2}), ImageURLPart("https://x/a.png"), DocumentURLPart("https://x/a.pdf")}}}}, ""},
		{"a forced tool", Request{Messages: []Message{ask}, Tools: []Tool{tool}, ToolChoice: UseTool("get_weather")}, ""},
		{"a tool result answering nothing", Request{Messages: []Message{ask, user(result)}}, "message 1 (user), part 0: the tool result answers a call no earlier assistant message made"},
		{"a result answered twice", Request{Messages: []Message{ask, assistant(call), user(result, result)}}, "message 2 (user), part 1: the tool result answers a call already answered"},
		{"a tool call in a user message", Request{Messages: []Message{user(call)}}, "message 0 (user), part 0: a tool call goes in an assistant message"},
		{"a reused call id", Request{Messages: []Message{ask, assistant(call, call)}}, "reuses the ID"},
		{"a call without a name", Request{Messages: []Message{ask, assistant(ToolCallPart("toolu_1", "", nil))}}, "needs an ID and a Name"},
		{"arguments not an object", Request{Messages: []Message{ask, assistant(ToolCallPart("toolu_1", "f", json.RawMessage(`[1]`)))}}, "Arguments are not a JSON object"},
		{"media in an assistant message", Request{Messages: []Message{ask, assistant(ImagePart("image/png", []byte{1}))}}, "message 1 (assistant), part 0: images and documents go in a user message"},
		{"a tool result in an assistant message", Request{Messages: []Message{ask, assistant(call), assistant(result)}}, "a tool result goes in a user message"},
		{"an empty part", Request{Messages: []Message{user(Part{})}}, "the part is empty"},
		{"a part with two fields", Request{Messages: []Message{user(Part{Text: "a", Media: &Media{URL: "https://x"}})}}, "the part sets 2 fields"},
		{"media with data and URL", Request{Messages: []Message{user(Part{Media: &Media{MediaType: "image/png", Data: []byte{1}, URL: "https://x"}})}}, "both Data and URL"},
		{"media with neither", Request{Messages: []Message{user(Part{Media: &Media{MediaType: "image/png"}})}}, "neither Data nor URL"},
		{"inline media without a type", Request{Messages: []Message{user(Part{Media: &Media{Data: []byte{1}}})}}, "no MediaType"},
		{"an empty message", Request{Messages: []Message{{Role: RoleUser}}}, "message 0 (user) is empty"},
		{"a system role", Request{Messages: []Message{{Role: "system", Content: "x"}}}, `role "system"`},
		{"a bad tool name", Request{Messages: []Message{ask}, Tools: []Tool{{Name: "get weather"}}}, "tool 0: a tool name holds only letters"},
		{"a long tool name", Request{Messages: []Message{ask}, Tools: []Tool{{Name: strings.Repeat("a", 65)}}}, "1 to 64 bytes"},
		{"a tool twice", Request{Messages: []Message{ask}, Tools: []Tool{tool, tool}}, "tool 1: the name is the name of an earlier tool"},
		{"a schema that is not an object", Request{Messages: []Message{ask}, Tools: []Tool{{Name: "f", InputSchema: json.RawMessage(`"x"`)}}}, "InputSchema is not a JSON object"},
		{"a choice naming no tool", Request{Messages: []Message{ask}, Tools: []Tool{tool}, ToolChoice: UseTool("get_time")}, "ToolChoice names a tool the request does not have"},
		{"a name without ToolNamed", Request{Messages: []Message{ask}, Tools: []Tool{tool}, ToolChoice: ToolChoice{Name: "get_weather"}}, "without Mode ToolNamed"},
		{"any without tools", Request{Messages: []Message{ask}, ToolChoice: ToolChoice{Mode: ToolAny}}, "no tools"},
		{"a bad response schema", Request{Messages: []Message{ask}, ResponseSchema: json.RawMessage(`[]`)}, "ResponseSchema is not a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.req.Validate()
			if tc.says == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var le *Error
			if !errors.As(err, &le) || le.Kind != KindBadRequest || !strings.Contains(le.Message, tc.says) {
				t.Fatalf("%v, want a bad request saying %q", err, tc.says)
			}
			if strings.Contains(err.Error(), "Paris") || strings.Contains(err.Error(), "18C") {
				t.Fatalf("the error quotes the conversation: %v", err)
			}
		})
	}
}

func TestValidateAllocatesNothingForText(t *testing.T) {
	req := Request{Messages: []Message{{Role: RoleUser, Content: "hi"}, {Role: RoleAssistant, Content: "hello"}, {Role: RoleUser, Content: "bye"}},
		Tools: []Tool{{Name: "a", InputSchema: json.RawMessage(`{}`)}, {Name: "b"}}}
	if n := testing.AllocsPerRun(100, func() { _ = req.Validate() }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

func TestCapabilitiesString(t *testing.T) {
	if s := (CapTools | CapImages).String(); s != "tools, images" {
		t.Fatalf("String = %q", s)
	}
}

// BenchmarkValidate is the check every call makes of its request, on the
// commonest one: a single text message.
func BenchmarkValidate(b *testing.B) {
	r := Request{Model: "m", Messages: []Message{{Role: RoleUser, Content: "hi"}}, Params: Params{MaxTokens: 100}}
	b.ReportAllocs()
	for b.Loop() {
		if err := r.Validate(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestParamsValidate: Params a request body cannot carry are reported,
// every one, each a bad request naming its field; sendable Params are nil.
func TestParamsValidate(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(-1)
	ok := Params{MaxTokens: 10, Temperature: Float(0.5), TopP: Float(1), Stop: []string{"x"}, Extra: map[string]any{"a": 1, "b": []string{"c"}}}
	if err := ok.Validate(); err != nil {
		t.Errorf("valid Params: %v", err)
	}
	if err := (Params{}).Validate(); err != nil {
		t.Errorf("zero Params: %v", err)
	}
	bad := Params{MaxTokens: -1, Temperature: &nan, TopP: &inf, Extra: map[string]any{"z": func() {}, "a": make(chan int), "ok": 1}}
	err := bad.Validate()
	j, isJoin := err.(interface{ Unwrap() []error })
	if !isJoin {
		t.Fatalf("got %v; want the problems joined", err)
	}
	want := []struct{ detail, says string }{
		{"Params.MaxTokens", "Params.MaxTokens is -1; it must not be negative"},
		{"Params.Temperature", "Params.Temperature is NaN; JSON cannot carry it"},
		{"Params.TopP", "Params.TopP is -Inf; JSON cannot carry it"},
		{`Params.Extra["a"]`, `Params.Extra["a"] cannot be encoded as JSON (`},
		{`Params.Extra["z"]`, `Params.Extra["z"] cannot be encoded as JSON (`},
	}
	errs := j.Unwrap()
	if len(errs) != len(want) {
		t.Fatalf("%d problems, want %d: %v", len(errs), len(want), err)
	}
	for i, w := range want {
		var le *Error
		if !errors.As(errs[i], &le) || le.Kind != KindBadRequest || le.Provider != "backstop" {
			t.Errorf("problem %d = %#v; want a backstop bad request", i, errs[i])
			continue
		}
		if le.Detail != w.detail || !strings.HasPrefix(le.Message, w.says) {
			t.Errorf("problem %d = %q (detail %q); want %q… (detail %q)", i, le.Message, le.Detail, w.says, w.detail)
		}
	}
	if KindOf(err) != KindBadRequest {
		t.Errorf("KindOf = %v; want KindBadRequest", KindOf(err))
	}
}
