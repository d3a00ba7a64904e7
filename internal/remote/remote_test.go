package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"
)

func TestHealthTransitions(t *testing.T) {
	var logs bytes.Buffer
	var calls []error
	h := NewHealth("shared thing", "k", time.Second, func(err error) { calls = append(calls, err) },
		slog.New(slog.NewTextHandler(&logs, nil)))
	if use, probe := h.Use(0); !use || probe || !h.Available() || h.Down(0) {
		t.Fatal("a new Health is not available")
	}
	boom := errors.New("boom")
	h.Failed(10, boom)
	h.Failed(20, boom) // already down: no second record
	if h.Available() || !h.Down(20) {
		t.Fatal("not down after a failure")
	}
	if use, _ := h.Use(int64(time.Second)); use {
		t.Fatal("a round trip allowed before ProbeEvery passed")
	}
	use, probe := h.Use(int64(time.Second) + 20)
	if !use || !probe {
		t.Fatalf("after ProbeEvery: use %v probe %v; want one probe", use, probe)
	}
	if use, _ := h.Use(int64(time.Second) + 21); use {
		t.Fatal("a second caller probed too")
	}
	h.Succeeded()
	h.Succeeded()
	if !h.Available() || len(calls) != 2 || calls[0] != boom || calls[1] != nil {
		t.Fatalf("available %v, onError calls %v; want [boom <nil>]", h.Available(), calls)
	}
	out := logs.String()
	if strings.Count(out, "level=WARN") != 1 || !strings.Contains(out, "backstop: shared thing unavailable, using local state") ||
		strings.Count(out, "level=INFO") != 1 || !strings.Contains(out, "backstop: shared thing available again") {
		t.Fatalf("logs:\n%s", out)
	}
}

func TestTimedOut(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	if TimedOut(ctx, errors.New("x")) {
		t.Fatal("a plain error on a live context is a timeout")
	}
	if !TimedOut(ctx, os.ErrDeadlineExceeded) {
		t.Fatal("a network timeout is not a timeout")
	}
	cancel()
	if !TimedOut(ctx, errors.New("x")) {
		t.Fatal("an ended context is not a timeout")
	}
}

func TestBlame(t *testing.T) {
	boom := errors.New("boom")
	// Redis failed, nobody's deadline involved.
	tctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	if cerr, timedOut := Blame(context.Background(), tctx, boom); cerr != nil || timedOut {
		t.Fatalf("plain failure: %v, %v", cerr, timedOut)
	}
	// A network timeout at the store's Timeout: Redis's.
	if cerr, timedOut := Blame(context.Background(), tctx, os.ErrDeadlineExceeded); cerr != nil || !timedOut {
		t.Fatalf("timeout: %v, %v", cerr, timedOut)
	}
	cancel()
	// The caller's deadline, earlier than the Timeout, cut the read just
	// before the caller's context saw it: the caller's.
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	tctx, cancel2 := context.WithTimeout(ctx, 2*time.Hour) // keeps ctx's earlier deadline
	defer cancel2()
	if cerr, _ := Blame(ctx, tctx, os.ErrDeadlineExceeded); cerr != context.DeadlineExceeded {
		t.Fatalf("caller's deadline: %v; want DeadlineExceeded", cerr)
	}
	// The caller canceled.
	cctx, ccancel := context.WithCancel(context.Background())
	ccancel()
	if cerr, _ := Blame(cctx, cctx, boom); cerr != context.Canceled {
		t.Fatalf("caller canceled: %v", cerr)
	}
}

// reply is an error reply from Redis, as go-redis reports one.
type reply string

func (r reply) Error() string { return string(r) }
func (reply) RedisError()     {}

func TestIsReply(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{reply("WRONGTYPE Operation against a key holding the wrong kind of value"), true},
		{fmt.Errorf("x: %w: %w", errors.New("unavailable"), reply("NOPERM")), true},
		{os.ErrDeadlineExceeded, false},
		{context.Canceled, false},
		{nil, false},
	} {
		if got := IsReply(tc.err); got != tc.want {
			t.Errorf("IsReply(%v) = %v; want %v", tc.err, got, tc.want)
		}
	}
}

// While Redis stays unavailable, an error reply is logged again once per
// ProbeEvery (a probe finding it), a timeout is not, and onError is called
// once per transition only.
func TestHealthReportsLastingErrorReplies(t *testing.T) {
	var logs bytes.Buffer
	var calls []error
	const probe = int64(time.Second)
	h := NewHealth("shared thing", "k", time.Second, func(err error) { calls = append(calls, err) },
		slog.New(slog.NewTextHandler(&logs, nil)))
	nope := reply("NOPERM no permissions")
	h.Failed(10, nope)                           // the transition
	h.Failed(20, nope)                           // a round trip that started before it: not again
	h.Failed(10+probe, nope)                     // the first probe
	h.Failed(10+probe+1, nope)                   // within ProbeEvery of it: not again
	h.Failed(10+2*probe, os.ErrDeadlineExceeded) // a probe that timed out
	h.Failed(10+3*probe, nope)                   // a probe finding the reply again
	out := logs.String()
	if got := strings.Count(out, "still unavailable, Redis answers with an error"); got != 2 {
		t.Fatalf("%d records of the lasting reply; want 2 (one per probe that found it):\n%s", got, out)
	}
	if strings.Count(out, "level=WARN") != 3 || len(calls) != 1 {
		t.Fatalf("%d Warn records, onError calls %v; want 3 and one call:\n%s", strings.Count(out, "level=WARN"), calls, out)
	}
}

func TestHealthSayingAndRepaired(t *testing.T) {
	var logs bytes.Buffer
	h := NewHealth("store", "p:", time.Second, nil, slog.New(slog.NewTextHandler(&logs, nil))).
		Saying("serving without it", "using it")
	h.Failed(1, errors.New("boom"))
	h.Succeeded()
	h.Repaired("string")
	out := logs.String()
	for _, want := range []string{
		`level=WARN msg="backstop: store unavailable, serving without it" key=p:`,
		`level=INFO msg="backstop: store available again, using it" key=p:`,
		`level=WARN msg="backstop: store: the key held a string, not the hash backstop keeps there; deleted it and carried on (give other data another key)" key=p: type=string`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log:\n%s\nwant %s", out, want)
		}
	}
}

// ioTimeout is a network timeout as net reports a read deadline.
type ioTimeout struct{}

func (ioTimeout) Error() string   { return "i/o timeout" }
func (ioTimeout) Timeout() bool   { return true }
func (ioTimeout) Temporary() bool { return true }

// Found in CI under load: the cache's "no answer within the store's
// Timeout" matched context.DeadlineExceeded when the context reported
// the deadline first, and not when go-redis's read deadline (set from the
// context's) fired a hair before as an i/o timeout. Late makes both match.
func TestLateMatchesTheDeadlineWhateverTheClientSaid(t *testing.T) {
	for _, err := range []error{ioTimeout{}, context.DeadlineExceeded, fmt.Errorf("read: %w", ioTimeout{})} {
		late := Late(err)
		if !errors.Is(late, context.DeadlineExceeded) || !errors.Is(late, err) {
			t.Errorf("Late(%v) = %v: want it to match both context.DeadlineExceeded and the cause", err, late)
		}
	}
	if got := Late(ioTimeout{}).Error(); got != "context deadline exceeded (i/o timeout)" {
		t.Errorf("Late(i/o timeout) says %q", got)
	}
}
