package redisstore_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// earlyConn is a connection to a Redis that does not answer, whose read
// deadline fires a microsecond before the deadline go-redis set: the
// ordering the commit a752042 describes ("the read timed out just before
// the context did"), made deterministic.
type earlyConn struct {
	mu sync.Mutex
	rd time.Time
}

func (c *earlyConn) Read([]byte) (int, error) {
	c.mu.Lock()
	d := c.rd
	c.mu.Unlock()
	if !d.IsZero() {
		time.Sleep(time.Until(d) - time.Microsecond)
	}
	return 0, &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
}
func (c *earlyConn) Write(p []byte) (int, error) { return len(p), nil }
func (c *earlyConn) Close() error                { return nil }
func (c *earlyConn) LocalAddr() net.Addr         { return &net.TCPAddr{} }
func (c *earlyConn) RemoteAddr() net.Addr        { return &net.TCPAddr{} }
func (c *earlyConn) SetDeadline(t time.Time) error {
	return c.SetReadDeadline(t)
}
func (c *earlyConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rd = t
	return nil
}
func (c *earlyConn) SetWriteDeadline(time.Time) error { return nil }

// Found in review: a round trip cut by the caller's own deadline (shorter than the
// Timeout) is blamed on Redis when the network read times out just before
// the caller's context reports it: Redis is declared unavailable (Warn log,
// OnError, the metric) and left alone for ProbeEvery, after a 10ms wait
// that the error calls "no answer within the Timeout (50ms)".
func TestBreakersCallerDeadlineNotBlamedOnRedis(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// An IP literal: the Dialer never dials it, but go-redis may look a
		// host name up, and a lookup inside a synctest bubble crashes the
		// next bubble that looks one up.
		c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true, MaxRetries: -1,
			Dialer: func(context.Context, string, string) (net.Conn, error) { return &earlyConn{}, nil }})
		t.Cleanup(func() { _ = c.Close() })
		var calls redistest.Errors
		s, err := breaker.NewShared(store(t, c).Breakers(sharedKey), breaker.SharedOptions{Timeout: 50 * time.Millisecond, ProbeEvery: time.Hour,
			OnError: calls.Add, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		_, lerr := s.Load(ctx)
		if errs := calls.Get(); len(errs) != 0 || !s.Available() {
			t.Errorf("Load under a 10ms caller deadline (Timeout 50ms) = %v; OnError %v, Available %v; want no OnError and Redis still available",
				lerr, errs, s.Available())
		}
	})
}
