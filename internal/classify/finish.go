package classify

import "github.com/backstop-llm/backstop/llm"

// FinishOf normalizes a provider's finish or stop reason as sent.
func FinishOf(raw string) llm.Finish {
	switch raw {
	case "end_turn", "stop", "stop_sequence", "STOP":
		return llm.FinishStop
	case "max_tokens", "length", "model_context_window_exceeded", "MAX_TOKENS":
		return llm.FinishLength
	case "tool_use", "tool_calls", "function_call":
		return llm.FinishToolUse
	case "content_filter", "refusal", "SAFETY", "RECITATION", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII":
		return llm.FinishContentFilter
	case "pause_turn":
		return llm.FinishPause
	}
	return llm.FinishUnknown
}
