package wire

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/backstop-llm/backstop/llm"
)

// Exchange is one attempt of an adapter over an official SDK, as the
// innermost layer the adapter installs sees it: a middleware the SDK runs
// right before its HTTP client (Middleware), or the transport of the HTTP
// client the adapter gives the SDK (Transport). It holds the adapter to the
// rules the native adapters keep with Endpoint, whatever the SDK does
// above it:
//
//   - one attempt is one request: a second request in the same attempt (a
//     middleware or transport that retries, a redirect followed) is refused
//     before it leaves, and a response whose request went to another
//     origin than the attempt's first (a client that followed a redirect)
//     fails the attempt;
//   - a redirect is never followed by a body: the request cannot be re-sent
//     (its GetBody is cleared), and a 3xx that comes back fails the attempt
//     with KindNotFound, as Endpoint's refused redirect does;
//   - every credential the request carries as it leaves (Authorization
//     bearer, basic or AWS SigV4, x-api-key, api-key, x-goog-api-key,
//     X-Amz-Security-Token, a key= query parameter), and every one the
//     response's request shows (what a transport below added, such as an
//     OAuth token) is learned, and redacted by Redact, Clean and Detail
//     with the configured key;
//   - a body that is not an event stream is read whole here, decompressed
//     when the transport left it compressed, under the cap, and handed on
//     from memory; an event stream is read through a limit on each line
//     and each event (the SSE framing), or on each frame for an AWS event
//     stream (application/vnd.amazon.eventstream, Bedrock's), so that the
//     SDK, whatever it buffers, never holds more than the cap of one
//     event. Past the cap the attempt fails, having read at most the cap.
//
// What the Exchange refused or cut is Failure: an *llm.Error classified as
// the native adapters classify the same thing, which the adapter returns
// instead of whatever the SDK made of it. An Exchange is used for one
// attempt; its methods are safe for the SDK's goroutines and the
// adapter's.
type Exchange struct {
	// ep is the adapter's endpoint: Provider, MaxBytes, the configured
	// Secret, the request-id header, the rate-limit reader.
	ep *Endpoint
	// stream is set for an attempt that asks for an event stream: a 2xx
	// that is not JSON is handed on unread, through the limit.
	stream bool
	// quiet makes a stream cut by the limit look like a clean end to the
	// SDK, for an SDK that writes a read error to the standard logger.
	quiet bool

	mu       sync.Mutex
	secrets  []string
	sent     int
	resp     *http.Response
	received time.Time
	body     []byte
	failure  *llm.Error
}

// NewExchange returns the Exchange of one attempt through ep. stream says
// the attempt asks for an event stream; quiet (for streams) makes a stream
// the limit cuts end cleanly for the SDK, Failure holding why.
func (e *Endpoint) NewExchange(stream, quiet bool) *Exchange {
	x := &Exchange{ep: e, stream: stream, quiet: quiet}
	if e.Secret != "" {
		x.secrets = append(x.secrets, e.Secret)
	}
	return x
}

// exchangeKey is the context key under which Transport finds the
// attempt's Exchange.
type exchangeKey struct{}

// WithExchange returns ctx carrying x, for a Transport below the SDK.
func WithExchange(ctx context.Context, x *Exchange) context.Context {
	return context.WithValue(ctx, exchangeKey{}, x)
}

// Transport is an http.RoundTripper that passes each request through the
// Exchange its context carries (WithExchange), then to Base
// (http.DefaultTransport when nil). A request without one goes to Base as
// it is.
type Transport struct {
	Base http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	x, _ := r.Context().Value(exchangeKey{}).(*Exchange)
	if x == nil {
		return base.RoundTrip(r)
	}
	return x.send(r, base.RoundTrip, false)
}

// GuardedClient returns the client an adapter gives an SDK: a copy of c
// (a client with the default transport when nil) that refuses redirects
// (see Client) and sends through a Transport over c's own, so that the
// Exchange of each attempt sees the request as it leaves and the response
// as it arrives. c is not changed.
func GuardedClient(c *http.Client) *http.Client {
	cp := Client(c)
	if _, ok := cp.Transport.(*Transport); !ok {
		cp.Transport = &Transport{Base: cp.Transport}
	}
	return cp
}

