package openai

// The answer's tool calls and finish reasons, whole and streamed.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/suite"
)

// weatherCall is the tool call of openai-go's streamaccumulator_test.go
// fixture, assembled.
var weatherCall = llm.ToolCall{ID: "call_FXoAjBUMcVv1k40fficJ9cSs", Name: "get_weather",
	Arguments: json.RawMessage(`{"location":"Santorini, Greece"}`)}

func TestFinishReasons(t *testing.T) {
	for raw, want := range map[string]llm.Finish{
		"stop": llm.FinishStop, "length": llm.FinishLength, "tool_calls": llm.FinishToolUse,
		"function_call": llm.FinishToolUse, "something_new": llm.FinishUnknown, "": llm.FinishUnknown,
	} {
		fr := "null"
		if raw != "" {
			fr = fmt.Sprintf("%q", raw)
		}
		body := `{"id":"c","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"x"},"finish_reason":` + fr + `}]}`
		s := suite.NewServer(t, suite.Respond(200, body))
		res, err := newProvider(t, s.URL).Complete(context.Background(), userReq)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		if res.Finish != want || res.FinishReason != raw {
			t.Errorf("finish_reason %q: Finish %v, FinishReason %q; want %v", raw, res.Finish, res.FinishReason, want)
		}
		// The same finish_reason streamed.
		s = suite.NewServer(t, suite.SSE([]string{evRole, chunkEvent(0, "x", raw), data("[DONE]")}))
		st := openStream(t, newProvider(t, s.URL), context.Background())
		if _, err := suite.ReadStream(st); err != io.EOF {
			t.Fatalf("%s: stream %v", raw, err)
		}
		if res := st.Response(); res.Finish != want || res.FinishReason != raw {
			t.Errorf("streamed finish_reason %q: Finish %v; want %v", raw, res.Finish, want)
		}
	}
	// content_filter withholds the answer: an error, not a Finish.
	s := suite.NewServer(t, suite.Respond(200, `{"choices":[{"message":{"content":"x"},"finish_reason":"content_filter"}]}`))
	if e := completeErr(t, newProvider(t, s.URL), context.Background()); e.Kind != llm.KindContentFilter {
		t.Errorf("content_filter: %+v", e)
	}
}

func TestResponseToolCalls(t *testing.T) {
	// The first call is openai-go's chatcompletion_helpers_test.go message.
	body := `{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-test","choices":[{"index":0,"message":{"role":"assistant","content":"hello","refusal":null,"tool_calls":[` +
		`{"id":"call_1","type":"function","function":{"name":"lookup","arguments":"{\"x\":1}"}},` +
		`{"id":"call_2","type":"function","function":{"name":"broken","arguments":"{\"x\":"}},` +
		`{"id":"call_3","type":"function","function":{"name":"empty","arguments":""}},` +
		`{"id":"call_4","type":"function","function":{"name":"object","arguments":{"y":[2]}}},` +
		`{"type":"function","function":{"name":"no_id","arguments":" {\"z\":true} "}},` +
		`{"id":"call_6","type":"function","function":{"name":"","arguments":"{}"}}` +
		`]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":4}}`
	s := suite.NewServer(t, suite.Respond(200, body))
	res, err := newProvider(t, s.URL).Complete(context.Background(), userReq)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "hello" || res.Finish != llm.FinishToolUse || len(res.ToolCalls) != 5 {
		t.Fatalf("response %+v", res)
	}
	want := []llm.ToolCall{
		{ID: "call_1", Name: "lookup", Arguments: json.RawMessage(`{"x":1}`)},
		{ID: "call_2", Name: "broken", Arguments: json.RawMessage(`"{\"x\":"`)}, // not JSON: kept as a string
		{ID: "call_3", Name: "empty", Arguments: json.RawMessage(`{}`)},
		{ID: "call_4", Name: "object", Arguments: json.RawMessage(`{"y":[2]}`)}, // a compatible server's object
		// The fifth call of the conversation has no id: call_4 would be
		// its name, but the fourth call has it, so it is call_5.
		{ID: "call_5", Name: "no_id", Arguments: json.RawMessage(`{"z":true}`)},
	}
	if !reflect.DeepEqual(res.ToolCalls, want) {
		t.Errorf("ToolCalls\n got %s\nwant %s", calls(res.ToolCalls), calls(want))
	}
	for _, c := range res.ToolCalls {
		if !json.Valid(c.Arguments) {
			t.Errorf("call %s: Arguments %s are not JSON", c.ID, c.Arguments)
		}
	}
}

