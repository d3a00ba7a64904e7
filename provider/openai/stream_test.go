package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/backstop-llm/backstop/llm"
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

// sse answers 200 with an event stream, flushing after each piece, then
// ends the body.
func sse(pieces []string, header ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(200)
		for _, p := range pieces {
			io.WriteString(w, p)
			w.(http.Flusher).Flush()
		}
	}
}

func readStream(s llm.Stream) ([]string, error) {
	var got []string
	for {
		c, err := s.Next()
		if err != nil {
			return got, err
		}
		got = append(got, c.Text)
	}
}

// streamFails reads s, which must fail with an *llm.Error after the chunks
// want, and returns the error.
func streamFails(t *testing.T, s llm.Stream, want ...string) *llm.Error {
	t.Helper()
	got, err := readStream(s)
	if !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
		t.Errorf("chunks %q; want %q", got, want)
	}
	if !strings.HasSuffix(s.Response().Text, strings.Join(want, "")) {
		t.Errorf("Response().Text = %q; want the chunks delivered", s.Response().Text)
	}
	var e *llm.Error
	if !errors.As(err, &e) {
		t.Fatalf("stream ended with %T %v; want an *llm.Error", err, err)
	}
	if e.Provider != "openai" || strings.Contains(e.Error(), testKey) || e.Err != nil && strings.Contains(e.Err.Error(), testKey) {
		t.Errorf("error without provider or quoting the key: %#v", e)
	}
	if _, again := s.Next(); again != err {
		t.Errorf("Next after the failure: %v; want the same error", again)
	}
	return e
}

func openStream(t *testing.T, p *Provider, ctx context.Context) llm.Stream {
	t.Helper()
	s, err := p.Stream(ctx, userReq)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestStream(t *testing.T) {
	for name, crlf := range map[string]bool{"LF": false, "CRLF": true} {
		t.Run(name, func(t *testing.T) {
			pieces := happyStream
			if crlf {
				pieces = make([]string, len(happyStream))
				for i, p := range happyStream {
					pieces[i] = strings.ReplaceAll(p, "\n", "\r\n")
				}
			}
			s := newServer(t, sse(pieces, "x-request-id", "req_stream", "x-ratelimit-remaining-requests", "4999",
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
			rest, err := readStream(st)
			if err != io.EOF || !reflect.DeepEqual(rest, []string{", world"}) {
				t.Fatalf("rest %q, %v; want [\", world\"], io.EOF", rest, err)
			}
			res := st.Response()
			reset := res.RateLimit.Requests.Reset
			if d := reset.Sub(start); d < 6*time.Minute-5*time.Second || d > 6*time.Minute+5*time.Second {
				t.Errorf("requests reset in %v; want 6m", d)
			}
			want := llm.Response{Text: "Hello, world", Model: "gpt-test-2026-01-01", ID: "chatcmpl-01", RequestID: "req_stream",
				FinishReason: "stop", Usage: llm.Usage{InputTokens: 20, OutputTokens: 5},
				RateLimit: llm.RateLimit{Requests: llm.Allowance{Remaining: 4999, Reset: reset}}}
			if !reflect.DeepEqual(*res, want) {
				t.Errorf("response\n got %+v\nwant %+v", *res, want)
			}
			if _, err := st.Next(); err != io.EOF {
				t.Errorf("Next after the end: %v", err)
			}
			if st.Close() != nil || st.Close() != nil {
				t.Error("Close twice failed")
			}
		})
	}
}

// TestStreamRequest checks the body is Complete's plus "stream" and
// "stream_options", and the Accept header.
func TestStreamRequest(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Accept"), "event-stream") {
			sse(happyStream)(w, r)
			return
		}
		respond(200, okBody)(w, r)
	})
	p := newProvider(t, s.URL)
	req := llm.Request{Model: "gpt-test", System: "Be brief.", Messages: []llm.Message{{Role: llm.RoleUser, Content: "Hi"}},
		Params: llm.Params{MaxTokens: 300, Temperature: llm.Float(0), Stop: []string{"END"}, Extra: map[string]any{"seed": 7}}}
	if _, err := p.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	var complete, stream map[string]any
	json.Unmarshal(s.body, &complete)
	st, err := p.Stream(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := readStream(st); err != io.EOF {
		t.Fatal(err)
	}
	if err := json.Unmarshal(s.body, &stream); err != nil {
		t.Fatal(err)
	}
	if stream["stream"] != true || !reflect.DeepEqual(stream["stream_options"], map[string]any{"include_usage": true}) {
		t.Errorf(`"stream" = %v, "stream_options" = %v`, stream["stream"], stream["stream_options"])
	}
	delete(stream, "stream")
	delete(stream, "stream_options")
	if !reflect.DeepEqual(stream, complete) || len(complete) != 6 {
		t.Errorf("stream body %v\nwant Complete's %v", stream, complete)
	}
	if s.header.Get("Accept") != "text/event-stream" || s.header.Get("Authorization") != "Bearer "+testKey ||
		s.method != http.MethodPost || s.path != "/v1/chat/completions" {
		t.Errorf("request %s %s with headers %v", s.method, s.path, s.header)
	}
	// Extra can switch stream_options off for a server that rejects it.
	req.Params.Extra = map[string]any{"stream_options": nil}
	if st, err = p.Stream(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if !strings.Contains(string(s.body), `"stream_options":null`) {
		t.Errorf("body %s", s.body)
	}
}

func TestStreamMultiLineData(t *testing.T) {
	split := "data: {\"id\":\"chatcmpl-01\",\ndata: \"choices\":[{\"index\":0,\ndata: \"delta\":{\"content\":\"two\\nlines\"}}]}\n\n"
	s := newServer(t, sse([]string{evRole, split, evEnd}))
	got, err := readStream(openStream(t, newProvider(t, s.URL), context.Background()))
	if err != io.EOF || !reflect.DeepEqual(got, []string{"two\nlines"}) {
		t.Errorf("got %q, %v", got, err)
	}
}

func TestStreamErrorEvent(t *testing.T) {
	tests := []struct {
		name, ev  string
		kind      llm.Kind
		typ, code string
	}{
		{"server error", data(`{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`), llm.KindServer, "server_error", ""},
		{"rate limit", data(errBody("tokens", "rate_limit_exceeded", "Rate limit reached")), llm.KindRateLimited, "tokens", "rate_limit_exceeded"},
		{"quota", data(errBody("insufficient_quota", "insufficient_quota", "quota")), llm.KindQuota, "insufficient_quota", "insufficient_quota"},
		{"error event type", "event: error\ndata: " + errBody("server_error", "", "boom") + "\n\n", llm.KindServer, "server_error", ""},
		{"error event without an error object", "event: error\ndata: {\"message\":\"boom\"}\n\n", llm.KindServer, "", ""},
		{"string error", data(`{"error":"model overloaded"}`), llm.KindServer, "", ""},
		{"key in message", data(errBody("invalid_request_error", "", "key "+testKey)), llm.KindServer, "invalid_request_error", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, sse([]string{evRole, evHello, evWorld, tt.ev, evEnd}, "x-request-id", "req_err"))
			e := streamFails(t, openStream(t, newProvider(t, s.URL), context.Background()), "Hello", ", world")
			if e.Kind != tt.kind || e.Status != 200 || e.RequestID != "req_err" || e.Type != tt.typ || e.Code != tt.code {
				t.Errorf("got %#v; want Kind %v, Status 200, request-id req_err, %s/%s", e, tt.kind, tt.typ, tt.code)
			}
		})
	}
}

