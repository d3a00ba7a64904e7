package redisstore_test

import (
	"bytes"
	"context"
	"log"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/backstop-llm/backstop/redisstore"
)

// lockedBuffer is a bytes.Buffer safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// closedAddr returns a loopback address nothing listens on: a dial is
// refused at once.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// failGet makes go-redis log: a Get through a Cache whose client dials a
// closed port (one dial, no retry) fails in its connection pool, which
// logs the failed dial. The store's own records go to a logger of their
// own, so that only go-redis's can reach slog.Default.
func failGet(t *testing.T) {
	t.Helper()
	client := redis.NewClient(&redis.Options{Addr: closedAddr(t), ContextTimeoutEnabled: true, DialerRetries: 1, MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	store, err := redisstore.NewCache(client, redisstore.CacheConfig{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := store.Get(context.Background(), "k"); err == nil {
		t.Fatal("Get from a closed port succeeded")
	}
}

// captureStandardLogger sends the standard logger's output to a buffer
// until the test ends.
func captureStandardLogger(t *testing.T) *lockedBuffer {
	t.Helper()
	w, flags, prefix := log.Writer(), log.Flags(), log.Prefix()
	t.Cleanup(func() { log.SetOutput(w); log.SetFlags(flags); log.SetPrefix(prefix) })
	var buf lockedBuffer
	log.SetOutput(&buf)
	return &buf
}

// TestGoRedisWritesNothingToTheStandardLoggerOrStderr: go-redis's own log
// (a pool's failed dial) reaches neither the standard logger nor the
// process's standard error, where go-redis's default logger writes.
func TestGoRedisWritesNothingToTheStandardLoggerOrStderr(t *testing.T) {
	std := captureStandardLogger(t)
	stderr := captureStderr(t)
	failGet(t)
	if out := stderr(); out != "" {
		t.Errorf("written to standard error:\n%s", out)
	}
	if out := std.String(); out != "" {
		t.Errorf("written to the standard logger:\n%s", out)
	}
}

// TestGoRedisLogsToSlogAtDebug: go-redis's own log goes to slog.Default, as
// debug records attributed to go-redis.
func TestGoRedisLogsToSlogAtDebug(t *testing.T) {
	prev := slog.Default()
	t.Cleanup(func() { slog.SetDefault(prev) })
	var records lockedBuffer
	slog.SetDefault(slog.New(slog.NewTextHandler(&records, &slog.HandlerOptions{Level: slog.LevelDebug})))
	std := captureStandardLogger(t) // after SetDefault, which points the log package at slog
	failGet(t)
	out := records.String()
	if !strings.Contains(out, "level=DEBUG") || !strings.Contains(out, "failed to dial") || !strings.Contains(out, "logger=go-redis") {
		t.Errorf("slog records:\n%s\nwant a debug record of go-redis's failed dial", out)
	}
	if out := std.String(); out != "" {
		t.Errorf("written to the standard logger:\n%s", out)
	}
}