// ErrRefused is the error the Exchange hands the SDK for what it refused or
// cut; Failure says what it was.
var ErrRefused = errors.New("the adapter refused the exchange (see its Failure)")

// Middleware sends r through next (the HTTP client, or the transport
// below) under the Exchange's rules. Its signature is the SDKs'
// option.Middleware.
func (x *Exchange) Middleware(r *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	return x.send(r, next, true)
}

// send is Middleware; rewind says whether it may clear r's GetBody (a
// middleware may change its request; a RoundTripper must not, and the
// client that calls it refuses redirects already).
func (x *Exchange) send(r *http.Request, next func(*http.Request) (*http.Response, error), rewind bool) (*http.Response, error) {
	x.mu.Lock()
	x.learn(r.Header)
	x.learnQuery(r.URL)
	x.sent++
	if x.sent > 1 {
		f := &llm.Error{Provider: x.ep.Provider, Kind: llm.KindUnknown, Code: "second_request",
			Message: "the SDK sent a second request in one attempt (a middleware or transport that retries, or a redirect followed); it was not sent: one attempt is one request, and the chain decides what to retry"}
		x.failure = x.redactLocked(f)
		x.mu.Unlock()
		return nil, ErrRefused
	}
	x.mu.Unlock()
	if rewind {
		// A client that follows a 307 or 308 re-sends the body through
		// GetBody: without it, it hands the redirect back instead.
		r.GetBody = nil
	}
	res, err := next(r)
	received := time.Now()
	x.mu.Lock()
	defer x.mu.Unlock()
	x.received = received
	if res != nil && res.Request != nil && res.Request != r {
		// The request as the transport sent it, with what a transport
		// below added (an OAuth token); learned before any error, since
		// a client's CheckRedirect error comes with its response.
		x.learn(res.Request.Header)
		x.learnQuery(res.Request.URL)
	}
	if err != nil || res == nil {
		return res, err
	}
	x.resp = res
	if res.Request != nil && res.Request.URL != nil && r.URL != nil && !SameOrigin(res.Request.URL, r.URL) {
		drainClose(res.Body)
		x.failure = x.redirected(res, "the HTTP client followed a redirect to "+strconv.Quote(res.Request.URL.Redacted())+
			"; the adapter refuses an answer from another origin than the request's: give the SDK a client that does not follow redirects, or the endpoint the provider documents")
		return nil, ErrRefused
	}
	if res.StatusCode >= 300 && res.StatusCode <= 399 {
		drainClose(res.Body)
		to := "no Location"
		if loc := res.Header.Get("Location"); loc != "" {
			to = strconv.Quote(loc)
			if u, err := r.URL.Parse(loc); err == nil {
				to = strconv.Quote(u.Redacted())
			}
		}
		x.failure = x.redirected(res, fmt.Sprintf("the server answered %d %s, pointing to %s; the adapter does not follow redirects, which would send the credentials and the request to another URL: give the SDK the endpoint the provider documents",
			res.StatusCode, http.StatusText(res.StatusCode), to))
		return nil, ErrRefused
	}
	if res.Body == nil || res.Body == http.NoBody {
		return res, nil
	}
	size := res.ContentLength
	if enc := res.Header.Get("Content-Encoding"); !res.Uncompressed && strings.EqualFold(enc, "gzip") {
		// The transport left it compressed (the SDK asked for gzip
		// itself): the cap is on what it inflates to.
		zr, err := gzip.NewReader(io.LimitReader(res.Body, x.ep.maxBytes()+1))
		if err != nil {
			drainClose(res.Body)
			x.failure = x.cut(res, err)
			return nil, ErrRefused
		}
		res.Body = &inflated{Reader: zr, body: res.Body}
		res.Header = res.Header.Clone()
		res.Header.Del("Content-Encoding")
		res.Header.Del("Content-Length")
		res.ContentLength, res.Uncompressed, size = -1, true, -1
	}
	if x.stream && res.StatusCode >= 200 && res.StatusCode <= 299 && !isJSON(res.Header) {
		if isEventStream(res.Header) {
			res.Body = &framed{x: x, rc: res.Body, max: x.ep.maxBytes()}
		} else {
			res.Body = &limited{x: x, rc: res.Body, max: x.ep.maxBytes()}
		}
		return res, nil
	}
	body, err := ReadCapped(res.Body, size, x.ep.maxBytes())
	res.Body.Close()
	if err != nil {
		if err == ErrTooLarge {
			f := x.ep.Failure(x.replyLocked(res), StatusKind(res.StatusCode))
			f.Message = fmt.Sprintf("response body is larger than %d bytes; raise MaxResponseBytes if answers are meant to be this large", x.ep.maxBytes())
			x.failure = x.redactLocked(f)
		} else {
			x.failure = x.cut(res, err)
		}
		return nil, ErrRefused
	}
	x.body = body
	res.Body = io.NopCloser(bytes.NewReader(body))
	res.ContentLength = int64(len(body))
	return res, nil
}