func TestStreamContentFilter(t *testing.T) {
	s := newServer(t, sse([]string{evRole, evHello, chunkEvent(0, "", "content_filter"), data("[DONE]")}))
	st := openStream(t, newProvider(t, s.URL), context.Background())
	e := streamFails(t, st, "Hello")
	if e.Kind != llm.KindContentFilter || e.Code != "content_filter" || e.Status != 200 || st.Response().FinishReason != "content_filter" {
		t.Errorf("got %#v; want KindContentFilter", e)
	}
	refusal := data(`{"choices":[{"index":0,"delta":{"refusal":"I can't "}}]}`) + data(`{"choices":[{"index":0,"delta":{"refusal":"help with that."},"finish_reason":"stop"}]}`)
	s = newServer(t, sse([]string{evRole, refusal, data("[DONE]")}))
	e = streamFails(t, openStream(t, newProvider(t, s.URL), context.Background()))
	if e.Kind != llm.KindContentFilter || e.Code != "refusal" || e.Detail != "I can't help with that." || strings.Contains(e.Error(), "help with") {
		t.Errorf("refusal: got %#v", e)
	}
}

func TestStreamMalformedEvent(t *testing.T) {
	for name, ev := range map[string]string{
		"syntax":      data(`{"choices":[{"index":0,"delta":{"content":"x"`),
		"wrong type":  data(`{"choices":[{"index":0,"delta":{"content":5}}]}`),
		"not object":  data(`[1,2]`),
		"done typo":   data(`[DONE`),
		"html":        data(`<html>`),
		"key in data": data(`{"choices":"` + testKey + `"}`),
	} {
		t.Run(name, func(t *testing.T) {
			s := newServer(t, sse([]string{evRole, evHello, ev, evEnd}))
			e := streamFails(t, openStream(t, newProvider(t, s.URL), context.Background()), "Hello")
			if e.Kind != llm.KindServer || e.Status != 200 || !strings.Contains(e.Message, `event "message" is not the expected JSON`) {
				t.Errorf("got %v; want KindServer naming the bad event", e)
			}
		})
	}
}

