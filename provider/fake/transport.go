package fake

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// inProcessURL is the base URL URL returns before Start: requests sent
// through the in-process Transport reach the fake whatever their host, and
// the .invalid top-level domain guarantees that a request sent by mistake
// through a real client goes nowhere.
const inProcessURL = "http://fake.backstop.invalid"

// errConnReset is what the in-process transport returns for ConnReset: the
// error a real connection reset produces.
func errConnReset() error {
	return &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
}

var errBodyClosed = errors.New("http: read on closed response body")

// transport is the in-process RoundTripper: it runs the handler in a
// goroutine that writes into a pipe-backed ResponseWriter, and returns the
// response as soon as the handler has written its headers.
type transport struct {
	h http.Handler
}

// RoundTrip serves req with the handler, without sockets. It returns when
// the handler has written its headers (its first Write, WriteHeader or
// Flush), when the handler returns, or when req's context ends, whichever
// comes first. The handler's context ends when req's context ends, when the
// response body is closed, or when the handler returns.
func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	var body []byte
	length := int64(0)
	if req.Body != nil {
		// A body announced as too large is not read: the handler refuses
		// it on its Content-Length, as the real APIs do.
		if req.ContentLength <= maxBody {
			b, err := io.ReadAll(req.Body)
			if err != nil {
				req.Body.Close()
				return nil, fmt.Errorf("fake: reading request body: %w", err)
			}
			body, length = b, int64(len(b))
		} else {
			length = req.ContentLength
		}
		req.Body.Close()
	}
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}

	hctx, cancel := context.WithCancel(ctx)
	sreq := serverRequest(hctx, req, body, length)
	w := &pipeWriter{
		ctx:    hctx,
		header: make(http.Header),
		ready:  make(chan struct{}),
		body:   &bodyPipe{ctx: ctx, cancel: cancel, signal: make(chan struct{}, 1)},
	}
	go func() {
		defer cancel()
		defer w.finish()
		t.h.ServeHTTP(w, sreq)
	}()

	select {
	case <-w.ready:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	if w.err != nil {
		return nil, w.err
	}
	cl := int64(-1)
	if v := w.sent.Get("Content-Length"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			cl = n
		}
	}
	return &http.Response{
		Status:        strconv.Itoa(w.status) + " " + http.StatusText(w.status),
		StatusCode:    w.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.sent,
		Body:          w.body,
		ContentLength: cl,
		Request:       req,
	}, nil
}

// serverRequest is req as a server's handler would see it.
func serverRequest(ctx context.Context, req *http.Request, body []byte, length int64) *http.Request {
	u := *req.URL
	host := req.Host
	if host == "" {
		host = u.Host
	}
	sreq := &http.Request{
		Method:        req.Method,
		URL:           &u,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        make(http.Header, len(req.Header)),
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: length,
		Host:          host,
		RemoteAddr:    "192.0.2.1:1234",
		RequestURI:    u.RequestURI(),
	}
	if sreq.Method == "" {
		sreq.Method = http.MethodGet
	}
	for k, vs := range req.Header { // keys arrive canonical over the wire
		ck := http.CanonicalHeaderKey(k)
		sreq.Header[ck] = append(sreq.Header[ck], vs...)
	}
	return sreq.WithContext(ctx)
}

// pipeWriter is the in-process ResponseWriter. Writes never block: the body
// is buffered in a bodyPipe, so the handler goroutine ends as soon as the
// handler returns, even when the client never reads or closes the body.
type pipeWriter struct {
	ctx    context.Context // the handler's
	header http.Header
	body   *bodyPipe

	mu      sync.Mutex
	started bool          // ready has been closed
	ready   chan struct{} // closed once headers are sent or the request failed
	// Set before ready is closed, read after.
	status int
	sent   http.Header
	err    error
}

var _ http.Flusher = (*pipeWriter)(nil)

// Header returns the header map to fill before WriteHeader.
func (w *pipeWriter) Header() http.Header { return w.header }

// WriteHeader sends the status and a snapshot of the headers. Later calls
// are ignored, as a server does.
func (w *pipeWriter) WriteHeader(code int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		return
	}
	w.status = code
	w.sent = w.header.Clone()
	if w.sent.Get("Date") == "" {
		w.sent.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	}
	w.started = true
	close(w.ready)
}

