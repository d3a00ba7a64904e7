package genai

import (
	"context"
	"io"
	"iter"
	"sync"

	gg "google.golang.org/genai"

	"github.com/backstop-llm/backstop/llm"
)

// Stream sends req as exactly one streamGenerateContent?alt=sse request
// (the SDK's retries and automatic continuation forced off, as in
// Complete) and returns once the first event has arrived: a failure before
// it (a transport error, an error status, an error event first) is
// returned as Complete would return it.
//
// Next returns the answer's text as it arrives, and each function call as
// a Chunk with ToolCall (Gemini sends every call whole). At the end it
// returns io.EOF; a stream that ends without a finishReason is
// KindConnection (cut short); an error event, a cut connection or an event
// the SDK cannot read is returned as a classified *llm.Error; a blocked
// prompt or candidate is KindContentFilter, after the chunks that came
// before it. Close may be called from another goroutine: it cancels the
// request and waits for a Next in progress to return.
func (p *Provider) Stream(ctx context.Context, req llm.Request) (st llm.Stream, err error) {
	defer func() {
		if v := recover(); v != nil {
			st, err = nil, p.panicked(v)
		}
	}()
	call, err := p.translate(req)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, p.sdkError(ctx, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	next, stop := iter.Pull2(p.models.GenerateContentStream(ctx, req.Model, call.contents, call.config))
	s := &stream{p: p, ctx: ctx, cancel: cancel, next: next, stop: stop}
	s.a.ids = call.ids
	s.mu.Lock()
	err = s.pull()
	s.mu.Unlock()
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// stream is an llm.Stream over the SDK's iterator, pulled one response at a
// time on the caller's goroutine.
type stream struct {
	p      *Provider
	ctx    context.Context
	cancel context.CancelFunc
	next   func() (*gg.GenerateContentResponse, error, bool)
	stop   func()

	mu     sync.Mutex // held while pulling; Close takes it to stop the iterator
	a      answer
	queue  []llm.Chunk // what the last response added, not yet returned
	ended  bool        // the iterator is done
	err    error       // the stream's outcome once known: io.EOF or an *llm.Error
	closed bool
}

// Next returns the next piece of the answer.
func (s *stream) Next() (llm.Chunk, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if len(s.queue) > 0 {
			c := s.queue[0]
			s.queue = s.queue[1:]
			return c, nil
		}
		switch {
		case s.err != nil:
			return llm.Chunk{}, s.err
		case s.closed:
			s.err = s.p.redact(&llm.Error{Provider: s.p.name, Kind: llm.KindCanceled, RequestID: s.a.requestID,
				Message: "the stream was closed before the answer was complete"})
			return llm.Chunk{}, s.err
		case s.ended:
			s.err = s.end()
			return llm.Chunk{}, s.err
		}
		if err := s.pull(); err != nil {
			s.err = err
			s.release()
		}
	}
}

// pull takes the next response from the iterator and queues its chunks.
// The caller holds mu.
func (s *stream) pull() (err error) {
	defer func() {
		if v := recover(); v != nil {
			s.ended = true
			err = s.p.panicked(v)
		}
	}()
	r, e, ok := s.next()
	switch {
	case !ok:
		s.ended = true
		return nil
	case e != nil:
		f := s.p.sdkError(s.ctx, e)
		if f.RequestID == "" {
			f.RequestID = s.a.requestID
		}
		return f
	}
	text, calls := s.a.add(r)
	if text != "" {
		s.queue = append(s.queue, llm.Chunk{Text: text})
	}
	for i := range calls {
		tc := calls[i]
		s.queue = append(s.queue, llm.Chunk{ToolCall: &tc})
	}
	return nil
}

// end is the outcome of a stream whose iterator ended without an error.
func (s *stream) end() error {
	s.release()
	if f := s.a.blocked(s.p); f != nil {
		return f
	}
	if s.a.finish == "" {
		return s.p.redact(&llm.Error{Provider: s.p.name, Kind: llm.KindConnection, RequestID: s.a.requestID,
			Message: "the stream ended before the answer was complete (no finishReason)", Err: io.ErrUnexpectedEOF})
	}
	return io.EOF
}

// release stops the iterator (closing the response body) and the request's
// context. The caller holds mu.
func (s *stream) release() {
	if s.stop != nil {
		func() {
			defer func() { _ = recover() }() // a panic already reported by pull
			s.stop()
		}()
		s.stop = nil
	}
	s.cancel()
}

// Response returns the answer assembled so far.
func (s *stream) Response() *llm.Response {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.p.clean(s.a.response())
}

// Close cancels the request, waits for a Next in progress, and releases the
// connection. It is safe to call more than once.
func (s *stream) Close() error {
	s.cancel() // first, unlocked: aborts a Next waiting for the server
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.release()
	return nil
}
