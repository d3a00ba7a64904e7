package wire

import (
	"context"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/backstop-llm/backstop/llm"
)

// sseStub is a RoundTripper answering with a fixed status, content type
// and body, recording the request's Accept header and whether the body
// was closed.
type sseStub struct {
	status int
	ctype  string
	body   io.Reader
	accept string
	closed bool
}

func (s *sseStub) RoundTrip(r *http.Request) (*http.Response, error) {
	s.accept = r.Header.Get("Accept")
	h := http.Header{"Request-Id": {"req_1"}, "X-Limit": {"7"}}
	if s.ctype != "" {
		h.Set("Content-Type", s.ctype)
	}
	return &http.Response{StatusCode: s.status, Header: h, ContentLength: -1, Body: s}, nil
}
func (s *sseStub) Read(p []byte) (int, error) { return s.body.Read(p) }
func (s *sseStub) Close() error               { s.closed = true; return nil }

func stubEndpoint(rt http.RoundTripper, maxBytes int64) *Endpoint {
	return &Endpoint{Provider: "p", URL: "http://h/v1", MaxBytes: maxBytes, RequestID: "Request-Id", Secret: key,
		Header: http.Header{"Accept": {"application/json"}}, Client: &http.Client{Transport: rt},
		RateLimit: func(h http.Header, _ time.Time) llm.RateLimit {
			n, _ := strconv.Atoi(h.Get("X-Limit"))
			return llm.RateLimit{Requests: llm.Allowance{Limit: int32(n)}}
		}}
}

func TestOpen(t *testing.T) {
	tests := []struct {
		name     string
		s        *sseStub
		open     bool // the body comes back open
		readBody string
	}{
		{"event stream", &sseStub{status: 200, ctype: "text/event-stream; charset=utf-8", body: strings.NewReader("data: x\n\n")}, true, ""},
		{"no content type", &sseStub{status: 200, body: strings.NewReader("data: x\n\n")}, true, ""},
		{"json 200", &sseStub{status: 200, ctype: "application/json; charset=utf-8", body: strings.NewReader(`{"a":1}`)}, false, `{"a":1}`},
		{"error status", &sseStub{status: 529, ctype: "text/event-stream", body: strings.NewReader(`{"e":1}`)}, false, `{"e":1}`},
	}
	for _, tt := range tests {
		r, rc, err := stubEndpoint(tt.s, 100).Open(t.Context(), []byte("{}"))
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if tt.s.accept != "text/event-stream" || r.Status != tt.s.status || r.Received.IsZero() {
			t.Errorf("%s: Accept %q, reply %+v", tt.name, tt.s.accept, r)
		}
		if tt.open {
			if rc == nil || tt.s.closed || r.Body != nil {
				t.Errorf("%s: body %v closed %v, Reply.Body %q; want it open and unread", tt.name, rc, tt.s.closed, r.Body)
			}
			continue
		}
		if rc != nil || !tt.s.closed || string(r.Body) != tt.readBody {
			t.Errorf("%s: body %v closed %v, Reply.Body %q; want it read and closed", tt.name, rc, tt.s.closed, r.Body)
		}
	}
	// A body over the cap fails as Post fails.
	s := &sseStub{status: 500, body: strings.NewReader(strings.Repeat("x", 101))}
	_, _, err := stubEndpoint(s, 100).Open(t.Context(), nil)
	var f *llm.Error
	if !errors.As(err, &f) || f.Kind != llm.KindServer || !strings.Contains(f.Message, "larger than 100 bytes") || !s.closed {
		t.Errorf("oversize error body: %v", err)
	}
}

// words is a Handler: each event's data is a piece of text, "end" ends
// the answer, "bad" is malformed and "fail" an error event.
func words(ev Event, res *llm.Response) (string, bool, error) {
	res.Model = "m"
	switch string(ev.Data) {
	case "end":
		return "", true, nil
	case "bad":
		return "", false, errors.New("bad JSON")
	case "fail":
		return "", false, &llm.Error{Provider: "p", Status: 200, RequestID: "req_1", Kind: llm.KindOverloaded, Message: "busy " + key}
	}
	return string(ev.Data), false, nil
}

