package genai

// What the adapter must do against a hostile or broken upstream, on every
// platform it supports (the Gemini API with an API key, Vertex AI with an
// authenticating HTTP client, Vertex AI in express mode with an API key):
// hold no more than MaxResponseBytes of any body, event or answer; keep
// the provider's words out of Error(); keep every credential the request
// carried out of everything it returns; and send one request to the
// configured origin, following no redirect.

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/oauth2"
	gg "google.golang.org/genai"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/suite"
)

// bearerToken is the access token the Vertex AI platform's client sends.
const bearerToken = "ya29.TEST-bearer-0123456789abcdefghij"

// followAll follows every redirect, as a careless client would.
func followAll(*http.Request, []*http.Request) error { return nil }

// platform is one way of reaching Gemini that the adapter supports.
type platform struct {
	name string
	// client returns a client of the platform pointed at url. follow
	// gives it a client of the caller's own that follows every redirect;
	// otherwise it has the platform's default (the SDK's own client for
	// an API key, an oauth2 client for Vertex AI).
	client func(t testing.TB, url string, follow bool) *gg.Client
}

// oauthClient is the authenticating client a Vertex AI caller brings: an
// oauth2.Transport with a static token, sending Authorization: Bearer.
func oauthClient() *http.Client {
	return oauth2.NewClient(context.Background(), oauth2.StaticTokenSource(&oauth2.Token{AccessToken: bearerToken}))
}

var platforms = []platform{
	{"gemini", func(t testing.TB, url string, follow bool) *gg.Client {
		var hc *http.Client
		if follow {
			hc = &http.Client{CheckRedirect: followAll}
		}
		return geminiClient(t, url, hc)
	}},
	{"vertex", func(t testing.TB, url string, follow bool) *gg.Client {
		hc := oauthClient()
		if follow {
			hc.CheckRedirect = followAll
		}
		return vertexClient(t, url, hc)
	}},
	{"vertex-express", func(t testing.TB, url string, follow bool) *gg.Client {
		var hc *http.Client
		if follow {
			hc = &http.Client{CheckRedirect: followAll}
		}
		c, err := gg.NewClient(context.Background(), &gg.ClientConfig{
			Backend:     gg.BackendVertexAI,
			APIKey:      testKey,
			HTTPClient:  hc,
			HTTPOptions: gg.HTTPOptions{BaseURL: url, APIVersion: "v1", RetryOptions: retryEverything},
		})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}},
}

// run runs one Complete, or one Stream read to its end, and returns
// the answer (a stream's Response) and the error (nil at a stream's
// io.EOF).
func run(p *Provider, req llm.Request, stream bool) (*llm.Response, error) {
	if !stream {
		return p.Complete(context.Background(), req)
	}
	st, err := p.Stream(context.Background(), req)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	for range 1 << 20 {
		if _, err = st.Next(); err != nil {
			break
		}
	}
	res := st.Response()
	if err == io.EOF {
		err = nil
	}
	return res, err
}

// lockedBuffer is a bytes.Buffer safe for several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// quietLog sends the standard logger (which the SDK writes to) to a
// buffer until the test ends, and fails the test if anything was written.
func quietLog(t *testing.T) {
	t.Helper()
	var buf lockedBuffer
	prev := log.Writer()
	log.SetOutput(&buf)
	t.Cleanup(func() {
		log.SetOutput(prev)
		if s := buf.String(); s != "" {
			t.Errorf("the standard logger was written to: %.500q", s)
		}
	})
}

const (
	// floodBytes is what a flooding server sends at least, unless the
	// client goes away first.
	floodBytes = 64 << 20
	// testCap is the MaxResponseBytes of the memory tests.
	testCap = 1 << 20
)

// flood writes prefix, then fill over and over until floodBytes have been
// written or the client went away, then suffix.
func flood(w http.ResponseWriter, r *http.Request, prefix string, fill []byte, suffix string) {
	n, err := io.WriteString(w, prefix)
	for err == nil && n < floodBytes && r.Context().Err() == nil {
		var m int
		m, err = w.Write(fill)
		n += m
	}
	if err == nil {
		io.WriteString(w, suffix)
	}
}

