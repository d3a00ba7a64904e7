package anthropic

// Tool calls in answers, whole and streamed, and the stop reasons.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/suite"
)

// showChunks prints chunks for a failure message.
func showChunks(cs []llm.Chunk) string {
	var b strings.Builder
	for _, c := range cs {
		if c.ToolCall != nil {
			fmt.Fprintf(&b, "[call %s %s %s]", c.ToolCall.ID, c.ToolCall.Name, c.ToolCall.Arguments)
		} else {
			fmt.Fprintf(&b, "[%q]", c.Text)
		}
	}
	return b.String()
}

// toolBody is a whole answer calling two tools between text blocks.
const toolBody = `{"id":"msg_01","type":"message","role":"assistant","model":"claude-test",
"content":[{"type":"text","text":"Let me check."},
{"type":"tool_use","id":"toolu_01A","name":"get_weather","input":{"city": "Paris", "unit": "c"}},
{"type":"thinking","thinking":"and the time"},
{"type":"tool_use","id":"toolu_01B","name":"get_time","input":{}},
{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"x"}}],
"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":5}}`

func TestCompleteToolCalls(t *testing.T) {
	s := suite.NewServer(t, suite.Respond(200, toolBody))
	res, err := newProvider(t, s.URL).Complete(context.Background(), userReq)
	if err != nil {
		t.Fatal(err)
	}
	want := []llm.ToolCall{
		{ID: "toolu_01A", Name: "get_weather", Arguments: json.RawMessage(`{"city": "Paris", "unit": "c"}`)},
		{ID: "toolu_01B", Name: "get_time", Arguments: json.RawMessage(`{}`)},
	}
	if !reflect.DeepEqual(res.ToolCalls, want) || res.Text != "Let me check." || res.Finish != llm.FinishToolUse || res.FinishReason != "tool_use" {
		t.Errorf("response %+v; want calls %+v", res, want)
	}
}

func TestCompleteNoToolCalls(t *testing.T) {
	s := suite.NewServer(t, suite.Respond(200, `{"type":"message","content":[{"type":"text","text":"hi"},{"type":"tool_use","id":"t","name":"n"}],"stop_reason":"end_turn"}`))
	res, err := newProvider(t, s.URL).Complete(context.Background(), userReq)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.ToolCalls) != 1 || string(res.ToolCalls[0].Arguments) != "{}" {
		t.Errorf("a call without input: %+v; want Arguments {}", res.ToolCalls)
	}
	s = suite.NewServer(t, suite.Respond(200, `{"type":"message","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn"}`))
	if res, err = newProvider(t, s.URL).Complete(context.Background(), userReq); err != nil || res.ToolCalls != nil {
		t.Errorf("text answer: %+v, %v; want no calls", res, err)
	}
}

func TestFinish(t *testing.T) {
	tests := []struct {
		reason string
		want   llm.Finish
	}{
		{"end_turn", llm.FinishStop},
		{"stop_sequence", llm.FinishStop},
		{"max_tokens", llm.FinishLength},
		{"model_context_window_exceeded", llm.FinishLength},
		{"tool_use", llm.FinishToolUse},
		{"pause_turn", llm.FinishPause},
		{"brand_new_reason", llm.FinishUnknown},
		{"", llm.FinishUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.reason, func(t *testing.T) {
			reason := "null"
			if tt.reason != "" {
				reason = `"` + tt.reason + `"`
			}
			body := `{"type":"message","content":[{"type":"text","text":"x"}],"stop_reason":` + reason + `}`
			stop := event("message_delta", `{"type":"message_delta","delta":{"stop_reason":`+reason+`},"usage":{"output_tokens":1}}`) +
				event("message_stop", `{"type":"message_stop"}`)
			s := suite.NewServer(t, suite.StreamOrComplete([]string{evStart, evText0, evHello, stop}, body))
			p := newProvider(t, s.URL)
			res, err := p.Complete(context.Background(), userReq)
			if err != nil || res.Finish != tt.want || res.FinishReason != tt.reason {
				t.Errorf("Complete: %+v, %v; want Finish %v", res, err, tt.want)
			}
			st := openStream(t, p, context.Background())
			if _, err := suite.ReadChunks(t, st); err != io.EOF {
				t.Fatal(err)
			}
			if res := st.Response(); res.Finish != tt.want || res.FinishReason != tt.reason {
				t.Errorf("Stream: Finish %v (%q); want %v", res.Finish, res.FinishReason, tt.want)
			}
		})
	}
	// refusal stays an error, as before.
	s := suite.NewServer(t, suite.Respond(200, `{"type":"message","content":[],"stop_reason":"refusal"}`))
	_, err := newProvider(t, s.URL).Complete(context.Background(), userReq)
	if e := (*llm.Error)(nil); !errors.As(err, &e) || e.Kind != llm.KindContentFilter {
		t.Errorf("refusal: %v; want KindContentFilter", err)
	}
}

