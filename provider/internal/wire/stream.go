package wire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/backstop-llm/backstop/llm"
)

// Open sends body as one HTTP POST asking for a server-sent event stream
// (Accept: text/event-stream) and returns as soon as the response headers
// have arrived. It never retries. A transport failure is an *llm.Error, as
// Post returns it.
//
// A 2xx event stream comes back with its body open and unread (Reply.Body
// nil): the caller reads it, with NewStream, and must close it. Any other
// reply is read in full, under the cap, and closed exactly as Post reads
// it, and the returned body is nil: an error status, or a 2xx whose
// Content-Type is application/json (a server that ignored "stream": true,
// or a gateway's error); the adapter parses that Reply as Complete does.
func (e *Endpoint) Open(ctx context.Context, body []byte) (*Reply, io.ReadCloser, error) {
	resp, err := e.send(ctx, body, "text/event-stream")
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 || isJSON(resp.Header) {
		r, err := e.read(ctx, resp)
		return r, nil, err
	}
	return &Reply{Status: resp.StatusCode, Header: resp.Header, Received: time.Now()}, resp.Body, nil
}

// isJSON reports whether the response declares a JSON body.
func isJSON(h http.Header) bool {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	return err == nil && mt == "application/json"
}

// Handler reads one event of a provider's event stream. It records what the
// event says about the answer in res (model, id, usage, finish reason; never
// Text, which the Stream assembles from what it returns) and returns the
// text the event adds ("" for none) and whether the event ends the answer.
//
// An *llm.Error it returns (an error event, a refusal at the end) is
// returned by Next as is, after redaction; any other error says the event
// is malformed, and Next turns it into a KindServer *llm.Error quoting the
// event.
//
// When the body ends cleanly before the Handler returned done, Next hands
// it one more Event with End set: done then says the answer is complete
// all the same (the provider said it finished, and only the sentinel that
// follows is missing), an error fails the stream, and neither fails it as
// cut short (KindConnection).
type Handler func(ev Event, res *llm.Response) (text string, done bool, err error)

// Stream is the llm.Stream of one response: it reads the event stream of a
// 2xx reply through the adapter's Handler on the caller's goroutine, and
// assembles the answer. Create one with NewStream or Whole.
type Stream struct {
	ep     *Endpoint
	ctx    context.Context
	r      *Reply // status, headers and arrival of the response; no body
	body   io.ReadCloser
	sse    *SSE
	handle Handler

	res  llm.Response
	text strings.Builder
	// whole is the text of an answer that arrived whole, until Next
	// returns it.
	whole string

	err    error // sticky: io.EOF at the end, or the failure
	closed atomic.Bool
}

var _ llm.Stream = (*Stream)(nil)

// NewStream returns the Stream reading body, the open event stream of the
// 2xx reply r (as Open returned them), through handle. ctx is the context
// the request was sent with; when a read fails it decides the failure's
// Kind, as in Post.
//
// One line, one event and the assembled text may each be at most the
// endpoint's MaxBytes long: a longer one fails the stream with a KindServer
// *llm.Error, so a hostile or broken server cannot exhaust memory.
func (e *Endpoint) NewStream(ctx context.Context, r *Reply, body io.ReadCloser, handle Handler) *Stream {
	s := &Stream{ep: e, ctx: ctx, r: r, body: body, handle: handle,
		sse: NewSSE(body, int(min(e.maxBytes(), int64(^uint(0)>>1))))}
	s.res.RequestID = r.Header.Get(e.RequestID)
	if e.RateLimit != nil {
		s.res.RateLimit = e.RateLimit(r.Header, r.Received)
	}
	return s
}

// Whole returns a Stream delivering res, an answer that arrived whole (a
// server that does not stream), as a single chunk followed by io.EOF.
func (e *Endpoint) Whole(r *Reply, res *llm.Response) *Stream {
	s := &Stream{ep: e, ctx: context.Background(), r: r, res: *res, whole: res.Text}
	s.res.Text = ""
	return s
}

