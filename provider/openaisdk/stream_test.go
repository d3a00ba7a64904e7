package openaisdk

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/openaiwire"
	"github.com/backstop-llm/backstop/provider/internal/suite"
	"github.com/openai/openai-go/v3/option"
)

// readAll reads s to its end: the chunks' texts and tool calls, and the
// final error.
func readAll(s llm.Stream) ([]string, []llm.ToolCall, error) {
	var texts []string
	var calls []llm.ToolCall
	for {
		c, err := s.Next()
		if err != nil {
			return texts, calls, err
		}
		switch {
		case c.ToolCall != nil:
			calls = append(calls, *c.ToolCall)
		case c.Text == "":
			return texts, calls, errEmptyChunk
		default:
			texts = append(texts, c.Text)
		}
	}
}

var errEmptyChunk = io.ErrNoProgress

func events(data ...string) []string {
	out := make([]string, len(data))
	for i, d := range data {
		out[i] = "data: " + d + "\n\n"
	}
	return out
}

// TestChatStream: text deltas are chunks; tool-call pieces are assembled
// by index and delivered once finish_reason arrives, the id translated
// back; the usage of the last chunk is recorded; [DONE] ends the answer.
func TestChatStream(t *testing.T) {
	ids := openaiwire.ToolIDs()
	out := ids.Out(foreignID)
	s := suite.NewServer(t, suite.SSE(events(
		`{"id":"chatcmpl-s","object":"chat.completion.chunk","model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}`,
		`{"id":"chatcmpl-s","object":"chat.completion.chunk","model":"gpt-4o","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":null}]}`,
		`{"id":"chatcmpl-s","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"get_time","arguments":""}}]}}]}`,
		`{"id":"chatcmpl-s","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"`+out+`","type":"function","function":{"name":"get_weather","arguments":"{\"city\":"}}]}}]}`,
		`{"id":"chatcmpl-s","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Rome\"}"}}]}}]}`,
		`{"id":"chatcmpl-s","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		`{"id":"chatcmpl-s","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12,"prompt_tokens_details":{"cached_tokens":2}}}`,
		`[DONE]`), "X-Request-Id", "req_s", "X-Ratelimit-Remaining-Requests", "41"))
	p := newProvider(t, s.URL, APIChat)
	st := suite.OpenStream(t, p, context.Background(), toolRequest())
	texts, calls, err := readAll(st)
	if err != io.EOF {
		t.Fatalf("stream ended with %v", err)
	}
	wantCalls := []llm.ToolCall{
		{ID: echoedID, Name: "get_weather", Arguments: json.RawMessage(`{"city":"Rome"}`)},
		{ID: "call_b", Name: "get_time", Arguments: json.RawMessage(`{}`)},
	}
	if !reflect.DeepEqual(texts, []string{"Hel", "lo"}) || !reflect.DeepEqual(calls, wantCalls) {
		t.Errorf("chunks %q calls %+v", texts, calls)
	}
	res := st.Response()
	if res.Text != "Hello" || res.ID != "chatcmpl-s" || res.Model != "gpt-4o" || res.RequestID != "req_s" ||
		res.FinishReason != "tool_calls" || res.Finish != llm.FinishToolUse || res.Usage != (llm.Usage{InputTokens: 5, OutputTokens: 7, CacheReadTokens: 2}) ||
		!reflect.DeepEqual(res.ToolCalls, wantCalls) || res.RateLimit.Requests.Remaining != 41 {
		t.Errorf("response %+v", res)
	}
	if _, err := st.Next(); err != io.EOF {
		t.Errorf("Next after the end: %v", err)
	}
	body := decode(t, s.Last().Body)
	if body["stream"] != true || !reflect.DeepEqual(body["stream_options"], map[string]any{"include_usage": true}) {
		t.Errorf("body %s", s.Last().Body)
	}
	if s.Count.Load() != 1 {
		t.Errorf("%d requests", s.Count.Load())
	}
}

// TestChatStreamError: an event carrying an error object after the 200 is
// classified as the same error before the stream (status 200), after the
// chunks delivered; tool calls not yet delivered are dropped.
func TestChatStreamError(t *testing.T) {
	s := suite.SSE(events(
		`{"id":"c","model":"gpt-4o","choices":[{"index":0,"delta":{"content":"Hel"}}]}`,
		`{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"f","arguments":"{}"}}]}}]}`,
		`{"error":{"message":"The server is overloaded `+testKey+`","type":"server_error","code":"server_overloaded"}}`), "X-Request-Id", "req_e")
	srv := suite.NewServer(t, s)
	st := suite.OpenStream(t, newProvider(t, srv.URL, APIChat), context.Background(), hello())
	e := suite.StreamFails(t, st, "openai", testKey, "Hel")
	if e.Kind != llm.KindOverloaded || e.Status != 200 || e.Code != "server_overloaded" || e.RequestID != "req_e" ||
		strings.Contains(e.Detail, testKey) || !strings.Contains(e.Detail, "overloaded") {
		t.Errorf("error %#v", e)
	}
	if len(st.Response().ToolCalls) != 0 {
		t.Errorf("undelivered calls kept: %+v", st.Response().ToolCalls)
	}
}

// TestChatStreamCut: a stream that ends without a finish reason is
// incomplete (KindConnection); a malformed event is KindServer.
func TestChatStreamCut(t *testing.T) {
	for body, kind := range map[string]llm.Kind{
		"data: " + `{"id":"c","choices":[{"index":0,"delta":{"content":"Hel"}}]}` + "\n\n":                    llm.KindConnection,
		"data: " + `{"id":"c","choices":[{"index":0,"delta":{"content":"Hel"}}]}` + "\n\ndata: {not json\n\n": llm.KindServer,
	} {
		srv := suite.NewServer(t, suite.SSE([]string{body}, "X-Request-Id", "req_c"))
		st := suite.OpenStream(t, newProvider(t, srv.URL, APIChat), context.Background(), hello())
		if e := suite.StreamFails(t, st, "openai", testKey, "Hel"); e.Kind != kind || e.RequestID != "req_c" {
			t.Errorf("%q: %#v", body, e)
		}
	}
}

// TestStreamWhole: a server that answers a streaming request with a JSON
// body is read as Complete reads it: its text, then its tool calls.
func TestStreamWhole(t *testing.T) {
	srv := suite.NewServer(t, suite.Respond(200, `{"id":"c","model":"m","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":"ok","tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]}}]}`,
		"Content-Type", "application/json"))
	st := suite.OpenStream(t, newProvider(t, srv.URL, APIChat), context.Background(), hello())
	texts, calls, err := readAll(st)
	if err != io.EOF || !reflect.DeepEqual(texts, []string{"ok"}) || len(calls) != 1 || calls[0].ID != "call_1" {
		t.Errorf("%q %+v %v", texts, calls, err)
	}
	if res := st.Response(); res.Text != "ok" || res.Finish != llm.FinishToolUse || len(res.ToolCalls) != 1 {
		t.Errorf("response %+v", res)
	}
}

func responseEvent(typ, rest string) string {
	return "event: " + typ + "\ndata: {\"type\":\"" + typ + "\"," + rest + "}\n\n"
}

// TestResponsesStream: output_text deltas are chunks; a function call's
// arguments are assembled from their deltas and delivered at
// output_item.done; response.completed ends the answer with its usage.
func TestResponsesStream(t *testing.T) {
	ids := openaiwire.ToolIDs()
	out := ids.Out(foreignID)
	resp := `"response":{"id":"resp_s","object":"response","status":"%s","model":"gpt-4o","output":[]%s}`
	srv := suite.NewServer(t, suite.SSE([]string{
		responseEvent("response.created", strings.Replace(strings.Replace(resp, "%s", "in_progress", 1), "%s", "", 1)),
		responseEvent("response.output_text.delta", `"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hel"`),
		responseEvent("response.output_text.delta", `"item_id":"msg_1","output_index":0,"content_index":0,"delta":"lo"`),
		responseEvent("response.output_item.added", `"output_index":1,"item":{"type":"function_call","id":"fc_1","call_id":"`+out+`","name":"get_weather","arguments":"","status":"in_progress"}`),
		responseEvent("response.function_call_arguments.delta", `"item_id":"fc_1","output_index":1,"delta":"{\"city\":"`),
		responseEvent("response.function_call_arguments.delta", `"item_id":"fc_1","output_index":1,"delta":"\"Rome\"}"`),
		responseEvent("response.output_item.done", `"output_index":1,"item":{"type":"function_call","id":"fc_1","call_id":"`+out+`","name":"get_weather","status":"completed"}`),
		responseEvent("response.completed", strings.Replace(strings.Replace(resp, "%s", "completed", 1), "%s", `,"usage":{"input_tokens":4,"input_tokens_details":{"cached_tokens":3},"output_tokens":6,"total_tokens":10}`, 1)),
	}, "X-Request-Id", "req_rs"))
	p := newProvider(t, srv.URL, APIResponses)
	st := suite.OpenStream(t, p, context.Background(), toolRequest())
	texts, calls, err := readAll(st)
	if err != io.EOF {
		t.Fatalf("stream ended with %v", err)
	}
	want := []llm.ToolCall{{ID: echoedID, Name: "get_weather", Arguments: json.RawMessage(`{"city":"Rome"}`)}}
	if !reflect.DeepEqual(texts, []string{"Hel", "lo"}) || !reflect.DeepEqual(calls, want) {
		t.Errorf("chunks %q calls %+v", texts, calls)
	}
	res := st.Response()
	if res.Text != "Hello" || res.ID != "resp_s" || res.Model != "gpt-4o" || res.RequestID != "req_rs" ||
		res.Finish != llm.FinishToolUse || res.Usage != (llm.Usage{InputTokens: 4, OutputTokens: 6, CacheReadTokens: 3}) {
		t.Errorf("response %+v", res)
	}
	if body := decode(t, srv.Last().Body); body["stream"] != true || srv.Last().Path != "/v1/responses" {
		t.Errorf("sent %s %s", srv.Last().Path, srv.Last().Body)
	}
}

// TestResponsesStreamError: an error event, and a response.failed, are
// classified by their codes (status 200), after the chunks delivered; a
// stream ending before response.completed is incomplete.
func TestResponsesStreamError(t *testing.T) {
	delta := responseEvent("response.output_text.delta", `"item_id":"m","output_index":0,"content_index":0,"delta":"Hel"`)
	for name, c := range map[string]struct {
		event string
		kind  llm.Kind
		code  string
	}{
		"error":  {responseEvent("error", `"code":"rate_limit_exceeded","message":"Slow down `+testKey+`","param":null,"sequence_number":3`), llm.KindRateLimited, "rate_limit_exceeded"},
		"failed": {responseEvent("response.failed", `"response":{"id":"r","status":"failed","model":"m","output":[],"error":{"code":"server_error","message":"boom"}}`), llm.KindServer, "server_error"},
		"cut":    {"", llm.KindConnection, ""},
	} {
		srv := suite.NewServer(t, suite.SSE([]string{delta, c.event}, "X-Request-Id", "req_x", "Retry-After", "3"))
		st := suite.OpenStream(t, newProvider(t, srv.URL, APIResponses), context.Background(), hello())
		e := suite.StreamFails(t, st, "openai", testKey, "Hel")
		if e.Kind != c.kind || e.Code != c.code || e.Status != 200 || e.RequestID != "req_x" || e.RetryAfter != 3*time.Second ||
			strings.Contains(e.Detail, testKey) {
			t.Errorf("%s: %#v", name, e)
		}
	}
}

// TestStreamClose: Close from another goroutine ends a Next waiting for
// the server (KindCanceled), and Close is idempotent; cancelling the
// context does the same.
func TestStreamClose(t *testing.T) {
	release := make(chan struct{})
	srv := suite.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: "+`{"id":"c","choices":[{"index":0,"delta":{"content":"Hel"}}]}`+"\n\n")
		w.(http.Flusher).Flush()
		suite.Hold(r, release)
	})
	defer close(release)
	for _, api := range []string{"close", "cancel"} {
		ctx, cancel := context.WithCancel(context.Background())
		st, err := newProvider(t, srv.URL, APIChat).Stream(ctx, hello())
		if err != nil {
			t.Fatal(err)
		}
		if c, err := st.Next(); err != nil || c.Text != "Hel" {
			t.Fatalf("%s: first chunk %+v %v", api, c, err)
		}
		time.AfterFunc(30*time.Millisecond, func() {
			if api == "close" {
				st.Close()
			} else {
				cancel()
			}
		})
		_, err = st.Next()
		if llm.KindOf(err) != llm.KindCanceled {
			t.Errorf("%s: Next ended with %v", api, err)
		}
		if st.Close() != nil || st.Close() != nil {
			t.Errorf("%s: Close failed", api)
		}
		cancel()
	}
}