// textEvent is a streamed event adding text.
func textEvent(text string) string {
	return `data: {"candidates":[{"content":{"role":"model","parts":[{"text":"` + text + `"}]}}]}` + "\r\n\r\n"
}

// callEvent is a streamed event calling a tool with a large argument.
func callEvent(arg string) string {
	return `data: {"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"f","args":{"a":"` + arg + `"}}}]}}]}` + "\r\n\r\n"
}

const finishEvent = `data: {"candidates":[{"content":{"role":"model","parts":[{"text":"."}]},"finishReason":"STOP"}]}` + "\r\n\r\n"

// gzipped returns prefix, floodBytes of 'a' and suffix, gzip-compressed:
// about 64 KiB that inflate to 64 MiB.
func gzipped(prefix, suffix string) []byte {
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	io.WriteString(zw, prefix)
	fill := bytes.Repeat([]byte("a"), 64<<10)
	for n := 0; n < floodBytes; n += len(fill) {
		zw.Write(fill)
	}
	io.WriteString(zw, suffix)
	zw.Close()
	return b.Bytes()
}

var (
	bombJSON = sync.OnceValue(func() []byte {
		return gzipped(`{"candidates":[{"content":{"role":"model","parts":[{"text":"`, `"}]},"finishReason":"STOP"}]}`)
	})
	bombSSE = sync.OnceValue(func() []byte {
		return gzipped(`data: {"candidates":[{"content":{"role":"model","parts":[{"text":"`, `"}]},"finishReason":"STOP"}]}`+"\r\n\r\n")
	})
)

// TestMemoryCapped: whatever the server sends (an endless error body or
// answer, a gzip bomb, one endless event, endless ordinary deltas of text
// or tool calls), an attempt holds no more than MaxResponseBytes of it and
// ends with a classified error; the SDK writes nothing to the standard
// logger.
func TestMemoryCapped(t *testing.T) {
	quietLog(t)
	a := bytes.Repeat([]byte("a"), 64<<10)
	delta := []byte(textEvent(strings.Repeat("b", 4<<10)))
	call := []byte(callEvent(strings.Repeat("c", 4<<10)))
	// One event of many data lines and no blank line.
	line := []byte("data: " + strings.Repeat("d", 4<<10) + "\n")
	cases := []struct {
		name   string
		stream bool
		handle http.HandlerFunc
	}{
		{"error body", false, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(400)
			flood(w, r, `{"error":{"code":400,"status":"INVALID_ARGUMENT","message":"`, a, `"}}`)
		}},
		{"error body, stream", true, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(503)
			flood(w, r, `{"error":{"code":503,"status":"UNAVAILABLE","message":"`, a, `"}}`)
		}},
		{"answer", false, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			flood(w, r, `{"candidates":[{"content":{"role":"model","parts":[{"text":"`, a, `"}]},"finishReason":"STOP"}]}`)
		}},
		{"gzip bomb", false, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(bombJSON())
		}},
		{"gzip bomb, stream", true, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(bombSSE())
		}},
		{"one endless event", true, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			flood(w, r, textEvent("first"), line, "\r\n")
		}},
		{"endless text deltas", true, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			flood(w, r, "", delta, finishEvent)
		}},
		{"endless tool calls", true, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			flood(w, r, "", call, finishEvent)
		}},
	}
	for _, pl := range platforms {
		for _, c := range cases {
			t.Run(pl.name+"/"+c.name, func(t *testing.T) {
				srv := suite.ServeOn(t, "127.0.0.1:0", nil, c.handle)
				p := newProvider(t, pl.client(t, srv.URL, false), Config{MaxResponseBytes: testCap})
				var err error
				grew := suite.HeapGrowth(func() { _, err = run(p, hello("gemini-2.5-flash"), c.stream) })
				t.Logf("allocated %d KiB: %v", grew>>10, err)
				if grew >= floodBytes {
					t.Errorf("the attempt allocated %d MiB; want less than %d MiB", grew>>20, floodBytes>>20)
				}
				if err == nil {
					t.Fatal("the attempt succeeded")
				}
				f, ok := err.(*llm.Error)
				if !ok || f.Kind == llm.KindUnknown {
					t.Errorf("error %T %.300v; want a classified *llm.Error", err, err)
				}
				if len(err.Error()) > 2048 {
					t.Errorf("err.Error() is %d bytes long", len(err.Error()))
				}
			})
		}
	}
}

