package fake

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// maxBody is the largest request body the fake accepts; larger ones get a
// 413, as from the real APIs (Anthropic's limit is 32 MB).
const maxBody = 32 << 20

var errTooLarge = errors.New("fake: request body too large")

// redacted replaces secrets in recorded headers.
const redacted = "[redacted]"

// Server is a fault-injecting fake of the Anthropic Messages and OpenAI Chat
// Completions APIs. Create one with New; it is safe for concurrent use.
//
// Each model has its own behaviour: a script (Script), a function (Handle),
// or, by default, an answer "fake answer from <model>". Every request is
// recorded for assertions (Requests, Arrivals, Calls).
type Server struct {
	mu     sync.Mutex
	seq    int // requests recorded, all models
	models map[string]*model
	loop   *loopback // the real server, between Start and Close

	buckets   map[string]*bucket // rate-limit state per model
	ownLimits map[string]bool    // models given limits by RateLimits
	defLimits *Limits            // RateLimits("", …), if called
	maxOut    map[string]int     // MaxOutputTokens overrides
	awsRegion string             // Region; "" is defaultRegion
}

// setMaxOutputTokens sets the largest max_tokens the fake accepts in an
// Anthropic request for model, overriding the limit it assumes from the
// model's name (see the package documentation); n <= 0 restores that limit.
func (s *Server) setMaxOutputTokens(model string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n <= 0 {
		delete(s.maxOut, model)
		return
	}
	if s.maxOut == nil {
		s.maxOut = make(map[string]int)
	}
	s.maxOut[model] = n
}

// outputLimit is the largest max_tokens accepted for model.
func (s *Server) outputLimit(model string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n, ok := s.maxOut[model]; ok {
		return n
	}
	return maxOutputTokens(model)
}

// model is one model's behaviour and history.
type model struct {
	script []Outcome
	used   int // outcomes of script consumed
	handle func(Call) Outcome
	calls  []Call
}

// Call is one request as the fake received it.
type Call struct {
	// Model is the model named in the request: in the body for Anthropic,
	// OpenAI and Azure's /openai/v1; in the path, URL-decoded, for Bedrock
	// (the model id), Vertex, Gemini and Azure's /openai/deployments (the
	// deployment). It is "" when the request did not name one.
	Model string
	// Format is the wire format, from the request's path.
	Format Format
	// N is the request's 1-based arrival index among the requests for Model.
	N int
	// Seq is the request's 1-based arrival index across all models: the N of
	// the generated ids req_fake_N, msg_fake_N and chatcmpl-fake-N.
	Seq int
	// Time is when the request was received (time.Now, so virtual time under
	// testing/synctest).
	Time time.Time
	// Header is the request's header, with the values of Authorization,
	// Proxy-Authorization, X-Api-Key, Api-Key, X-Goog-Api-Key,
	// X-Amz-Security-Token and Cookie replaced by
	// "[redacted]" (an Authorization scheme is kept: "Bearer [redacted]"), so
	// tests can check that a key was sent without the key being stored.
	Header http.Header
	// Body is the raw request body.
	Body []byte
	// Tools are the names of the tools the request declared (Anthropic
	// tools[].name, OpenAI tools[].function.name), in order.
	Tools []string
	// ToolResults are the tool results the request sent back, in order:
	// Anthropic tool_result blocks, OpenAI messages with role "tool". A
	// rejected request records those found before the error.
	ToolResults []ToolResult

	ctx context.Context
}

// Context returns the request's context, so that a Handle function that
// blocks (to admit one request at a time, say) can give up when the client
// does. It is context.Background() for the Calls returned by Server.Calls.
func (c Call) Context() context.Context {
	if c.ctx == nil {
		return context.Background()
	}
	return c.ctx
}

func (c Call) clone() Call {
	c.Header = c.Header.Clone()
	c.Body = bytes.Clone(c.Body)
	c.Tools = slices.Clone(c.Tools)
	c.ToolResults = slices.Clone(c.ToolResults)
	return c
}

// New returns a Server that answers every model with its default answer. It
// opens no socket: use Client or Transport for in-process requests, or
// Start for a loopback server.
func New() *Server {
	return &Server{models: make(map[string]*model)}
}