func TestStreamCut(t *testing.T) {
	for name, h := range map[string]http.HandlerFunc{
		"clean end":  sse([]string{evRole, evHello, evWorld}),
		"mid-event":  sse([]string{evRole, evHello, evWorld, evEnd[:40]}),
		"no [DONE]":  sse([]string{evRole, evHello, evWorld, chunkEvent(0, "", "stop")}),
		"[DONE] cut": sse([]string{evRole, evHello, evWorld, "data: [DONE]\n"}),
		"reset": func(w http.ResponseWriter, r *http.Request) {
			sse([]string{evRole, evHello, evWorld})(w, r)
			hangUp(w, r)
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := newServer(t, h)
			e := streamFails(t, openStream(t, newProvider(t, s.URL), context.Background()), "Hello", ", world")
			if e.Kind != llm.KindConnection || e.Status != 200 || llm.KindOf(e) != llm.KindConnection {
				t.Errorf("got %#v; want KindConnection", e)
			}
			if name == "clean end" && e.Message != "the stream ended before the answer was complete" {
				t.Errorf("message %q", e.Message)
			}
		})
	}
}

// TestStreamErrorStatus: an error before the stream starts is the error
// Complete returns for the same reply.
func TestStreamErrorStatus(t *testing.T) {
	tests := []struct {
		status int
		body   string
		header []string
	}{
		{429, errBody("tokens", "rate_limit_exceeded", "Please try again in 1.574s."), []string{"retry-after-ms", "1574", "x-request-id", "req_1"}},
		{429, errBody("insufficient_quota", "insufficient_quota", "quota"), []string{"x-should-retry", "false"}},
		{401, errBody("invalid_request_error", "invalid_api_key", "Incorrect API key provided: "+testKey), nil},
		{400, errBody("invalid_request_error", "context_length_exceeded", "too long"), nil},
		{502, "<html>Bad Gateway</html>", nil},
		{503, "", nil},
		{200, errBody("server_error", "", "boom"), []string{"content-type", "application/json"}},
	}
	for _, tt := range tests {
		s := newServer(t, respond(tt.status, tt.body, tt.header...))
		p := newProvider(t, s.URL)
		want := completeErr(t, p, context.Background())
		before := s.count.Load()
		st, err := p.Stream(context.Background(), userReq)
		if st != nil {
			t.Errorf("%d: a stream with the error", tt.status)
		}
		var got *llm.Error
		if !errors.As(err, &got) || !reflect.DeepEqual(got, want) {
			t.Errorf("%d: Stream error\n %#v\nwant Complete's\n %#v", tt.status, err, want)
		}
		if n := s.count.Load() - before; n != 1 {
			t.Errorf("%d: %d requests; want 1", tt.status, n)
		}
	}
}

// TestStreamJSONReply: a server that ignores "stream": true and answers
// with the whole completion still gives a stream, of one chunk.
func TestStreamJSONReply(t *testing.T) {
	s := newServer(t, respond(200, okBody, "content-type", "application/json", "x-request-id", "req_json"))
	st := openStream(t, newProvider(t, s.URL), context.Background())
	got, err := readStream(st)
	res := st.Response()
	if err != io.EOF || !reflect.DeepEqual(got, []string{"Hello, world"}) || res.Text != "Hello, world" || res.ID != "chatcmpl-01" ||
		res.RequestID != "req_json" || res.Usage.InputTokens != 20 || res.FinishReason != "stop" {
		t.Errorf("got %q, %v, %+v", got, err, res)
	}
}

