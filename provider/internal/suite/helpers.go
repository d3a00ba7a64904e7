package suite

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/backstop-llm/backstop/llm"
)

// Server is a loopback httptest server that counts the requests it receives
// and records the last one.
type Server struct {
	*httptest.Server
	// Count is how many requests have arrived.
	Count atomic.Int64

	mu   sync.Mutex
	last Request
}

// Request is what a Server recorded of a request.
type Request struct {
	Method string
	// Path is the request URI: path and query.
	Path   string
	Header http.Header
	Body   []byte
}

// NewServer starts a Server answering with h, closed when t ends.
func NewServer(t testing.TB, h http.HandlerFunc) *Server {
	t.Helper()
	s := &Server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.Count.Add(1)
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.last = Request{Method: r.Method, Path: r.URL.RequestURI(), Header: r.Header.Clone(), Body: b}
		s.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// Last returns the last request received.
func (s *Server) Last() Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// Respond answers with status, headers (name, value pairs) and body.
func Respond(status int, body string, header ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

// SSE answers 200 with an event stream, flushing after each piece, then
// ends the body.
func SSE(pieces []string, header ...string) http.HandlerFunc {
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

// HangUp drops the connection with a TCP reset.
func HangUp(w http.ResponseWriter, r *http.Request) {
	c, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// CompleteErr runs one Complete that must fail and returns its *llm.Error,
// failing t unless the error names p and quotes no key.
func CompleteErr(t testing.TB, p llm.Provider, ctx context.Context, req llm.Request, key string) *llm.Error {
	t.Helper()
	res, err := p.Complete(ctx, req)
	if err == nil {
		t.Fatalf("Complete succeeded with %+v; want an error", res)
	}
	if res != nil {
		t.Errorf("Complete returned a response with its error: %+v", res)
	}
	var e *llm.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %T %v is not an *llm.Error", err, err)
	}
	if e.Provider != p.Name() {
		t.Errorf("Provider = %q; want %q", e.Provider, p.Name())
	}
	if strings.Contains(err.Error(), key) {
		t.Errorf("error quotes the API key: %v", err)
	}
	return e
}

// OpenStream opens a stream that must start, closed when t ends.
func OpenStream(t testing.TB, p llm.StreamProvider, ctx context.Context, req llm.Request) llm.Stream {
	t.Helper()
	s, err := p.Stream(ctx, req)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// ReadStream reads s to its end and returns the chunks' texts and the
// final error.
func ReadStream(s llm.Stream) ([]string, error) {
	var got []string
	for {
		c, err := s.Next()
		if err != nil {
			return got, err
		}
		got = append(got, c.Text)
	}
}

// StreamFails reads s, which must fail with an *llm.Error naming provider
// and quoting no key after the chunks want, and returns the error.
func StreamFails(t testing.TB, s llm.Stream, provider, key string, want ...string) *llm.Error {
	t.Helper()
	got, err := ReadStream(s)
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
	if e.Provider != provider || strings.Contains(e.Error(), key) || e.Err != nil && strings.Contains(e.Err.Error(), key) {
		t.Errorf("error without provider or quoting the key: %#v", e)
	}
	if _, again := s.Next(); again != err {
		t.Errorf("Next after the failure: %v; want the same error", again)
	}
	return e
}
