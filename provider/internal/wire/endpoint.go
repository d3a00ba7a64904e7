// Package wire is the HTTP plumbing the provider adapters share. It posts one
// JSON request and reads the reply under a size cap, or opens an event
// stream and reads its server-sent events incrementally, on the caller's
// goroutine; reads the headers every provider sends (Retry-After,
// x-should-retry, rate-limit figures); turns transport failures and
// unreadable bodies into *llm.Error; and redacts the API key from
// everything an error quotes. It knows no provider's body format: the
// adapters own their JSON, their events and their error classification.
package wire

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/backstop-llm/backstop/llm"
)

// DefaultMaxBytes is the response body cap used when none is configured:
// 8 MiB.
const DefaultMaxBytes = 8 << 20

// Endpoint is one JSON API endpoint of one provider. Its fields are set once
// by the adapter's constructor; it is safe for concurrent use.
type Endpoint struct {
	// Provider is the adapter's Name, put into every error.
	Provider string
	// URL is where Post sends requests.
	URL string
	// Client sends the requests; nil means http.DefaultClient, refusing
	// redirects. Give it one
	// made by the package's Client function, which refuses redirects: a
	// client that follows them would send the key and the body to
	// wherever a server points.
	Client *http.Client
	// Header is sent with every request (authentication, API version,
	// content type). Post sends a copy, so a RoundTripper that edits its
	// request cannot change it.
	Header http.Header
	// MaxBytes caps the response body Post reads; 0 means DefaultMaxBytes.
	MaxBytes int64
	// Secret is the API key, redacted from every error Redact sees and
	// every answer Clean sees: wherever it appears when it is MinSecretLen
	// bytes or longer, only as a whole token when shorter.
	Secret string
	// RequestID names the response header holding the request id.
	RequestID string
	// RateLimit reads the provider's rate-limit headers into a RateLimit;
	// nil reads none.
	RateLimit func(h http.Header, received time.Time) llm.RateLimit
}

// Reply is a response whose body has been read in full and closed.
type Reply struct {
	// Status is the HTTP status code.
	Status int
	// Header is the response's header.
	Header http.Header
	// Body is the whole body, at most MaxBytes long.
	Body []byte
	// Received is when the response headers arrived: relative waits and
	// resets in the headers are measured from it.
	Received time.Time
}

// ErrTooLarge reports a body longer than the cap (ReadCapped).
var ErrTooLarge = errors.New("response body too large")

// Post sends body as one HTTP POST and reads the reply. It never retries.
// Any failure is returned as an *llm.Error: a transport failure carries the
// Kind of its cause (KindCanceled for a canceled ctx, KindTimeout for a
// deadline), a body over the cap or cut short carries the status and
// headers. A reply of any status is returned as is for the adapter to parse.
func (e *Endpoint) Post(ctx context.Context, body []byte) (*Reply, error) {
	resp, err := e.send(ctx, body, "")
	if err != nil {
		return nil, err
	}
	return e.read(ctx, resp)
}

// send posts body with the endpoint's headers (Accept replaced by accept
// when not empty) and returns the response once its headers have arrived.
// A transport failure is an *llm.Error carrying the Kind of its cause.
func (e *Endpoint) send(ctx context.Context, body []byte, accept string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL, bytes.NewReader(body))
	if err != nil {
		return nil, e.Redact(&llm.Error{Provider: e.Provider, Kind: llm.KindOf(err),
			Message: "cannot build the HTTP request: " + err.Error(), Err: err})
	}
	req.Header = e.Header.Clone()
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	client := e.Client
	if client == nil {
		client = defaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, e.Redact(&llm.Error{Provider: e.Provider, Kind: transportKind(ctx, err), Err: err})
	}
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		return nil, e.redirected(req, resp)
	}
	return resp, nil
}

// Client returns the client an endpoint sends with: a copy of c
// (http.DefaultClient when nil) whose CheckRedirect refuses every redirect,
// so that a 3xx comes back to send as it is. Following one would send the
// request again, to wherever the server pointed: net/http re-sends the body
// and every custom header (x-api-key, api-key) even to another host, and one
// attempt would become two requests.
func Client(c *http.Client) *http.Client {
	if c == nil {
		c = http.DefaultClient
	}
	cp := *c
	cp.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &cp
}

