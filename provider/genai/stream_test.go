package genai

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/suite"
)

// drain reads st to its end: the chunks and the final error.
func drain(t *testing.T, st llm.Stream) ([]llm.Chunk, error) {
	t.Helper()
	var cs []llm.Chunk
	for range 100 {
		c, err := st.Next()
		if err != nil {
			return cs, err
		}
		cs = append(cs, c)
	}
	t.Fatal("the stream does not end")
	return nil, nil
}

// startStream streams hello to the Gemini API of s with ctx, failing the
// test when the stream does not start; the stream is closed when the test
// ends.
func startStream(t *testing.T, ctx context.Context, s *server) llm.Stream {
	t.Helper()
	p := newProvider(t, geminiClient(t, s.URL, s.Client()), Config{})
	st, err := p.Stream(ctx, hello("gemini-2.5-flash"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestStream(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, _ seen) {
		w.Header().Set("X-Goog-Request-Id", "greq-s")
		writeSSE(w,
			`{"candidates":[{"content":{"role":"model","parts":[{"text":"thinking…","thought":true}]}}],"modelVersion":"gemini-2.5-flash-001","responseId":"rs"}`,
			`{"candidates":[{"content":{"role":"model","parts":[{"text":"Hel"}]}}],"usageMetadata":{"promptTokenCount":4,"candidatesTokenCount":1}}`,
			`{"candidates":[{"content":{"role":"model","parts":[{"text":"lo"},{"functionCall":{"name":"f","args":{"a":1}}}]}}]}`,
			`{"candidates":[{"content":{"role":"model","parts":[{"text":""}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":4,"cachedContentTokenCount":3,"candidatesTokenCount":6}}`)
	})
	st := startStream(t, context.Background(), s)
	cs, err := drain(t, st)
	if err != io.EOF {
		t.Fatalf("end: %v", err)
	}
	if len(cs) != 3 || cs[0].Text != "Hel" || cs[1].Text != "lo" || cs[2].ToolCall == nil ||
		cs[2].ToolCall.ID != "call_0" || cs[2].ToolCall.Name != "f" || string(cs[2].ToolCall.Arguments) != `{"a":1}` {
		t.Fatalf("chunks %+v", cs)
	}
	res := st.Response()
	if res.Text != "Hello" || res.Model != "gemini-2.5-flash-001" || res.ID != "rs" || res.RequestID != "greq-s" ||
		res.Usage != (llm.Usage{InputTokens: 4, OutputTokens: 6, CacheReadTokens: 3}) || res.Finish != llm.FinishToolUse || len(res.ToolCalls) != 1 {
		t.Errorf("response %+v", res)
	}
	if _, err := st.Next(); err != io.EOF {
		t.Errorf("Next after the end: %v", err)
	}
	if r := s.only(t); r.Path != "/v1beta/models/gemini-2.5-flash:streamGenerateContent" || r.Query != "alt=sse" {
		t.Errorf("request %s?%s", r.Path, r.Query)
	}
}

func TestStreamErrorMidStream(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, _ seen) {
		writeSSE(w,
			`{"candidates":[{"content":{"role":"model","parts":[{"text":"Par"}]}}]}`,
			`{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}`)
	})
	st := startStream(t, context.Background(), s)
	cs, err := drain(t, st)
	if len(cs) != 1 || cs[0].Text != "Par" {
		t.Errorf("chunks %+v", cs)
	}
	if f := asError(t, err); f.Kind != llm.KindOverloaded || f.Type != "UNAVAILABLE" || f.Status != 503 {
		t.Errorf("kind %v type %q status %d", f.Kind, f.Type, f.Status)
	}
	if _, again := st.Next(); again != err {
		t.Errorf("Next after the error: %v", again)
	}
	if st.Response().Text != "Par" {
		t.Errorf("response text %q", st.Response().Text)
	}
	if n := len(s.requests()); n != 1 {
		t.Errorf("%d requests; the SDK resumed the stream", n)
	}
}

func TestStreamErrorFirstEvent(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, _ seen) {
		writeSSE(w, `{"error":{"code":429,"message":"slow down","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1.5s"}]}}`)
	})
	p := newProvider(t, geminiClient(t, s.URL, s.Client()), Config{})
	st, err := p.Stream(context.Background(), hello("gemini-2.5-flash"))
	if f := asError(t, err); st != nil || f.Kind != llm.KindRateLimited || f.RetryAfter != 1500*time.Millisecond {
		t.Errorf("kind %v retry %v", f.Kind, f.RetryAfter)
	}
	if n := len(s.requests()); n != 1 {
		t.Errorf("%d requests", n)
	}
}