// TestDoneWatch: "data: [DONE]" is seen at the start of a line however the
// reads split it, and not inside an event's text.
func TestDoneWatch(t *testing.T) {
	for body, want := range map[string]bool{
		"data: [DONE]\n\n":                        true,
		"data: {\"a\":1}\n\ndata:[DONE]\n\n":      true,
		"data: {\"a\":1}\r\n\r\ndata: [DONE]\r\n": true,
		"data: {\"a\":\"data: [DONE]\"}\n\n":      false,
		"data: {\"a\":1}\n\n":                     false,
	} {
		for _, size := range []int{1, 3, 7, 64} {
			var r io.Reader = strings.NewReader(body)
			if size == 1 {
				r = iotest.OneByteReader(r)
			}
			w := newDoneWatch(io.NopCloser(r))
			buf := make([]byte, size)
			for {
				if _, err := w.Read(buf); err != nil {
					break
				}
			}
			if w.seen != want {
				t.Errorf("%q in reads of %d: seen %v", body, size, w.seen)
			}
		}
	}
	// A stream that finished (its finish_reason arrived) is complete
	// without [DONE], as with the native adapter; one that ends before
	// its finish_reason is cut short; one split across writes is complete.
	whole := suite.NewServer(t, suite.SSE(events(`{"id":"c","choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":"stop"}]}`)))
	st := suite.OpenStream(t, newProvider(t, whole.URL, APIChat), context.Background(), hello())
	if texts, _, err := readAll(st); err != io.EOF || len(texts) != 1 {
		t.Errorf("finished without [DONE]: %q %v", texts, err)
	}
	cut := suite.NewServer(t, suite.SSE(events(`{"id":"c","choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}`)))
	st = suite.OpenStream(t, newProvider(t, cut.URL, APIChat), context.Background(), hello())
	if e := suite.StreamFails(t, st, "openai", testKey, "Hel"); e.Kind != llm.KindConnection {
		t.Errorf("cut: %#v", e)
	}
	split := suite.NewServer(t, suite.SSE(append(events(`{"id":"c","choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":"stop"}]}`), "data: [DO", "NE]\n\n")))
	st = suite.OpenStream(t, newProvider(t, split.URL, APIChat), context.Background(), hello())
	if texts, _, err := readAll(st); err != io.EOF || len(texts) != 1 {
		t.Errorf("split: %q %v", texts, err)
	}
}

