package suite

// How both adapters' streams end, fail and stop: an error before the
// stream is Complete's error; a stream cut short, a malformed event, a
// line without end, a closed stream or a canceled call each fail it with
// their own Kind; one Stream is one request; nothing is left behind.

import (
	"context"
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

// TestStreamMalformedEvent: an event that is not the expected JSON fails
// the stream after what came before it, as a server error naming it.
func TestStreamMalformedEvent(t *testing.T) {
	forEach(t, func(t *testing.T, a adapter) {
		events := map[string]string{"key in unparseable data": a.badEvent(`"` + a.key + `"`)}
		for name, ev := range a.badEvents {
			events[name] = ev
		}
		for name, ev := range events {
			t.Run(name, func(t *testing.T) {
				s := NewServer(t, SSE([]string{a.start, a.text("Hello"), ev, a.end}))
				e := a.streamFails(t, OpenStream(t, a.new(t, s.URL, nil), context.Background(), request), "Hello")
				if e.Kind != llm.KindServer || e.Status != 200 || !strings.Contains(e.Message, a.badEventMessage) {
					t.Errorf("got %v; want KindServer, %q", e, a.badEventMessage)
				}
			})
		}
	})
}

// TestStreamCut: a stream that ends before the answer is complete (cleanly,
// mid-event, before its last event, or reset) is a connection failure after
// the chunks delivered.
func TestStreamCut(t *testing.T) {
	forEach(t, func(t *testing.T, a adapter) {
		started := []string{a.start, a.text("Hello"), a.text(", world")}
		cuts := map[string]http.HandlerFunc{
			"clean end": SSE(started),
			"mid-event": SSE(append(started, a.end[:40])),
			"reset": func(w http.ResponseWriter, r *http.Request) {
				SSE(started)(w, r)
				HangUp(w, r)
			},
		}
		for name, end := range a.unfinished {
			cuts[name] = SSE(append(started, end))
		}
		for name, h := range cuts {
			t.Run(name, func(t *testing.T) {
				s := NewServer(t, h)
				e := a.streamFails(t, OpenStream(t, a.new(t, s.URL, nil), context.Background(), request), "Hello", ", world")
				if e.Kind != llm.KindConnection || e.Status != 200 || llm.KindOf(e) != llm.KindConnection {
					t.Errorf("got %#v; want KindConnection", e)
				}
				if name == "clean end" && e.Message != "the stream ended before the answer was complete" {
					t.Errorf("message %q", e.Message)
				}
			})
		}
	})
}

// TestStreamWholeWithoutSentinel: a stream whose provider said it finished
// (a finish reason, a stop reason) and whose body then ended cleanly is a
// complete answer, though the sentinel that usually follows (message_stop,
// "data: [DONE]") never came: every published client serves it, and failing
// it would count complete answers against the breaker.
func TestStreamWholeWithoutSentinel(t *testing.T) {
	forEach(t, func(t *testing.T, a adapter) {
		for name, end := range a.whole {
			t.Run(name, func(t *testing.T) {
				s := NewServer(t, SSE([]string{a.start, a.text("Hello"), a.text(", world"), end}))
				st := OpenStream(t, a.new(t, s.URL, nil), context.Background(), request)
				defer st.Close()
				text, err := ReadStream(st)
				if err != io.EOF {
					t.Fatalf("the stream failed: %v", err)
				}
				if got := strings.Join(text, ""); got != "Hello, world" {
					t.Errorf("text %q", got)
				}
				if res := st.Response(); res.Finish != llm.FinishStop || res.Text != "Hello, world" {
					t.Errorf("response %+v; want the text and a stop finish", res)
				}
			})
		}
	})
}

// TestStreamErrorStatus: an error before the stream starts is the error
// Complete returns for the same reply, after one request.
func TestStreamErrorStatus(t *testing.T) {
	forEach(t, func(t *testing.T, a adapter) {
		tests := []struct {
			status int
			body   string
			header []string
		}{
			{529, a.fail(llm.KindOverloaded, "Overloaded"), []string{"retry-after", "4", a.requestID, "req_1"}},
			{429, a.fail(llm.KindRateLimited, "Please try again in 1.574s."), []string{"retry-after-ms", "1574", a.requestID, "req_1"}},
			{429, a.fail(llm.KindQuota, "quota"), []string{"x-should-retry", "false"}},
			{401, a.fail(llm.KindAuth, "invalid key "+a.key), nil},
			{400, a.fail(llm.KindContextLength, "too long"), nil},
			{502, "<html>Bad Gateway</html>", nil},
			{500, "", a.rateHeaders},
			{503, "", nil},
			{200, a.fail(llm.KindOverloaded, "Overloaded"), []string{"content-type", "application/json"}},
			{200, a.fail(llm.KindServer, "boom"), []string{"content-type", "application/json"}},
		}
		for _, tt := range tests {
			s := NewServer(t, Respond(tt.status, tt.body, tt.header...))
			p := a.new(t, s.URL, nil)
			want := a.completeErr(t, p, context.Background())
			before := s.Count.Load()
			st, err := p.Stream(context.Background(), request)
			if st != nil {
				t.Errorf("%d: a stream with the error", tt.status)
			}
			var got *llm.Error
			if !errors.As(err, &got) || !sameError(got, want) {
				t.Errorf("%d: Stream error\n %#v\nwant Complete's\n %#v", tt.status, err, want)
			}
			if n := s.Count.Load() - before; n != 1 {
				t.Errorf("%d: %d requests; want 1", tt.status, n)
			}
		}
	})
}

// sameError reports whether a and b are equal but for rate-limit resets
// within a second of each other: a reset given as a delay ("1.574s") is
// measured from each reply's arrival.
func sameError(a, b *llm.Error) bool {
	x, y := *a, *b
	for _, p := range [][2]*llm.Allowance{
		{&x.RateLimit.Requests, &y.RateLimit.Requests}, {&x.RateLimit.Tokens, &y.RateLimit.Tokens},
		{&x.RateLimit.InputTokens, &y.RateLimit.InputTokens}, {&x.RateLimit.OutputTokens, &y.RateLimit.OutputTokens},
	} {
		if d := p[0].Reset.Sub(p[1].Reset); d > -time.Second && d < time.Second {
			p[1].Reset = p[0].Reset
		}
	}
	return reflect.DeepEqual(x, y)
}

// TestStreamJSONReply: a server that ignores the request to stream and
// answers with the whole answer still gives a stream, of one chunk, whose
// answer is Complete's.
func TestStreamJSONReply(t *testing.T) {
	forEach(t, func(t *testing.T, a adapter) {
		s := NewServer(t, Respond(200, a.ok("Hello, world"), "content-type", "application/json", a.requestID, "req_json"))
		p := a.new(t, s.URL, nil)
		want, err := p.Complete(context.Background(), request)
		if err != nil {
			t.Fatal(err)
		}
		st := OpenStream(t, p, context.Background(), request)
		got, err := ReadStream(st)
		res := st.Response()
		if err != io.EOF || !reflect.DeepEqual(got, []string{"Hello, world"}) || res.Text != "Hello, world" || res.RequestID != "req_json" {
			t.Errorf("got %q, %v, %+v", got, err, res)
		}
		res.RateLimit, want.RateLimit = llm.RateLimit{}, llm.RateLimit{}
		if !reflect.DeepEqual(*res, *want) {
			t.Errorf("streamed answer\n %+v\nwant Complete's\n %+v", *res, *want)
		}
	})
}

// TestStreamOneRequest: whatever a stream meets, one Stream is one request.
func TestStreamOneRequest(t *testing.T) {
	forEach(t, func(t *testing.T, a adapter) {
		var mode atomic.Value
		s := NewServer(t, func(w http.ResponseWriter, r *http.Request) {
			switch mode.Load() {
			case "ok":
				SSE(a.stream("Hello", ", world"))(w, r)
			case "error event":
				SSE([]string{a.start, a.errorEvent})(w, r)
			case "429":
				Respond(429, a.fail(llm.KindRateLimited, "slow"), "retry-after-ms", "10", "x-should-retry", "true")(w, r)
			case "529":
				Respond(529, a.fail(llm.KindOverloaded, "Overloaded"), "retry-after", "1", "x-should-retry", "true")(w, r)
			case "cut":
				SSE([]string{a.start, a.text("Hello")})(w, r)
			case "reset":
				HangUp(w, r)
			}
		})
		p := a.new(t, s.URL, nil)
		want := map[string]llm.Kind{"ok": llm.KindUnknown, "error event": a.errorKind, "429": llm.KindRateLimited,
			"529": llm.KindOverloaded, "cut": llm.KindConnection, "reset": llm.KindConnection}
		for _, m := range []string{"ok", "529", "ok", "reset", "error event", "cut", "reset", "ok", "429", "ok"} {
			mode.Store(m)
			before := s.Count.Load()
			st, err := p.Stream(context.Background(), request)
			if err == nil {
				_, err = ReadStream(st)
				st.Close()
			}
			if n := s.Count.Load() - before; n != 1 {
				t.Errorf("%s: %d requests; want exactly 1", m, n)
			}
			if err == io.EOF {
				err = nil
			}
			if k := llm.KindOf(err); k != want[m] || m != "ok" && err == nil {
				t.Errorf("%s: got %v; want %v", m, err, want[m])
			}
		}
	})
}

// TestStreamCloseEarly closes the stream after one chunk: the server sees
// the connection go, Next says the stream was closed, and no goroutine is
// left behind.
func TestStreamCloseEarly(t *testing.T) {
	forEach(t, func(t *testing.T, a adapter) {
		ignore := goleak.IgnoreCurrent()
		closed := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			SSE([]string{a.start, a.text("Hello")})(w, r)
			select {
			case <-r.Context().Done():
				close(closed)
			case <-time.After(10 * time.Second):
			}
		}))
		tr := &http.Transport{}
		st, err := a.new(t, srv.URL, &http.Client{Transport: tr}).Stream(context.Background(), request)
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
		e := a.streamFails(t, st)
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
	})
}