// TestMaxResponseBytesOption: zero is the default, negative is refused.
func TestMaxResponseBytesOption(t *testing.T) {
	c := geminiClient(t, "http://127.0.0.1:1", nil)
	if _, err := New(c, Config{MaxResponseBytes: -1}); err == nil || !strings.Contains(err.Error(), "MaxResponseBytes") {
		t.Errorf("a negative MaxResponseBytes: %v", err)
	}
	p := newProvider(t, c, Config{})
	if p.ep.MaxBytes != 8<<20 {
		t.Errorf("the default cap is %d", p.ep.MaxBytes)
	}
}

// echo is an upstream that copies every request header value into its
// request-id headers, its error messages and its answers' id and model,
// and records the credentials each request carried.
type echo struct {
	mu    sync.Mutex
	creds []string
}

// credentials returns the credentials the server received.
func (e *echo) credentials() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.creds...)
}

// handler answers as how says: "ok", "error" (a 503), "error event" (an
// error event first), "error mid-stream" (text, then an error event). A
// request whose path holds "stream" gets an event stream.
func (e *echo) handler(how func(r *http.Request) string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		var all []string
		e.mu.Lock()
		for name, vs := range r.Header {
			for _, v := range vs {
				all = append(all, v)
				switch {
				case strings.EqualFold(name, "X-Goog-Api-Key"):
					e.creds = append(e.creds, v)
				case strings.EqualFold(name, "Authorization"):
					_, tok, _ := strings.Cut(v, " ")
					e.creds = append(e.creds, tok)
				}
			}
		}
		e.mu.Unlock()
		joined := strings.Join(all, " | ")
		w.Header().Set("X-Goog-Request-Id", "req-"+joined)
		w.Header().Set("X-Request-Id", "req-"+joined)
		q, _ := json.Marshal("echo " + joined)
		errBody := `{"error":{"code":503,"message":` + string(q) + `,"status":"UNAVAILABLE"}}`
		ok := `{"candidates":[{"content":{"role":"model","parts":[{"text":"fine"}]},"finishReason":"STOP"}],` +
			`"responseId":` + string(q) + `,"modelVersion":` + string(q) + `}`
		stream := strings.Contains(r.URL.Path, "stream")
		switch h := how(r); {
		case h == "error":
			writeJSON(w, 503, errBody)
		case !stream:
			writeJSON(w, 200, ok)
		case h == "ok":
			writeSSE(w, ok)
		case h == "error event":
			writeSSE(w, errBody)
		case h == "error mid-stream":
			writeSSE(w, `{"candidates":[{"content":{"role":"model","parts":[{"text":"Par"}]}}],"responseId":`+string(q)+`}`, errBody)
		}
	}
}

// leaks returns where a credential of creds appears in texts.
func leaks(creds []string, texts map[string]string) []string {
	var out []string
	for where, s := range texts {
		for _, c := range creds {
			if c != "" && strings.Contains(s, c) {
				out = append(out, fmt.Sprintf("%s carries %q", where, c))
			}
		}
	}
	return out
}

// errorTexts returns every text err shows.
func errorTexts(err error) map[string]string {
	m := map[string]string{"Error()": err.Error(), "%+v": fmt.Sprintf("%+v", err), "%#v": fmt.Sprintf("%#v", err)}
	if f, ok := err.(*llm.Error); ok {
		m["Detail"], m["Message"], m["RequestID"], m["Type"], m["Code"] = f.Detail, f.Message, f.RequestID, f.Type, f.Code
	}
	return m
}