// modelLocked returns the state of model name, creating it. s.mu is held.
func (s *Server) modelLocked(name string) *model {
	if s.models == nil {
		s.models = make(map[string]*model)
	}
	m := s.models[name]
	if m == nil {
		m = &model{}
		s.models[name] = m
	}
	return m
}

// Script appends outcomes to model's script: each request for model takes
// the next unused outcome, in arrival order; once the script is used up, its
// last outcome repeats. Outcomes appended later come before that repetition.
// Script replaces a function set with Handle.
//
// Requests the fake rejects (a missing API key, an invalid body) are recorded
// but take no outcome.
func (s *Server) Script(model string, outcomes ...Outcome) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.modelLocked(model)
	if m.handle != nil {
		m.handle = nil
		m.script, m.used = nil, 0
	}
	m.script = append(m.script, outcomes...)
}

// Handle makes fn decide the outcome of every valid request for model,
// replacing its script: for rate limiters, admission control, outcomes that
// depend on the request body or on time. fn is called concurrently, without
// the Server's lock held, and may block; a blocking fn should give up when
// Call.Context ends. A nil fn restores the default answer.
func (s *Server) Handle(model string, fn func(Call) Outcome) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.modelLocked(model)
	m.handle = fn
	m.script, m.used = nil, 0
}

// Requests reports how many requests for model the fake has received,
// rejected ones included.
func (s *Server) Requests(model string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.models[model]; m != nil {
		return len(m.calls)
	}
	return 0
}

// Arrivals returns the arrival times of the requests for model, in arrival
// order.
func (s *Server) Arrivals(model string) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.models[model]
	if m == nil {
		return nil
	}
	ts := make([]time.Time, len(m.calls))
	for i, c := range m.calls {
		ts[i] = c.Time
	}
	return ts
}

// Calls returns copies of the requests for model, in arrival order.
func (s *Server) Calls(model string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.models[model]
	if m == nil {
		return nil
	}
	cs := make([]Call, len(m.calls))
	for i, c := range m.calls {
		cs[i] = c.clone()
	}
	return cs
}

// record stores the arrival of a request and returns it.
func (s *Server) record(f Format, name string, h http.Header, body []byte, cr carried) Call {
	h = redact(h)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	m := s.modelLocked(name)
	c := Call{Model: name, Format: f, N: len(m.calls) + 1, Seq: s.seq, Time: time.Now(), Header: h, Body: body,
		Tools: cr.tools, ToolResults: cr.results}
	m.calls = append(m.calls, c)
	return c
}

// next picks the outcome for an accepted request.
func (s *Server) next(c Call) Outcome {
	s.mu.Lock()
	m := s.modelLocked(c.Model)
	if fn := m.handle; fn != nil {
		s.mu.Unlock()
		return fn(c.clone())
	}
	defer s.mu.Unlock()
	switch {
	case len(m.script) == 0:
		return Outcome{}
	case m.used < len(m.script):
		m.used++
		return m.script[m.used-1]
	default:
		return m.script[len(m.script)-1]
	}
}

func redact(h http.Header) http.Header {
	c := make(http.Header, len(h))
	for k, vs := range h {
		vs = append([]string(nil), vs...)
		switch k {
		case "Authorization", "Proxy-Authorization":
			for i, v := range vs {
				if scheme, _, ok := strings.Cut(strings.TrimSpace(v), " "); ok {
					vs[i] = scheme + " " + redacted
				} else {
					vs[i] = redacted
				}
			}
		case "X-Api-Key", "Api-Key", "X-Goog-Api-Key", "X-Amz-Security-Token", "Cookie":
			for i := range vs {
				vs[i] = redacted
			}
		}
		c[k] = vs
	}
	return c
}