// Next returns the next piece of text. At the end of a complete answer it
// returns io.EOF; any failure is an *llm.Error, the key redacted. Once it
// has returned an error it returns the same error again; after Close, a
// stream that had not ended returns a KindCanceled *llm.Error.
func (s *Stream) Next() (llm.Chunk, error) {
	if s.err != nil {
		return llm.Chunk{}, s.err
	}
	if s.closed.Load() {
		s.err = s.closedError()
		return llm.Chunk{}, s.err
	}
	if s.sse == nil { // an answer that arrived whole
		s.err = io.EOF
		if s.whole == "" {
			return llm.Chunk{}, io.EOF
		}
		t := s.whole
		s.whole = ""
		s.text.WriteString(t)
		return llm.Chunk{Text: t}, nil
	}
	for {
		ev, err := s.sse.Next()
		if err == io.EOF && s.ctx.Err() == nil && !s.closed.Load() {
			// A clean end: complete if the provider had said it finished.
			ev, err = Event{End: true}, nil
		}
		if err != nil {
			return llm.Chunk{}, s.fail(s.readFailure(err))
		}
		text, done, err := s.handle(ev, &s.res)
		if ev.End && err == nil && !done {
			return llm.Chunk{}, s.fail(s.readFailure(io.EOF))
		}
		switch {
		case err != nil:
			return llm.Chunk{}, s.fail(s.eventFailure(ev, err))
		case done:
			s.err = io.EOF
			return llm.Chunk{}, io.EOF
		case text == "":
			continue
		case int64(s.text.Len())+int64(len(text)) > s.ep.maxBytes():
			f := s.ep.Failure(s.r, llm.KindServer)
			f.Message = fmt.Sprintf("the streamed answer is longer than %d bytes; raise MaxResponseBytes if answers are meant to be this large",
				s.ep.maxBytes())
			return llm.Chunk{}, s.fail(s.ep.Redact(f))
		}
		s.text.WriteString(text)
		return llm.Chunk{Text: text}, nil
	}
}

// Response returns a copy of the answer assembled so far, the key redacted
// from its metadata (see Endpoint.Clean).
func (s *Stream) Response() *llm.Response {
	res := s.res
	res.Text = s.text.String()
	return s.ep.Clean(&res)
}

// Close closes the response body, releasing the connection. It is safe to
// call more than once, and from another goroutine to abort a Next that is
// waiting for the server.
func (s *Stream) Close() error {
	if !s.closed.CompareAndSwap(false, true) || s.body == nil {
		return nil
	}
	return s.body.Close()
}

// fail records f as the stream's outcome and releases the connection: no
// more events will be read.
func (s *Stream) fail(f *llm.Error) error {
	s.err = f
	if s.body != nil && s.closed.CompareAndSwap(false, true) {
		s.body.Close()
	}
	return f
}

// closedError is what Next returns after Close.
func (s *Stream) closedError() *llm.Error {
	f := s.ep.Failure(s.r, llm.KindCanceled)
	f.Message = "the stream was closed before the answer was complete"
	f.Err = http.ErrBodyReadAfterClose
	return s.ep.Redact(f)
}

// readFailure turns a failed read of the event stream into an *llm.Error.
func (s *Stream) readFailure(err error) *llm.Error {
	switch {
	case s.ctx.Err() != nil:
		f := s.ep.Failure(s.r, kindOf(s.ctx, err))
		f.Err = err
		if !errors.Is(err, s.ctx.Err()) {
			f.Err = errors.Join(s.ctx.Err(), err)
		}
		f.Message = "reading the event stream: " + f.Err.Error()
		return s.ep.Redact(f)
	case s.closed.Load():
		return s.closedError()
	case err == io.EOF:
		f := s.ep.Failure(s.r, llm.KindConnection)
		f.Err = io.ErrUnexpectedEOF
		f.Message = "the stream ended before the answer was complete"
		return s.ep.Redact(f)
	case err == ErrLineTooLong || err == ErrEventTooLarge:
		what := "a line"
		if err == ErrEventTooLarge {
			what = "an event"
		}
		f := s.ep.Failure(s.r, llm.KindServer)
		f.Err = err
		f.Message = fmt.Sprintf("the event stream sent %s longer than %d bytes; raise MaxResponseBytes if events are meant to be this large",
			what, s.ep.maxBytes())
		return s.ep.Redact(f)
	}
	// Anything else is the connection failing mid-answer.
	kind := kindOf(s.ctx, err)
	if kind == llm.KindUnknown {
		kind = llm.KindConnection
	}
	f := s.ep.Failure(s.r, kind)
	f.Err = err
	f.Message = "reading the event stream: " + err.Error()
	return s.ep.Redact(f)
}

// eventFailure turns a Handler's error into an *llm.Error.
func (s *Stream) eventFailure(ev Event, err error) *llm.Error {
	var f *llm.Error
	if errors.As(err, &f) {
		return s.ep.Redact(f)
	}
	name := ev.Type
	if name == "" {
		name = "message"
	}
	f = s.ep.Failure(s.r, llm.KindServer)
	f.Err = err
	if len(ev.Data) == 0 {
		f.Message = fmt.Sprintf("event %s has no data", s.ep.quote([]byte(name)))
	} else {
		f.Message = fmt.Sprintf("event %s is not the expected JSON (%v)", s.ep.quote([]byte(name)), err)
		f.Detail = s.ep.quote(ev.Data)
	}
	return s.ep.Redact(f)
}
