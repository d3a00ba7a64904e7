package classify

import (
	"testing"

	"github.com/backstop-llm/backstop/llm"
)

func TestFinishOf(t *testing.T) {
	for raw, want := range map[string]llm.Finish{"end_turn": llm.FinishStop, "stop": llm.FinishStop, "stop_sequence": llm.FinishStop, "max_tokens": llm.FinishLength,
		"length": llm.FinishLength, "model_context_window_exceeded": llm.FinishLength, "tool_use": llm.FinishToolUse, "tool_calls": llm.FinishToolUse,
		"function_call": llm.FinishToolUse, "content_filter": llm.FinishContentFilter, "refusal": llm.FinishContentFilter, "pause_turn": llm.FinishPause, "": llm.FinishUnknown, "new": llm.FinishUnknown} {
		if got := FinishOf(raw); got != want {
			t.Errorf("FinishOf(%q) = %v, want %v", raw, got, want)
		}
	}
}