// TestStreamCanceled: a call canceled while Next waits is canceled, one
// whose deadline passes mid-stream is a timeout, and one canceled before
// the headers is canceled as Complete's would be.
func TestStreamCanceled(t *testing.T) {
	forEach(t, func(t *testing.T, a adapter) {
		release := make(chan struct{})
		s := NewServer(t, func(w http.ResponseWriter, r *http.Request) {
			SSE([]string{a.start, a.text("Hello")})(w, r)
			select {
			case <-r.Context().Done():
			case <-release:
			}
		})
		defer close(release)
		ctx, cancel := context.WithCancel(context.Background())
		st := OpenStream(t, a.new(t, s.URL, nil), ctx, request)
		if c, err := st.Next(); err != nil || c.Text != "Hello" {
			t.Fatalf("first chunk %q, %v", c.Text, err)
		}
		time.AfterFunc(20*time.Millisecond, cancel) // while Next waits
		e := a.streamFails(t, st)
		if e.Kind != llm.KindCanceled || !errors.Is(e, context.Canceled) || e.Status != 200 {
			t.Errorf("got %#v; want KindCanceled wrapping context.Canceled", e)
		}
		ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		st = OpenStream(t, a.new(t, s.URL, nil), ctx, request)
		e = a.streamFails(t, st, "Hello")
		if e.Kind != llm.KindTimeout || !errors.Is(e, context.DeadlineExceeded) {
			t.Errorf("deadline: got %#v; want KindTimeout", e)
		}
		ctx, cancel = context.WithCancel(context.Background())
		cancel()
		if _, err := a.new(t, s.URL, nil).Stream(ctx, request); llm.KindOf(err) != llm.KindCanceled {
			t.Errorf("canceled before sending: %v", err)
		}
	})
}

