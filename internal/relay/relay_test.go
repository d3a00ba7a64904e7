package relay

import (
	"context"
	"errors"
	"io"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/retry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// step is one read of a fake stream: after wait, a chunk, or err.
type step struct {
	wait  time.Duration
	text  string
	err   error
	panic bool
}

// fake is a provider whose stream reads its steps, each after its wait
// unless the stream's context ends first (a canceled *llm.Error, as the
// adapters return).
type fake struct {
	steps  []step
	closed bool
}

func (f *fake) Name() string { return "fake" }
func (f *fake) Complete(context.Context, llm.Request) (*llm.Response, error) {
	return nil, errors.New("streams only")
}
func (f *fake) Stream(ctx context.Context, _ llm.Request) (llm.Stream, error) {
	return &fakeStream{f: f, ctx: ctx}, nil
}

type fakeStream struct {
	f    *fake
	ctx  context.Context
	next int
}

func (s *fakeStream) Next() (llm.Chunk, error) {
	if s.next == len(s.f.steps) {
		return llm.Chunk{}, io.EOF
	}
	st := s.f.steps[s.next]
	s.next++
	select {
	case <-time.After(st.wait):
	case <-s.ctx.Done():
		return llm.Chunk{}, &llm.Error{Provider: "fake", Kind: llm.KindCanceled, Err: s.ctx.Err()}
	}
	if st.panic {
		panic("provider bug")
	}
	if st.err != nil {
		return llm.Chunk{}, st.err
	}
	return llm.Chunk{Text: st.text}, nil
}
func (s *fakeStream) Response() *llm.Response { return &llm.Response{RequestID: "req-1"} }
func (s *fakeStream) Close() error            { s.f.closed = true; return nil }

// relayAll relays s to the end, each chunk held by the caller for hold.
func relayAll(s *Stream, caller context.Context, hold time.Duration) (text string, got []string, err error) {
	text, err, _ = s.Relay(caller, func(ch llm.Chunk) bool {
		got = append(got, ch.Text)
		time.Sleep(hold) // the caller's time, on the fake clock
		return true
	})
	s.Release()
	return text, got, err
}

// TestRelayDeliversEveryChunkAndTheText: the first chunk read by Open is
// delivered first, the text is every chunk's, and the caller's time with
// a chunk (longer than the idle limit) is not the provider's silence.
func TestRelayDeliversEveryChunkAndTheText(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fake{steps: []step{{text: "a"}, {wait: 2 * time.Second, text: "b"}, {text: "c"}}}
		var s Stream
		resp, _, err := s.Open(t.Context(), f, &llm.Request{}, time.Second, 3*time.Second)
		if err != nil || resp == nil {
			t.Fatalf("Open: %v, %v", resp, err)
		}
		text, got, err := relayAll(&s, t.Context(), 10*time.Second)
		if err != nil || text != "abc" || len(got) != 3 || got[0] != "a" {
			t.Fatalf("text %q, chunks %q, err %v; want abc in 3 chunks, no error", text, got, err)
		}
		if !f.closed {
			t.Fatal("Release left the provider's stream open")
		}
	})
}

// TestFirstChunkLateIsErrFirstChunk: a first chunk that does not come
// within its limit ends Open with ErrFirstChunk, the stream closed and its
// request id kept; s is left as it was.
func TestFirstChunkLateIsErrFirstChunk(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fake{steps: []step{{wait: time.Minute, text: "a"}}}
		var s Stream
		resp, opened, err := s.Open(t.Context(), f, &llm.Request{}, time.Second, time.Minute)
		if resp != nil || err != ErrFirstChunk || opened != "req-1" {
			t.Fatalf("Open: %v, %q, %v; want ErrFirstChunk with request id req-1", resp, opened, err)
		}
		if !f.closed || s.s != nil {
			t.Fatalf("stream closed %v, s holds %v; want closed and s untouched", f.closed, s.s)
		}
	})
}