// drain reads s to the end and returns the chunks and the final error.
func drain(s llm.Stream) (string, error) {
	var b strings.Builder
	for {
		c, err := s.Next()
		if err != nil {
			return b.String(), err
		}
		b.WriteString(c.Text + ",")
	}
}

func openStream(t *testing.T, ctx context.Context, body io.Reader, maxBytes int64) (*Stream, *sseStub) {
	t.Helper()
	stub := &sseStub{status: 200, ctype: "text/event-stream", body: body}
	e := stubEndpoint(stub, maxBytes)
	r, rc, err := e.Open(ctx, nil)
	if err != nil || rc == nil {
		t.Fatal(err)
	}
	return e.NewStream(ctx, r, rc, words), stub
}

func TestStream(t *testing.T) {
	s, stub := openStream(t, t.Context(), strings.NewReader("data: a\n\n: ping\n\ndata: \n\ndata: b\n\ndata: end\n\ndata: after\n\n"), 100)
	got, err := drain(s)
	res := s.Response()
	if got != "a,b," || err != io.EOF || res.Text != "ab" || res.Model != "m" || res.RequestID != "req_1" || res.RateLimit.Requests.Limit != 7 {
		t.Errorf("got %q, %v, %+v", got, err, res)
	}
	if _, err := s.Next(); err != io.EOF {
		t.Errorf("Next after the end: %v", err)
	}
	res.Text = "changed"
	if s.Response().Text != "ab" {
		t.Error("Response returned the stream's own answer, not a copy")
	}
	if s.Close() != nil || s.Close() != nil || !stub.closed {
		t.Error("Close twice")
	}
	if _, err := s.Next(); err != io.EOF {
		t.Errorf("Next after the end and Close: %v; want io.EOF still", err)
	}
}

// streamErr reads s to its end, which must be an *llm.Error, and returns it.
func streamErr(t *testing.T, s llm.Stream) *llm.Error {
	t.Helper()
	_, err := drain(s)
	var f *llm.Error
	if !errors.As(err, &f) {
		t.Fatalf("stream ended with %T %v; want an *llm.Error", err, err)
	}
	if f.Provider != "p" || f.Status != 200 || f.RequestID != "req_1" || strings.Contains(f.Error(), key) ||
		f.Err != nil && strings.Contains(f.Err.Error(), key) {
		t.Errorf("incomplete or leaking error %#v", f)
	}
	if _, again := s.Next(); again != error(f) {
		t.Errorf("error not sticky: %v then %v", f, again)
	}
	return f
}

func TestStreamFailures(t *testing.T) {
	boom := errors.New("connection reset by peer")
	tests := []struct {
		name    string
		body    io.Reader
		max     int64
		kind    llm.Kind
		message string
	}{
		{"cut before the end", strings.NewReader("data: a\n\ndata: b\n\n"), 100, llm.KindConnection, "the stream ended before the answer was complete"},
		{"cut mid-event", strings.NewReader("data: a\n\ndata: end"), 100, llm.KindConnection, "ended before"},
		{"read error", io.MultiReader(strings.NewReader("data: a\n\n"), iotest.ErrReader(boom)), 100, llm.KindConnection, "connection reset"},
		{"malformed", strings.NewReader("event: x\ndata: bad\n\n"), 100, llm.KindServer, `event "x" is not the expected JSON (bad JSON)`},
		{"error event", strings.NewReader("data: fail\n\n"), 100, llm.KindOverloaded, "busy [redacted]"},
		{"line too long", strings.NewReader("data: " + strings.Repeat("a", 100) + "\n\n"), 100, llm.KindServer, "a line longer than 100 bytes"},
		{"event too large", strings.NewReader(strings.Repeat("data: aaaaaaaaa\n", 11) + "\n"), 100, llm.KindServer, "an event longer than 100 bytes"},
		{"text too long", strings.NewReader(strings.Repeat("data: aaaaaaaaa\n\n", 12)), 100, llm.KindServer, "the streamed answer is longer than 100 bytes"},
		{"key in a malformed event", strings.NewReader("data: bad\n\ndata: " + key + "\n\n"), 100, llm.KindServer, "not the expected JSON"},
	}
	for _, tt := range tests {
		s, stub := openStream(t, t.Context(), tt.body, tt.max)
		f := streamErr(t, s)
		if f.Kind != tt.kind || !strings.Contains(f.Message+" "+f.Detail, tt.message) {
			t.Errorf("%s: got %v; want Kind %v, a message containing %q", tt.name, f, tt.kind, tt.message)
		}
		if !stub.closed {
			t.Errorf("%s: the body was not closed after the failure", tt.name)
		}
		if llm.KindOf(f) != tt.kind {
			t.Errorf("%s: KindOf = %v", tt.name, llm.KindOf(f))
		}
	}
}