// calls formats tool calls for a failure message.
func calls(cs []llm.ToolCall) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "{%s %s %s} ", c.ID, c.Name, c.Arguments)
	}
	return b.String()
}

// TestRefusal checks a refusal is a KindContentFilter error, the model's
// text in Detail only, as Anthropic's stop_reason refusal is.
func TestRefusal(t *testing.T) {
	body := `{"id":"c","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"I can't help with PROMPT-secret."},"finish_reason":"stop"}]}`
	s := suite.NewServer(t, suite.Respond(200, body))
	e := completeErr(t, newProvider(t, s.URL), context.Background())
	if e.Kind != llm.KindContentFilter || e.Code != "refusal" || e.Detail != "I can't help with PROMPT-secret." ||
		strings.Contains(e.Error(), "PROMPT-secret") || strings.Contains(e.Message, "PROMPT-secret") {
		t.Errorf("got %#v", e)
	}
}

// sdkToolStream is openai-go's streamaccumulator_test.go tool-call stream
// (text, then one call in nine argument pieces, finish_reason tool_calls,
// a usage chunk), trimmed of logprobs.
var sdkToolStream = []string{
	evRole,
	chunkEvent(0, "It is sunny", ""),
	data(`{"id":"chatcmpl-A3Tguz3LSXTHBTY2NAPBCSyfBltxF","object":"chat.completion.chunk","created":1725392480,"model":"gpt-4o-2024-05-13","system_fingerprint":"fp_157b3831f5","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_FXoAjBUMcVv1k40fficJ9cSs","type":"function","function":{"name":"get_weather","arguments":""}}]},"logprobs":{"content":[],"refusal":null},"finish_reason":null}],"usage":null}`),
	toolPiece(0, `{\"`), toolPiece(0, `location`), toolPiece(0, `\":\"`), toolPiece(0, `Sant`), toolPiece(0, `orini`),
	toolPiece(0, `,`), toolPiece(0, ` Greece`), toolPiece(0, `\"}`),
	data(`{"id":"chatcmpl-A3Tguz3LSXTHBTY2NAPBCSyfBltxF","object":"chat.completion.chunk","created":1725392480,"model":"gpt-4o-2024-05-13","system_fingerprint":"fp_157b3831f5","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],"usage":null}`),
	data(`{"id":"chatcmpl-A3Tguz3LSXTHBTY2NAPBCSyfBltxF","object":"chat.completion.chunk","created":1725392480,"model":"gpt-4o-2024-05-13","system_fingerprint":"fp_157b3831f5","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":100,"total_tokens":110}}`),
	data("[DONE]"),
}

// toolPiece is a delta appending args (JSON-escaped already) to the
// arguments of call index.
func toolPiece(index int, args string) string {
	return data(fmt.Sprintf(`{"id":"chatcmpl-A3Tguz3LSXTHBTY2NAPBCSyfBltxF","object":"chat.completion.chunk","created":1725392480,"model":"gpt-4o-2024-05-13","system_fingerprint":"fp_157b3831f5","choices":[{"index":0,"delta":{"tool_calls":[{"index":%d,"function":{"arguments":"%s"}}]},"logprobs":{"content":[],"refusal":null},"finish_reason":null}],"usage":null}`, index, args))
}

func TestStreamToolCall(t *testing.T) {
	s := suite.NewServer(t, suite.SSE(sdkToolStream))
	st := openStream(t, newProvider(t, s.URL), context.Background())
	got, err := suite.ReadChunks(t, st)
	if err != io.EOF || len(got) != 2 || got[0].Text != "It is sunny" || got[1].ToolCall == nil ||
		!reflect.DeepEqual(*got[1].ToolCall, weatherCall) {
		t.Fatalf("chunks %+v, %v; want the text then %+v", got, err, weatherCall)
	}
	res := st.Response()
	if res.Text != "It is sunny" || res.Finish != llm.FinishToolUse || res.FinishReason != "tool_calls" ||
		!reflect.DeepEqual(res.ToolCalls, []llm.ToolCall{weatherCall}) || res.Usage != (llm.Usage{InputTokens: 10, OutputTokens: 100}) {
		t.Errorf("Response %+v", res)
	}
	if _, err := st.Next(); err != io.EOF {
		t.Errorf("Next after the end: %v", err)
	}
}

