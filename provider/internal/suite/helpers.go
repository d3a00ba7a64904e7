package suite

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unicode/utf8"

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

// Hold blocks until release is closed or r is canceled: a handler that
// keeps a request open.
func Hold(r *http.Request, release <-chan struct{}) {
	select {
	case <-release:
	case <-r.Context().Done():
	}
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

// ReadChunks reads s to its end and returns its chunks and the final
// error, failing t at a chunk that is not either text or a tool call.
func ReadChunks(t testing.TB, s llm.Stream) ([]llm.Chunk, error) {
	t.Helper()
	var got []llm.Chunk
	for {
		c, err := s.Next()
		if err != nil {
			return got, err
		}
		if (c.Text == "") == (c.ToolCall == nil) {
			t.Fatalf("chunk %+v: want text or a tool call", c)
		}
		got = append(got, c)
	}
}

// ReadToEnd reads s to its end as every stream must end, whatever its
// events: each chunk text or a tool call with JSON arguments (see
// ReadChunks), the end io.EOF or a complete error of provider that quotes
// no key (see CheckError), returned as fail; Response then holds exactly the
// text and calls delivered, Close succeeds and Next after it fails.
func ReadToEnd(t testing.TB, s llm.Stream, provider, key string) (text string, calls []llm.ToolCall, fail *llm.Error) {
	t.Helper()
	chunks, err := ReadChunks(t, s)
	if err != io.EOF {
		fail = CheckError(t, err, provider, key, 200)
	}
	var b strings.Builder
	for _, c := range chunks {
		b.WriteString(c.Text)
		if c.ToolCall != nil {
			if !json.Valid(c.ToolCall.Arguments) {
				t.Fatalf("a tool call whose arguments are not JSON: %q", c.ToolCall.Arguments)
			}
			calls = append(calls, *c.ToolCall)
		}
	}
	text = b.String()
	if res := s.Response(); res.Text != text || !reflect.DeepEqual(res.ToolCalls, calls) {
		t.Fatalf("Response text %q, calls %+v; want the chunks' %q, %+v", res.Text, res.ToolCalls, text, calls)
	}
	if s.Close() != nil {
		t.Fatal("Close failed")
	}
	if _, err := s.Next(); err == nil {
		t.Fatal("Next after the end and Close succeeded")
	}
	return text, calls, fail
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

// WithKey returns body with key inserted at byte at (modulo its length),
// so that every fuzzed body gives the redaction something to do.
func WithKey(body []byte, key string, at uint) []byte {
	i := int(at % uint(len(body)+1))
	return append(append(append([]byte(nil), body[:i]...), key...), body[i:]...)
}

// CheckError fails t unless err is a complete *llm.Error of provider for
// status that quotes no key, and returns it.
func CheckError(t testing.TB, err error, provider, key string, status int) *llm.Error {
	t.Helper()
	var e *llm.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %T %v is not an *llm.Error", err, err)
	}
	if e.Provider != provider || e.Status != status || e.Kind == llm.KindUnknown && status >= 200 && status <= 299 {
		t.Fatalf("incomplete error for status %d: %#v", status, e)
	}
	for _, s := range []string{e.Error(), e.Type, e.Code, e.Message, e.RequestID} {
		if strings.Contains(s, key) {
			t.Fatalf("error quotes the key: %q", s)
		}
	}
	if e.Err != nil && strings.Contains(e.Err.Error(), key) {
		t.Fatalf("cause quotes the key: %v", e.Err)
	}
	return e
}

// ErrorFuzz is what FuzzParseError needs of an adapter.
type ErrorFuzz struct {
	// Provider is the adapter's name; Key its API key.
	Provider, Key string
	// Seeds are error replies of the adapter's wire format.
	Seeds []Reply
	// Parse turns a reply of status and body into the adapter's error.
	Parse func(status int, body []byte) *llm.Error
	// Check checks what the adapter's error must hold of the reply beside
	// what every error must (see CheckError).
	Check func(t *testing.T, e *llm.Error, body []byte)
}

// Reply is a reply's status and body.
type Reply struct {
	Status int
	Body   string
}

// FuzzParseError fuzzes an adapter's parsing of error replies of fuzzed
// statuses and bodies, each echoing the key somewhere: every one is a
// complete error that quotes no key (see CheckError), then as c.Check says.
func FuzzParseError(f *testing.F, c ErrorFuzz) {
	for _, s := range c.Seeds {
		f.Add(s.Status, []byte(s.Body), uint(len(s.Body)/2))
	}
	f.Fuzz(func(t *testing.T, status int, body []byte, keyAt uint) {
		body = WithKey(body, c.Key, keyAt)
		c.Check(t, CheckError(t, c.Parse(status, body), c.Provider, c.Key, status), body)
	})
}

// ResponseFuzz is what FuzzParseResponse needs of an adapter.
type ResponseFuzz struct {
	// Provider is the adapter's name; Key its API key.
	Provider, Key string
	// Seeds are 200 bodies of the adapter's wire format.
	Seeds []string
	// Parse turns a 200 reply of body into the answer or an error.
	Parse func(body []byte) (*llm.Response, error)
	// Check checks an answer accepted from body.
	Check func(t *testing.T, body []byte, res *llm.Response)
}

// FuzzParseResponse fuzzes an adapter's parsing of 200 replies, half of
// them echoing the key: each is an answer, as c.Check says, whose tool
// calls have distinct ids (see CheckToolIDs), or a complete error that
// quotes no key, never both.
func FuzzParseResponse(f *testing.F, c ResponseFuzz) {
	for _, s := range c.Seeds {
		f.Add([]byte(s), uint(0))
	}
	f.Fuzz(func(t *testing.T, body []byte, keyAt uint) {
		if keyAt%2 == 1 { // half the runs echo the key somewhere
			body = WithKey(body, c.Key, keyAt/2)
		}
		res, err := c.Parse(body)
		if err != nil {
			if res != nil {
				t.Fatal("both a response and an error")
			}
			CheckError(t, err, c.Provider, c.Key, 200)
			return
		}
		CheckToolIDs(t, nil, res.ToolCalls)
		c.Check(t, body, res)
	})
}

// StreamFuzz is what FuzzStream needs of an adapter.
type StreamFuzz struct {
	// Provider is the adapter's name; Key the API key Open configures.
	Provider, Key string
	// RequestID is the response header holding the request id.
	RequestID string
	// End is what a stream must contain to end with io.EOF.
	End string
	// Finish is the field that says the answer finished ("finish_reason",
	// "stop_reason"): a stream that ends cleanly after it is complete
	// without End.
	Finish string
	// MaxText is the adapter's MaxResponseBytes, which Open configures.
	MaxText int
	// Seeds are short event streams of the adapter's wire format.
	Seeds []string
	// Open returns the adapter sending through rt.
	Open    func(rt http.RoundTripper) (llm.StreamProvider, error)
	Request llm.Request
}

// FuzzStream fuzzes an adapter's Stream over bodies of c's wire format,
// delivered in reads of fuzzed sizes, half of them echoing the key: every
// stream ends with io.EOF only when complete (its End sentinel, or its
// Finish field, was sent), or with a complete error that quotes no key;
// its Response holds the chunks' text; no two calls of the conversation
// share an id (see CheckToolIDs).
func FuzzStream(f *testing.F, c StreamFuzz) {
	// Short seeds: the fuzzer minimizes every new input, in time that
	// grows with the square of its length.
	for _, s := range c.Seeds {
		f.Add([]byte(s), []byte{5, 1, 63}, uint(len(s)/2))
	}
	tr := &Replay{RequestID: c.RequestID}
	p, err := c.Open(tr)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body, sizes []byte, keyAt uint) {
		if keyAt%2 == 1 { // half the runs echo the key somewhere
			body = WithKey(body, c.Key, keyAt/2)
		}
		tr.Body, tr.Sizes = body, sizes
		st, err := p.Stream(context.Background(), c.Request)
		if err != nil {
			t.Fatalf("Stream: %v", err)
		}
		defer st.Close()
		_, calls, fail := ReadToEnd(t, st, c.Provider, c.Key)
		CheckToolIDs(t, c.Request.Messages, calls)
		if fail == nil && !bytes.Contains(body, []byte(c.End)) && (c.Finish == "" || !containsFold(body, c.Finish)) {
			t.Fatalf("io.EOF from a stream without %s or %s: %q", c.End, c.Finish, body)
		}
		if fail != nil && fail.RequestID != "req_1" {
			t.Fatalf("error without the request id: %#v", fail)
		}
		if res := st.Response(); res.RequestID != "req_1" || len(res.Text) > c.MaxText {
			t.Fatalf("Response %+v; want the request id and at most %d bytes of text", res, c.MaxText)
		}
	})
}

