package anthropic

import (
	"context"
	"encoding/json"
	"errors"
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

// event is one server-sent event as Anthropic writes it.
func event(name, data string) string {
	return "event: " + name + "\ndata: " + data + "\n\n"
}

var (
	evStart = event("message_start", `{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[],"model":"claude-test-20260101","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"cache_creation_input_tokens":3,"cache_read_input_tokens":7,"output_tokens":1}}}`)
	evText0 = event("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`)
	evHello = delta(1, "Hello")
	evWorld = delta(1, ", world")
	evStop  = event("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}`) +
		event("message_stop", `{"type":"message_stop"}`)
	// evOther is everything a stream may carry that is not text: thinking
	// and tool blocks, pings, events of a later API version.
	evOther = event("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`) +
		event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me think"}}`) +
		event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQB"}}`) +
		event("content_block_stop", `{"type":"content_block_stop","index":0}`) +
		event("ping", `{"type": "ping"}`) +
		event("brand_new_event", `{"type":"brand_new_event","anything":[1,{"x":null}]}`) +
		event("brand_new_event", `not even JSON`) +
		": a comment\n\n"
	evTool = event("content_block_start", `{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}}`) +
		event("content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"city\": \"Paris\"}"}}`) +
		event("content_block_stop", `{"type":"content_block_stop","index":2}`)
)

func delta(index int, text string) string {
	b, _ := json.Marshal(map[string]any{"type": "content_block_delta", "index": index,
		"delta": map[string]string{"type": "text_delta", "text": text}})
	return event("content_block_delta", string(b))
}

var happyStream = []string{evStart, evOther, evText0, evHello, event("ping", `{"type": "ping"}`), evWorld,
	event("content_block_stop", `{"type":"content_block_stop","index":1}`), evTool, evStop}

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

// readStream reads s to its end and returns the chunks' texts and the
// final error.
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
	if e.Provider != "anthropic" || strings.Contains(e.Error(), testKey) || e.Err != nil && strings.Contains(e.Err.Error(), testKey) {
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
			s := newServer(t, sse(pieces, "request-id", "req_stream",
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
				res.Usage != (llm.Usage{InputTokens: 20, OutputTokens: 1}) || res.FinishReason != "" {
				t.Errorf("Response after one chunk: %+v", res)
			}
			rest, err := readStream(st)
			if err != io.EOF || !reflect.DeepEqual(rest, []string{", world"}) {
				t.Fatalf("rest %q, %v; want [\", world\"], io.EOF", rest, err)
			}
			res := st.Response()
			reset := time.Date(2026, 11, 30, 16, 0, 0, 0, time.UTC)
			want := llm.Response{Text: "Hello, world", Model: "claude-test-20260101", ID: "msg_01", RequestID: "req_stream",
				FinishReason: "end_turn", Usage: llm.Usage{InputTokens: 20, OutputTokens: 15},
				RateLimit: llm.RateLimit{Requests: llm.Allowance{Remaining: 49, Reset: reset}}}
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

// TestStreamRequest checks the body is Complete's plus "stream": true, and
// the Accept header.
func TestStreamRequest(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Accept"), "event-stream") {
			sse(happyStream)(w, r)
			return
		}
		respond(200, okBody)(w, r)
	})
	p := newProvider(t, s.URL)
	req := llm.Request{Model: "claude-test", System: "Be brief.", Messages: []llm.Message{{Role: llm.RoleUser, Content: "Hi"}},
		Params: llm.Params{MaxTokens: 300, Temperature: llm.Float(0), Stop: []string{"END"}, Extra: map[string]any{"metadata": map[string]string{"user_id": "u1"}}}}
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
	if stream["stream"] != true {
		t.Errorf(`"stream" = %v; want true`, stream["stream"])
	}
	delete(stream, "stream")
	if !reflect.DeepEqual(stream, complete) || len(complete) != 7 {
		t.Errorf("stream body %v\nwant Complete's %v", stream, complete)
	}
	if s.header.Get("Accept") != "text/event-stream" || s.header.Get("X-Api-Key") != testKey || s.method != http.MethodPost || s.path != "/v1/messages" {
		t.Errorf("request %s %s with headers %v", s.method, s.path, s.header)
	}
}

func TestStreamMultiLineData(t *testing.T) {
	split := "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\ndata: \"index\":1,\"delta\":{\"type\":\"text_delta\",\ndata: \"text\":\"two\\nlines\"}}\n\n"
	s := newServer(t, sse([]string{evStart, evText0, split, evStop}))
	got, err := readStream(openStream(t, newProvider(t, s.URL), context.Background()))
	if err != io.EOF || !reflect.DeepEqual(got, []string{"two\nlines"}) {
		t.Errorf("got %q, %v", got, err)
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
	s := newServer(t, sse(pieces))
	st := openStream(t, newProvider(t, s.URL), context.Background())
	got, err := readStream(st)
	if err != io.EOF || strings.Join(got, "") != "Hello, world" || st.Response().FinishReason != "end_turn" {
		t.Errorf("got %q, %v, %+v", got, err, st.Response())
	}
}

func TestStreamErrorEvent(t *testing.T) {
	tests := []struct {
		name, data string
		kind       llm.Kind
		typ        string
	}{
		{"overloaded", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, llm.KindOverloaded, "overloaded_error"},
		{"api error", `{"type":"error","error":{"details":null,"type":"api_error","message":"Internal server error"}}`, llm.KindServer, "api_error"},
		{"rate limit", `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`, llm.KindRateLimited, "rate_limit_error"},
		{"spend limit", `{"type":"error","error":{"type":"rate_limit_error","message":"x","details":{"error_code":"enforced_spend_limit_reached"}}}`, llm.KindQuota, "rate_limit_error"},
		{"unknown type", `{"type":"error","error":{"type":"brand_new_error","message":"?"}}`, llm.KindServer, "brand_new_error"},
		{"unparseable", `Overloaded`, llm.KindServer, ""},
		{"key in message", `{"type":"error","error":{"type":"overloaded_error","message":"` + testKey + `"}}`, llm.KindOverloaded, "overloaded_error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, sse([]string{evStart, evText0, evHello, evWorld, event("error", tt.data), evStop}, "request-id", "req_err"))
			e := streamFails(t, openStream(t, newProvider(t, s.URL), context.Background()), "Hello", ", world")
			if e.Kind != tt.kind || e.Status != 200 || e.RequestID != "req_err" || e.Type != tt.typ {
				t.Errorf("got %#v; want Kind %v, Status 200, request-id req_err, Type %q", e, tt.kind, tt.typ)
			}
			if tt.name == "overloaded" && (e.Detail != "Overloaded" || strings.Contains(e.Error(), "Overloaded [")) {
				t.Errorf("message %q, detail %q; want the provider's message in Detail only", e.Error(), e.Detail)
			}
		})
	}
}

func TestStreamRefusal(t *testing.T) {
	refusal := event("message_delta", `{"type":"message_delta","delta":{"stop_reason":"refusal"},"usage":{"output_tokens":3}}`) +
		event("message_stop", `{"type":"message_stop"}`)
	s := newServer(t, sse([]string{evStart, evText0, evHello, refusal}))
	st := openStream(t, newProvider(t, s.URL), context.Background())
	e := streamFails(t, st, "Hello")
	if e.Kind != llm.KindContentFilter || e.Code != "refusal" || st.Response().FinishReason != "refusal" {
		t.Errorf("got %#v; want KindContentFilter", e)
	}
}

func TestStreamMalformedEvent(t *testing.T) {
	for name, ev := range map[string]string{
		"syntax":       event("content_block_delta", `{"type":"content_block_delta","delta":{"type":"text_delta","text":"x"`),
		"wrong type":   event("content_block_delta", `{"type":"content_block_delta","delta":{"type":"text_delta","text":5}}`),
		"wrong shape":  event("message_delta", `{"type":"message_delta","usage":"many"}`),
		"no event":     "data: not JSON\n\n",
		"key in event": event("message_start", `{"message":"`+testKey+`"}`),
	} {
		t.Run(name, func(t *testing.T) {
			s := newServer(t, sse([]string{evStart, evText0, evHello, ev, evStop}))
			e := streamFails(t, openStream(t, newProvider(t, s.URL), context.Background()), "Hello")
			if e.Kind != llm.KindServer || e.Status != 200 || !strings.Contains(e.Message, "is not the expected JSON") {
				t.Errorf("got %v; want KindServer naming the bad event", e)
			}
		})
	}
}

func TestStreamCut(t *testing.T) {
	for name, h := range map[string]http.HandlerFunc{
		"clean end": sse([]string{evStart, evText0, evHello, evWorld}),
		"mid-event": sse([]string{evStart, evText0, evHello, evWorld, evStop[:40]}),
		"no message_stop": sse([]string{evStart, evText0, evHello, evWorld,
			event("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":15}}`)}),
		"reset": func(w http.ResponseWriter, r *http.Request) {
			sse([]string{evStart, evText0, evHello, evWorld})(w, r)
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
		{529, errBody("overloaded_error", "Overloaded"), []string{"retry-after", "4", "request-id", "req_1"}},
		{429, `{"type":"error","error":{"type":"rate_limit_error","message":"x","details":{"error_code":"enforced_spend_limit_reached"}}}`, nil},
		{401, errBody("authentication_error", "invalid x-api-key "+testKey), []string{"x-should-retry", "false"}},
		{400, errBody("invalid_request_error", "prompt is too long: 208310 tokens > 200000 maximum"), nil},
		{502, "<html>Bad Gateway</html>", nil},
		{500, "", []string{"anthropic-ratelimit-requests-limit", "50", "anthropic-ratelimit-requests-reset", "2026-11-30T16:00:00Z"}},
		{200, errBody("overloaded_error", "Overloaded"), []string{"content-type", "application/json"}},
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
// with the whole message still gives a stream, of one chunk.
func TestStreamJSONReply(t *testing.T) {
	s := newServer(t, respond(200, okBody, "content-type", "application/json", "request-id", "req_json"))
	st := openStream(t, newProvider(t, s.URL), context.Background())
	got, err := readStream(st)
	res := st.Response()
	if err != io.EOF || !reflect.DeepEqual(got, []string{"Hello, world"}) || res.Text != "Hello, world" || res.ID != "msg_01" ||
		res.RequestID != "req_json" || res.Usage.InputTokens != 20 {
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
			sse([]string{evStart, event("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)})(w, r)
		case "529":
			respond(529, errBody("overloaded_error", "Overloaded"), "retry-after", "1", "x-should-retry", "true")(w, r)
		case "cut":
			sse([]string{evStart, evText0, evHello})(w, r)
		case "reset":
			hangUp(w, r)
		}
	})
	p := newProvider(t, s.URL)
	want := map[string]llm.Kind{"ok": llm.KindUnknown, "error event": llm.KindOverloaded, "529": llm.KindOverloaded,
		"cut": llm.KindConnection, "reset": llm.KindConnection}
	for _, m := range []string{"ok", "529", "ok", "reset", "error event", "cut", "reset", "ok"} {
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
		sse([]string{evStart, evText0, evHello})(w, r)
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
		sse([]string{evStart, evText0, evHello})(w, r)
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
	// Canceled before the headers: as Complete.
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	_, err := newProvider(t, s.URL).Stream(ctx, userReq)
	if llm.KindOf(err) != llm.KindCanceled {
		t.Errorf("canceled before sending: %v", err)
	}
}

// TestStreamLineTooLong: a server sending a line without end fails the
// stream soon after MaxResponseBytes, in bounded memory, and is cut off.
func TestStreamLineTooLong(t *testing.T) {
	var written atomic.Int64
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, evStart+"data: ")
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
	req.Params.Extra = map[string]any{"bad": make(chan int)}
	_, err := newProvider(t, s.URL).Stream(context.Background(), req)
	if llm.KindOf(err) != llm.KindBadRequest || s.count.Load() != 0 {
		t.Errorf("got %v after %d requests; want a bad request and none sent", err, s.count.Load())
	}
}