// TestStreamCut: a stream cut before its finishReason fails as a
// connection failure, after one request; its Response keeps the usage
// the last event reported, so a billed failed attempt can be priced.
func TestStreamCut(t *testing.T) {
	quietLog(t) // the SDK logs a failed read; the adapter hides it from the SDK
	for name, handle := range map[string]func(http.ResponseWriter){
		// A clean close without a finishReason: the SDK would reconnect
		// with continuation on; the answer is incomplete.
		"clean close": func(w http.ResponseWriter) {
			writeSSE(w, `{"candidates":[{"content":{"role":"model","parts":[{"text":"Par"}]}}],"usageMetadata":{"promptTokenCount":9,"cachedContentTokenCount":5,"candidatesTokenCount":1}}`)
		},
		// A connection dropped mid-event.
		"dropped": func(w http.ResponseWriter) {
			writeSSE(w, `{"candidates":[{"content":{"role":"model","parts":[{"text":"Par"}]}}],"usageMetadata":{"promptTokenCount":9,"cachedContentTokenCount":5,"candidatesTokenCount":1}}`)
			w.Write([]byte(`data: {"candidates":[{"content":{"ro`))
			w.(http.Flusher).Flush()
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := newServer(t, func(w http.ResponseWriter, r *http.Request, _ seen) { handle(w) })
			st := startStream(t, context.Background(), s)
			cs, err := drain(t, st)
			f := asError(t, err)
			if len(cs) != 1 || (f.Kind != llm.KindConnection && f.Kind != llm.KindServer) {
				t.Errorf("chunks %+v, kind %v: %v", cs, f.Kind, f)
			}
			if f.Kind != llm.KindConnection {
				t.Errorf("%s: kind %v; want connection", name, f.Kind)
			}
			if n := len(s.requests()); n != 1 {
				t.Errorf("%d requests; the SDK reconnected", n)
			}
			if got, want := st.Response().Usage, (llm.Usage{InputTokens: 9, OutputTokens: 1, CacheReadTokens: 5}); got != want {
				t.Errorf("usage after the cut %+v; want %+v", got, want)
			}
		})
	}
}

func TestStreamClose(t *testing.T) {
	quietLog(t)
	release := make(chan struct{})
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, _ seen) {
		writeSSE(w, `{"candidates":[{"content":{"role":"model","parts":[{"text":"a"}]}}]}`)
		suite.Hold(r, release)
	})
	defer close(release)
	st := startStream(t, context.Background(), s)
	if c, err := st.Next(); err != nil || c.Text != "a" {
		t.Fatalf("%+v %v", c, err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := st.Next() // waits for the server
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	if err := st.Close(); err != nil {
		t.Error(err)
	}
	select {
	case err := <-done:
		if f := asError(t, err); f.Kind != llm.KindCanceled {
			t.Errorf("kind %v: %v", f.Kind, f)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not abort Next")
	}
	if err := st.Close(); err != nil {
		t.Error(err)
	}
	if _, err := st.Next(); !errors.As(err, new(*llm.Error)) {
		t.Errorf("Next after Close: %v", err)
	}
}

func TestStreamCanceled(t *testing.T) {
	quietLog(t)
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, _ seen) {
		writeSSE(w, `{"candidates":[{"content":{"role":"model","parts":[{"text":"a"}]}}]}`)
		<-r.Context().Done()
	})
	ctx, cancel := context.WithCancel(context.Background())
	st := startStream(t, ctx, s)
	if _, err := st.Next(); err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(20*time.Millisecond, cancel)
	_, err := st.Next()
	if f := asError(t, err); f.Kind != llm.KindCanceled {
		t.Errorf("kind %v: %v", f.Kind, f)
	}
}

// TestNoAutomaticContinuation checks that the SDK's automatic continuation,
// which resends the request, stays off: a continuation token in an answer
// and a stream cut after a checkpoint each take one request.
func TestNoAutomaticContinuation(t *testing.T) {
	var s *server
	s = newServer(t, func(w http.ResponseWriter, r *http.Request, _ seen) {
		if strings.Contains(r.URL.Path, "stream") {
			if len(s.requests()) > 2 {
				writeSSE(w, okBody) // what a resumed stream would get
				return
			}
			// A checkpoint, then a clean close without a finishReason.
			writeSSE(w, `{"candidates":[{"content":{"role":"model","parts":[{"text":"a"}]},"continuationToken":"AQID"}]}`)
			return
		}
		if len(s.requests()) > 1 {
			writeJSON(w, 200, okBody) // what a continued answer would get
			return
		}
		writeJSON(w, 200, `{"candidates":[{"content":{"role":"model","parts":[{"text":"part"}]},"finishReason":"CONTINUATION","continuationToken":"AQID"}]}`)
	})
	p := newProvider(t, geminiClient(t, s.URL, s.Client()), Config{})
	res, err := p.Complete(context.Background(), hello("gemini-2.5-flash"))
	if err != nil || res.Text != "part" || res.FinishReason != "CONTINUATION" {
		t.Errorf("%+v %v", res, err)
	}
	if n := len(s.requests()); n != 1 {
		t.Errorf("Complete sent %d requests; the SDK continued the answer", n)
	}
	before := len(s.requests())
	st, err := p.Stream(context.Background(), hello("gemini-2.5-flash"))
	if err == nil {
		_, err = drain(t, st)
		st.Close()
	}
	if f := asError(t, err); f.Kind != llm.KindConnection {
		t.Errorf("empty stream: kind %v", f.Kind)
	}
	if n := len(s.requests()) - before; n != 1 {
		t.Errorf("Stream sent %d requests; the SDK reconnected", n)
	}
}
