package openai

// What is specific to the Chat Completions chunks. How every adapter's
// stream is requested, ends, fails (error events among them) and stops is
// tested once for all in provider/internal/suite.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/suite"
)

// data is one server-sent event as OpenAI writes it.
func data(s string) string { return "data: " + s + "\n\n" }

// chunkEvent is a chat.completion.chunk for choice index with the delta
// content text and finish reason (null when empty).
func chunkEvent(index int, text, finish string) string {
	fr := "null"
	if finish != "" {
		fr = fmt.Sprintf("%q", finish)
	}
	delta := "{}"
	if text != "" {
		b, _ := json.Marshal(text)
		delta = `{"content":` + string(b) + `}`
	}
	return data(fmt.Sprintf(`{"id":"chatcmpl-01","object":"chat.completion.chunk","created":1,"model":"gpt-test-2026-01-01","system_fingerprint":"fp_1","choices":[{"index":%d,"delta":%s,"logprobs":null,"finish_reason":%s}],"usage":null}`,
		index, delta, fr))
}

var (
	// evAzure is the prompt filter results Azure OpenAI sends first.
	evAzure = data(`{"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,"content_filter_results":{}}]}`)
	evRole  = data(`{"id":"chatcmpl-01","object":"chat.completion.chunk","created":1,"model":"gpt-test-2026-01-01","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}`)
	evHello = chunkEvent(0, "Hello", "")
	evWorld = chunkEvent(0, ", world", "")
	evEnd   = chunkEvent(0, "", "stop") +
		data(`{"id":"chatcmpl-01","object":"chat.completion.chunk","created":1,"model":"gpt-test-2026-01-01","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":5,"total_tokens":25,"prompt_tokens_details":{"cached_tokens":10}}}`) +
		data("[DONE]")
	// evOther is what a stream may carry that is not text: keep-alive
	// comments, an empty event, a second choice, events of other types.
	evOther = ": keep-alive\n\n" + "data:\n\n" + chunkEvent(1, "second choice", "") + "event: ping\ndata: {}\n\n" +
		data(`{"id":"chatcmpl-01","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]},"finish_reason":null}]}`)
)

var happyStream = []string{evAzure, evRole, evHello, evOther, evWorld, evEnd}

// streamFails reads s, which must fail with an *llm.Error after the chunks
// want, and returns the error.
func streamFails(t *testing.T, s llm.Stream, want ...string) *llm.Error {
	t.Helper()
	return suite.StreamFails(t, s, "openai", testKey, want...)
}

func openStream(t *testing.T, p *Provider, ctx context.Context) llm.Stream {
	t.Helper()
	return suite.OpenStream(t, p, ctx, userReq)
}

func TestStream(t *testing.T) {
	for name, crlf := range map[string]bool{"LF": false, "CRLF": true} {
		t.Run(name, func(t *testing.T) {
			s := suite.NewServer(t, suite.SSE(suite.WithCRLF(happyStream, crlf), "x-request-id", "req_stream", "x-ratelimit-remaining-requests", "4999",
				"x-ratelimit-reset-requests", "6m0s"))
			st := openStream(t, newProvider(t, s.URL), context.Background())
			start := time.Now()
			if res := st.Response(); res.RequestID != "req_stream" || res.Text != "" || res.RateLimit.Requests.Remaining != 4999 {
				t.Errorf("Response before Next: %+v", res)
			}
			c, err := st.Next()
			if err != nil || c.Text != "Hello" {
				t.Fatalf("first chunk %q, %v", c.Text, err)
			}
			if res := st.Response(); res.Text != "Hello" || res.ID != "chatcmpl-01" || res.Model != "gpt-test-2026-01-01" ||
				res.Usage != (llm.Usage{}) || res.FinishReason != "" {
				t.Errorf("Response after one chunk: %+v", res)
			}
			rest, err := suite.ReadStream(st)
			if err != io.EOF || !reflect.DeepEqual(rest, []string{", world"}) {
				t.Fatalf("rest %q, %v; want [\", world\"], io.EOF", rest, err)
			}
			res := st.Response()
			reset := res.RateLimit.Requests.Reset
			if d := reset.Sub(start); d < 6*time.Minute-5*time.Second || d > 6*time.Minute+5*time.Second {
				t.Errorf("requests reset in %v; want 6m", d)
			}
			want := llm.Response{Text: "Hello, world", Model: "gpt-test-2026-01-01", ID: "chatcmpl-01", RequestID: "req_stream",
				FinishReason: "stop", Finish: llm.FinishStop, Usage: llm.Usage{InputTokens: 20, OutputTokens: 5, CacheReadTokens: 10},
				RateLimit: llm.RateLimit{Requests: llm.Allowance{Remaining: 4999, Reset: reset}}}
			suite.StreamEnds(t, st, want)
		})
	}
}

func TestStreamContentFilter(t *testing.T) {
	s := suite.NewServer(t, suite.SSE([]string{evRole, evHello, chunkEvent(0, "", "content_filter"), data("[DONE]")}))
	st := openStream(t, newProvider(t, s.URL), context.Background())
	e := streamFails(t, st, "Hello")
	if e.Kind != llm.KindContentFilter || e.Code != "content_filter" || e.Status != 200 || st.Response().FinishReason != "content_filter" {
		t.Errorf("got %#v; want KindContentFilter", e)
	}
	refusal := data(`{"choices":[{"index":0,"delta":{"refusal":"I can't "}}]}`) + data(`{"choices":[{"index":0,"delta":{"refusal":"help with that."},"finish_reason":"stop"}]}`)
	s = suite.NewServer(t, suite.SSE([]string{evRole, refusal, data("[DONE]")}))
	e = streamFails(t, openStream(t, newProvider(t, s.URL), context.Background()))
	if e.Kind != llm.KindContentFilter || e.Code != "refusal" || e.Detail != "I can't help with that." || strings.Contains(e.Error(), "help with") {
		t.Errorf("refusal: got %#v", e)
	}
}

// TestStreamOptionsOff: Extra can switch stream_options off for a server
// that rejects it (the suite's TestStreamRequest checks it is sent).
func TestStreamOptionsOff(t *testing.T) {
	s := suite.NewServer(t, suite.SSE(happyStream))
	req := userReq
	req.Params.Extra = map[string]any{"stream_options": nil}
	st, err := newProvider(t, s.URL).Stream(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if !strings.Contains(string(s.Last().Body), `"stream_options":null`) {
		t.Errorf("body %s", s.Last().Body)
	}
}
