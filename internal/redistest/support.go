package redistest

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Log is a log destination safe for the concurrent writes of a logger:
// slog.New(slog.NewTextHandler(&log, nil)), then String to read it.
type Log struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// RoundTrips is a go-redis hook (client.AddHook) counting a client's
// script round trips, EVALSHA commands (a store sends exactly one per
// round trip, and an EVAL after it only when the server did not know the
// script yet), and its dials.
type RoundTrips struct{ Evals, Dials atomic.Int64 }

// DialHook counts dials.
func (h *RoundTrips) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		h.Dials.Add(1)
		return next(ctx, network, addr)
	}
}

// ProcessHook counts EVALSHA commands.
func (h *RoundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "evalsha" {
			h.Evals.Add(1)
		}
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook counts nothing.
func (h *RoundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// Errors records the calls of a store's OnError callback: pass its Add.
type Errors struct {
	mu   sync.Mutex
	errs []error
}

// Add records err.
func (e *Errors) Add(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.errs = append(e.errs, err)
}

// Get returns the errors recorded so far, in order.
func (e *Errors) Get() []error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]error(nil), e.errs...)
}

// Silent returns the address of a loopback listener that accepts
// connections, reads them and never answers: a Redis that hangs. The
// listener and its connections are closed when the test ends.
func Silent(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	conns.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			open = append(open, conn)
			mu.Unlock()
			conns.Go(func() { _, _ = io.Copy(io.Discard, conn) }) // read, never answer
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, conn := range open {
			_ = conn.Close()
		}
		mu.Unlock()
		conns.Wait()
	})
	return ln.Addr().String()
}

// SilentConn is a connection to a Redis that reads every command and never
// answers: a Read waits for the read deadline and times out, Early before
// it (0: at the deadline). It starts no goroutine, and inside a synctest
// bubble a Read is durably blocked (a sleep), so a store's Timeout passes
// in virtual time; a loopback socket's deadline would be real time.
type SilentConn struct {
	// Early makes a Read time out that long before the deadline go-redis
	// set: a read that times out just before the context does.
	Early time.Duration

	mu sync.Mutex
	rd time.Time
}

func (c *SilentConn) Read([]byte) (int, error) {
	c.mu.Lock()
	d := c.rd
	c.mu.Unlock()
	if d.IsZero() {
		d = time.Now().Add(time.Hour) // go-redis always sets one; never hang a test
	}
	time.Sleep(time.Until(d) - c.Early)
	return 0, &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
}
func (c *SilentConn) Write(p []byte) (int, error) { return len(p), nil }
func (c *SilentConn) Close() error                { return nil }
func (c *SilentConn) LocalAddr() net.Addr         { return &net.TCPAddr{} }
func (c *SilentConn) RemoteAddr() net.Addr        { return &net.TCPAddr{} }
func (c *SilentConn) SetDeadline(t time.Time) error {
	return c.SetReadDeadline(t)
}
func (c *SilentConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rd = t
	return nil
}
func (c *SilentConn) SetWriteDeadline(time.Time) error { return nil }

// SilentClient returns a client of a Redis that never answers, each of its
// connections a SilentConn made by conn (nil: &SilentConn{}), closed when
// the test ends.
func SilentClient(t testing.TB, conn func() net.Conn) *redis.Client {
	t.Helper()
	if conn == nil {
		conn = func() net.Conn { return &SilentConn{} }
	}
	// An IP literal: the Dialer is used instead, and no name is looked up
	// (a lookup inside a synctest bubble crashes the next bubble that
	// looks one up).
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true, MaxRetries: -1,
		Dialer: func(context.Context, string, string) (net.Conn, error) { return conn(), nil }})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// CountedClient returns a client of addr that bounds commands by their
// context and dials once per try, with a RoundTrips hook counting its
// round trips; it is closed when the test ends (inside a synctest bubble
// when t is the bubble's, whose cleanups run in the bubble).
func CountedClient(t testing.TB, addr string) (*redis.Client, *RoundTrips) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, DialerRetries: 1})
	h := &RoundTrips{}
	c.AddHook(h)
	t.Cleanup(func() { _ = c.Close() })
	return c, h
}

// UnboundedClients returns the three kinds of go-redis client a store must
// refuse, none bounding its commands by their context (ContextTimeoutEnabled
// false): a Client, a ClusterClient and a Ring on addr, closed when the
// test ends. They are never asked anything.
func UnboundedClients(t testing.TB, addr string) (*redis.Client, *redis.ClusterClient, *redis.Ring) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}})
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": addr}})
	t.Cleanup(func() {
		_ = c.Close()
		_ = cluster.Close()
		_ = ring.Close()
	})
	return c, cluster, ring
}

// Commands is a go-redis hook counting every command a client sends, a
// pipeline's each and a new connection's handshake included:
// client.AddHook(&h), then h.N.
type Commands struct{ N atomic.Int64 }

// DialHook is go-redis's redis.Hook; it counts nothing.
func (h *Commands) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook counts one command.
func (h *Commands) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.N.Add(1)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook counts each command of a pipeline.
func (h *Commands) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.N.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}
