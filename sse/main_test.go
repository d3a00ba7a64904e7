package sse_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/backstop-llm/backstop/llm"
	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them: the
// producer goroutine of Write, a handler, a provider's stream.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// got is one event as a client parsed it.
type got struct {
	Name string // "message" when the event had no event line
	Data string
}

// reader parses a Server-Sent Events body the way the HTML spec says a
// browser does: lines end at CRLF, CR or LF; "event" sets the type, data
// lines are joined with LF, comments (":") are ignored, a blank line
// dispatches an event that has data.
type reader struct {
	br       *bufio.Reader
	comments int // comment lines seen (heartbeats)
}

func newReader(r io.Reader) *reader { return &reader{br: bufio.NewReader(r)} }

// line reads one line without its ending.
func (r *reader) line() (string, error) {
	var b strings.Builder
	for {
		c, err := r.br.ReadByte()
		if err != nil {
			return b.String(), err
		}
		switch c {
		case '\n':
			return b.String(), nil
		case '\r':
			if n, err := r.br.Peek(1); err == nil && n[0] == '\n' {
				r.br.ReadByte()
			}
			return b.String(), nil
		}
		b.WriteByte(c)
	}
}

// next returns the next event, io.EOF at the end of the body.
func (r *reader) next() (got, error) {
	var name string
	var data []string
	for {
		l, err := r.line()
		if err != nil {
			if l == "" {
				return got{}, err
			}
			return got{}, io.ErrUnexpectedEOF
		}
		if l == "" {
			if data == nil {
				name = ""
				continue
			}
			if name == "" {
				name = "message"
			}
			return got{Name: name, Data: strings.Join(data, "\n")}, nil
		}
		if strings.HasPrefix(l, ":") {
			r.comments++
			continue
		}
		field, value, _ := strings.Cut(l, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			name = value
		case "data":
			data = append(data, value)
		}
	}
}

// all reads the events to the end of the body.
func (r *reader) all(t *testing.T) []got {
	t.Helper()
	var out []got
	for {
		ev, err := r.next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("reading the stream after %v: %v", out, err)
		}
		out = append(out, ev)
	}
}

// open sends a GET to url and checks the SSE headers. The request's
// context ends with ctx, or after a minute: a guard against a test that
// would hang, not a measure.
func open(t *testing.T, ctx context.Context, url string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 {
		t.Fatalf("status %d, want 200", resp.StatusCode)
	}
	for k, v := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"} {
		if g := resp.Header.Get(k); g != v {
			t.Errorf("header %s: %q, want %q", k, g, v)
		}
	}
	return resp
}

// sprov is a streaming provider whose stream sends steps, one per Next.
type sprov struct {
	name  string
	steps []step
	// opened is closed when a stream opens; ctxDone when the context of
	// a stream that reached a block step is done.
	opened chan struct{}
	ctxEnd chan struct{}
}

type step struct {
	text  string
	call  *llm.ToolCall
	err   error
	block bool // wait for the stream's context to end, then fail with it
}

type sstream struct {
	p     *sprov
	ctx   context.Context
	i     int
	text  strings.Builder
	calls []llm.ToolCall
}

func (p *sprov) Name() string { return p.name }
func (p *sprov) Complete(context.Context, llm.Request) (*llm.Response, error) {
	return nil, &llm.Error{Provider: p.name, Kind: llm.KindBadRequest, Message: "streams only"}
}
func (p *sprov) Stream(ctx context.Context, req llm.Request) (llm.Stream, error) {
	if p.opened != nil {
		close(p.opened)
		p.opened = nil
	}
	return &sstream{p: p, ctx: ctx}, nil
}
func (s *sstream) Next() (llm.Chunk, error) {
	if s.i == len(s.p.steps) {
		return llm.Chunk{}, io.EOF
	}
	st := s.p.steps[s.i]
	s.i++
	switch {
	case st.block:
		<-s.ctx.Done()
		if s.p.ctxEnd != nil {
			close(s.p.ctxEnd)
		}
		return llm.Chunk{}, &llm.Error{Provider: s.p.name, Kind: llm.KindCanceled, Err: s.ctx.Err()}
	case st.err != nil:
		return llm.Chunk{}, st.err
	}
	s.text.WriteString(st.text)
	if st.call != nil {
		s.calls = append(s.calls, *st.call)
	}
	return llm.Chunk{Text: st.text, ToolCall: st.call}, nil
}
func (s *sstream) Response() *llm.Response {
	return &llm.Response{Text: s.text.String(), Model: "m-" + s.p.name, RequestID: "req_" + s.p.name, ToolCalls: s.calls}
}
func (s *sstream) Close() error { return nil }

func texts(ts ...string) []step {
	out := make([]step, len(ts))
	for i, t := range ts {
		out[i] = step{text: t}
	}
	return out
}

var question = llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "my secret question"}},
	Params: llm.Params{MaxTokens: 100}}