// TestStreamLineTooLong: a server sending a line without end fails the
// stream soon after MaxResponseBytes, in bounded memory, and is cut off.
func TestStreamLineTooLong(t *testing.T) {
	forEach(t, func(t *testing.T, a adapter) {
		var written atomic.Int64
		s := NewServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, a.start+"data: ")
			buf := []byte(strings.Repeat("a", 32<<10))
			for written.Load() < 1<<30 {
				n, err := w.Write(buf)
				written.Add(int64(n))
				if err != nil {
					return
				}
			}
		})
		p := a.with(t, config{key: a.key, base: s.URL, maxBytes: 256 << 10})
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		st := OpenStream(t, p, context.Background(), request)
		e := a.streamFails(t, st)
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
	})
}

func TestStreamEncodeError(t *testing.T) {
	forEach(t, func(t *testing.T, a adapter) {
		for _, bad := range []any{make(chan int), func() {}} {
			s := NewServer(t, SSE(a.stream("Hello")))
			req := request
			req.Params.Extra = map[string]any{"bad": bad}
			_, err := a.new(t, s.URL, nil).Stream(context.Background(), req)
			if llm.KindOf(err) != llm.KindBadRequest || s.Count.Load() != 0 {
				t.Errorf("%T: got %v after %d requests; want a bad request and none sent", bad, err, s.Count.Load())
			}
		}
	})
}

// TestStreamMultiLineData: an event whose data spans several lines is one
// event, its lines joined by "\n".
func TestStreamMultiLineData(t *testing.T) {
	forEach(t, func(t *testing.T, a adapter) {
		s := NewServer(t, SSE([]string{a.start, a.multiLine, a.end}))
		got, err := ReadStream(OpenStream(t, a.new(t, s.URL, nil), context.Background(), request))
		if err != io.EOF || !reflect.DeepEqual(got, []string{"two\nlines"}) {
			t.Errorf("got %q, %v", got, err)
		}
	})
}

// TestStreamErrorEvent: an error event fails the stream after the text
// before it, classified as its wire format says, with the request id; the
// provider's message is in Detail only.
func TestStreamErrorEvent(t *testing.T) {
	forEach(t, func(t *testing.T, a adapter) {
		for _, tt := range a.errorEvents {
			t.Run(tt.name, func(t *testing.T) {
				s := NewServer(t, SSE([]string{a.start, a.text("Hello"), a.text(", world"), tt.event, a.end}, a.requestID, "req_err"))
				e := a.streamFails(t, OpenStream(t, a.new(t, s.URL, nil), context.Background(), request), "Hello", ", world")
				if e.Kind != tt.kind || e.Status != 200 || e.RequestID != "req_err" || e.Type != tt.typ || e.Code != tt.code {
					t.Errorf("got %#v; want Kind %v, Status 200, request id req_err, %s/%s", e, tt.kind, tt.typ, tt.code)
				}
				if tt.detail != "" && (e.Detail != tt.detail || strings.Contains(e.Error(), tt.detail+" [")) {
					t.Errorf("message %q, detail %q; want the provider's message in Detail only", e.Error(), e.Detail)
				}
			})
		}
	})
}
