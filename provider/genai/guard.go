package genai

import (
	"context"
	"io"
	"net/http"
	"sync"

	gg "google.golang.org/genai"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/wire"
)

// altRequestID is the request-id header read when X-Goog-Request-Id (the
// endpoint's) is absent: classify.VendorGoogle's second name.
const altRequestID = "X-Request-Id"

// rebuild returns the Models the adapter sends through: those of a client
// built anew from cc, the caller's client's configuration, over a guarded
// copy of its HTTP client (see guardedClient). NewClient fills in every
// field a client needs (the HTTP client, the base URL, the API version)
// the first time, so building again from the result detects no
// credentials and touches no network: with HTTPClient set the SDK neither
// runs credential detection nor asks for a quota project. The caller's
// client and HTTP client are not changed.
func rebuild(cc gg.ClientConfig, vertex bool) (*gg.Models, error) {
	cfg := cc
	cfg.HTTPClient = guardedClient(cc.HTTPClient)
	cfg.HTTPOptions.Headers = cc.HTTPOptions.Headers.Clone()
	if !vertex {
		// A project or location the SDK took from the environment, which
		// the Gemini API does not use: given back explicitly, NewClient
		// would refuse them.
		cfg.Project, cfg.Location = "", ""
	}
	if cfg.APIKey != "" {
		// Credentials beside a key the SDK took from the environment:
		// given back together, NewClient would refuse them. The Models
		// service never reads Credentials once HTTPClient is set.
		cfg.Credentials = nil
	}
	c, err := gg.NewClient(context.Background(), &cfg)
	if err != nil {
		return nil, err
	}
	return c.Models, nil
}

// guardedClient returns the HTTP client the adapter gives the SDK: a copy
// of c that refuses redirects, with the Exchange of each attempt
// (wire.Transport) right under the SDK, over c's own transport, and
// quietTransport above it.
func guardedClient(c *http.Client) *http.Client {
	g := wire.GuardedClient(c)
	g.Transport = &quietTransport{next: g.Transport}
	return g
}

// attempt is one Complete or Stream: its Exchange, and the error a read of
// the body failed with, which quietTransport hid from the SDK.
type attempt struct {
	x *wire.Exchange

	mu      sync.Mutex
	readErr error
}

// attemptKey is the context key under which quietTransport finds the
// attempt.
type attemptKey struct{}

// newAttempt returns the attempt of one Complete (stream false) or Stream,
// and ctx carrying it. A stream's Exchange is quiet: a stream it cuts ends
// cleanly for the SDK.
func (p *Provider) newAttempt(ctx context.Context, stream bool) (context.Context, *attempt) {
	a := &attempt{x: p.ep.NewExchange(stream, stream)}
	for _, s := range p.extra {
		a.x.Secret(s)
	}
	ctx = wire.WithExchange(ctx, a.x)
	return context.WithValue(ctx, attemptKey{}, a), a
}

// readError returns the error a read of the body failed with, nil when
// none did.
func (a *attempt) readError() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.readErr
}

func (a *attempt) setReadError(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.readErr == nil {
		a.readErr = err
	}
}

// quietTransport hands the SDK each body of an attempt so that a failed
// read ends it as io.EOF, the error kept for the adapter, and so that
// Close reports nothing: the SDK writes a stream's read error and a
// failed Close to the process's standard logger (log.Printf in
// iterateResponseStream), which is not its to write to.
type quietTransport struct {
	next http.RoundTripper
}

func (q *quietTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := q.next.RoundTrip(r)
	a, _ := r.Context().Value(attemptKey{}).(*attempt)
	if err != nil || a == nil || res == nil || res.Body == nil || res.Body == http.NoBody {
		return res, err
	}
	res.Body = &quietBody{rc: res.Body, a: a}
	return res, nil
}

// quietBody is a body whose read errors end it (see quietTransport).
type quietBody struct {
	rc io.ReadCloser
	a  *attempt
}

func (b *quietBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err != nil && err != io.EOF {
		b.a.setReadError(err)
		err = io.EOF
	}
	return n, err
}

func (b *quietBody) Close() error {
	b.rc.Close()
	return nil
}

// refused returns what the attempt's Exchange refused or cut, with the
// request id, nil when nothing: the attempt's outcome, whatever the SDK
// made of it.
func (p *Provider) refused(a *attempt) *llm.Error {
	f := a.x.Failure()
	if f != nil && f.RequestID == "" {
		f.RequestID = a.x.RequestID(altRequestID)
	}
	return f
}

// readFailure is the error of a body whose read failed with err
// (quietTransport kept it): KindCanceled or KindTimeout when ctx ended,
// else the cause's kind, KindConnection when nothing names one. err is a
// transport's error, which quotes no body.
func (p *Provider) readFailure(ctx context.Context, a *attempt, err error) *llm.Error {
	kind := llm.KindOf(err)
	if cerr := ctx.Err(); cerr != nil {
		kind = llm.KindOf(cerr)
	}
	if kind == llm.KindUnknown {
		kind = llm.KindConnection
	}
	f := p.ep.Failure(a.x.Reply(), kind)
	f.Err = err
	f.Message = "reading the response body: " + err.Error()
	return p.finish(a, f)
}

// finish fills in the request id of f, an error of attempt a, and redacts
// every secret the attempt knows of.
func (p *Provider) finish(a *attempt, f *llm.Error) *llm.Error {
	if f.RequestID == "" {
		f.RequestID = a.x.RequestID(altRequestID)
	}
	return a.x.Redact(f)
}
