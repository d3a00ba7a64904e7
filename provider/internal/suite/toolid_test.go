package suite

import (
	"fmt"
	"testing"
)

// TestToolIDs: whatever ids the provider sends, no two calls of the
// conversation share one (see ToolIDs).
func TestToolIDs(t *testing.T) {
	forEach(t, func(t *testing.T, a adapter) {
		s := StartFake(t)
		ToolIDs(t, FakeTarget(s, "model-fake", a.new(t, s.URL(), s.Client())))
	})
}

func TestWireToolIDs(t *testing.T) {
	for _, tc := range []struct {
		body           string
		calls, results string
	}{
		{`{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a"},{"type":"text","text":"x"}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"a"}]}]}`, "[a]", "[a]"},
		{`{"messages":[{"role":"assistant","tool_calls":[{"id":"a","type":"function"},{"id":"b","type":"function"}]},{"role":"tool","tool_call_id":"b"}]}`, "[a b]", "[b]"},
		{`{"input":[{"type":"function_call","call_id":"a"},{"type":"function_call_output","call_id":"a"}]}`, "[a]", "[a]"},
		{`{"contents":[{"parts":[{"functionCall":{"id":"a","name":"f"}},{"functionCall":{"name":"g"}}]},{"parts":[{"functionResponse":{"id":"a"}}]}]}`, "[a]", "[a]"},
	} {
		calls, results := WireToolIDs([]byte(tc.body))
		if got := fmtList(calls); got != tc.calls {
			t.Errorf("calls %s; want %s in %s", got, tc.calls, tc.body)
		}
		if got := fmtList(results); got != tc.results {
			t.Errorf("results %s; want %s in %s", got, tc.results, tc.body)
		}
	}
}

func fmtList(l []string) string { return fmt.Sprint(l) }