// toolStart, jsonDelta and blockStop are the events of a streamed tool_use
// block, as anthropic-sdk-go's fixtures show them.
func toolStart(index int, id, name string) string {
	return event("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":%q,"name":%q,"input":{}}}`, index, id, name))
}

func jsonDelta(index int, piece string) string {
	b, _ := json.Marshal(map[string]any{"type": "content_block_delta", "index": index,
		"delta": map[string]string{"type": "input_json_delta", "partial_json": piece}})
	return event("content_block_delta", string(b))
}

func blockStop(index int) string {
	return event("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, index))
}

var evToolStop = event("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":30}}`) +
	event("message_stop", `{"type":"message_stop"}`)

func TestStreamToolCall(t *testing.T) {
	s := suite.NewServer(t, suite.SSE([]string{evStart, toolStart(0, "toolu_id", "get_weather"),
		jsonDelta(0, ""), jsonDelta(0, `{"city": `), jsonDelta(0, `"Los `), jsonDelta(0, `Angeles"}`), blockStop(0), evToolStop}))
	st := openStream(t, newProvider(t, s.URL), context.Background())
	got, err := suite.ReadChunks(t, st)
	want := llm.ToolCall{ID: "toolu_id", Name: "get_weather", Arguments: json.RawMessage(`{"city": "Los Angeles"}`)}
	if err != io.EOF || !reflect.DeepEqual(got, []llm.Chunk{{ToolCall: &want}}) {
		t.Fatalf("chunks %s, %v; want the call", showChunks(got), err)
	}
	res := st.Response()
	if !reflect.DeepEqual(res.ToolCalls, []llm.ToolCall{want}) || res.Finish != llm.FinishToolUse || res.Text != "" {
		t.Errorf("Response %+v", res)
	}
}

// TestStreamToolCallsInterleaved: two calls, one with no arguments, between
// and among text blocks, with the blocks' events interleaved as
// anthropic-sdk-go's "interleaved content blocks" fixture has them.
func TestStreamToolCallsInterleaved(t *testing.T) {
	s := suite.NewServer(t, suite.SSE([]string{evStart,
		evText0, evHello,
		toolStart(2, "toolu_A", "get_weather"),
		delta(1, ", world"),
		jsonDelta(2, `{"city": `),
		jsonDelta(2, `"Paris"}`),
		blockStop(1),
		blockStop(2),
		toolStart(3, "toolu_B", "now"),
		blockStop(3),
		event("content_block_start", `{"type":"content_block_start","index":4,"content_block":{"type":"text","text":""}}`),
		delta(4, "Done."),
		blockStop(4),
		evToolStop}))
	st := openStream(t, newProvider(t, s.URL), context.Background())
	a := llm.ToolCall{ID: "toolu_A", Name: "get_weather", Arguments: json.RawMessage(`{"city": "Paris"}`)}
	b := llm.ToolCall{ID: "toolu_B", Name: "now", Arguments: json.RawMessage(`{}`)}

	var got []llm.Chunk
	for {
		c, err := st.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, c)
		// Response always holds what Next has returned, no more.
		var text string
		var calls []llm.ToolCall
		for _, c := range got {
			text += c.Text
			if c.ToolCall != nil {
				calls = append(calls, *c.ToolCall)
			}
		}
		if res := st.Response(); res.Text != text || !reflect.DeepEqual(res.ToolCalls, calls) {
			t.Fatalf("after %s: Response has %q and %+v", showChunks(got), res.Text, res.ToolCalls)
		}
	}
	want := []llm.Chunk{{Text: "Hello"}, {Text: ", world"}, {ToolCall: &a}, {ToolCall: &b}, {Text: "Done."}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("chunks %s; want %s", showChunks(got), showChunks(want))
	}
	res := st.Response()
	if res.Text != "Hello, worldDone." || !reflect.DeepEqual(res.ToolCalls, []llm.ToolCall{a, b}) || res.Finish != llm.FinishToolUse {
		t.Errorf("Response %+v", res)
	}
}

func TestStreamToolCallUnstopped(t *testing.T) {
	// A gateway that drops content_block_stop: the call ends with the
	// message.
	s := suite.NewServer(t, suite.SSE([]string{evStart, toolStart(0, "toolu_1", "f"), jsonDelta(0, `{"a":1}`), evToolStop}))
	st := openStream(t, newProvider(t, s.URL), context.Background())
	got, err := suite.ReadChunks(t, st)
	if err != io.EOF || len(got) != 1 || got[0].ToolCall == nil || string(got[0].ToolCall.Arguments) != `{"a":1}` {
		t.Errorf("chunks %s, %v", showChunks(got), err)
	}
}

func TestStreamToolCallBadArguments(t *testing.T) {
	s := suite.NewServer(t, suite.SSE([]string{evStart, toolStart(0, "toolu_1", "f"), jsonDelta(0, `{"a":`), blockStop(0), evToolStop}, "request-id", "req_bad"))
	e := streamFails(t, openStream(t, newProvider(t, s.URL), context.Background()))
	if e.Kind != llm.KindInvalidOutput || e.RequestID != "req_bad" || e.Status != 200 {
		t.Errorf("got %#v; want KindInvalidOutput", e)
	}
}