// redirected is the failure for a redirect: KindNotFound (the endpoint is
// not where the configuration says), Code "redirect".
func (x *Exchange) redirected(res *http.Response, msg string) *llm.Error {
	f := x.ep.Failure(x.replyLocked(res), llm.KindNotFound)
	f.Code = "redirect"
	f.Message = msg
	return x.redactLocked(f)
}

// cut is the failure for a body that could not be read whole: the status
// says what the server meant, unless it was a success, whose answer is lost
// in transit.
func (x *Exchange) cut(res *http.Response, err error) *llm.Error {
	kind := StatusKind(res.StatusCode)
	if res.StatusCode >= 200 && res.StatusCode <= 299 {
		if kind = llm.KindOf(err); kind == llm.KindUnknown {
			kind = llm.KindConnection
		}
	}
	if res.Request != nil {
		if cerr := res.Request.Context().Err(); cerr != nil {
			kind = llm.KindOf(cerr)
		}
	}
	f := x.ep.Failure(x.replyLocked(res), kind)
	f.Err = err
	f.Message = "reading the response body: " + err.Error()
	return x.redactLocked(f)
}

// Failure returns what the Exchange refused or cut, nil when nothing: the
// error the attempt must return, whatever the SDK made of it.
func (x *Exchange) Failure() *llm.Error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.failure
}

// Sent returns how many requests reached the layer below: 0 when the SDK
// failed before sending.
func (x *Exchange) Sent() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.sent
}

// Response returns the response that arrived (its body may have been
// replaced), nil when none did.
func (x *Exchange) Response() *http.Response {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.resp
}

// Body returns the body read whole, nil for a stream or when none was.
func (x *Exchange) Body() []byte {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.body
}

// Received returns when the response arrived; now when none did.
func (x *Exchange) Received() time.Time {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.received.IsZero() {
		return time.Now()
	}
	return x.received
}

// Reply returns the status, headers, body and arrival of the response for
// the wire helpers (an empty header when none arrived).
func (x *Exchange) Reply() *Reply {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.replyLocked(x.resp)
}

func (x *Exchange) replyLocked(res *http.Response) *Reply {
	r := &Reply{Received: x.received, Body: x.body, Header: http.Header{}}
	if r.Received.IsZero() {
		r.Received = time.Now()
	}
	if res != nil {
		r.Status = res.StatusCode
		if res.Header != nil {
			r.Header = res.Header
		}
	}
	return r
}

// RequestID returns the request id of the response, read from the
// endpoint's request-id header or, when that is empty, the first of names
// present; "" when no response arrived.
func (x *Exchange) RequestID(names ...string) string {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.resp == nil {
		return ""
	}
	return redactAll(requestID(x.resp.Header, x.ep.RequestID, names), x.secrets)
}

func requestID(h http.Header, first string, names []string) string {
	if first != "" {
		if id := h.Get(first); id != "" {
			return id
		}
	}
	for _, n := range names {
		if id := h.Get(n); id != "" {
			return id
		}
	}
	return ""
}

// Secret adds s (a key the adapter knows of another way) to the secrets
// redacted.
func (x *Exchange) Secret(s string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.add(s)
}

// learn records the credentials h carries.
func (x *Exchange) learn(h http.Header) {
	for _, name := range [...]string{"X-Api-Key", "Api-Key", "X-Goog-Api-Key", "X-Amz-Security-Token"} {
		for _, v := range h.Values(name) {
			x.add(strings.TrimSpace(v))
		}
	}
	for _, v := range h.Values("Authorization") {
		for _, s := range credentials(v) {
			x.add(s)
		}
	}
	for _, v := range h.Values("Proxy-Authorization") {
		for _, s := range credentials(v) {
			x.add(s)
		}
	}
}

