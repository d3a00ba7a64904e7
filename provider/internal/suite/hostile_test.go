package suite

// What both adapters must do against a hostile or broken upstream: refuse
// redirects (the API key and the prompt must never reach another URL), keep
// the prompt and the answer out of their errors' text, keep the key out of
// an answer's metadata, and classify a transport failure that nothing else
// names as a connection failure.

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/backstop-llm/backstop/llm"
)

// counted is a loopback server that counts the requests it receives.
type counted struct {
	*httptest.Server
	n atomic.Int64
}

// serve starts a counted server on addr ("127.0.0.1:0", say).
func serve(t *testing.T, addr string, h http.HandlerFunc) *counted {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	c := &counted{}
	c.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.n.Add(1)
		io.Copy(io.Discard, r.Body)
		h(w, r)
	}))
	c.Listener.Close()
	c.Listener = l
	c.Start()
	t.Cleanup(c.Close)
	return c
}

// TestRedirectIsRefused: a provider URL that redirects to another host must
// not get the key or the prompt sent there, whatever client the caller
// gave, and one attempt stays one request.
func TestRedirectIsRefused(t *testing.T) {
	elsewhere := serve(t, "127.0.0.2:0", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
	})
	clients := []struct {
		name   string
		client *http.Client
	}{
		{"no client", nil},
		{"own client", &http.Client{}},
		{"own client following every redirect", &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return nil }}},
	}
	for _, a := range adapters {
		for _, status := range []int{301, 302, 303, 307, 308} {
			from := serve(t, "127.0.0.1:0", func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, elsewhere.URL+r.URL.Path, status)
			})
			for _, c := range clients {
				for _, stream := range []bool{false, true} {
					before := from.n.Load()
					err := attempt(a.new(t, from.URL, c.client), stream)
					name := a.name + "/" + c.name + "/" + http.StatusText(status)
					if stream {
						name += "/stream"
					}
					if got := from.n.Load() - before; got != 1 {
						t.Errorf("%s: the provider's URL got %d requests; want 1", name, got)
					}
					if err == nil {
						t.Errorf("%s: the attempt succeeded; want a refused redirect", name)
						continue
					}
					le := llmError(t, err)
					if le.Kind != llm.KindNotFound || le.Status != status || le.Code != "redirect" {
						t.Errorf("%s: kind %v, status %d, code %q; want not_found, %d, redirect", name, le.Kind, le.Status, le.Code, status)
					}
					if msg := err.Error(); !strings.Contains(msg, elsewhere.URL) || strings.Contains(msg, a.key) {
						t.Errorf("%s: error %q should name %s and never the key", name, msg, elsewhere.URL)
					}
				}
			}
		}
	}
	if n := elsewhere.n.Load(); n != 0 {
		t.Errorf("the other host got %d requests; want 0", n)
	}
}

// TestErrorsQuoteNoContent: a provider's error message quoting the prompt,
// a cut-short answer and a garbled streamed event carrying the answer stay
// out of the error's text (and so out of logs and span statuses); they are
// in Detail for a caller who asks.
func TestErrorsQuoteNoContent(t *testing.T) {
	for _, a := range adapters {
		cases := []struct {
			name    string
			status  int
			body    string
			stream  bool
			content string
		}{
			{"error message quoting the prompt", 400, a.fail(llm.KindBadRequest, "messages.0.content: invalid value "+prompt), false, prompt},
			{"error message quoting the prompt, stream", 400, a.fail(llm.KindBadRequest, "messages.0.content: invalid value "+prompt), true, prompt},
			{"answer cut short", 200, cutAfter(a.ok(answer), answer), false, answer},
			{"garbled event", 200, a.badEvent(answer), true, answer},
		}
		for _, c := range cases {
			srv := serve(t, "127.0.0.1:0", func(w http.ResponseWriter, r *http.Request) {
				if c.stream && c.status == 200 {
					w.Header().Set("Content-Type", "text/event-stream")
				} else {
					w.Header().Set("Content-Type", "application/json")
				}
				w.WriteHeader(c.status)
				io.WriteString(w, c.body)
			})
			err := attempt(a.new(t, srv.URL, nil), c.stream)
			if err == nil {
				t.Errorf("%s/%s: no error", a.name, c.name)
				continue
			}
			le := llmError(t, err)
			if msg := err.Error(); strings.Contains(msg, c.content) {
				t.Errorf("%s/%s: the error's text quotes content: %s", a.name, c.name, msg)
			}
			if !strings.Contains(le.Detail, c.content[:20]) {
				t.Errorf("%s/%s: Detail %q should keep the provider's text", a.name, c.name, le.Detail)
			}
		}
	}
}

// cutAfter returns body cut just after the first s in it.
func cutAfter(body, s string) string {
	return body[:strings.Index(body, s)+len(s)]
}

// TestAnswerMetadataRedactsKey: a server echoing the key in its request-id
// header or the answer's id must not put the key into the Response (and so
// into Result.Served, spans and last-known-good stores).
func TestAnswerMetadataRedactsKey(t *testing.T) {
	for _, a := range adapters {
		for _, how := range []string{"complete", "stream of a whole answer", "stream"} {
			stream := how != "complete"
			srv := serve(t, "127.0.0.1:0", func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set(a.requestID, "req_"+a.key+"_1")
				if how == "stream" {
					w.Header().Set("Content-Type", "text/event-stream")
					io.WriteString(w, a.events(a.key))
					return
				}
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, strings.Replace(a.ok("fine"), `_1"`, "_"+a.key+`"`, 1))
			})
			p := a.new(t, srv.URL, nil)
			var res *llm.Response
			if stream {
				s, err := p.Stream(context.Background(), request)
				if err != nil {
					t.Fatalf("%s: %v", a.name, err)
				}
				for {
					if _, err := s.Next(); err != nil {
						break
					}
				}
				res = s.Response()
				s.Close()
			} else {
				var err error
				if res, err = p.Complete(context.Background(), request); err != nil {
					t.Fatalf("%s: %v", a.name, err)
				}
			}
			for field, v := range map[string]string{"RequestID": res.RequestID, "ID": res.ID, "Model": res.Model} {
				if strings.Contains(v, a.key) {
					t.Errorf("%s (%s): Response.%s = %q carries the key", a.name, how, field, v)
				}
			}
			if !strings.Contains(res.RequestID, "req_") {
				t.Errorf("%s (%s): RequestID %q lost the rest of the id", a.name, how, res.RequestID)
			}
		}
	}
}

// TestHugeHeaderIsConnection: a response whose headers exceed net/http's
// limit never arrived: a connection failure (retried, then the next
// target), not an unknown one that stops the chain.
func TestHugeHeaderIsConnection(t *testing.T) {
	for _, a := range adapters {
		srv := serve(t, "127.0.0.1:0", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Padding", strings.Repeat("a", 11<<20))
			w.WriteHeader(http.StatusOK)
		})
		for _, stream := range []bool{false, true} {
			err := attempt(a.new(t, srv.URL, nil), stream)
			if err == nil {
				t.Fatalf("%s: no error", a.name)
			}
			if k := llm.KindOf(err); k != llm.KindConnection {
				t.Errorf("%s (stream %v): kind %v; want connection (%v)", a.name, stream, k, err)
			}
		}
	}
}
