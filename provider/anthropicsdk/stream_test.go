package anthropicsdk

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/suite"
)

// event is one server-sent event as Anthropic writes it; delta the
// text_delta event of a content block.
var event, delta = suite.AnthropicEvent, suite.AnthropicDelta

var (
	evStart = suite.AnthropicStart
	evText0 = suite.AnthropicText1
	evStop  = suite.AnthropicStop
	// evOther is what a stream may carry that is not text: a thinking
	// block, pings, comments, an event of a later API version.
	evOther = suite.AnthropicOther +
		": a comment\n\n"
	evTool = event("content_block_start", `{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}}`) +
		event("content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"city\": "}}`) +
		event("content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"\"Paris\"}"}}`) +
		event("content_block_stop", `{"type":"content_block_stop","index":2}`)
)

var happyStream = []string{evStart, evOther, evText0, delta(1, "Hello"), event("ping", `{"type": "ping"}`), delta(1, ", world"),
	event("content_block_stop", `{"type":"content_block_stop","index":1}`), evTool, delta(3, "!"), evStop}

// readChunks reads s to its end and returns the chunks and the final error.
func readChunks(s llm.Stream) ([]llm.Chunk, error) {
	var got []llm.Chunk
	for {
		c, err := s.Next()
		if err != nil {
			return got, err
		}
		got = append(got, c)
	}
}

func TestStream(t *testing.T) {
	s := suite.NewServer(t, suite.SSE(happyStream, "Request-Id", "req_s", "Anthropic-Ratelimit-Tokens-Remaining", "99"))
	p := newProvider(t, s.URL)
	st := suite.OpenStream(t, p, context.Background(), userReq)
	got, err := readChunks(st)
	if err != io.EOF {
		t.Fatalf("ended with %v", err)
	}
	call := llm.ToolCall{ID: "toolu_1", Name: "get_weather", Arguments: json.RawMessage(`{"city": "Paris"}`)}
	want := []llm.Chunk{{Text: "Hello"}, {Text: ", world"}, {ToolCall: &call}, {Text: "!"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("chunks %+v; want %+v", got, want)
	}
	res := llm.Response{Text: "Hello, world!", Model: "claude-test-20260101", ID: "msg_01", RequestID: "req_s",
		FinishReason: "end_turn", Finish: llm.FinishStop, Usage: llm.Usage{InputTokens: 20, OutputTokens: 15, CacheReadTokens: 7, CacheWriteTokens: 3},
		RateLimit: llm.RateLimit{Tokens: llm.Allowance{Remaining: 99}}, ToolCalls: []llm.ToolCall{call}}
	suite.StreamEnds(t, st, res)
	if n := s.Count.Load(); n != 1 {
		t.Errorf("%d requests", n)
	}
	// The native adapter assembles the same answer from the same events.
	nst := suite.OpenStream(t, nativeProvider(t, s.URL), context.Background(), userReq)
	if _, err := readChunks(nst); err != io.EOF {
		t.Fatal(err)
	}
	if nr := nst.Response(); !reflect.DeepEqual(*nr, res) {
		t.Errorf("native\n got %+v\nwant %+v", *nr, res)
	}
}

// TestStreamErrorEvent: an error event after the 200 is classified as the
// native adapter classifies it, after the text delivered before it.
func TestStreamErrorEvent(t *testing.T) {
	errEv := event("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_body"}`)
	s := suite.NewServer(t, suite.SSE([]string{evStart, evText0, delta(1, "Hel"), errEv}, "Request-Id", "req_e", "Retry-After", "3"))
	st := suite.OpenStream(t, newProvider(t, s.URL), context.Background(), userReq)
	e := suite.StreamFails(t, st, "anthropic", testKey, "Hel")
	if e.Kind != llm.KindOverloaded || e.Status != 200 || e.Type != "overloaded_error" || e.RequestID != "req_e" || e.RetryAfter != 3*time.Second {
		t.Errorf("%#v", e)
	}
	nst := suite.OpenStream(t, nativeProvider(t, s.URL), context.Background(), userReq)
	same(t, e, suite.StreamFails(t, nst, "anthropic", testKey, "Hel"))
	if n := s.Count.Load(); n != 2 {
		t.Errorf("%d requests; want one each", n)
	}
}

func TestStreamFailures(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events []string
		chunks []string
		kind   llm.Kind
	}{
		{"cut short", []string{evStart, evText0, delta(1, "Hel")}, []string{"Hel"}, llm.KindConnection},
		{"refusal", []string{evStart, evText0, delta(1, "I"), event("message_delta", `{"type":"message_delta","delta":{"stop_reason":"refusal"}}`), event("message_stop", `{"type":"message_stop"}`)}, []string{"I"}, llm.KindContentFilter},
		{"event not JSON", []string{evStart, event("content_block_delta", `{"type":`)}, nil, llm.KindServer},
		{"bad tool arguments", []string{evStart, event("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}`),
			event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}`),
			event("content_block_stop", `{"type":"content_block_stop","index":0}`)}, nil, llm.KindInvalidOutput},
		{"rate limited", []string{evStart, event("error", `{"type":"error","error":{"type":"rate_limit_error","message":"slow"}}`)}, nil, llm.KindRateLimited},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := suite.NewServer(t, suite.SSE(tc.events, "Request-Id", "req_f"))
			st := suite.OpenStream(t, newProvider(t, s.URL), context.Background(), userReq)
			e := suite.StreamFails(t, st, "anthropic", testKey, tc.chunks...)
			if e.Kind != tc.kind || e.Status != 200 || e.RequestID != "req_f" {
				t.Errorf("%#v; want %v", e, tc.kind)
			}
		})
	}
}

// TestStreamWithoutMessageStop: a stream whose message_delta carried the
// stop reason and whose body then ended cleanly is a whole answer, though
// message_stop never came, as the native adapter reads it; and a refusal
// said that way is still a refusal.
func TestStreamWithoutMessageStop(t *testing.T) {
	stop := event("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}`)
	s := suite.NewServer(t, suite.SSE([]string{evStart, evText0, delta(1, "Hel"), delta(1, "lo"), stop}, "Request-Id", "req_w"))
	st := suite.OpenStream(t, newProvider(t, s.URL), context.Background(), userReq)
	chunks, err := readChunks(st)
	if err != io.EOF || len(chunks) != 2 {
		t.Fatalf("chunks %+v, err %v; want two chunks and io.EOF", chunks, err)
	}
	if res := st.Response(); res.Text != "Hello" || res.Finish != llm.FinishStop {
		t.Errorf("response %+v", res)
	}
	refused := event("message_delta", `{"type":"message_delta","delta":{"stop_reason":"refusal"}}`)
	s = suite.NewServer(t, suite.SSE([]string{evStart, evText0, delta(1, "I"), refused}, "Request-Id", "req_w"))
	st = suite.OpenStream(t, newProvider(t, s.URL), context.Background(), userReq)
	if e := suite.StreamFails(t, st, "anthropic", testKey, "I"); e.Kind != llm.KindContentFilter {
		t.Errorf("refusal: %#v", e)
	}
}

