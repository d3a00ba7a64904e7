package openaisdk

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/backstop-llm/backstop/internal/classify"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/wire"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
)

// stream is the llm.Stream of both APIs: step reads the SDK's events one
// at a time on the caller's goroutine; the tool calls they complete wait
// in ready and are delivered before the next text.
type stream struct {
	rp    classify.Reply // what the answer is read with (attempt.reply)
	a     *attempt
	ctx   context.Context
	close func() error
	max   int // MaxResponseBytes: the most text, refusal and tool calls assembled

	// step reads one event: a piece of text, true at the end of a complete
	// answer, or the failure.
	step func() (string, bool, error)

	res       llm.Response
	refusal   strings.Builder // the refusal text streamed, up to max
	callBytes int             // the bytes of the tool calls assembled, up to max
	text      strings.Builder
	ready     []llm.ToolCall
	delivered []llm.ToolCall
	err       error // sticky: io.EOF or the *llm.Error
	ended     bool  // the answer is complete; deliver ready, then io.EOF
	closed    atomic.Bool
}

func newStream(a *attempt, ctx context.Context, r classify.Reply, close func() error) *stream {
	s := &stream{rp: r, a: a, ctx: ctx, close: close, max: int(min(a.p.ep.MaxBytes, int64(^uint(0)>>1)))}
	s.res.RequestID = classify.VendorOpenAI.RequestID(r.Header)
	s.res.RateLimit = classify.VendorOpenAI.RateLimit(r.Header, r.Received)
	return s
}

// whole makes s deliver an answer that arrived in one piece: its text, then
// its tool calls.
func (s *stream) whole(res *llm.Response) {
	text, calls := res.Text, res.ToolCalls
	res.Text, res.ToolCalls = "", nil
	s.res = *res
	s.step = func() (string, bool, error) {
		if t := text; t != "" {
			text = ""
			return t, false, nil
		}
		s.ready = calls
		return "", true, nil
	}
}

// Next returns the next chunk: a tool call assembled, else the next text;
// io.EOF after the whole answer; an *llm.Error when the stream failed.
func (s *stream) Next() (c llm.Chunk, err error) {
	if s.err != nil {
		return llm.Chunk{}, s.err
	}
	defer func() {
		if v := recover(); v != nil {
			s.ready = nil
			s.err = s.a.panicked(v)
			c, err = llm.Chunk{}, s.err
			s.close()
		}
	}()
	for {
		if s.closed.Load() {
			return llm.Chunk{}, s.closedError()
		}
		if len(s.ready) > 0 {
			tc := s.ready[0]
			s.ready = s.ready[1:]
			s.delivered = append(s.delivered, tc)
			return llm.Chunk{ToolCall: &tc}, nil
		}
		if s.ended {
			s.err = io.EOF
			return llm.Chunk{}, io.EOF
		}
		text, end, err := s.step()
		switch {
		case err != nil:
			s.ready = nil // the answer is incomplete: what is not delivered is dropped
			if s.closed.Load() {
				return llm.Chunk{}, s.closedError()
			}
			var f *llm.Error
			if !errors.As(err, &f) {
				f = s.eventError(err)
			}
			s.err = f
			s.close()
			return llm.Chunk{}, s.err
		case end:
			s.ended = true
			s.close() // nothing more to read: release the connection now
		case text != "":
			if s.text.Len()+len(text) > s.max {
				s.err = s.failure(llm.KindServer, fmt.Sprintf("the streamed text is longer than %d bytes; raise MaxResponseBytes if answers are meant to be this long", s.max), nil)
				s.close()
				return llm.Chunk{}, s.err
			}
			s.text.WriteString(text)
			return llm.Chunk{Text: text}, nil
		}
	}
}

// refuse adds a piece of a refusal, unless the refusal would grow longer
// than the cap.
func (s *stream) refuse(r string) {
	if r != "" && s.refusal.Len()+len(r) <= s.max {
		s.refusal.WriteString(r)
	}
}

// withheld is the error for an answer the stream ended as withheld (see
// Provider.withheld), or nil.
func (s *stream) withheld() *llm.Error {
	return s.a.withheld(s.rp, s.res.FinishReason, s.refusal.String())
}

// growCalls counts n more bytes of tool calls against the cap.
func (s *stream) growCalls(n int) error {
	if s.callBytes += n; s.callBytes > s.max {
		return s.failure(llm.KindServer, fmt.Sprintf("the streamed tool calls are longer than %d bytes; raise MaxResponseBytes if answers are meant to be this long", s.max), nil)
	}
	return nil
}

// closedError ends a stream closed before its end.
func (s *stream) closedError() error {
	s.ready = nil
	s.err = s.failure(llm.KindCanceled, "the stream was closed before the answer was complete", nil)
	return s.err
}