// TestCredentialsNeverReturned: an upstream echoing every request header
// into its request ids, error messages and answers' metadata gets none of
// the credentials the request carried into anything the adapter returns,
// including those a transport below the SDK added (the oauth2 bearer);
// every answer and error carries the request id, redacted.
func TestCredentialsNeverReturned(t *testing.T) {
	quietLog(t)
	for _, pl := range platforms {
		for _, how := range []string{"ok", "error", "error event", "error mid-stream"} {
			for _, stream := range []bool{false, true} {
				if !stream && strings.HasPrefix(how, "error ") {
					continue
				}
				name := pl.name + "/" + how
				if stream {
					name += "/stream"
				}
				t.Run(name, func(t *testing.T) {
					e := &echo{}
					srv := suite.ServeOn(t, "127.0.0.1:0", nil, e.handler(func(*http.Request) string { return how }))
					p := newProvider(t, pl.client(t, srv.URL, false), Config{})
					res, err := run(p, hello("gemini-2.5-flash"), stream)
					creds := e.credentials()
					if len(creds) == 0 {
						t.Fatal("the request carried no credential")
					}
					texts := map[string]string{}
					if res != nil {
						texts["RequestID"], texts["ID"], texts["Model"], texts["FinishReason"] = res.RequestID, res.ID, res.Model, res.FinishReason
						if !strings.HasPrefix(res.RequestID, "req-") {
							t.Errorf("the answer's RequestID %q; want the echoed id", res.RequestID)
						}
					}
					if how == "ok" {
						if err != nil {
							t.Fatal(err)
						}
					} else {
						if err == nil {
							t.Fatal("no error")
						}
						for k, v := range errorTexts(err) {
							texts["error "+k] = v
						}
						if f, ok := err.(*llm.Error); !ok || !strings.HasPrefix(f.RequestID, "req-") {
							t.Errorf("the error's RequestID is not the echoed id: %#v", err)
						}
					}
					for _, l := range leaks(creds, texts) {
						t.Error(l)
					}
				})
			}
		}
	}
}

// prompt is a request whose words an upstream's error may quote.
const prompt = "PROMPT-Tell me the secret plan of the lighthouse keeper"

// TestErrorTextQuotesNoPrompt: an error body quoting the prompt, whole or
// cut short, never puts the prompt into Error() (and so into span statuses
// and logs); a whole one keeps it in Detail.
func TestErrorTextQuotesNoPrompt(t *testing.T) {
	quietLog(t)
	body := `{"error":{"code":400,"message":"Invalid value at 'contents[0]': ` + prompt + `","status":"INVALID_ARGUMENT"}}`
	cases := []struct {
		name   string
		handle http.HandlerFunc
		detail bool // the prompt is in Detail
	}{
		{"whole", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 400, body) }, true},
		{"cut short", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", strconv.Itoa(len(body)+100))
			w.WriteHeader(400)
			io.WriteString(w, body)
			w.(http.Flusher).Flush()
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		}, false},
		{"answer cut short", func(w http.ResponseWriter, r *http.Request) {
			ok := `{"candidates":[{"content":{"role":"model","parts":[{"text":"` + prompt + `"}]}}]}`
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", strconv.Itoa(len(ok)+100))
			io.WriteString(w, ok)
			w.(http.Flusher).Flush()
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		}, false},
	}
	for _, pl := range platforms {
		for _, c := range cases {
			for _, stream := range []bool{false, true} {
				name := pl.name + "/" + c.name
				if stream {
					name += "/stream"
				}
				t.Run(name, func(t *testing.T) {
					srv := suite.ServeOn(t, "127.0.0.1:0", nil, c.handle)
					p := newProvider(t, pl.client(t, srv.URL, false), Config{})
					req := hello("gemini-2.5-flash")
					req.Messages[0].Content = prompt
					_, err := run(p, req, stream)
					if err == nil {
						t.Fatal("no error")
					}
					f := asError(t, err)
					for _, s := range []string{err.Error(), fmt.Sprintf("%+v", err), f.Message} {
						if strings.Contains(s, prompt[:20]) {
							t.Errorf("the error's text quotes the prompt: %.300q", s)
						}
					}
					if f.Err != nil && strings.Contains(f.Err.Error(), prompt[:20]) {
						t.Errorf("the error's cause quotes the prompt: %.300q", f.Err.Error())
					}
					if c.detail && !strings.Contains(f.Detail, prompt[:20]) {
						t.Errorf("Detail %q should keep the provider's words", f.Detail)
					}
					if f.Kind == llm.KindUnknown {
						t.Errorf("unclassified: %v", err)
					}
				})
			}
		}
	}
}