// TestStreamWhole: a server that answers a stream request with JSON is
// read as Complete reads it.
func TestStreamWhole(t *testing.T) {
	s := suite.NewServer(t, suite.Respond(200, toolBody, "Content-Type", "application/json", "Request-Id", "req_w"))
	st := suite.OpenStream(t, newProvider(t, s.URL), context.Background(), userReq)
	got, err := readChunks(st)
	if err != io.EOF || len(got) != 3 || got[0].ToolCall == nil || got[0].ToolCall.ID != "toolu_01A" || got[1].ToolCall == nil || got[2].Text != "Let me check." {
		t.Fatalf("%+v %v", got, err)
	}
	res := st.Response()
	if res.Text != "Let me check." || len(res.ToolCalls) != 2 || res.RequestID != "req_w" || res.Finish != llm.FinishToolUse {
		t.Errorf("%+v", res)
	}
}

// TestStreamClose: Close from another goroutine aborts a Next waiting for
// the server; Next then reports KindCanceled.
func TestStreamClose(t *testing.T) {
	release := make(chan struct{})
	s := suite.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		io.WriteString(w, evStart+evText0+delta(1, "Hi"))
		w.(http.Flusher).Flush()
		suite.Hold(r, release)
	})
	defer close(release)
	st := suite.OpenStream(t, newProvider(t, s.URL), context.Background(), userReq)
	if c, err := st.Next(); err != nil || c.Text != "Hi" {
		t.Fatalf("%+v %v", c, err)
	}
	time.AfterFunc(50*time.Millisecond, func() { st.Close() })
	_, err := st.Next()
	if llm.KindOf(err) != llm.KindCanceled {
		t.Fatalf("after Close: %v", err)
	}
	if _, again := st.Next(); !errors.Is(again, err) && again != err {
		t.Errorf("Next again: %v", again)
	}
	if st.Response().Text != "Hi" {
		t.Errorf("%+v", st.Response())
	}
}

// TestStreamCanceled: a canceled ctx is KindCanceled mid-stream.
func TestStreamCanceled(t *testing.T) {
	release := make(chan struct{})
	s := suite.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		io.WriteString(w, evStart)
		w.(http.Flusher).Flush()
		suite.Hold(r, release)
	})
	defer close(release)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := suite.OpenStream(t, newProvider(t, s.URL), ctx, userReq)
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := st.Next(); llm.KindOf(err) != llm.KindCanceled {
		t.Fatalf("%v", err)
	}
}

// TestStreamTooLong: the assembled answer is capped, each event being
// under the cap.
func TestStreamTooLong(t *testing.T) {
	piece := strings.Repeat("0123456789", 25)
	s := suite.NewServer(t, suite.SSE([]string{evStart, evText0, delta(1, piece), delta(1, piece), evStop}))
	p, err := New(newClient(t, s.URL), Config{MaxResponseBytes: 400, HTTPClient: httpClient(t)})
	if err != nil {
		t.Fatal(err)
	}
	st := suite.OpenStream(t, p, context.Background(), userReq)
	if e := suite.StreamFails(t, st, "anthropic", testKey, piece); e.Kind != llm.KindServer || !strings.Contains(e.Message, "streamed answer is longer than 400 bytes") {
		t.Errorf("%#v", e)
	}
}

// TestStreamCutKeepsUsage: a stream cut after output still reports, in
// Response, the usage message_start announced (the prompt, cache reads and
// writes apart): a failed attempt that was billed can be priced.
func TestStreamCutKeepsUsage(t *testing.T) {
	s := suite.NewServer(t, suite.SSE([]string{evStart, evText0, delta(1, "Hel")}))
	st := suite.OpenStream(t, newProvider(t, s.URL), context.Background(), userReq)
	defer st.Close()
	if e := suite.StreamFails(t, st, "anthropic", testKey, "Hel"); e.Kind != llm.KindConnection {
		t.Fatalf("got %v; want a cut stream", e)
	}
	if got, want := st.Response().Usage, (llm.Usage{InputTokens: 20, OutputTokens: 1, CacheReadTokens: 7, CacheWriteTokens: 3}); got != want {
		t.Errorf("usage after the cut %+v; want %+v", got, want)
	}
}