// panicky is a body that panics when read.
type panicky struct {
	io.ReadCloser
	reads int
}

func (p *panicky) Read(b []byte) (int, error) {
	if p.reads++; p.reads > 0 {
		panic("body exploded " + testKey)
	}
	return p.ReadCloser.Read(b)
}

// TestStreamPanic: a panic while reading a stream (in a body a middleware
// wrapped) ends it with an *llm.Error, the key redacted.
func TestStreamPanic(t *testing.T) {
	srv := suite.NewServer(t, suite.SSE(events(`{"id":"c","choices":[{"index":0,"delta":{"content":"Hel"}}]}`, `[DONE]`)))
	wrap := option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		res, err := next(r)
		if err == nil {
			res.Body = &panicky{ReadCloser: res.Body}
		}
		return res, err
	})
	st := suite.OpenStream(t, newProvider(t, srv.URL, APIChat, wrap), context.Background(), hello())
	var err error
	for err == nil {
		_, err = st.Next()
	}
	e, ok := err.(*llm.Error)
	if !ok || e.Kind != llm.KindUnknown || !strings.Contains(e.Message, "panicked") || strings.Contains(e.Error(), testKey) {
		t.Errorf("ended with %#v", err)
	}
	if _, again := st.Next(); again != err {
		t.Errorf("Next after the panic: %v", again)
	}
}
