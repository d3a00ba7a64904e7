package anthropic

import (
	"net/http"
	"strings"
	"testing"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/suite"
)

// FuzzStream fuzzes Stream with event streams of the wire format, read in
// pieces of fuzzed sizes (see suite.FuzzStream).
func FuzzStream(f *testing.F) {
	seeds := []string{
		"event: message_start\ndata: {\"message\":{\"id\":\"m\",\"model\":\"c\",\"usage\":{\"input_tokens\":1,\"cache_read_input_tokens\":2}}}\n\n",
		"event: content_block_start\ndata: {\"content_block\":{\"type\":\"text\",\"text\":\"a\"}}\n\n",
		"event: content_block_delta\ndata: {\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\r\n\r\n",
		"event: message_delta\ndata: {\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n",
		"event: message_stop\ndata: {}\n\n",
		"data: {\"type\":\"message_stop\"}\r\r",
		"event: error\ndata: {\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
		"event: ping\n: hi\ndata: {\ndata: }\n\n",
		"event: message_delta\ndata: {\"delta\":{\"stop_reason\":\"refusal\"}}\n\nevent: message_stop\ndata: {}\n\n",
		"data: " + strings.Repeat("x", 80) + "\n\n",
		"",
	}
	suite.FuzzStream(f, suite.StreamFuzz{Provider: "anthropic", Key: testKey, RequestID: "Request-Id", End: "message_stop", MaxText: 256,
		Seeds: seeds, Request: userReq,
		Open: func(rt http.RoundTripper) (llm.StreamProvider, error) {
			return New(Config{APIKey: testKey, BaseURL: "http://127.0.0.1", MaxResponseBytes: 256, HTTPClient: &http.Client{Transport: rt}})
		}})
}
