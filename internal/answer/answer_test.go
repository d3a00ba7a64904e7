package answer

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/validate"
)

var weather = []llm.Tool{{Name: "get_weather", InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}}

// TestCheck: an answer's calls are checked against the request's tools,
// an unknown tool and bad arguments are invalid output, a tool whose
// InputSchema does not compile is a bad request, and an answer that calls
// no tool is checked against the schema.
func TestCheck(t *testing.T) {
	var c Checker
	call := func(name, args string) *llm.Response {
		return &llm.Response{RequestID: "req_1", ToolCalls: []llm.ToolCall{{ID: "toolu_1", Name: name, Arguments: json.RawMessage(args)}}}
	}
	if _, err := c.Check("anthropic", nil, weather, call("get_weather", `{"city":"Paris"}`)); err != nil {
		t.Fatalf("valid call: %v", err)
	}
	for _, tc := range []struct {
		name  string
		tools []llm.Tool
		resp  *llm.Response
		kind  llm.Kind
		is    error
	}{
		{"unknown tool", weather, call("get_time", `{}`), llm.KindInvalidOutput, validate.ErrUnknownTool},
		{"bad arguments", weather, call("get_weather", `{"town":"Paris"}`), llm.KindInvalidOutput, validate.ErrInvalid},
		{"bad input schema", []llm.Tool{{Name: "get_weather", InputSchema: json.RawMessage(`{"type":12}`)}}, call("get_weather", `{}`), llm.KindBadRequest, validate.ErrBadSchema},
	} {
		_, err := c.Check("anthropic", nil, tc.tools, tc.resp)
		var terr *validate.ToolCallError
		if llm.KindOf(err) != tc.kind || !errors.Is(err, tc.is) || !errors.As(err, &terr) || terr.ID != "toolu_1" {
			t.Errorf("%s: %v (kind %v); want kind %v matching %v", tc.name, err, llm.KindOf(err), tc.kind, tc.is)
		}
	}
	schema := mustCompile(t, []byte(`{"type":"object","required":["answer"]}`))
	if js, err := c.Check("anthropic", schema, nil, &llm.Response{Text: `{"answer":"yes"}`}); err != nil || string(js) != `{"answer":"yes"}` {
		t.Errorf("valid text: %s, %v", js, err)
	}
	_, err := c.Check("anthropic", schema, nil, &llm.Response{Text: `{"other":1}`, RequestID: "req_2"})
	var le *llm.Error
	if !errors.As(err, &le) || le.Kind != llm.KindInvalidOutput || le.RequestID != "req_2" || le.Message != "the answer does not match the schema: at (root) (required)" {
		t.Errorf("invalid text: %#v", err)
	}
}

// TestReplayable: only calls with distinct non-empty ids and object
// arguments are replayed as calls; others are re-asked in words.
func TestReplayable(t *testing.T) {
	for _, tc := range []struct {
		name  string
		calls []llm.ToolCall
		want  bool
	}{
		{"ids and objects", []llm.ToolCall{{ID: "a", Arguments: json.RawMessage(`{}`)}, {ID: "b"}}, true},
		{"no id", []llm.ToolCall{{Arguments: json.RawMessage(`{}`)}}, false},
		{"an id used twice", []llm.ToolCall{{ID: "a"}, {ID: "a"}}, false},
		{"arguments not an object", []llm.ToolCall{{ID: "a", Arguments: json.RawMessage(`[1]`)}}, false},
	} {
		if got := replayable(tc.calls); got != tc.want {
			t.Errorf("%s: replayable = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestReaskInWords: an answer whose calls cannot be replayed is re-asked
// in words, with the tool's feedback, and msgs is not appended to in place.
func TestReaskInWords(t *testing.T) {
	msgs := make([]llm.Message, 1, 4)
	msgs[0] = llm.Message{Role: llm.RoleUser, Content: "weather?"}
	ans := &llm.Response{ToolCalls: []llm.ToolCall{{Name: "get_time"}}}
	err := &validate.ToolCallError{Name: "get_time", Err: validate.ErrUnknownTool}
	got := Reask(msgs, weather, ans, err)
	want := []llm.Message{msgs[0],
		{Role: llm.RoleAssistant, Content: "(no text)"},
		{Role: llm.RoleUser, Content: `There is no tool named "get_time". The tools are: get_weather. Call one of them.`}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Reask = %+v, want %+v", got, want)
	}
	if &got[0] == &msgs[0] {
		t.Error("Reask appended to msgs in place")
	}
}

// TestViolations: the paths and keywords of a failure, and "no_json" at
// the root for an answer with none.
func TestViolations(t *testing.T) {
	_, err := mustCompile(t, []byte(`{"type":"object","properties":{"n":{"type":"integer"}}}`)).Validate(`{"n":"x"}`)
	if p, k := Violations(err); !reflect.DeepEqual(p, []string{"/n"}) || !reflect.DeepEqual(k, []string{"type"}) {
		t.Errorf("Violations = %q, %q", p, k)
	}
	if p, k := Violations(validate.ErrNoJSON); !reflect.DeepEqual(p, []string{""}) || !reflect.DeepEqual(k, []string{"no_json"}) {
		t.Errorf("no JSON: Violations = %q, %q", p, k)
	}
}

// mustCompile compiles schema, failing the test when it does not compile.
func mustCompile(t testing.TB, schema []byte) *validate.Schema {
	t.Helper()
	s, err := validate.Compile(schema)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