// defaultClient is http.DefaultClient refusing redirects, for an Endpoint
// whose Client is nil.
var defaultClient = Client(nil)

// redirectDrain is how much of a redirect's body is read so that its
// connection can be reused; a longer body closes the connection instead.
const redirectDrain = 4 << 10

// redirected is the error for a redirect the endpoint refused: KindNotFound
// (the endpoint is not where the configuration says: not retried, counted
// against the breaker, the chain moves on), saying where the server pointed.
func (e *Endpoint) redirected(req *http.Request, resp *http.Response) *llm.Error {
	io.Copy(io.Discard, io.LimitReader(resp.Body, redirectDrain))
	resp.Body.Close()
	r := &Reply{Status: resp.StatusCode, Header: resp.Header, Received: time.Now()}
	f := e.Failure(r, llm.KindNotFound)
	f.Code = "redirect"
	to := "no Location"
	if loc := resp.Header.Get("Location"); loc != "" {
		to = strconv.Quote(loc)
		if u, err := req.URL.Parse(loc); err == nil {
			to = strconv.Quote(u.Redacted())
		}
	}
	f.Message = fmt.Sprintf("the server answered %d %s, pointing to %s; the adapter does not follow redirects, which would send the API key and the request to another URL: set BaseURL to the endpoint the provider documents",
		resp.StatusCode, http.StatusText(resp.StatusCode), to)
	return e.Redact(f)
}

// read reads resp's body in full under the cap and closes it.
func (e *Endpoint) read(ctx context.Context, resp *http.Response) (*Reply, error) {
	defer resp.Body.Close()
	r := &Reply{Status: resp.StatusCode, Header: resp.Header, Received: time.Now()}
	var err error
	r.Body, err = ReadCapped(resp.Body, resp.ContentLength, e.maxBytes())
	switch {
	case err == ErrTooLarge:
		f := e.Failure(r, StatusKind(r.Status))
		f.Message = fmt.Sprintf("response body is larger than %d bytes; raise MaxResponseBytes if answers are meant to be this large",
			e.maxBytes())
		return nil, e.Redact(f)
	case err != nil:
		// A body cut short: the status still says what the server meant,
		// unless it was a success, whose answer is now lost in transit.
		kind := StatusKind(r.Status)
		if r.Status >= 200 && r.Status <= 299 || ctx.Err() != nil {
			kind = kindOf(ctx, err)
		}
		f := e.Failure(r, kind)
		f.Err = err
		f.Message = "reading the response body: " + err.Error()
		return nil, e.Redact(f)
	}
	return r, nil
}

func (e *Endpoint) maxBytes() int64 {
	if e.MaxBytes <= 0 {
		return DefaultMaxBytes
	}
	return e.MaxBytes
}

// transportKind classifies a failure of the client to send a request or to
// read its response's headers, as kindOf does; what nothing classifies (a
// header block over net/http's limit, a protocol error, a RoundTripper's
// own error) is KindConnection: the exchange failed in transit, not at the
// provider.
func transportKind(ctx context.Context, err error) llm.Kind {
	if k := kindOf(ctx, err); k != llm.KindUnknown {
		return k
	}
	return llm.KindConnection
}

// kindOf classifies a transport error, trusting the context over the error
// it happened to produce: a canceled call is KindCanceled even when the
// cancellation surfaced as a closed connection.
func kindOf(ctx context.Context, err error) llm.Kind {
	if cerr := ctx.Err(); cerr != nil {
		return llm.KindOf(cerr)
	}
	return llm.KindOf(err)
}

// ReadCapped reads r to the end, failing with ErrTooLarge as soon as more
// than max bytes arrive. It reads at most max+1 bytes, so a hostile server
// can neither exhaust memory nor hold the read open past the cap. size is
// the announced Content-Length (-1 when unknown): a body announced larger
// than max is refused unread; otherwise size only sizes the buffer.
func ReadCapped(r io.Reader, size, max int64) ([]byte, error) {
	if size > max {
		return nil, ErrTooLarge
	}
	n := int64(512)
	if size >= 0 {
		n = size + 1 // room for the read that reports EOF
	}
	b := make([]byte, 0, n)
	lr := io.LimitedReader{R: r, N: max + 1}
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		m, err := lr.Read(b[len(b):cap(b)])
		b = b[:len(b)+m]
		if int64(len(b)) > max {
			return nil, ErrTooLarge
		}
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}