func TestStreamOneRequest(t *testing.T) {
	var mode atomic.Value
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch mode.Load() {
		case "ok":
			sse(happyStream)(w, r)
		case "error event":
			sse([]string{evRole, data(errBody("tokens", "rate_limit_exceeded", "slow"))})(w, r)
		case "429":
			respond(429, errBody("tokens", "rate_limit_exceeded", "slow"), "retry-after-ms", "10", "x-should-retry", "true")(w, r)
		case "cut":
			sse([]string{evRole, evHello})(w, r)
		case "reset":
			hangUp(w, r)
		}
	})
	p := newProvider(t, s.URL)
	want := map[string]llm.Kind{"ok": llm.KindUnknown, "error event": llm.KindRateLimited, "429": llm.KindRateLimited,
		"cut": llm.KindConnection, "reset": llm.KindConnection}
	for _, m := range []string{"ok", "429", "ok", "reset", "error event", "cut", "reset", "ok"} {
		mode.Store(m)
		before := s.count.Load()
		st, err := p.Stream(context.Background(), userReq)
		if err == nil {
			_, err = readStream(st)
			st.Close()
		}
		if n := s.count.Load() - before; n != 1 {
			t.Errorf("%s: %d requests; want exactly 1", m, n)
		}
		if err == io.EOF {
			err = nil
		}
		if k := llm.KindOf(err); k != want[m] || m != "ok" && err == nil {
			t.Errorf("%s: got %v; want %v", m, err, want[m])
		}
	}
}

// TestStreamCloseEarly closes the stream after one chunk: the server sees
// the connection go, and no goroutine is left behind.
func TestStreamCloseEarly(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	closed := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sse([]string{evRole, evHello})(w, r)
		select {
		case <-r.Context().Done():
			close(closed)
		case <-time.After(10 * time.Second):
		}
	}))
	tr := &http.Transport{}
	p, err := New(Config{APIKey: testKey, BaseURL: srv.URL, HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := p.Stream(context.Background(), userReq)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := st.Next(); err != nil || c.Text != "Hello" {
		t.Fatalf("first chunk %q, %v", c.Text, err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the server did not see the connection closed")
	}
	e := streamFails(t, st)
	if e.Kind != llm.KindCanceled || !strings.Contains(e.Message, "closed") {
		t.Errorf("Next after Close: %v", e)
	}
	if st.Response().Text != "Hello" {
		t.Errorf("Response after Close: %+v", st.Response())
	}
	st.Close()
	srv.Close()
	tr.CloseIdleConnections()
	goleak.VerifyNone(t, ignore)
}

func TestStreamCanceled(t *testing.T) {
	release := make(chan struct{})
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		sse([]string{evRole, evHello})(w, r)
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	defer close(release)
	ctx, cancel := context.WithCancel(context.Background())
	st := openStream(t, newProvider(t, s.URL), ctx)
	if c, err := st.Next(); err != nil || c.Text != "Hello" {
		t.Fatalf("first chunk %q, %v", c.Text, err)
	}
	time.AfterFunc(20*time.Millisecond, cancel) // while Next waits
	e := streamFails(t, st)
	if e.Kind != llm.KindCanceled || !errors.Is(e, context.Canceled) || e.Status != 200 {
		t.Errorf("got %#v; want KindCanceled wrapping context.Canceled", e)
	}
	// A deadline mid-stream is a timeout.
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	st = openStream(t, newProvider(t, s.URL), ctx)
	e = streamFails(t, st, "Hello")
	if e.Kind != llm.KindTimeout || !errors.Is(e, context.DeadlineExceeded) {
		t.Errorf("deadline: got %#v; want KindTimeout", e)
	}
}

// TestStreamLineTooLong: a server sending a line without end fails the
// stream soon after MaxResponseBytes, in bounded memory, and is cut off.
func TestStreamLineTooLong(t *testing.T) {
	var written atomic.Int64
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, evRole+"data: ")
		buf := []byte(strings.Repeat("a", 32<<10))
		for written.Load() < 1<<30 {
			n, err := w.Write(buf)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	})
	p, err := New(Config{APIKey: testKey, BaseURL: s.URL, MaxResponseBytes: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	st := openStream(t, p, context.Background())
	e := streamFails(t, st)
	runtime.ReadMemStats(&after)
	if e.Kind != llm.KindServer || !strings.Contains(e.Message, "a line longer than 262144 bytes") {
		t.Errorf("got %v; want KindServer about the line", e)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
		t.Errorf("allocated %d bytes reading a stream capped at 256 KiB", alloc)
	}
	s.Close() // waits for the handler, which the closed connection ends
	if n := written.Load(); n > 64<<20 {
		t.Errorf("the server wrote %d bytes before the client hung up", n)
	}
}

func TestStreamEncodeError(t *testing.T) {
	s := newServer(t, sse(happyStream))
	req := userReq
	req.Params.Extra = map[string]any{"bad": func() {}}
	_, err := newProvider(t, s.URL).Stream(context.Background(), req)
	if llm.KindOf(err) != llm.KindBadRequest || s.count.Load() != 0 {
		t.Errorf("got %v after %d requests; want a bad request and none sent", err, s.count.Load())
	}
}