// Replay is an in-process transport answering every request with a 200
// event stream whose body is Body, delivered in reads of the sizes given
// (cycling; 1 to 64 bytes; no sizes: all at once), with "req_1" in the
// header RequestID. A fuzz worker runs one input at a time, so one Replay
// serves them all.
type Replay struct {
	RequestID   string
	Body, Sizes []byte
}

func (b *Replay) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, ContentLength: -1, Request: req,
		Header: http.Header{"Content-Type": {"text/event-stream"}, b.RequestID: {"req_1"}},
		Body:   io.NopCloser(&pieces{b: b.Body, sizes: b.Sizes})}, nil
}

// Canned answers every request in process with Status (0 means 200),
// Header and Body, after reading and closing the request's body: no
// sockets, so that a benchmark measures the adapter and the SDK alone. A
// fuzz worker runs one input at a time, so it may change the fields
// between calls.
type Canned struct {
	Status int
	Header http.Header
	Body   []byte
}

func (c *Canned) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	status := c.Status
	if status == 0 {
		status = http.StatusOK
	}
	return &http.Response{StatusCode: status, Status: strconv.Itoa(status) + " " + http.StatusText(status),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Request: r, ContentLength: int64(len(c.Body)),
		Header: c.Header.Clone(), Body: io.NopCloser(bytes.NewReader(c.Body))}, nil
}