// TestSilenceBetweenChunksIsErrIdle: a gap between two chunks longer than
// the idle limit ends the relay with ErrIdle and the text so far.
func TestSilenceBetweenChunksIsErrIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fake{steps: []step{{text: "a"}, {text: "b"}, {wait: time.Hour, text: "c"}}}
		var s Stream
		if _, _, err := s.Open(t.Context(), f, &llm.Request{}, 0, time.Minute); err != nil {
			t.Fatal(err)
		}
		text, _, err := relayAll(&s, t.Context(), 0)
		if err != ErrIdle || text != "ab" || !Timer(err) {
			t.Fatalf("text %q, err %v; want ab and ErrIdle", text, err)
		}
	})
}

// TestStoppedKeepsTheRefusedChunk: a caller that stops reading stops the
// relay; the chunk it was handed is in the text.
func TestStoppedKeepsTheRefusedChunk(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fake{steps: []step{{text: "a"}, {text: "b"}, {text: "c"}}}
		var s Stream
		if _, _, err := s.Open(t.Context(), f, &llm.Request{}, 0, time.Minute); err != nil {
			t.Fatal(err)
		}
		defer s.Release()
		text, err, stopped := s.Relay(t.Context(), func(ch llm.Chunk) bool { return ch.Text != "b" })
		if !stopped || err != nil || text != "ab" {
			t.Fatalf("text %q, err %v, stopped %v; want ab, stopped", text, err, stopped)
		}
	})
}

// TestCancellationIsClassified: the caller's cancellation is
// KindCanceled; a deadline of the stream's context is KindTimeout; any
// other cancellation of it is KindUnknown, never the caller's. (The
// error's own Kind: llm.KindOf reads through an unknown kind to the
// cancellation it wraps.)
func TestCancellationIsClassified(t *testing.T) {
	for _, tt := range []struct {
		name string
		// cut returns the stream's context and the caller's, and ends one.
		cut  func(ctx context.Context) (stream, caller context.Context, end func())
		want llm.Kind
	}{
		{"caller", func(ctx context.Context) (context.Context, context.Context, func()) {
			c, cancel := context.WithCancel(ctx)
			return c, c, cancel
		}, llm.KindCanceled},
		{"deadline", func(ctx context.Context) (context.Context, context.Context, func()) {
			c, cancel := context.WithTimeout(ctx, 30*time.Second)
			return c, ctx, func() { <-c.Done(); cancel() }
		}, llm.KindTimeout},
		{"other", func(ctx context.Context) (context.Context, context.Context, func()) {
			c, cancel := context.WithCancel(ctx)
			return c, ctx, cancel
		}, llm.KindUnknown},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fake{steps: []step{{text: "a"}, {wait: time.Hour, text: "b"}}}
				sctx, caller, end := tt.cut(t.Context())
				var s Stream
				if _, _, err := s.Open(sctx, f, &llm.Request{}, 0, 2*time.Hour); err != nil {
					t.Fatal(err)
				}
				go end()
				_, _, err := relayAll(&s, caller, 0)
				var le *llm.Error
				if !errors.As(err, &le) || le.Kind != tt.want || Timer(err) {
					t.Fatalf("err %v; want an *llm.Error of kind %v", err, tt.want)
				}
			})
		})
	}
}

// TestPanicInOpenLeavesNothingOpen: a provider that panics reading the
// first chunk has its stream closed and the first chunk's timer stopped
// (goleak, synctest: no timer or goroutine left); the panic goes on.
func TestPanicInOpenLeavesNothingOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fake{steps: []step{{panic: true}}}
		var s Stream
		func() {
			defer func() {
				if recover() == nil {
					t.Fatal("the provider's panic did not go on")
				}
			}()
			s.Open(t.Context(), f, &llm.Request{}, time.Second, time.Minute)
		}()
		if !f.closed {
			t.Fatal("the stream the panicking provider opened is still open")
		}
	})
}

