package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/backstop-llm/backstop/internal/classify"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/openaiwire"
	"github.com/backstop-llm/backstop/provider/internal/suite"
)

// FuzzStream fuzzes Stream with event streams of the wire format, read in
// pieces of fuzzed sizes (see suite.FuzzStream); FuzzStreamToolCalls and
// FuzzStreamToolCallEvents check the tool calls in depth.
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
		"data: {\"choices\":[{\"delta\":{\"content\":\"a\",\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n",
		"",
	}
	suite.FuzzStream(f, suite.StreamFuzz{Provider: "openai", Key: testKey, RequestID: "X-Request-Id", End: "[DONE]", Finish: "finish_reason", MaxText: 256,
		Seeds: seeds, Request: userReq,
		Open: func(rt http.RoundTripper) (llm.StreamProvider, error) {
			p, err := New(Config{APIKey: testKey, BaseURL: "http://127.0.0.1", MaxResponseBytes: 256, HTTPClient: &http.Client{Transport: rt}})
			return p, err
		}})
}

// FuzzStreamToolCalls fuzzes the assembly of two calls whose arguments
// arrive in pieces cut and interleaved as cuts says: each call must come
// out whole, once, in index order, with the arguments its pieces spell (as
// argumentsJSON keeps them), and in Response().ToolCalls.
func FuzzStreamToolCalls(f *testing.F) {
	f.Add(`{"location":"Santorini, Greece"}`, `{"tz":"UTC"}`, []byte{3, 1, 4, 1, 5, 9, 2, 6}, false)
	f.Add(`{"a":`, ``, []byte{0}, true)
	f.Add("\"é\xff", ` [1, 2] `, []byte{1, 1, 1}, false)
	tr := &suite.Replay{RequestID: "X-Request-Id"}
	p, err := New(Config{APIKey: testKey, BaseURL: "http://127.0.0.1", HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, a, b string, cuts []byte, atDone bool) {
		if len(a)+len(b) > 4096 {
			t.Skip("long arguments test nothing short ones do not")
		}
		var events strings.Builder
		events.WriteString(data(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"g","arguments":""}}]}}]}`))
		events.WriteString(data(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"f"}}]}}]}`))
		rest := [2]string{a, b}
		var spelled [2]strings.Builder // what the pieces spell, decoded as the adapter decodes them
		for k := 0; rest[0] != "" || rest[1] != ""; k++ {
			var cut byte = 1
			if len(cuts) > 0 {
				cut = cuts[k%len(cuts)]
			}
			i := int(cut) % 2
			if rest[i] == "" {
				i = 1 - i
			}
			n := min(int(cut)/2%8+1, len(rest[i]))
			piece := rest[i][:n]
			rest[i] = rest[i][n:]
			q, _ := json.Marshal(piece)
			var back string
			json.Unmarshal(q, &back)
			spelled[i].WriteString(back)
			events.WriteString(data(fmt.Sprintf(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":%d,"function":{"arguments":%s}}]}}]}`, i, q)))
		}
		if !atDone {
			events.WriteString(chunkEvent(0, "", "tool_calls"))
		}
		events.WriteString(data("[DONE]"))
		tr.Body = []byte(events.String())
		st, err := p.Stream(context.Background(), userReq)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		text, got, fail := suite.ReadToEnd(t, st, "openai", testKey)
		if fail != nil || text != "" {
			t.Fatalf("text %q, %v; want the calls alone", text, fail)
		}
		want := []llm.ToolCall{
			{ID: "call_a", Name: "f", Arguments: openaiwire.ArgumentsJSON(spelled[0].String())},
			{ID: "call_b", Name: "g", Arguments: openaiwire.ArgumentsJSON(spelled[1].String())},
		}
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(st.Response().ToolCalls, want) {
			t.Fatalf("calls %s; want %s", calls(got), calls(want))
		}
	})
}

// FuzzStreamToolCallEvents fuzzes Stream with raw event streams carrying
// tool-call deltas: whatever the events, every chunk is text or a tool
// call with an id, a name and JSON arguments, no two with one id; the
// calls delivered are Response().ToolCalls; their bytes stay under
// MaxResponseBytes; a failure is a complete *llm.Error.
func FuzzStreamToolCallEvents(f *testing.F) {
	for _, s := range []string{
		strings.Join(sdkToolStream, ""),
		data(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":-1,"id":"call_123","type":"function","function":{"name":"test_func","arguments":"{}"}}]}}]}`) + data("[DONE]"),
		data(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{"}},{"index":0,"id":"x","function":{"name":"f","arguments":{"a":1}}}]},"finish_reason":"stop"}]}`) +
			data(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":3,"id":"y","function":{"name":"g"}}]}}]}`) + data("[DONE]"),
		data(`{"choices":[{"index":0,"delta":{"tool_calls":null}}]}`) + data(`{"choices":[{"index":0,"delta":{"tool_calls":[]}}]}`),
		data(`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{"}},{"function":{"arguments":"}"}},{"index":0,"id":"b","function":{"name":"g"}}]},"finish_reason":"stop"}]}`) + data("[DONE]"),
	} {
		f.Add([]byte(s))
	}
	const max = 512
	tr := &suite.Replay{RequestID: "X-Request-Id"}
	p, err := New(Config{APIKey: testKey, BaseURL: "http://127.0.0.1", MaxResponseBytes: max, HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		tr.Body = body
		st, err := p.Stream(context.Background(), userReq)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		_, got, _ := suite.ReadToEnd(t, st, "openai", testKey)
		suite.CheckToolIDs(t, userReq.Messages, got)
		size := 0
		for _, tc := range got {
			if tc.ID == "" || tc.Name == "" {
				t.Fatalf("tool call %q %q %q", tc.ID, tc.Name, tc.Arguments)
			}
			size += len(tc.Arguments) + len(tc.Name)
		}
		if res := st.Response(); res.Finish != classify.FinishOf(res.FinishReason) {
			t.Fatalf("Response %+v: Finish not of FinishReason", res)
		}
		// Arguments kept as a JSON string grow by their quoting; the raw
		// pieces were capped.
		if size > 8*max {
			t.Fatalf("%d bytes of tool calls under MaxResponseBytes %d", size, max)
		}
	})
}
