package anthropic

import (
	"bytes"
	"context"
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
	suite.FuzzStream(f, suite.StreamFuzz{Provider: "anthropic", Key: testKey, RequestID: "Request-Id", End: "message_stop", Finish: "stop_reason", MaxText: 256,
		Seeds: seeds, Request: userReq,
		Open: func(rt http.RoundTripper) (llm.StreamProvider, error) {
			return New(Config{APIKey: testKey, BaseURL: "http://127.0.0.1", MaxResponseBytes: 256, HTTPClient: &http.Client{Transport: rt}})
		}})
}

// FuzzStreamToolCalls fuzzes the assembly of streamed tool calls: event
// streams of text and tool_use blocks, read in pieces of fuzzed sizes. Every
// chunk is text or a call with JSON arguments; Response holds exactly the
// chunks returned; the calls never exceed MaxResponseBytes; a translated id
// comes back as the caller's; no two calls of the conversation share an id;
// a failure is a clean *llm.Error.
func FuzzStreamToolCalls(f *testing.F) {
	translated := newToolIDs()
	sent := translated.Out("functions.get:0")
	// Short seeds (see FuzzStream): the events without their "type".
	start := func(i, id string) string {
		return "event: content_block_start\ndata: {\"index\":" + i + ",\"content_block\":{\"type\":\"tool_use\",\"id\":\"" + id + "\",\"name\":\"f\"}}\n\n"
	}
	piece := func(i, json string) string {
		return "event: content_block_delta\ndata: {\"index\":" + i + ",\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"" + json + "\"}}\n\n"
	}
	stop := func(i string) string { return "event: content_block_stop\ndata: {\"index\":" + i + "}\n\n" }
	text := "event: content_block_delta\ndata: {\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n"
	end := "event: message_stop\ndata: {}\n\n"
	seeds := []string{
		start("0", "a") + piece("0", `{\"a\":`) + piece("0", "1}") + stop("0") + end,
		start("2", sent) + text + piece("2", "{}") + stop("2") + text + end,
		start("0", "a") + start("1", "b") + stop("1") + piece("0", "[") + stop("0") + end,
		start("3", "x") + end,
		"event: content_block_start\ndata: {\"content_block\":{\"type\":\"tool_use\",\"input\":{\"k\":1}}}\n\n" + stop("0") + end,
	}
	for _, s := range seeds {
		f.Add([]byte(s), []byte{7, 3, 63})
	}
	const maxBytes = 256
	tr := &suite.Replay{RequestID: "Request-Id"}
	p, err := New(Config{APIKey: testKey, BaseURL: "http://127.0.0.1", MaxResponseBytes: maxBytes, HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		f.Fatal(err)
	}
	req := llm.Request{Model: "m", Messages: []llm.Message{
		{Role: llm.RoleUser, Content: "Go"},
		{Role: llm.RoleAssistant, Parts: []llm.Part{llm.ToolCallPart("functions.get:0", "get", nil)}},
		{Role: llm.RoleUser, Parts: []llm.Part{llm.ToolResultPart("functions.get:0", "ok", false)}},
	}}
	f.Fuzz(func(t *testing.T, body, sizes []byte) {
		tr.Body, tr.Sizes = body, sizes
		st, err := p.Stream(context.Background(), req)
		if err != nil {
			t.Fatalf("Stream: %v", err)
		}
		defer st.Close()
		_, calls, fail := suite.ReadToEnd(t, st, "anthropic", testKey)
		if fail == nil && !bytes.Contains(body, []byte("message_stop")) {
			t.Fatalf("io.EOF from a stream without message_stop: %q", body)
		}
		suite.CheckToolIDs(t, req.Messages, calls)
		size := 0
		for _, c := range calls {
			if c.ID == sent {
				t.Fatalf("translated id %q returned untranslated", sent)
			}
			size += len(c.ID) + len(c.Name) + len(c.Arguments)
		}
		// {} for a call without input is not counted, nor what a renamed
		// id adds (_2, or call_<n> for none).
		if size > maxBytes+(len(`{}`)+len("call_999"))*len(calls) {
			t.Fatalf("%d bytes of calls; the cap is %d", size, maxBytes)
		}
	})
}