// learnQuery records a key the URL carries (the Gemini API's key=).
func (x *Exchange) learnQuery(u *url.URL) {
	if u == nil || u.RawQuery == "" {
		return
	}
	q := u.Query()
	for _, name := range [...]string{"key", "api-key", "api_key"} {
		for _, v := range q[name] {
			x.add(v)
		}
	}
}

// credentials returns the secrets an Authorization header's value holds:
// a bearer or basic token whole; of AWS SigV4 ("AWS4-HMAC-SHA256
// Credential=AKID/date/region/service/aws4_request, SignedHeaders=…,
// Signature=hex") the access key id and the signature; of any other
// scheme, what follows the scheme.
func credentials(v string) []string {
	v = strings.TrimSpace(v)
	scheme, rest, ok := strings.Cut(v, " ")
	if !ok {
		return []string{v}
	}
	rest = strings.TrimSpace(rest)
	if !strings.HasPrefix(strings.ToUpper(scheme), "AWS4-") {
		return []string{rest}
	}
	var out []string
	for _, kv := range strings.Split(rest, ",") {
		k, val, _ := strings.Cut(strings.TrimSpace(kv), "=")
		switch k {
		case "Credential":
			akid, _, _ := strings.Cut(val, "/")
			out = append(out, akid)
		case "Signature":
			out = append(out, val)
		}
	}
	return out
}

// add records s as a secret, once.
func (x *Exchange) add(s string) {
	if s == "" {
		return
	}
	for _, have := range x.secrets {
		if have == s {
			return
		}
	}
	x.secrets = append(x.secrets, s)
}

// Redact removes every secret (configured and learned) from every text
// field of f, as Endpoint.Redact does for one, and returns f.
func (x *Exchange) Redact(f *llm.Error) *llm.Error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.redactLocked(f)
}

func (x *Exchange) redactLocked(f *llm.Error) *llm.Error {
	for _, s := range x.secrets {
		ep := Endpoint{Secret: s}
		ep.Redact(f)
	}
	return f
}

// Clean removes every secret from the metadata of res (ID, Model,
// RequestID, FinishReason), as Endpoint.Clean does for one, and returns
// res.
func (x *Exchange) Clean(res *llm.Response) *llm.Response {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, s := range x.secrets {
		ep := Endpoint{Secret: s}
		ep.Clean(res)
	}
	return res
}

// Detail returns msg, the provider's own text, for llm.Error.Detail: every
// secret redacted, then cut to at most 512 bytes on a rune boundary.
func (x *Exchange) Detail(msg string) string {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := len(msg)
	room := detailMax
	for _, s := range x.secrets {
		room += len(s)
	}
	n = min(n, room)
	s := redactAll(msg[:n], x.secrets)
	if len(s) > detailMax || len(msg) > n {
		s = cutRunes(s, detailMax) + "…"
	}
	return s
}

// redactAll returns s with every secret redacted.
func redactAll(s string, secrets []string) string {
	for _, k := range secrets {
		s = redactKey(s, len(s), k)
	}
	return s
}

// Fail records f as the attempt's failure unless one is recorded, and
// returns the recorded one, redacted.
func (x *Exchange) Fail(f *llm.Error) *llm.Error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.failure == nil {
		x.failure = x.redactLocked(f)
	}
	return x.failure
}

// SameOrigin reports whether a and b have the same scheme, host and
// effective port.
func SameOrigin(a, b *url.URL) bool {
	if !strings.EqualFold(a.Scheme, b.Scheme) || !strings.EqualFold(a.Hostname(), b.Hostname()) {
		return false
	}
	return port(a) == port(b)
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
		return "443"
	case "http":
		return "80"
	}
	return ""
}

// drainClose reads a little of body, so that its connection can be
// reused, and closes it.
func drainClose(body io.ReadCloser) {
	if body == nil {
		return
	}
	io.Copy(io.Discard, io.LimitReader(body, redirectDrain))
	body.Close()
}

// inflated is a gzip body the Exchange decompresses.
type inflated struct {
	*gzip.Reader
	body io.ReadCloser
}

func (b *inflated) Close() error { return b.body.Close() }

