package validate_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/backstop-llm/backstop/validate"
)

// TestSummary: a failed answer is described by where and which keyword
// failed, at most three places, and never by a message that quotes it.
func TestSummary(t *testing.T) {
	s := mustCompile(t, []byte(`{"type":"object","required":["a","b","c","d"],"properties":{"name":{"const":"x"}}}`))
	_, verr := s.Validate(`{"name":"Jane Doe"}`)
	_, noJSON := s.Validate("no json here")
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"no JSON", noJSON, "the answer holds no JSON"},
		{"bad JSON", s.ValidateJSON([]byte(`{"a":`)), "the answer's JSON is not valid"},
		{"violations", verr, "the answer does not match the schema: at (root) (required); at /name (const)"},
		{"not an answer's error", errors.New("boom"), "the answer does not match the schema: at (root) (no_json)"},
	} {
		if got := validate.Summary(tc.err); got != tc.want {
			t.Errorf("%s: Summary = %q, want %q", tc.name, got, tc.want)
		}
	}
	if strings.Contains(validate.Summary(verr), "Jane") {
		t.Errorf("Summary quotes the answer: %q", validate.Summary(verr))
	}

	var many strings.Builder
	many.WriteString(`{"type":"object","properties":{`)
	for i := range 5 {
		if i > 0 {
			many.WriteString(",")
		}
		fmt.Fprintf(&many, `"p%d":{"type":"string"}`, i)
	}
	many.WriteString(`}}`)
	_, err := mustCompile(t, []byte(many.String())).Validate(`{"p0":0,"p1":1,"p2":2,"p3":3,"p4":4}`)
	if got := validate.Summary(err); !strings.HasSuffix(got, "; and 2 more") || strings.Count(got, "at /p") != 3 {
		t.Errorf("five violations: Summary = %q, want three places and 2 more", got)
	}
}

// TestToolCallError: the error names the call and what is wrong, matches
// ErrUnknownTool or the arguments' error, and never quotes the arguments.
func TestToolCallError(t *testing.T) {
	unknown := &validate.ToolCallError{Call: 1, ID: "toolu_2", Name: "get_time", Err: validate.ErrUnknownTool}
	if got, want := unknown.Error(), "tool call 1 (get_time): the model called a tool the request does not have"; got != want {
		t.Errorf("unknown tool: %q, want %q", got, want)
	}
	if !errors.Is(unknown, validate.ErrUnknownTool) || errors.Is(unknown, validate.ErrInvalid) {
		t.Errorf("unknown tool: matches ErrUnknownTool %v, ErrInvalid %v", errors.Is(unknown, validate.ErrUnknownTool), errors.Is(unknown, validate.ErrInvalid))
	}

	args := mustCompile(t, []byte(`{"type":"object","properties":{"city":{"const":"Paris"}}}`)).ValidateJSON([]byte(`{"city":"Secret Town"}`))
	bad := &validate.ToolCallError{Call: 0, ID: "toolu_1", Name: "get_weather", Err: args}
	if got, want := bad.Error(), "tool call 0 (get_weather): the arguments fail the tool's InputSchema: the answer does not match the schema: at /city (const)"; got != want {
		t.Errorf("bad arguments: %q, want %q", got, want)
	}
	if !errors.Is(bad, validate.ErrInvalid) || errors.Is(bad, validate.ErrUnknownTool) {
		t.Errorf("bad arguments: matches ErrInvalid %v, ErrUnknownTool %v", errors.Is(bad, validate.ErrInvalid), errors.Is(bad, validate.ErrUnknownTool))
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
