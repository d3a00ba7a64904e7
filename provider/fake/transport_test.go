package fake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// These tests drive the in-process transport with handlers of their own, to
// pin down what a streaming handler (coming later) will rely on.

func get(t *testing.T, h http.Handler, ctx context.Context) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://fake.backstop.invalid/v1/x?q=1", strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	return (&http.Client{Transport: &transport{h: h}}).Do(req)
}

func TestTransportReturnsAtHeadersAndStreams(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		ended := false
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() { ended = true }()
			b, _ := io.ReadAll(r.Body)
			if string(b) != "hello" || r.Host != "fake.backstop.invalid" || r.RequestURI != "/v1/x?q=1" ||
				r.ContentLength != 5 || r.Method != http.MethodPost {
				t.Errorf("server request: %s %s %s %d %q", r.Method, r.Host, r.RequestURI, r.ContentLength, b)
			}
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "event: one\n\n")
			w.(http.Flusher).Flush()
			<-release
			timer := time.NewTimer(time.Second)
			<-timer.C
			_, _ = io.WriteString(w, "event: two\n\n")
		})
		start := time.Now()
		resp, err := get(t, h, context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		synctest.Wait()
		if ended || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" ||
			resp.ContentLength != -1 || resp.Header.Get("Date") == "" {
			t.Fatalf("response before the handler ended: ended %v, %d %v %d", ended, resp.StatusCode, resp.Header, resp.ContentLength)
		}
		buf := make([]byte, 64)
		n, err := resp.Body.Read(buf)
		if err != nil || string(buf[:n]) != "event: one\n\n" {
			t.Fatalf("first read %q %v", buf[:n], err)
		}
		close(release)
		rest, err := io.ReadAll(resp.Body)
		if err != nil || string(rest) != "event: two\n\n" || time.Since(start) != time.Second {
			t.Errorf("rest %q %v after %v", rest, err, time.Since(start))
		}
	})
}

func TestTransportBodyCloseEndsHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ended := false
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusAccepted)
			<-r.Context().Done()
			_, err := w.Write([]byte("late"))
			ended = err != nil
		})
		resp, err := get(t, h, context.Background())
		if err != nil || resp.StatusCode != http.StatusAccepted {
			t.Fatal(resp, err)
		}
		resp.Body.Close()
		synctest.Wait()
		if !ended {
			t.Error("the handler did not end (or could still write) after the body was closed")
		}
		if _, err := resp.Body.Read(make([]byte, 1)); err == nil {
			t.Error("read after close succeeded")
		}
	})
}

func TestTransportContextEndsBodyRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := get(t, h, ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		start := time.Now()
		_, err = io.ReadAll(resp.Body)
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 5*time.Second {
			t.Errorf("read ended with %v after %v", err, time.Since(start))
		}
	})
}

func TestTransportContextEndsBeforeHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		handlerErr := make(chan error, 1)
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
			handlerErr <- r.Context().Err()
		})
		ctx, cancel := context.WithCancelCause(context.Background())
		cause := errors.New("caller gave up")
		time.AfterFunc(time.Second, func() { cancel(cause) })
		_, err := get(t, h, ctx)
		if !errors.Is(err, cause) {
			t.Errorf("err = %v, want the context's cause", err)
		}
		if err := <-handlerErr; !errors.Is(err, context.Canceled) {
			t.Errorf("handler context: %v", err)
		}
	})
}

func TestTransportImplicitResponses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A handler that writes nothing: 200, empty body.
		resp, err := get(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), context.Background())
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || len(b) != 0 || err != nil || resp.ContentLength != 0 {
			t.Errorf("empty handler: %d %q %v %d", resp.StatusCode, b, err, resp.ContentLength)
		}
		// A Write without a Content-Type: sniffed, as by a server.
		resp, err = get(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "<html><body>Bad Gateway</body></html>")
		}), context.Background())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
			t.Errorf("sniffed content type %q", ct)
		}
	})
}

func TestTransportPanics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, v := range []any{"boom", http.ErrAbortHandler} {
			_, err := get(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(v) }), context.Background())
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("panic %v: err = %v", v, err)
			}
		}
		// A panic after the headers cuts the body short.
		resp, err := get(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "partial")
			panic(http.ErrAbortHandler)
		}), context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if string(b) != "partial" || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("body %q, err %v", b, err)
		}
	})
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

func TestTransportRequestBodyError(t *testing.T) {
	req, _ := http.NewRequest(http.MethodPost, inProcessURL+"/v1/messages", io.NopCloser(failingReader{}))
	_, err := (&transport{h: New()}).RoundTrip(req)
	if err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Errorf("err = %v", err)
	}
}

func TestTransportCanonicalisesHeaders(t *testing.T) {
	s := New()
	req, _ := http.NewRequest(http.MethodPost, inProcessURL+"/v1/messages",
		strings.NewReader(`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header = http.Header{"x-api-key": {"k"}, "anthropic-version": {"2023-06-01"}} // as sent on the wire
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("status %d", resp.StatusCode)
	}
	if got := s.Calls("m")[0].Header.Get("X-Api-Key"); got != redacted {
		t.Errorf("recorded key %q", got)
	}
}

// A Read blocked on a body whose handler ignores its context returns when
// another goroutine closes the body, as with a real connection.
func TestTransportCloseWakesBlockedRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.(http.Flusher).Flush()
			<-release // deaf to the request's context
		})
		resp, err := get(t, h, context.Background())
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		time.AfterFunc(5*time.Second, func() { resp.Body.Close() })
		_, err = resp.Body.Read(make([]byte, 8))
		if err == nil || time.Since(start) != 5*time.Second {
			t.Errorf("read ended with %v after %v, want an error after 5s", err, time.Since(start))
		}
		close(release)
	})
}

// Writes after the headers reach a blocked reader one by one, as the
// handler makes them, and the reader waits durably between them.
func TestTransportStreamsWritesPromptly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			for i := range 3 {
				time.Sleep(time.Second)
				_, _ = fmt.Fprintf(w, "%d", i)
			}
		})
		start := time.Now()
		resp, err := get(t, h, context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got []string
		buf := make([]byte, 8)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				got = append(got, fmt.Sprintf("%s@%v", buf[:n], time.Since(start)))
			}
			if err != nil {
				if err != io.EOF {
					t.Error(err)
				}
				break
			}
		}
		// The first write sends the headers, so RoundTrip returns at 1s.
		if want := []string{"0@1s", "1@2s", "2@3s"}; strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("reads %v, want %v", got, want)
		}
	})
}