// pieces reads b in pieces of the sizes given, cycling (each 1 to 64
// bytes); no sizes means all at once.
type pieces struct {
	b     []byte
	sizes []byte
	i     int
}

func (p *pieces) Read(buf []byte) (int, error) {
	if len(p.b) == 0 {
		return 0, io.EOF
	}
	n := len(p.b)
	if len(p.sizes) > 0 {
		n = int(p.sizes[p.i%len(p.sizes)])%64 + 1
		p.i++
	}
	n = copy(buf, p.b[:min(n, len(p.b))])
	p.b = p.b[n:]
	return n, nil
}

// WithCRLF returns pieces with every "\n" made "\r\n" when crlf is set.
func WithCRLF(pieces []string, crlf bool) []string {
	if !crlf {
		return pieces
	}
	out := make([]string, len(pieces))
	for i, p := range pieces {
		out[i] = strings.ReplaceAll(p, "\n", "\r\n")
	}
	return out
}

// StreamEnds checks that s, read to its end, holds want as its Response,
// that Next after the end is io.EOF and that Close twice succeeds.
func StreamEnds(t testing.TB, s llm.Stream, want llm.Response) {
	t.Helper()
	if res := s.Response(); !reflect.DeepEqual(*res, want) {
		t.Errorf("response\n got %+v\nwant %+v", *res, want)
	}
	if _, err := s.Next(); err != io.EOF {
		t.Errorf("Next after the end: %v", err)
	}
	if s.Close() != nil || s.Close() != nil {
		t.Error("Close twice failed")
	}
}

// StreamOrComplete answers a request accepting an event stream with
// stream, any other with a 200 and body.
func StreamOrComplete(stream []string, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Accept"), "event-stream") {
			SSE(stream)(w, r)
			return
		}
		Respond(200, body)(w, r)
	}
}

// Bodies sends req to p through s once with Complete and once with Stream
// (read to its end) and returns the JSON bodies s received for each.
func Bodies(t testing.TB, p llm.StreamProvider, s *Server, req llm.Request) (complete, stream map[string]any) {
	t.Helper()
	if _, err := p.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(s.Last().Body, &complete)
	st, err := p.Stream(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := ReadStream(st); err != io.EOF {
		t.Fatal(err)
	}
	if err := json.Unmarshal(s.Last().Body, &stream); err != nil {
		t.Fatal(err)
	}
	return complete, stream
}

// containsFold reports whether body holds key in any case, as
// encoding/json matches an object's keys to a struct's fields: "stoP_reAson"
// (or "ſtop_reason", whose long s folds to s) is the adapter's stop_reason.
func containsFold(body []byte, key string) bool {
	n := utf8.RuneCountInString(key)
	for i := 0; i < len(body); {
		j, runes := i, 0
		for j < len(body) && runes < n {
			_, size := utf8.DecodeRune(body[j:])
			j += size
			runes++
		}
		if runes == n && strings.EqualFold(string(body[i:j]), key) {
			return true
		}
		_, size := utf8.DecodeRune(body[i:])
		i += size
	}
	return false
}
