package genai

import (
	"context"
	"fmt"
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
	var at *attempt
	defer func() {
		if v := recover(); v != nil {
			st, err = nil, p.panicked(at, v)
		}
	}()
	call, err := p.translate(req)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, p.notSent(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	actx, at := p.newAttempt(ctx, true)
	next, stop := iter.Pull2(p.models.GenerateContentStream(actx, req.Model, call.contents, call.config))
	s := &stream{p: p, at: at, ctx: ctx, cancel: cancel, next: next, stop: stop}
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
	at     *attempt
	ctx    context.Context
	cancel context.CancelFunc
	next   func() (*gg.GenerateContentResponse, error, bool)
	stop   func()

	mu     sync.Mutex // held while pulling; Close takes it to stop the iterator
	a      answer
	size   int64       // bytes of text and tool calls assembled
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
			f := s.p.ep.Failure(s.at.x.Reply(), llm.KindCanceled)
			f.Message = "the stream was closed before the answer was complete"
			s.err = s.p.finish(s.at, f)
			return llm.Chunk{}, s.err
		case s.ended:
			s.err = s.end()
			s.release()
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
			err = s.p.panicked(s.at, v)
		}
	}()
	r, e, ok := s.next()
	switch {
	case !ok:
		s.ended = true
		return nil
	case e != nil:
		f := s.p.sdkError(s.ctx, s.at, e)
		if f.RequestID == "" {
			f.RequestID = s.a.requestID
		}
		return f
	}
	if s.a.requestID == "" {
		s.a.requestID = s.at.x.RequestID(altRequestID)
	}
	text, calls := s.a.add(r)
	s.size += int64(len(text))
	for i := range calls {
		s.size += int64(len(calls[i].ID) + len(calls[i].Name) + len(calls[i].Arguments))
	}
	if s.size > s.p.ep.MaxBytes {
		f := s.p.ep.Failure(s.at.x.Reply(), llm.KindServer)
		f.Message = fmt.Sprintf("the streamed answer is longer than %d bytes; raise MaxResponseBytes if answers are meant to be this large", s.p.ep.MaxBytes)
		return s.p.finish(s.at, f)
	}
	if text != "" {
		s.queue = append(s.queue, llm.Chunk{Text: text})
	}
	for i := range calls {
		tc := calls[i]
		s.queue = append(s.queue, llm.Chunk{ToolCall: &tc})
	}
	return nil
}

// end is the outcome of a stream whose iterator ended without an error:
// what the Exchange cut, a read that failed (both of which end the body
// cleanly for the SDK), a block, a stream cut short, or io.EOF. The caller
// holds mu and releases the stream after.
func (s *stream) end() error {
	if f := s.p.refused(s.at); f != nil {
		return f
	}
	if err := s.at.readError(); err != nil {
		return s.p.readFailure(s.ctx, s.at, err)
	}
	if f := s.a.blocked(s.p, s.at); f != nil {
		return f
	}
	if s.a.finish == "" {
		f := s.p.ep.Failure(s.at.x.Reply(), llm.KindConnection)
		f.Message = "the stream ended before the answer was complete (no finishReason)"
		f.Err = io.ErrUnexpectedEOF
		return s.p.finish(s.at, f)
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

// Response returns the answer assembled so far, every secret the attempt
// knows of removed from its metadata.
func (s *stream) Response() *llm.Response {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.at.x.Clean(s.a.response())
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