// ServeHTTP is the fake's handler: POST /v1/messages speaks the Anthropic
// Messages API, POST /v1/chat/completions the OpenAI Chat Completions API,
// the platforms' paths (Bedrock, Vertex AI, Gemini, Azure OpenAI) their
// formats (see the package documentation's Cloud platforms), and any other
// path gets a 404 (another method a 405). It checks the
// request as the real API would (API key, anthropic-version, the body's
// fields, messages and tools, as the package documentation lists; a body
// over 32 MiB gets a 413), records it, and serves the model's next outcome
// with the model's rate-limit headers. An answer to a request with "stream": true is sent as
// server-sent events in the request's format, each event flushed as it is
// written (see Outcome.Chunks); errors, hangs and resets are the same for
// streamed requests as for others.
//
// Mount it in an httptest.Server or a mux of your own if you like; Client,
// Transport and Start are the usual ways in.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ep, ok := route(r.URL)
	if !ok {
		noRoute(w, r, http.StatusNotFound)
		return
	}
	f := ep.format
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		noRoute(w, r, http.StatusMethodNotAllowed)
		return
	}
	var body []byte
	err := errTooLarge
	if r.ContentLength <= maxBody {
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	}
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.Is(err, errTooLarge) || errors.As(err, &tooBig) {
			s.mu.Lock()
			s.seq++
			seq := s.seq
			s.mu.Unlock()
			respond(w, r, exchange{format: f, seq: seq, model: ep.model}, Status(http.StatusRequestEntityTooLarge))
		}
		return // the client went away
	}
	req := parseRequest(body)
	if f.family() == Gemini {
		req = parseGemini(body)
	}
	if ep.pathModel {
		req.model = ep.model
	}
	if ep.pathStream {
		req.stream = ep.stream
	}
	rej, cr := reject(ep, r, req, s.outputLimit, s.region())
	call := s.record(f, req.model, r.Header, body, cr)
	ex := exchange{format: f, model: req.model, seq: call.Seq, reqLen: len(body), stop: req.stop,
		stream: req.stream, usage: req.usage, n: cr.n}
	if rej != nil {
		respond(w, r, ex, *rej)
		return
	}
	call.ctx = r.Context()
	o := s.next(call)
	in, out := estimate(ex.reqLen), 0
	if o.kind == kindAnswer && !o.body.ok {
		a := answerOf(o, ex)
		in, out = a.in, a.out
	}
	ex.limits = s.consume(f, req.model, in, out)
	respond(w, r, ex, o)
}

// respond carries out outcome o for the request.
func respond(w http.ResponseWriter, r *http.Request, ex exchange, o Outcome) {
	if o.onDone != nil {
		defer o.onDone()
	}
	ctx := r.Context()
	if o.kind == kindHang {
		<-ctx.Done()
		return
	}
	if !wait(ctx, o.delay) {
		return
	}
	if o.kind == kindReset {
		resetConn(w)
		return
	}

	rid := o.requestID
	if rid == "" {
		rid = "req_fake_" + strconv.Itoa(ex.seq)
	}
	if o.kind == kindAnswer && ex.stream && !o.body.ok {
		streamAnswer(ctx, w, ex, o, rid)
		return
	}
	status := http.StatusOK
	contentType := "application/json"
	var body []byte
	var extra []header
	switch {
	case o.body.ok:
		if o.kind == kindError {
			status = errorStatus(o, ex.format)
		} else if ex.stream {
			contentType = streamContentType(ex.format)
		}
		body = []byte(o.body.v)
	case o.kind == kindError:
		status, body, extra = errorBody(o, ex, rid)
	default:
		body = answerBody(o, ex)
	}
	h := w.Header()
	h.Set("Content-Type", contentType)
	setRequestID(h, ex.format, rid)
	setHeaders(h, extra)
	setHeaders(h, ex.limits)
	setHeaders(h, o.headers)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// setHeaders applies an outcome's headers: set, or removed when empty.
func setHeaders(h http.Header, hs []header) {
	for _, kv := range hs {
		if kv.v == "" {
			h.Del(kv.k)
		} else {
			h.Set(kv.k, kv.v)
		}
	}
}

// wait waits d, and reports whether ctx is still live after it. The wait
// ends early when ctx ends. It uses a timer, so under testing/synctest it
// passes in virtual time.
func wait(ctx context.Context, d time.Duration) bool {
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return false
		}
	}
	return ctx.Err() == nil
}