func TestStreamToolCallTooLong(t *testing.T) {
	pieces := []string{evStart, toolStart(0, "toolu_1", "f"), jsonDelta(0, `{"a":"`)}
	for range 10 {
		pieces = append(pieces, jsonDelta(0, strings.Repeat("x", 100)))
	}
	pieces = append(pieces, jsonDelta(0, `"}`), blockStop(0), evToolStop)
	s := suite.NewServer(t, suite.SSE(pieces))
	p, err := New(Config{APIKey: testKey, BaseURL: s.URL, MaxResponseBytes: 512})
	if err != nil {
		t.Fatal(err)
	}
	e := streamFails(t, openStream(t, p, context.Background()))
	if e.Kind != llm.KindServer || !strings.Contains(e.Message, "512") {
		t.Errorf("got %#v; want KindServer naming the limit", e)
	}
}

// TestStreamWholeToolCalls: a gateway answering a stream with a JSON body
// delivers its calls as chunks too.
func TestStreamWholeToolCalls(t *testing.T) {
	s := suite.NewServer(t, suite.Respond(200, toolBody, "content-type", "application/json"))
	st := openStream(t, newProvider(t, s.URL), context.Background())
	got, err := suite.ReadChunks(t, st)
	if err != io.EOF || len(got) != 3 || got[0].ToolCall == nil || got[0].ToolCall.ID != "toolu_01A" ||
		got[1].ToolCall == nil || got[1].ToolCall.ID != "toolu_01B" || got[2].Text != "Let me check." {
		t.Fatalf("chunks %s, %v", showChunks(got), err)
	}
	if res := st.Response(); len(res.ToolCalls) != 2 || res.Finish != llm.FinishToolUse || res.Text != "Let me check." {
		t.Errorf("Response %+v", res)
	}
}

// TestForeignToolIDsRoundTrip: ids another provider issued go out valid for
// Anthropic; an answer echoing a translated id gets the caller's id back,
// renamed since the history holds it (<caller's id>_2, not a hash), and a
// new id the API issued comes back as it is.
func TestForeignToolIDsRoundTrip(t *testing.T) {
	req := foreignHistory()
	var sent []string
	answer := func(ids []string) (string, []string) {
		body := `{"type":"message","content":[`
		stream := []string{evStart}
		for i, id := range ids {
			if i > 0 {
				body += ","
			}
			body += fmt.Sprintf(`{"type":"tool_use","id":%q,"name":"get","input":{}}`, id)
			stream = append(stream, toolStart(i, id, "get"), blockStop(i))
		}
		return body + `],"stop_reason":"tool_use"}`, append(stream, evToolStop)
	}
	// First learn the ids the adapter sends.
	s0 := suite.NewServer(t, suite.Respond(200, okBody))
	if _, err := newProvider(t, s0.URL).Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	sent, _ = sentIDs(t, s0.Last().Body)
	echo := append(append([]string(nil), sent...), "toolu_new")
	want := []string{"call_abc123_2", "functions.get:0_2", strings.Repeat("x", 70) + "_2", "toolu_new"}

	body, events := answer(echo)
	s := suite.NewServer(t, suite.StreamOrComplete(events, body))
	p := newProvider(t, s.URL)
	res, err := p.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got := callIDs(res.ToolCalls); !reflect.DeepEqual(got, want) {
		t.Errorf("Complete: ids %q; want %q", got, want)
	}
	st := suite.OpenStream(t, p, context.Background(), req)
	chunks, err := suite.ReadChunks(t, st)
	if err != io.EOF {
		t.Fatal(err)
	}
	var streamed []llm.ToolCall
	for _, c := range chunks {
		streamed = append(streamed, *c.ToolCall)
	}
	if got := callIDs(streamed); !reflect.DeepEqual(got, want) {
		t.Errorf("Stream: ids %q; want %q", got, want)
	}
	if got := callIDs(st.Response().ToolCalls); !reflect.DeepEqual(got, want) {
		t.Errorf("Stream Response: ids %q; want %q", got, want)
	}
}

func callIDs(calls []llm.ToolCall) []string {
	var ids []string
	for _, c := range calls {
		ids = append(ids, c.ID)
	}
	return ids
}

// TestStreamCloseDropsPending: after Close, calls finished but not yet
// returned are not returned, nor in Response.
func TestStreamCloseDropsPending(t *testing.T) {
	s := suite.NewServer(t, suite.SSE([]string{evStart, toolStart(0, "toolu_A", "a"), blockStop(0), toolStart(1, "toolu_B", "b"), blockStop(1),
		evText0, evHello, evToolStop}))
	st := openStream(t, newProvider(t, s.URL), context.Background())
	c, err := st.Next()
	if err != nil || c.ToolCall == nil || c.ToolCall.ID != "toolu_A" {
		t.Fatalf("first chunk %s, %v", showChunks([]llm.Chunk{c}), err)
	}
	st.Close()
	if c, err := st.Next(); err == nil {
		t.Fatalf("Next after Close returned %s", showChunks([]llm.Chunk{c}))
	}
	if res := st.Response(); len(res.ToolCalls) != 1 || res.Text != "" {
		t.Errorf("Response after Close: %+v; want only the call returned", res)
	}
}
