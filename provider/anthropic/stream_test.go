package anthropic

// What is specific to the Messages API's events. How every adapter's stream
// is requested, ends, fails (error events among them) and stops is tested
// once for all in provider/internal/suite.

import (
	"context"
	"encoding/json"
	"io"
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
	evHello = delta(1, "Hello")
	evWorld = delta(1, ", world")
	evStop  = suite.AnthropicStop
	// evOther is everything a stream may carry that is not text: thinking
	// and tool blocks, pings, events of a later API version.
	evOther = suite.AnthropicOther +
		event("brand_new_event", `not even JSON`) +
		": a comment\n\n"
	evTool = event("content_block_start", `{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}}`) +
		event("content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"city\": \"Paris\"}"}}`) +
		event("content_block_stop", `{"type":"content_block_stop","index":2}`)
)

var happyStream = []string{evStart, evOther, evText0, evHello, event("ping", `{"type": "ping"}`), evWorld,
	event("content_block_stop", `{"type":"content_block_stop","index":1}`), evTool, evStop}

// streamFails reads s, which must fail with an *llm.Error after the chunks
// want, and returns the error.
func streamFails(t *testing.T, s llm.Stream, want ...string) *llm.Error {
	t.Helper()
	return suite.StreamFails(t, s, "anthropic", testKey, want...)
}

func openStream(t *testing.T, p *Provider, ctx context.Context) llm.Stream {
	t.Helper()
	return suite.OpenStream(t, p, ctx, userReq)
}

func TestStream(t *testing.T) {
	for name, crlf := range map[string]bool{"LF": false, "CRLF": true} {
		t.Run(name, func(t *testing.T) {
			s := suite.NewServer(t, suite.SSE(suite.WithCRLF(happyStream, crlf), "request-id", "req_stream",
				"anthropic-ratelimit-requests-remaining", "49", "anthropic-ratelimit-requests-reset", "2026-11-30T16:00:00Z"))
			st := openStream(t, newProvider(t, s.URL), context.Background())
			if res := st.Response(); res.RequestID != "req_stream" || res.Text != "" || res.RateLimit.Requests.Remaining != 49 {
				t.Errorf("Response before Next: %+v", res)
			}
			c, err := st.Next()
			if err != nil || c.Text != "Hello" {
				t.Fatalf("first chunk %q, %v", c.Text, err)
			}
			if res := st.Response(); res.Text != "Hello" || res.ID != "msg_01" || res.Model != "claude-test-20260101" ||
				res.Usage != (llm.Usage{InputTokens: 20, OutputTokens: 1, CacheReadTokens: 7, CacheWriteTokens: 3}) || res.FinishReason != "" {
				t.Errorf("Response after one chunk: %+v", res)
			}
			call := llm.ToolCall{ID: "toolu_1", Name: "get_weather", Arguments: json.RawMessage(`{"city": "Paris"}`)}
			rest, err := suite.ReadChunks(t, st)
			if err != io.EOF || !reflect.DeepEqual(rest, []llm.Chunk{{Text: ", world"}, {ToolCall: &call}}) {
				t.Fatalf("rest %s, %v; want \", world\", the call, io.EOF", showChunks(rest), err)
			}
			reset := time.Date(2026, 11, 30, 16, 0, 0, 0, time.UTC)
			want := llm.Response{Text: "Hello, world", Model: "claude-test-20260101", ID: "msg_01", RequestID: "req_stream",
				FinishReason: "end_turn", Usage: llm.Usage{InputTokens: 20, OutputTokens: 15, CacheReadTokens: 7, CacheWriteTokens: 3},
				RateLimit: llm.RateLimit{Requests: llm.Allowance{Remaining: 49, Reset: reset}},
				ToolCalls: []llm.ToolCall{call}, Finish: llm.FinishStop}
			suite.StreamEnds(t, st, want)
		})
	}
}

// TestStreamNoEventLines: a gateway that drops the "event:" lines still
// streams, the JSON's "type" naming each event.
func TestStreamNoEventLines(t *testing.T) {
	var pieces []string
	for _, p := range happyStream {
		var kept []string
		for _, l := range strings.SplitAfter(p, "\n") {
			if !strings.HasPrefix(l, "event:") {
				kept = append(kept, l)
			}
		}
		pieces = append(pieces, strings.Join(kept, ""))
	}
	pieces = append(pieces[:1], pieces[2:]...) // evOther's non-JSON data aside
	s := suite.NewServer(t, suite.SSE(pieces))
	st := openStream(t, newProvider(t, s.URL), context.Background())
	got, err := suite.ReadStream(st)
	if err != io.EOF || strings.Join(got, "") != "Hello, world" || st.Response().FinishReason != "end_turn" {
		t.Errorf("got %q, %v, %+v", got, err, st.Response())
	}
}

func TestStreamRefusal(t *testing.T) {
	refusal := event("message_delta", `{"type":"message_delta","delta":{"stop_reason":"refusal"},"usage":{"output_tokens":3}}`) +
		event("message_stop", `{"type":"message_stop"}`)
	s := suite.NewServer(t, suite.SSE([]string{evStart, evText0, evHello, refusal}))
	st := openStream(t, newProvider(t, s.URL), context.Background())
	e := streamFails(t, st, "Hello")
	if e.Kind != llm.KindContentFilter || e.Code != "refusal" || st.Response().FinishReason != "refusal" {
		t.Errorf("got %#v; want KindContentFilter", e)
	}
}

// TestStreamCutKeepsUsage: a stream cut after output still reports, in
// Response, the usage message_start announced (the prompt, cache reads and
// writes apart): a failed attempt that was billed can be priced.
func TestStreamCutKeepsUsage(t *testing.T) {
	s := suite.NewServer(t, suite.SSE([]string{evStart, evText0, evHello}))
	st := openStream(t, newProvider(t, s.URL), context.Background())
	defer st.Close()
	if e := streamFails(t, st, "Hello"); e.Kind != llm.KindConnection {
		t.Fatalf("got %v; want a cut stream", e)
	}
	if got, want := st.Response().Usage, (llm.Usage{InputTokens: 20, OutputTokens: 1, CacheReadTokens: 7, CacheWriteTokens: 3}); got != want {
		t.Errorf("usage after the cut %+v; want %+v", got, want)
	}
}