// cancelBody fails its read with the error the transport gives a canceled
// request, after canceling.
type cancelBody struct{ cancel context.CancelFunc }

func (c cancelBody) Read([]byte) (int, error) {
	c.cancel()
	return 0, errors.New("net/http: request canceled")
}

func TestStreamCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	s, _ := openStream(t, ctx, io.MultiReader(strings.NewReader("data: a\n\n"), cancelBody{cancel}), 100)
	if c, err := s.Next(); err != nil || c.Text != "a" {
		t.Fatalf("first chunk %q, %v", c.Text, err)
	}
	f := streamErr(t, s)
	if f.Kind != llm.KindCanceled || !errors.Is(f, context.Canceled) {
		t.Errorf("got %v; want KindCanceled wrapping context.Canceled", f)
	}
	if s.Response().Text != "a" {
		t.Errorf("the text so far is lost: %q", s.Response().Text)
	}
}

func TestStreamClosed(t *testing.T) {
	s, stub := openStream(t, t.Context(), strings.NewReader("data: a\n\ndata: b\n\ndata: end\n\n"), 100)
	if c, err := s.Next(); err != nil || c.Text != "a" {
		t.Fatalf("first chunk %q, %v", c.Text, err)
	}
	if err := s.Close(); err != nil || !stub.closed {
		t.Fatalf("Close: %v", err)
	}
	f := streamErr(t, s)
	if f.Kind != llm.KindCanceled || !errors.Is(f, http.ErrBodyReadAfterClose) || !strings.Contains(f.Message, "closed") {
		t.Errorf("Next after Close: %v", f)
	}
}

func TestWhole(t *testing.T) {
	e := stubEndpoint(nil, 100)
	r := &Reply{Status: 200, Header: http.Header{}}
	res := &llm.Response{Text: "all at once", Model: "m", FinishReason: "stop"}
	s := e.Whole(r, res)
	if s.Response().Text != "" || s.Response().Model != "m" {
		t.Errorf("before Next: %+v", s.Response())
	}
	got, err := drain(s)
	if got != "all at once," || err != io.EOF || !reflect.DeepEqual(*s.Response(), *res) {
		t.Errorf("got %q, %v, %+v", got, err, s.Response())
	}
	s = e.Whole(r, &llm.Response{})
	if got, err := drain(s); got != "" || err != io.EOF {
		t.Errorf("empty answer: %q, %v", got, err)
	}
	s = e.Whole(r, res)
	if s.Close() != nil || s.Close() != nil {
		t.Error("Close")
	}
	if _, err := s.Next(); llm.KindOf(err) != llm.KindCanceled {
		t.Errorf("Next after Close: %v", err)
	}
}

// pipeBody is a response body the test writes to; closing it unblocks a
// waiting Read, as closing an HTTP response body does.
type pipeBody struct{ *io.PipeReader }

// TestStreamCloseWhileWaiting: Close from another goroutine ends a Next
// that is waiting for the server (the race detector checks the handover).
func TestStreamCloseWhileWaiting(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	e := stubEndpoint(nil, 100)
	r := &Reply{Status: 200, Header: http.Header{"Request-Id": {"req_1"}}}
	s := e.NewStream(t.Context(), r, pipeBody{pr}, words)
	go func() {
		io.WriteString(pw, "data: a\n\n")
		time.Sleep(20 * time.Millisecond)
		s.Close()
	}()
	if c, err := s.Next(); err != nil || c.Text != "a" {
		t.Fatalf("first chunk %q, %v", c.Text, err)
	}
	f := streamErr(t, s) // waits until Close
	if f.Kind != llm.KindCanceled || !strings.Contains(f.Message, "closed") {
		t.Errorf("Next ended by Close: %v", f)
	}
}