// TestVerdict: how a relayed stream's end counts for its target.
func TestVerdict(t *testing.T) {
	table := retry.DefaultTable()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	deadline := &llm.Error{Kind: llm.KindTimeout, Message: "the deadline passed during the stream"}
	for _, tt := range []struct {
		name     string
		err      error
		excluded bool
		call     context.Context
		kind     llm.Kind
		v        retry.BreakerVerdict
		success  bool
	}{
		{"complete", nil, false, context.Background(), llm.KindUnknown, retry.NotFailure, true},
		{"abandoned", errors.New("abandoned"), true, context.Background(), llm.KindCanceled, retry.Excluded, false},
		{"idle", ErrIdle, false, ended, llm.KindTimeout, table.Rule(llm.KindTimeout).Breaker, false},
		{"deadline cut", deadline, false, ended, llm.KindTimeout, retry.Excluded, false},
		{"timeout, call alive", deadline, false, context.Background(), llm.KindTimeout, table.Rule(llm.KindTimeout).Breaker, false},
		{"overloaded", &llm.Error{Kind: llm.KindOverloaded}, false, ended, llm.KindOverloaded, table.Rule(llm.KindOverloaded).Breaker, false},
	} {
		kind, v, success := Verdict(tt.err, tt.excluded, tt.call, &table)
		if kind != tt.kind || v != tt.v || success != tt.success {
			t.Errorf("%s: %v, %v, %v; want %v, %v, %v", tt.name, kind, v, success, tt.kind, tt.v, tt.success)
		}
	}
}

// TestRestart: a committed stream that failed is restarted only when
// restarts are on, the caller did not cancel, and the table lets the
// failure move on; a context-length failure asks for a larger window.
func TestRestart(t *testing.T) {
	table := retry.DefaultTable()
	for _, tt := range []struct {
		name           string
		kind           llm.Kind
		on, content    bool
		ok, wantLarger bool
	}{
		{"timeout", llm.KindTimeout, true, false, true, false},
		{"off", llm.KindTimeout, false, false, false, false},
		{"canceled", llm.KindCanceled, true, false, false, false},
		{"bad request", llm.KindBadRequest, true, false, false, false},
		{"context length", llm.KindContextLength, true, false, true, true},
		{"content filter, not allowed", llm.KindContentFilter, true, false, false, false},
		{"content filter, allowed", llm.KindContentFilter, true, true, true, false},
	} {
		ok, larger := Restart(tt.kind, tt.on, &table, tt.content)
		if ok != tt.ok || larger != tt.wantLarger {
			t.Errorf("%s: %v, %v; want %v, %v", tt.name, ok, larger, tt.ok, tt.wantLarger)
		}
	}
}

// TestOutcome: how a stream ended, for telemetry.
func TestOutcome(t *testing.T) {
	cut := errors.New("cut")
	for _, tt := range []struct {
		abandoned, incomplete bool
		err                   error
		restarts              int
		want                  string
	}{
		{true, false, nil, 0, "abandoned"},
		{false, true, cut, 0, "incomplete"},
		{false, false, nil, 1, "restarted"},
		{false, false, nil, 0, "complete"},
		{false, false, cut, 2, ""},
	} {
		if got := Outcome(tt.abandoned, tt.incomplete, tt.err, tt.restarts); got != tt.want {
			t.Errorf("Outcome(%v, %v, %v, %d) = %q; want %q", tt.abandoned, tt.incomplete, tt.err, tt.restarts, got, tt.want)
		}
	}
}

// TestSettled: a relayed attempt's outcome carries its verdict, its
// stream's response and the allowance that response announced.
func TestSettled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		table := retry.DefaultTable()
		var s Stream
		if _, _, err := s.Open(context.Background(), &fake{steps: []step{{text: "a"}}}, &llm.Request{}, 0, time.Minute); err != nil {
			t.Fatal(err)
		}
		defer s.Release()
		at := time.Now()
		o := s.Settled(ErrIdle, false, context.Background(), &table, at, time.Second)
		if !o.Sent || o.Success || o.Kind != llm.KindTimeout || o.Verdict != table.Rule(llm.KindTimeout).Breaker ||
			o.Err != ErrIdle || o.Response.RequestID != "req-1" || !o.At.Equal(at) || o.Elapsed != time.Second {
			t.Errorf("Settled(ErrIdle) = %+v", o)
		}
		if o := s.Settled(nil, false, context.Background(), &table, at, time.Second); !o.Success || o.Verdict != retry.NotFailure {
			t.Errorf("Settled(nil) = %+v; want a success", o)
		}
	})
}
