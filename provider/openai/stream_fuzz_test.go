package openai

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
		"data: {\"id\":\"c\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n",
		"data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":null}\r\n\r\n",
		"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n",
		"data: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"x\"}}]}\r\rdata: [DONE]\r\r",
		"data: {\"error\":{\"message\":\"boom\",\"type\":\"server_error\",\"code\":\"rate_limit_exceeded\"}}\n\n",
		"event: error\ndata: {\"error\":\"x\"}\n\n",
		"data: {\"choices\":[{\"delta\":{\"refusal\":\"no\"},\"finish_reason\":\"content_filter\"}]}\n\ndata: [DONE]\n\n",
		": ping\n\ndata:\n\ndata: {\ndata: }\n\n",
		"data: " + strings.Repeat("x", 300) + "\n\n",
		"",
	}
	suite.FuzzStream(f, suite.StreamFuzz{Provider: "openai", Key: testKey, RequestID: "X-Request-Id", End: "[DONE]", MaxText: 256,
		Seeds: seeds, Request: userReq,
		Open: func(rt http.RoundTripper) (llm.StreamProvider, error) {
			return New(Config{APIKey: testKey, BaseURL: "http://127.0.0.1", MaxResponseBytes: 256, HTTPClient: &http.Client{Transport: rt}})
		}})
}
