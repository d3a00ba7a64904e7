package sse_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/sse"
)

// flushes records what was written and flushed to it.
type flushes struct {
	mu      sync.Mutex
	header  http.Header
	flushed strings.Builder // what was flushed so far
	pending strings.Builder
}

func (f *flushes) Header() http.Header { return f.header }
func (f *flushes) WriteHeader(int)     {}
func (f *flushes) Write(b []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pending.Write(b)
}
func (f *flushes) Flush() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.flushed.WriteString(f.pending.String())
	f.pending.Reset()
}
func (f *flushes) pings() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Count(f.flushed.String(), ": ping\n\n")
}

// While the iterator is silent, a comment line is flushed every
// Heartbeat (DefaultHeartbeat for the zero Config), counted from the last
// thing written; a negative Heartbeat sends none. In virtual time.
func TestHeartbeat(t *testing.T) {
	for _, tc := range []struct {
		name  string
		c     sse.Config
		every time.Duration // 0: none
	}{
		{"default", sse.Config{}, sse.DefaultHeartbeat},
		{"10s", sse.Config{Heartbeat: 10 * time.Second}, 10 * time.Second},
		{"off", sse.Config{Heartbeat: -1}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := &flushes{header: http.Header{}}
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				r := httptest.NewRequest("GET", "/", nil).WithContext(ctx)
				next := make(chan string)
				done := make(chan error)
				go func() {
					done <- tc.c.Write(w, r, func(yield func(sse.Event, error) bool) {
						for text := range next {
							if !yield(sse.Event{Name: sse.EventText, Data: sse.TextData{Text: text}}, nil) {
								return
							}
						}
					})
				}()
				want := func(at string, n int) {
					t.Helper()
					synctest.Wait()
					if g := w.pings(); g != n {
						t.Fatalf("%s: %d pings, want %d", at, g, n)
					}
				}
				if tc.every == 0 {
					time.Sleep(time.Hour)
					want("after an hour", 0)
				} else {
					time.Sleep(tc.every - time.Millisecond)
					want("just before the first heartbeat", 0)
					time.Sleep(time.Millisecond)
					want("at the first heartbeat", 1)
					time.Sleep(2 * tc.every)
					want("two heartbeats later", 3)
					// An event resets the wait: the next ping is a whole
					// Heartbeat after it.
					time.Sleep(tc.every / 2)
					next <- "x"
					time.Sleep(tc.every - time.Millisecond)
					want("just before a heartbeat after the event", 3)
					time.Sleep(time.Millisecond)
					want("a heartbeat after the event", 4)
				}
				close(next)
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}