// resetConn resets the request's connection: in-process by failing the
// round trip, over a real server by closing the hijacked TCP connection
// with SO_LINGER 0 (an RST), elsewhere (HTTP/2, a writer that cannot be
// hijacked) by aborting the handler.
func resetConn(w http.ResponseWriter) {
	if pw, ok := w.(*pipeWriter); ok {
		pw.reset()
		return
	}
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	// Close the innermost connection: a *tls.Conn would send close_notify
	// first, which the client reads as a clean EOF.
	for {
		nc, ok := conn.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		conn = nc.NetConn()
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// noRoute answers a request for a path or method the fake does not serve,
// with a message that says what it does serve.
func noRoute(w http.ResponseWriter, r *http.Request, status int) {
	typ := "not_found_error"
	if status == http.StatusMethodNotAllowed {
		typ = "invalid_request_error"
	}
	body := marshal(struct {
		Type  string               `json:"type"`
		Error anthropicErrorDetail `json:"error"`
	}{"error", anthropicErrorDetail{Type: typ, Message: fmt.Sprintf(
		"fake: no route for %s %s: the fake serves POST %s (Anthropic), POST %s (OpenAI), "+
			"/model/{id}/invoke[-with-response-stream] (Bedrock), "+
			"/v1/projects/{p}/locations/{l}/publishers/{anthropic|google}/models/{m}:{method} (Vertex), "+
			"/v1beta/models/{m}:{generateContent|streamGenerateContent} (Gemini) and "+
			"/openai/deployments/{d}/chat/completions, /openai/v1/chat/completions (Azure)",
		r.Method, r.URL.Path, anthropicPath, openaiPath)}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// Transport returns an in-process RoundTripper that serves every request
// with the fake, whatever its URL's host, without sockets. It works inside
// testing/synctest bubbles: the handler runs in a goroutine that ends when
// the handler returns, the request's context ends or the response body is
// closed, and delays use timers, so they pass in virtual time.
//
// RoundTrip returns as soon as the handler has written its headers; if the
// request's context ends first, it returns the context's error.
func (s *Server) Transport() http.RoundTripper {
	return &transport{h: s}
}

// Client returns an *http.Client using Transport: pass it with URL to an
// adapter's Config (HTTPClient, BaseURL).
func (s *Server) Client() *http.Client {
	return &http.Client{Transport: s.Transport()}
}

// URL returns the base URL to give an adapter: the loopback server's
// (http://127.0.0.1:port) between Start and Close, else http://fake.backstop.invalid. An
// adapter appends /v1/messages or /v1/chat/completions to it.
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loop != nil {
		return s.loop.url
	}
	return inProcessURL
}

// loopback is a real HTTP server on 127.0.0.1 serving the fake.
type loopback struct {
	srv    *http.Server
	url    string
	served chan struct{} // closed when Serve has returned

	mu      sync.Mutex
	active  int           // handlers running
	closing bool          // Close has begun: refuse new handlers
	drained chan struct{} // closed once closing and no handler runs
}

// serve runs s's handler for one request, tracking it for Close.
func (l *loopback) serve(w http.ResponseWriter, r *http.Request, s *Server) {
	l.mu.Lock()
	if l.closing {
		l.mu.Unlock()
		panic(http.ErrAbortHandler)
	}
	l.active++
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.active--
		if l.closing && l.active == 0 {
			close(l.drained)
		}
		l.mu.Unlock()
	}()
	s.ServeHTTP(w, r)
}

// Start starts a real HTTP server for the fake on a free loopback port
// (127.0.0.1:0), for examples and for tests that need real connections (a
// connection reset over TCP). URL returns its address until Close. Client
// and Transport stay in-process. Start fails if the server is already
// started.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loop != nil {
		return errors.New("fake: Start called on a started server; call Close first")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("fake: listening on loopback: %w", err)
	}
	l := &loopback{
		url:     "http://" + ln.Addr().String(),
		served:  make(chan struct{}),
		drained: make(chan struct{}),
	}
	l.srv = &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { l.serve(w, r, s) }),
		ReadHeaderTimeout: time.Minute,
	}
	go func() {
		defer close(l.served)
		_ = l.srv.Serve(ln)
	}()
	s.loop = l
	return nil
}

// Close shuts the loopback server down: it closes the listener and every
// connection, which ends the context of requests in flight (a Hang, an
// After), and waits for their handlers to return. Handle functions that
// block must give up when Call.Context ends, or Close waits for them. Close
// is a no-op when the server is not started; Start may be called again
// after it. Recorded calls and scripts are kept.
func (s *Server) Close() {
	s.mu.Lock()
	l := s.loop
	s.loop = nil
	s.mu.Unlock()
	if l == nil {
		return
	}
	_ = l.srv.Close()
	<-l.served
	l.mu.Lock()
	l.closing = true
	if l.active == 0 {
		close(l.drained)
	}
	l.mu.Unlock()
	<-l.drained
}
