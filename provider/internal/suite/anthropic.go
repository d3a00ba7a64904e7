package suite

import "encoding/json"

// The event stream of Anthropic's Messages API, as the native adapter's and
// the SDK wrapper's stream tests replay it.

// AnthropicEvent is one server-sent event as Anthropic writes it.
func AnthropicEvent(name, data string) string {
	return "event: " + name + "\ndata: " + data + "\n\n"
}

// AnthropicDelta is the text_delta event of content block index.
func AnthropicDelta(index int, text string) string {
	b, _ := json.Marshal(map[string]any{"type": "content_block_delta", "index": index,
		"delta": map[string]string{"type": "text_delta", "text": text}})
	return AnthropicEvent("content_block_delta", string(b))
}

var (
	// AnthropicStart is a message_start with cache usage.
	AnthropicStart = AnthropicEvent("message_start", `{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[],"model":"claude-test-20260101","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"cache_creation_input_tokens":3,"cache_read_input_tokens":7,"output_tokens":1}}}`)
	// AnthropicText1 starts text block 1.
	AnthropicText1 = AnthropicEvent("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`)
	// AnthropicStop ends the message: end_turn, 15 output tokens.
	AnthropicStop = AnthropicEvent("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}`) +
		AnthropicEvent("message_stop", `{"type":"message_stop"}`)
	// AnthropicOther is events a stream may carry that are not text: a
	// thinking block (0), a ping, an event of a later API version.
	AnthropicOther = AnthropicEvent("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`) +
		AnthropicEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me think"}}`) +
		AnthropicEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQB"}}`) +
		AnthropicEvent("content_block_stop", `{"type":"content_block_stop","index":0}`) +
		AnthropicEvent("ping", `{"type": "ping"}`) +
		AnthropicEvent("brand_new_event", `{"type":"brand_new_event","anything":[1,{"x":null}]}`)
)