// TestStreamParallelToolCalls checks two calls whose pieces interleave
// come out whole, in index order, at finish_reason, before the end.
func TestStreamParallelToolCalls(t *testing.T) {
	first := func(i int, id, name string) string {
		return data(fmt.Sprintf(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":%d,"id":%q,"type":"function","function":{"name":%q,"arguments":""}}]},"finish_reason":null}]}`, i, id, name))
	}
	events := []string{evRole,
		first(1, "call_b", "get_time"), first(0, "call_a", "get_weather"),
		toolPiece(0, `{\"city\":`), toolPiece(1, `{\"tz\":`), toolPiece(1, `\"UTC\"}`), toolPiece(0, `\"Paris\"}`),
		// Both calls' pieces in one delta, as some servers send them.
		data(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":" "}},{"index":1,"function":{"arguments":" "}}]},"finish_reason":null}]}`),
		chunkEvent(0, "", "tool_calls"), data("[DONE]")}
	want := []llm.ToolCall{
		{ID: "call_a", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)},
		{ID: "call_b", Name: "get_time", Arguments: json.RawMessage(`{"tz":"UTC"}`)},
	}
	s := suite.NewServer(t, suite.SSE(events))
	st := openStream(t, newProvider(t, s.URL), context.Background())
	got, err := suite.ReadChunks(t, st)
	if err != io.EOF || len(got) != 2 {
		t.Fatalf("chunks %+v, %v", got, err)
	}
	for i := range want {
		if !reflect.DeepEqual(*got[i].ToolCall, want[i]) {
			t.Errorf("call %d: %s; want %s", i, calls([]llm.ToolCall{*got[i].ToolCall}), calls(want[i:i+1]))
		}
	}
	if !reflect.DeepEqual(st.Response().ToolCalls, want) {
		t.Errorf("Response().ToolCalls %s", calls(st.Response().ToolCalls))
	}
}

// TestStreamToolCallsWithoutIndex checks the streams of compatible servers
// that omit the index (pieces without an id continue the last call) or
// give every parallel call index 0 with its own id (Gemini's), ending
// with finish_reason stop.
func TestStreamToolCallsWithoutIndex(t *testing.T) {
	want := []llm.ToolCall{
		{ID: "function-call-1", Name: "get_weather", Arguments: json.RawMessage(`{"location":"Sydney"}`)},
		{ID: "function-call-2", Name: "get_time", Arguments: json.RawMessage(`{"tz":"UTC"}`)},
	}
	for name, index := range map[string]string{"no index": "", "one index": `"index":0,`} {
		t.Run(name, func(t *testing.T) {
			piece := func(id, name, args string) string {
				idName := ""
				if id != "" {
					idName = fmt.Sprintf(`"id":%q,"type":"function",`, id)
				}
				fn := fmt.Sprintf(`"arguments":%q`, args)
				if name != "" {
					fn = fmt.Sprintf(`"name":%q,`, name) + fn
				}
				return data(`{"choices":[{"index":0,"delta":{"tool_calls":[{` + index + idName + `"function":{` + fn + `}}]},"finish_reason":null}]}`)
			}
			events := []string{evRole,
				piece("function-call-1", "get_weather", `{"location":`), piece("", "", `"Sydney"}`),
				piece("function-call-2", "get_time", `{"tz":"UTC"}`),
				chunkEvent(0, "", "stop"), data("[DONE]")}
			s := suite.NewServer(t, suite.SSE(events))
			st := openStream(t, newProvider(t, s.URL), context.Background())
			got, err := suite.ReadChunks(t, st)
			if err != io.EOF || len(got) != 2 || !reflect.DeepEqual(st.Response().ToolCalls, want) {
				t.Fatalf("chunks %+v, %v; calls %s; want %s", got, err, calls(st.Response().ToolCalls), calls(want))
			}
		})
	}
}

// TestStreamToolCallsAtDone checks calls without a finish_reason come out
// at [DONE], and that a call's broken arguments stay valid JSON.
func TestStreamToolCallsAtDone(t *testing.T) {
	events := []string{evRole,
		data(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","function":{"name":"f","arguments":"{\"a\":"}}]}}]}`),
		data("[DONE]")}
	s := suite.NewServer(t, suite.SSE(events))
	st := openStream(t, newProvider(t, s.URL), context.Background())
	got, err := suite.ReadChunks(t, st)
	want := llm.ToolCall{ID: "call_a", Name: "f", Arguments: json.RawMessage(`"{\"a\":"`)}
	if err != io.EOF || len(got) != 1 || !reflect.DeepEqual(*got[0].ToolCall, want) {
		t.Fatalf("chunks %+v, %v; want %+v", got, err, want)
	}
	if res := st.Response(); res.Finish != llm.FinishUnknown || len(res.ToolCalls) != 1 {
		t.Errorf("Response %+v", res)
	}
}

// TestStreamToolCallsTooLong checks MaxResponseBytes caps the assembled
// arguments, and that a call assembled is not delivered after a failure.
func TestStreamToolCallsTooLong(t *testing.T) {
	events := []string{evRole, data(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","function":{"name":"f","arguments":""}}]}}]}`)}
	piece := toolPiece(0, strings.Repeat("x", 100))
	for range 20 {
		events = append(events, piece)
	}
	events = append(events, chunkEvent(0, "", "tool_calls"), data("[DONE]"))
	s := suite.NewServer(t, suite.SSE(events))
	p, err := New(Config{APIKey: testKey, BaseURL: s.URL, MaxResponseBytes: 1500})
	if err != nil {
		t.Fatal(err)
	}
	e := streamFails(t, openStream(t, p, context.Background()))
	if e.Kind != llm.KindServer || !strings.Contains(e.Message, "tool calls are longer than 1500 bytes") {
		t.Errorf("got %#v", e)
	}
	// Endless empty calls are capped too.
	events = []string{evRole}
	for i := range 100 {
		events = append(events, data(fmt.Sprintf(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":%d,"function":{"arguments":""}}]}}]}`, i)))
	}
	s = suite.NewServer(t, suite.SSE(append(events, data("[DONE]"))))
	p, _ = New(Config{APIKey: testKey, BaseURL: s.URL, MaxResponseBytes: 1500})
	if e := streamFails(t, openStream(t, p, context.Background())); e.Kind != llm.KindServer {
		t.Errorf("got %#v", e)
	}
	// A failure after finish_reason: the call assembled is not delivered.
	events = []string{evRole, data(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`),
		data(errBody("server_error", "", "boom"))}
	s = suite.NewServer(t, suite.SSE(events))
	st := openStream(t, newProvider(t, s.URL), context.Background())
	if e := streamFails(t, st); e.Kind != llm.KindServer || len(st.Response().ToolCalls) != 0 {
		t.Errorf("got %#v, calls %+v", e, st.Response().ToolCalls)
	}
}

// TestStreamWholeToolCalls checks an answer that arrived whole (a server
// that does not stream) delivers its text, then its calls.
func TestStreamWholeToolCalls(t *testing.T) {
	body := `{"id":"c","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Checking.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"lookup","arguments":"{\"x\":1}"}},{"id":"call_2","type":"function","function":{"name":"lookup","arguments":"{\"x\":2}"}}]},"finish_reason":"tool_calls"}]}`
	s := suite.NewServer(t, suite.Respond(200, body, "Content-Type", "application/json"))
	st := openStream(t, newProvider(t, s.URL), context.Background())
	if res := st.Response(); len(res.ToolCalls) != 0 {
		t.Errorf("calls before Next: %+v", res.ToolCalls)
	}
	got, err := suite.ReadChunks(t, st)
	if err != io.EOF || len(got) != 3 || got[0].Text != "Checking." || got[1].ToolCall.ID != "call_1" || got[2].ToolCall.ID != "call_2" {
		t.Fatalf("chunks %+v, %v", got, err)
	}
	if res := st.Response(); res.Text != "Checking." || len(res.ToolCalls) != 2 || res.Finish != llm.FinishToolUse {
		t.Errorf("Response %+v", res)
	}
}

// TestStreamCloseDropsCalls checks nothing is delivered after Close.
func TestStreamCloseDropsCalls(t *testing.T) {
	events := []string{evRole, data(`{"choices":[{"index":0,"delta":{"content":"x","tool_calls":[{"index":0,"id":"call_a","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`),
		data("[DONE]")}
	s := suite.NewServer(t, suite.SSE(events))
	st := openStream(t, newProvider(t, s.URL), context.Background())
	if c, err := st.Next(); err != nil || c.Text != "x" {
		t.Fatalf("first chunk %+v, %v", c, err)
	}
	st.Close()
	if c, err := st.Next(); err == nil {
		t.Errorf("Next after Close: %+v", c)
	}
}