// Write sends the headers (200 when unset, with the Content-Type sniffed as
// a server does) and buffers b for the client.
func (w *pipeWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	started := w.started
	w.mu.Unlock()
	if !started {
		if w.header.Get("Content-Type") == "" && len(b) > 0 {
			w.header.Set("Content-Type", http.DetectContentType(b))
		}
		w.WriteHeader(http.StatusOK)
	}
	return w.body.write(b)
}

// Flush sends the headers if they are not sent yet; written data is always
// visible to the client at once.
func (w *pipeWriter) Flush() {
	w.mu.Lock()
	started := w.started
	w.mu.Unlock()
	if !started {
		w.WriteHeader(http.StatusOK)
	}
}

// reset makes the request fail as a reset connection would: RoundTrip
// returns the error if headers are not sent, else the body read does.
func (w *pipeWriter) reset() { w.fail(errConnReset()) }

func (w *pipeWriter) fail(err error) {
	w.mu.Lock()
	if !w.started {
		w.err = err
		w.started = true
		close(w.ready)
	}
	w.mu.Unlock()
	w.body.closeWrite(err)
}

// finish ends the response when the handler returns, or panics.
func (w *pipeWriter) finish() {
	if v := recover(); v != nil {
		err := fmt.Errorf("fake: handler aborted the response: %w", io.ErrUnexpectedEOF)
		if v != http.ErrAbortHandler {
			err = fmt.Errorf("fake: handler panicked: %v: %w", v, io.ErrUnexpectedEOF)
		}
		w.fail(err)
		return
	}
	w.mu.Lock()
	started := w.started
	w.mu.Unlock()
	if !started && w.ctx.Err() != nil {
		// The handler gave up because the request ended: no response.
		w.fail(context.Cause(w.ctx))
		return
	}
	if !started {
		if w.header.Get("Content-Length") == "" {
			w.header.Set("Content-Length", "0")
		}
		w.WriteHeader(http.StatusOK)
	}
	// A body the request's end cut short reads as that end, not as EOF.
	w.body.closeWrite(context.Cause(w.ctx))
}

// bodyPipe is an unbounded in-memory pipe: the handler writes without
// blocking, the client reads, waiting on a channel and the request's context
// (so a reader is durably blocked under testing/synctest). Every write
// signals the reader, so a streaming handler's events reach the client as
// they are written, with no flushing needed.
type bodyPipe struct {
	ctx    context.Context    // the client's request context
	cancel context.CancelFunc // ends the handler's context

	mu     sync.Mutex
	buf    bytes.Buffer
	werr   error // set when the writer is done: io.EOF or the failure
	closed bool  // the client closed the body
	signal chan struct{}
}

func (p *bodyPipe) notify() {
	select {
	case p.signal <- struct{}{}:
	default:
	}
}

func (p *bodyPipe) write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closed:
		return 0, io.ErrClosedPipe
	case p.werr != nil:
		return 0, errors.New("fake: write after the response ended")
	}
	p.buf.Write(b)
	p.notify()
	return len(b), nil
}

func (p *bodyPipe) closeWrite(err error) {
	if err == nil {
		err = io.EOF
	}
	p.mu.Lock()
	if p.werr == nil {
		p.werr = err
	}
	p.mu.Unlock()
	p.notify()
}

// Read returns buffered data, or waits for more. Once the request's context
// has ended, reads fail with its cause unless the body was read to its end,
// as with a real transport.
func (p *bodyPipe) Read(b []byte) (int, error) {
	for {
		p.mu.Lock()
		switch {
		case p.closed:
			p.mu.Unlock()
			return 0, errBodyClosed
		case p.buf.Len() == 0 && p.werr != nil:
			err := p.werr
			p.mu.Unlock()
			return 0, err
		case p.ctx.Err() != nil:
			p.mu.Unlock()
			return 0, context.Cause(p.ctx)
		case p.buf.Len() > 0:
			n, _ := p.buf.Read(b)
			p.mu.Unlock()
			return n, nil
		}
		p.mu.Unlock()
		select {
		case <-p.signal:
		case <-p.ctx.Done():
		}
	}
}

// Close discards the body and ends the handler's context. A Read blocked in
// another goroutine returns at once, as when a real connection is closed.
func (p *bodyPipe) Close() error {
	p.mu.Lock()
	p.closed = true
	p.buf = bytes.Buffer{}
	p.mu.Unlock()
	p.cancel()
	p.notify()
	return nil
}
