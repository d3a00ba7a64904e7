package anthropicsdk

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/suite"
)

// FuzzStream runs the suite's stream fuzzer over the SDK's decoding and
// this adapter's: every stream ends with io.EOF only when complete, or with
// a complete *llm.Error that quotes no key; no panic escapes.
func FuzzStream(f *testing.F) {
	seeds := []string{
		"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"c\",\"usage\":{\"input_tokens\":1,\"cache_read_input_tokens\":2}}}\n\n",
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"content_block\":{\"type\":\"text\",\"text\":\"a\"}}\n\n",
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\r\n\r\n",
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"f\",\"input\":{}}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n",
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n",
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
		"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
		"event: ping\n: hi\ndata: {\ndata: }\n\n",
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"refusal\"}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
		"data: " + strings.Repeat("x", 80) + "\n\n",
		"",
	}
	suite.FuzzStream(f, suite.StreamFuzz{Provider: "anthropic", Key: testKey, RequestID: "Request-Id", End: "message_stop", Finish: "stop_reason", MaxText: 256,
		Seeds: seeds, Request: userReq,
		Open: func(rt http.RoundTripper) (llm.StreamProvider, error) {
			client := newClient(f, "http://127.0.0.1")
			return New(client, Config{APIKey: testKey, MaxResponseBytes: 256, HTTPClient: clientOf(rt)})
		}})
}

// FuzzComplete: whatever status and body a server sends, Complete returns
// an answer (its tool calls' ids distinct) or a complete *llm.Error naming
// the provider, with the request id, quoting no key; never a panic.
func FuzzComplete(f *testing.F) {
	for _, s := range []string{okBody, toolBody, `{"type":"error","error":{"type":"overloaded_error","message":"x"}}`,
		`{"error":{"code":429,"status":"RESOURCE_EXHAUSTED"}}`, `{"content":null}`, `<html>`, ``} {
		f.Add(200, []byte(s), uint(0))
		f.Add(529, []byte(s), uint(3))
	}
	// Every request is answered with the input's status and body and a
	// request id.
	tr := &suite.Canned{Header: http.Header{"Content-Type": {"application/json"}, "Request-Id": {"req_1"}}}
	p, err := New(newClient(f, "http://127.0.0.1"), Config{MaxResponseBytes: 4096, HTTPClient: clientOf(tr)})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, status int, body []byte, keyAt uint) {
		if status < 200 || status > 599 || status >= 300 && status < 400 {
			return
		}
		if keyAt%2 == 1 {
			body = suite.WithKey(body, testKey, keyAt/2)
		}
		tr.Status, tr.Body = status, body
		res, err := p.Complete(context.Background(), userReq)
		if err != nil {
			e := suite.CheckError(t, err, "anthropic", testKey, status)
			if e.RequestID != "req_1" {
				t.Fatalf("no request id: %#v", e)
			}
			if strings.Contains(e.Detail, testKey) {
				t.Fatalf("Detail quotes the key: %q", e.Detail)
			}
			return
		}
		if status > 299 {
			t.Fatalf("an answer for status %d: %+v", status, res)
		}
		for _, s := range []string{res.ID, res.Model, res.RequestID, res.FinishReason} {
			if strings.Contains(s, testKey) {
				t.Fatalf("answer quotes the key: %+v", res)
			}
		}
		suite.CheckToolIDs(t, userReq.Messages, res.ToolCalls)
	})
}