// Response returns the answer assembled so far, every credential the
// request carried redacted from its metadata.
func (s *stream) Response() *llm.Response {
	res := s.res
	res.Text = s.text.String()
	res.ToolCalls = slices.Clone(s.delivered)
	return s.a.x.Clean(&res)
}

// Close releases the connection. It is safe to call more than once.
func (s *stream) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.close()
	return nil
}

// failure is an error of the stream after it started: the status and the
// headers of its response, kind, and backstop's message.
func (s *stream) failure(kind llm.Kind, msg string, cause error) *llm.Error {
	f := s.a.answerFailure(s.rp, kind)
	f.Message, f.Err = msg, cause
	return s.a.x.Redact(f)
}

// cut is the failure of a stream that ended before the answer was
// complete.
func (s *stream) cut() *llm.Error {
	return s.failure(llm.KindConnection, "the stream ended before the answer was complete", io.ErrUnexpectedEOF)
}

// eventError classifies what the SDK's stream failed with: what the
// Exchange cut (an event over the cap) as its Failure; an error event as
// the same error before the stream would be (with the stream's status,
// 200); an event that is not the expected JSON or a line too long as
// KindServer; a read that failed as the transport (KindCanceled when ctx
// is done, else KindConnection at worst). The SDK's error, whose text may
// quote an event, is kept as Err behind wire.Opaque, its text in Detail.
func (s *stream) eventError(err error) *llm.Error {
	if f := s.a.x.Failure(); f != nil {
		return f
	}
	var se *ssestream.StreamError
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return s.errorEvent(se.Event.Data)
	case s.ctx.Err() != nil:
		f := s.failure(llm.KindOf(s.ctx.Err()), "reading the event stream: "+s.ctx.Err().Error(), err)
		if !errors.Is(err, s.ctx.Err()) {
			f.Err = errors.Join(s.ctx.Err(), err)
		}
		return f
	case errors.As(err, &syntax), errors.As(err, &typ):
		f := s.failure(llm.KindServer, "an event is not the expected JSON", wire.Opaque(err))
		f.Detail = s.a.x.Detail(err.Error())
		return f
	case errors.Is(err, bufio.ErrTooLong):
		return s.failure(llm.KindServer, "the event stream sent a line longer than the SDK reads", err)
	}
	kind := llm.KindOf(err)
	if kind == llm.KindUnknown {
		kind = llm.KindConnection
	}
	return s.failure(kind, "reading the event stream: "+err.Error(), err)
}

// errorEvent classifies an event carrying a top-level error object, as
// Complete classifies an error body.
func (s *stream) errorEvent(data []byte) *llm.Error {
	return s.a.bodyError(withBody(s.rp, data), `the error event holds no "error" object`, nil)
}

// isJSON reports whether a 2xx to a streaming request is a JSON body
// rather than an event stream.
func isJSON(h http.Header) bool {
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// doneWatch notes whether an event stream carried "data: [DONE]" at the
// start of a line, which the SDK's stream consumes without a trace: the
// native adapter's test of a complete Chat Completions stream.
type doneWatch struct {
	io.ReadCloser
	tail []byte // the last bytes read, up to len(doneLine)-1
	seen bool
}

// doneLine is the end of a Chat Completions stream, after a line break
// (or the start of the body); JSON text cannot hold a raw line break, so
// no event's content can fake it. "data:[DONE]" is matched too.
var doneLine, doneLineTight = []byte("\ndata: [DONE]"), []byte("\ndata:[DONE]")

func newDoneWatch(rc io.ReadCloser) *doneWatch {
	return &doneWatch{ReadCloser: rc, tail: append(make([]byte, 0, len(doneLine)), '\n')}
}

// Read implements io.Reader.
func (d *doneWatch) Read(p []byte) (int, error) {
	n, err := d.ReadCloser.Read(p)
	if n > 0 && !d.seen {
		b := p[:n]
		var edge [2 * 13]byte // the tail and the start of b, for a line split across reads
		e := append(append(edge[:0], d.tail...), b[:min(len(b), len(doneLine)-1)]...)
		d.seen = bytes.Contains(e, doneLine) || bytes.Contains(e, doneLineTight) ||
			bytes.Contains(b, doneLine) || bytes.Contains(b, doneLineTight)
		if len(b) >= len(doneLine)-1 {
			d.tail = append(d.tail[:0], b[len(b)-(len(doneLine)-1):]...)
		} else {
			d.tail = append(d.tail, b...)
			d.tail = d.tail[max(0, len(d.tail)-(len(doneLine)-1)):]
		}
	}
	return n, err
}

// watchDone returns the option that wraps the response body of one call in
// a doneWatch, stored in *w.
func watchDone(w **doneWatch) option.RequestOption {
	return option.WithMiddleware(func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		res, err := next(req)
		if err == nil && res != nil && res.Body != nil && res.StatusCode < 300 {
			*w = newDoneWatch(res.Body)
			res.Body = *w
		}
		return res, err
	})
}