// limited is an event stream's body read through the limit: no line and
// no event (the lines between two blank lines) may be longer than max.
// Past it the body is closed, the Exchange's failure recorded, and the
// reader reports ErrRefused (io.EOF for a quiet Exchange).
type limited struct {
	x   *Exchange
	rc  io.ReadCloser
	max int64

	line, event int64 // bytes of the current line and event
	cr          bool  // the last byte was a CR
	err         error // sticky
}

func (l *limited) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	n, err := l.rc.Read(p)
	for _, c := range p[:n] {
		switch c {
		case '\n':
			if l.cr { // the LF of a CRLF
				l.cr = false
				continue
			}
			l.endLine()
		case '\r':
			l.cr = true
			l.endLine()
			continue
		default:
			l.line++
			l.event++
		}
		l.cr = false
		if l.line > l.max || l.event > l.max {
			return 0, l.refuse()
		}
	}
	if err != nil && err != io.EOF {
		return n, err
	}
	return n, err
}

// endLine ends a line; an empty one ends the event.
func (l *limited) endLine() {
	if l.line == 0 {
		l.event = 0
	}
	l.line = 0
}

// refuse records why the stream was cut and closes it.
func (l *limited) refuse() error {
	l.err = l.x.refuseEvent(l.rc, l.max)
	return l.err
}

// refuseEvent records, unless a failure is recorded, that the stream sent
// an event longer than max, closes rc, and returns what the body reports
// from then on: ErrRefused, io.EOF for a quiet Exchange.
func (x *Exchange) refuseEvent(rc io.ReadCloser, max int64) error {
	x.mu.Lock()
	if x.failure == nil {
		f := x.ep.Failure(x.replyLocked(x.resp), llm.KindServer)
		f.Err = ErrEventTooLarge
		f.Message = fmt.Sprintf("the event stream sent an event longer than %d bytes; raise MaxResponseBytes if events are meant to be this large", max)
		x.failure = x.redactLocked(f)
	}
	quiet := x.quiet
	x.mu.Unlock()
	rc.Close()
	if quiet {
		return io.EOF
	}
	return ErrRefused
}

func (l *limited) Close() error { return l.rc.Close() }

// isEventStream reports whether h declares an AWS event stream
// (application/vnd.amazon.eventstream), as Bedrock streams its answers.
func isEventStream(h http.Header) bool {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	return err == nil && mt == "application/vnd.amazon.eventstream"
}

// framed is an AWS event stream's body read through the limit. Its
// messages are binary frames, not lines: each starts with its total length
// (4 bytes, big-endian), and a frame longer than max is refused as soon as
// that length is read, before its payload, so that the decoder above (which
// takes frames up to 16 MiB) never holds more than the cap of one frame.
type framed struct {
	x   *Exchange
	rc  io.ReadCloser
	max int64

	prelude [4]byte
	have    int   // bytes of the current frame's length read
	left    int64 // bytes of the current frame still to come after its length
	err     error // sticky
}

func (f *framed) Read(p []byte) (int, error) {
	if f.err != nil {
		return 0, f.err
	}
	n, err := f.rc.Read(p)
	for i := 0; i < n; {
		if f.left > 0 {
			k := min(f.left, int64(n-i))
			f.left -= k
			i += int(k)
			continue
		}
		f.prelude[f.have] = p[i]
		f.have++
		i++
		if f.have == len(f.prelude) {
			f.have = 0
			total := int64(binary.BigEndian.Uint32(f.prelude[:]))
			if total > f.max {
				f.err = f.x.refuseEvent(f.rc, f.max)
				return 0, f.err
			}
			f.left = max(total-int64(len(f.prelude)), 0)
		}
	}
	return n, err
}

func (f *framed) Close() error { return f.rc.Close() }

// Opaque wraps an SDK's error, whose text may quote the provider's
// response (and so the prompt), so that it can travel as an llm.Error's
// Err: its Error() says only what kind of error it was; errors.Is and
// errors.As still see the SDK's error through Unwrap. Put the SDK's text,
// cut and redacted (Detail), in the llm.Error's Detail instead.
func Opaque(err error) error {
	if err == nil {
		return nil
	}
	return &opaque{err: err}
}

type opaque struct{ err error }

func (o *opaque) Error() string {
	return fmt.Sprintf("the SDK's error (%T; its text may quote the response, so it is in Detail)", o.err)
}
func (o *opaque) Unwrap() error { return o.err }