// TestRedirectRefused: a provider URL that redirects to another host never
// gets the credentials or the prompt sent there, with the platform's
// default client or a client of the caller's that follows every redirect;
// the attempt is one request, failing with KindNotFound and Code
// "redirect".
func TestRedirectRefused(t *testing.T) {
	quietLog(t)
	var elsewhereN atomic.Int64
	elsewhere := suite.ServeOn(t, "127.0.0.2:0", nil, func(w http.ResponseWriter, r *http.Request) {
		elsewhereN.Add(1)
		if strings.Contains(r.URL.Path, "stream") {
			writeSSE(w, okBody)
			return
		}
		writeJSON(w, 200, okBody)
	})
	for _, pl := range platforms {
		for _, status := range []int{301, 302, 303, 307, 308} {
			var fromN atomic.Int64
			from := suite.ServeOn(t, "127.0.0.1:0", nil, func(w http.ResponseWriter, r *http.Request) {
				fromN.Add(1)
				io.Copy(io.Discard, r.Body)
				http.Redirect(w, r, elsewhere.URL+r.URL.RequestURI(), status)
			})
			for _, follow := range []bool{false, true} {
				p := newProvider(t, pl.client(t, from.URL, follow), Config{})
				for _, stream := range []bool{false, true} {
					name := fmt.Sprintf("%s/%d/follow=%v/stream=%v", pl.name, status, follow, stream)
					before := fromN.Load()
					_, err := run(p, hello("gemini-2.5-flash"), stream)
					if got := fromN.Load() - before; got != 1 {
						t.Errorf("%s: the provider's URL got %d requests; want 1", name, got)
					}
					if err == nil {
						t.Errorf("%s: the attempt succeeded; want a refused redirect", name)
						continue
					}
					f, ok := err.(*llm.Error)
					if !ok || f.Kind != llm.KindNotFound || f.Status != status || f.Code != "redirect" {
						t.Errorf("%s: %#v; want not_found, status %d, code redirect", name, err, status)
					}
					if strings.Contains(err.Error(), testKey) || strings.Contains(err.Error(), bearerToken) {
						t.Errorf("%s: the error quotes a credential: %s", name, err)
					}
				}
			}
		}
	}
	if n := elsewhereN.Load(); n != 0 {
		t.Errorf("the other host got %d requests; want 0", n)
	}
}

// TestRequestIDs: every answer and every error carries the request id of
// the response, from X-Goog-Request-Id or else X-Request-Id.
func TestRequestIDs(t *testing.T) {
	quietLog(t)
	for _, header := range []string{"X-Goog-Request-Id", "X-Request-Id"} {
		for _, how := range []string{"ok", "error", "error event", "error mid-stream", "too large"} {
			for _, stream := range []bool{false, true} {
				if !stream && strings.HasPrefix(how, "error ") {
					continue
				}
				name := fmt.Sprintf("%s/%s/stream=%v", header, how, stream)
				srv := suite.ServeOn(t, "127.0.0.1:0", nil, func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set(header, "greq-7")
					errBody := `{"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}}`
					switch {
					case how == "error":
						writeJSON(w, 503, errBody)
					case how == "too large":
						writeJSON(w, 200, `{"candidates":[{"content":{"parts":[{"text":"`+strings.Repeat("a", 2*testCap)+`"}]}}]}`)
					case !stream:
						writeJSON(w, 200, okBody)
					case how == "ok":
						writeSSE(w, okBody)
					case how == "error event":
						writeSSE(w, errBody)
					case how == "error mid-stream":
						writeSSE(w, `{"candidates":[{"content":{"role":"model","parts":[{"text":"Par"}]}}]}`, errBody)
					}
				})
				p := newProvider(t, geminiClient(t, srv.URL, nil), Config{MaxResponseBytes: testCap})
				res, err := run(p, hello("gemini-2.5-flash"), stream)
				if how == "ok" {
					if err != nil || res.RequestID != "greq-7" {
						t.Errorf("%s: %+v %v", name, res, err)
					}
					continue
				}
				if f, ok := err.(*llm.Error); !ok || f.RequestID != "greq-7" {
					t.Errorf("%s: %#v; want request id greq-7", name, err)
				}
				if res != nil && res.RequestID != "greq-7" {
					t.Errorf("%s: the partial answer's RequestID %q", name, res.RequestID)
				}
			}
		}
	}
}
