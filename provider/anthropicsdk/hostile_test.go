package anthropicsdk

// What the adapter must do against a hostile upstream, on each platform the
// SDK reaches (the Anthropic API, Bedrock, Vertex), as the native adapters
// do: read no more than the cap of any body, event or answer; keep every
// credential the request carried out of every error, answer, span, log and
// cached answer; and send nothing to a host a redirect points to.

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/bedrock"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/vertex"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/degrade"
	"github.com/backstop-llm/backstop/internal/oteltest"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/observe"
	"github.com/backstop-llm/backstop/provider/internal/suite"
	"github.com/backstop-llm/backstop/redisstore"
	"github.com/backstop-llm/backstop/retry"
)

// The credentials of the hostile tests' clients, each long enough to be
// redacted wherever it appears. The secret access key never travels: the
// request carries the access key id, the signature and the session token.
const (
	hostileAKID    = "AKIAHOSTILETEST01234"
	hostileSecret  = "hostile-secret-access-key-0123456789"
	hostileSession = "hostile-session-token-0123456789abcdef"
	hostileToken   = "ya29.hostile-vertex-token-0123456789"
)

// platform is one service the SDK reaches, as the hostile tests build it.
type platform struct {
	name  string
	model string
	// options are the provider's Config for the platform.
	options Config
	// client returns the SDK client sending to url, opts given before the
	// platform's own option (as a caller passes option.WithHTTPClient).
	client func(t *testing.T, url string, opts ...option.RequestOption) anthropic.Client
}

func platforms() []platform {
	return []platform{
		{name: PlatformAnthropic, model: "claude-hostile",
			client: func(t *testing.T, url string, opts ...option.RequestOption) anthropic.Client {
				return anthropic.NewClient(append([]option.RequestOption{option.WithAPIKey(testKey), option.WithBaseURL(url)}, opts...)...)
			}},
		{name: PlatformBedrock, model: "eu.anthropic.claude-hostile-v1:0", options: Config{Platform: PlatformBedrock, Region: "eu-west-1"},
			client: func(t *testing.T, url string, opts ...option.RequestOption) anthropic.Client {
				t.Setenv("AWS_BEARER_TOKEN_BEDROCK", "")
				cfg := aws.Config{Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider(hostileAKID, hostileSecret, hostileSession)}
				return anthropic.NewClient(append(opts, bedrock.WithConfig(cfg), option.WithBaseURL(url))...)
			}},
		{name: PlatformVertex, model: "claude-hostile@20260101", options: Config{Platform: PlatformVertex, Region: "europe-west4"},
			client: func(t *testing.T, url string, opts ...option.RequestOption) anthropic.Client {
				creds := &google.Credentials{TokenSource: oauth2.StaticTokenSource(&oauth2.Token{AccessToken: hostileToken, TokenType: "Bearer"})}
				return anthropic.NewClient(append(opts, vertex.WithCredentials(context.Background(), "europe-west4", "my-project", creds), option.WithBaseURL(url))...)
			}},
	}
}

// provider returns the platform's provider at url. hc, when not nil, is
// the HTTP client the caller gives the adapter (Config.HTTPClient); opts
// are the caller's own options for the SDK client.
func (pl platform) provider(t *testing.T, url string, o Config, hc *http.Client, opts ...option.RequestOption) *Provider {
	t.Helper()
	o.Platform, o.Region = pl.options.Platform, pl.options.Region
	o.HTTPClient = hc
	p, err := New(pl.client(t, url, opts...), o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// request is a request for the platform's model.
func (pl platform) request() llm.Request {
	req := userReq
	req.Model = pl.model
	return req
}

// streamed reports whether r, with its body, asks for a stream, on any
// platform: Bedrock and Vertex say it in the path, the API in the body.
func streamed(r *http.Request, body []byte) bool {
	return strings.HasSuffix(r.URL.Path, "/invoke-with-response-stream") || strings.HasSuffix(r.URL.Path, ":streamRawPredict") ||
		bytes.Contains(body, []byte(`"stream":true`))
}

// writeEvents answers 200 with events (SSE text, "event: …\ndata: …\n\n")
// in the platform's wire format: Bedrock's event stream, whose frames
// carry each event's data, or the text itself.
func writeEvents(t *testing.T, w http.ResponseWriter, pl platform, events ...string) {
	if pl.name == PlatformBedrock {
		w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
		w.WriteHeader(200)
		for _, d := range sseData(events...) {
			w.Write(chunk(t, d))
		}
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	for _, e := range events {
		io.WriteString(w, e)
	}
}

// pour writes head, then piece over and over until total bytes are written
// or the client goes away.
func pour(w http.ResponseWriter, r *http.Request, head, piece []byte, total int) {
	n, _ := w.Write(head)
	f, _ := w.(http.Flusher)
	for n < total && r.Context().Err() == nil {
		m, err := w.Write(piece)
		if err != nil {
			return
		}
		n += m
		if f != nil {
			f.Flush()
		}
	}
}

// attempt makes one Complete or Stream (read to its end) and returns its
// error, nil when it succeeded.
func attempt(p *Provider, req llm.Request, stream bool) error {
	if !stream {
		_, err := p.Complete(context.Background(), req)
		return err
	}
	st, err := p.Stream(context.Background(), req)
	if err != nil {
		return err
	}
	defer st.Close()
	for {
		if _, err := st.Next(); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
}

// poured is how much a memory test's server sends: more than the 64 MiB
// the heap may not grow by.
const poured = 64 << 20

// gzipped returns s compressed.
func gzipped(s []byte) []byte {
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	zw.Write(s)
	zw.Close()
	return b.Bytes()
}

// TestMemoryCapped: whatever a server sends, an attempt reads at most
// MaxResponseBytes of it and fails classified: an error body, a success
// body, a gzip bomb (read whole or as a stream), one giant stream event,
// endless text deltas. The heap grows by less than the 64 MiB sent.
func TestMemoryCapped(t *testing.T) {
	const max = 1 << 20
	a64k := bytes.Repeat([]byte("a"), 64<<10)
	jsonHead := []byte(`{"id":"msg_01","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"`)
	bomb := gzipped(append(append([]byte(nil), jsonHead...), bytes.Repeat([]byte("a"), poured)...))
	sseBomb := gzipped(append([]byte("event: content_block_delta\ndata: "), bytes.Repeat([]byte("a"), poured)...))
	dataLine := append(append([]byte("data: "), a64k...), '\n')
	deltaEvent := []byte(delta(0, strings.Repeat("x", 1<<10)))
	var giantFrame, deltaFrame []byte // Bedrock's, made once a test can make them

	for _, pl := range platforms() {
		type memCase struct {
			name   string
			stream bool
			h      http.HandlerFunc
		}
		errorBody := func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(500)
			pour(w, r, []byte(`{"type":"error","error":{"type":"api_error","message":"`), a64k, poured)
		}
		successBody := func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(200)
			pour(w, r, jsonHead, a64k, poured)
		}
		gzipBomb := func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Encoding", "gzip")
			w.WriteHeader(200)
			w.Write(bomb)
		}
		sseGzipBomb := func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Content-Encoding", "gzip")
			w.WriteHeader(200)
			w.Write(sseBomb)
		}
		giantEvent := func(w http.ResponseWriter, r *http.Request) {
			if pl.name == PlatformBedrock {
				// One frame as large as the AWS decoder takes (16 MiB of
				// payload), over and over.
				w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
				w.WriteHeader(200)
				pour(w, r, nil, giantFrame, poured)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			pour(w, r, []byte("event: content_block_delta\n"), dataLine, poured)
		}
		endless := func(w http.ResponseWriter, r *http.Request) {
			if pl.name == PlatformBedrock {
				w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
				w.WriteHeader(200)
				pour(w, r, chunk(t, sseData(evStart)[0]), deltaFrame, poured)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			pour(w, r, []byte(evStart+evText0), deltaEvent, poured)
		}
		cases := []memCase{
			{"error body", false, errorBody},
			{"error body/stream", true, errorBody},
			{"success body", false, successBody},
			{"success body/stream", true, successBody},
			{"gzip bomb", false, gzipBomb},
			{"gzip bomb/stream", true, gzipBomb},
			{"giant event", true, giantEvent},
			{"endless deltas", true, endless},
		}
		if pl.name != PlatformBedrock {
			cases = append(cases, memCase{"gzip bomb event", true, sseGzipBomb})
		}
		for _, tc := range cases {
			t.Run(pl.name+"/"+tc.name, func(t *testing.T) {
				if giantFrame == nil && pl.name == PlatformBedrock {
					text := strings.Repeat("a", 11<<20) // its base64, in the frame, is under 16 MiB
					giantFrame = chunk(t, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`+text+`"}}`)
					deltaFrame = chunk(t, sseData(string(deltaEvent))[0])
				}
				s := httptest.NewServer(tc.h)
				defer s.Close()
				p := pl.provider(t, s.URL, Config{MaxResponseBytes: max}, httpClient(t))
				req := pl.request()
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				err := attempt(p, req, tc.stream)
				runtime.ReadMemStats(&after)
				var e *llm.Error
				if !errors.As(err, &e) || e.Kind == llm.KindUnknown || !strings.Contains(e.Message, "than 1048576 bytes") {
					t.Fatalf("the attempt ended with %v (%#v); want a classified *llm.Error saying the cap", err, e)
				}
				if grew := after.TotalAlloc - before.TotalAlloc; grew >= poured {
					t.Errorf("the attempt allocated %d MiB (ending with %v); want less than the %d MiB sent", grew>>20, err, poured>>20)
				}
			})
		}
	}
}

// echo is an upstream that quotes every request header it receives in its
// request-id headers and in what it answers, and records the credentials
// the requests carried.
type echo struct {
	t  *testing.T
	pl platform
	// mode says what it answers: "answer", "error", "midstream".
	mode atomic.Value

	mu    sync.Mutex
	creds map[string]bool
}

func (e *echo) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var vals []string
	for _, vs := range r.Header {
		vals = append(vals, vs...)
	}
	quoted := strings.Join(vals, " | ")
	e.mu.Lock()
	for _, c := range suite.CredentialsIn(r.Header) {
		e.creds[c] = true
	}
	e.mu.Unlock()
	for _, h := range []string{"Request-Id", "X-Amzn-Requestid", "X-Request-Id"} {
		w.Header().Set(h, quoted)
	}
	q, _ := json.Marshal(quoted)
	switch mode := e.mode.Load().(string); {
	case mode == "error":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(500)
		fmt.Fprintf(w, `{"type":"error","error":{"type":"api_error","message":%s},"request_id":%s}`, q, q)
	case !streamed(r, body):
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":%s,"type":"message","role":"assistant","model":%s,"content":[{"type":"text","text":"Hi"}],"stop_reason":%s,"usage":{"input_tokens":1,"output_tokens":1}}`, q, q, q)
	case mode == "midstream":
		start := event("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":%s,"type":"message","role":"assistant","content":[],"model":%s,"usage":{"input_tokens":1,"output_tokens":1}}}`, q, q))
		if e.pl.name == PlatformBedrock {
			writeEvents(e.t, w, e.pl, start, evText0, delta(1, "Hi"))
			w.Write(exception(e.t, "modelStreamErrorException", quoted))
			return
		}
		writeEvents(e.t, w, e.pl, start, evText0, delta(1, "Hi"),
			event("error", fmt.Sprintf(`{"type":"error","error":{"type":"api_error","message":%s}}`, q)))
	default:
		writeEvents(e.t, w, e.pl,
			event("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":%s,"type":"message","role":"assistant","content":[],"model":%s,"usage":{"input_tokens":1,"output_tokens":1}}}`, q, q)),
			evText0, delta(1, "Hi"),
			event("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%s},"usage":{"output_tokens":2}}`, q)),
			event("message_stop", `{"type":"message_stop"}`))
	}
}

// leaks returns the credentials the upstream saw that appear in texts.
func (e *echo) leaks(texts ...string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for c := range e.creds {
		for _, s := range texts {
			if strings.Contains(s, c) {
				out = append(out, c)
				break
			}
		}
	}
	return out
}

// errorTexts is every text an error shows: Error(), %+v, and each field of
// the *llm.Error.
func errorTexts(err error) []string {
	out := []string{err.Error(), fmt.Sprintf("%+v", err)}
	var e *llm.Error
	if errors.As(err, &e) {
		out = append(out, e.Message, e.Detail, e.RequestID, e.Type, e.Code, e.Provider)
		if e.Err != nil {
			out = append(out, e.Err.Error())
		}
	}
	return out
}

// responseTexts is the metadata of an answer.
func responseTexts(res *llm.Response) []string {
	return []string{res.ID, res.Model, res.RequestID, res.FinishReason}
}

// TestSecretsNeverLeak: an upstream that quotes every header it receives in
// its request ids, its error messages and the answer's id, model and stop
// reason gets none of the credentials the request carried into an error
// or an answer's metadata, on any platform, whole or streamed, though the
// provider was told of none of them (Config.APIKey is empty).
func TestSecretsNeverLeak(t *testing.T) {
	for _, pl := range platforms() {
		t.Run(pl.name, func(t *testing.T) {
			up := &echo{t: t, pl: pl, creds: map[string]bool{}}
			s := httptest.NewServer(up)
			defer s.Close()
			p := pl.provider(t, s.URL, Config{}, httpClient(t))
			req := pl.request()
			check := func(what string, texts ...string) {
				t.Helper()
				if l := up.leaks(texts...); len(l) > 0 {
					t.Errorf("%s quotes %q: %q", what, l, texts)
				}
			}

			up.mode.Store("answer")
			res, err := p.Complete(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			check("Complete's answer", responseTexts(res)...)
			st, err := p.Stream(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := readChunks(st); err != io.EOF {
				t.Fatalf("stream: %v", err)
			}
			check("a stream's answer", responseTexts(st.Response())...)

			up.mode.Store("error")
			for _, stream := range []bool{false, true} {
				err := attempt(p, req, stream)
				if err == nil {
					t.Fatal("an error reply succeeded")
				}
				check(fmt.Sprintf("the error (stream %v)", stream), errorTexts(err)...)
			}

			up.mode.Store("midstream")
			st, err = p.Stream(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := readChunks(st); err == io.EOF {
				t.Error("the stream's error event was not reported")
			} else {
				check("the error raised mid-stream", errorTexts(err)...)
			}
			check("the answer of a failed stream", responseTexts(st.Response())...)
			st.Close()

			// The upstream saw the credentials the test expects, so that
			// the search above searched for something.
			want := map[string][]string{PlatformAnthropic: {testKey}, PlatformBedrock: {hostileAKID, hostileSession}, PlatformVertex: {hostileToken}}[pl.name]
			up.mu.Lock()
			for _, c := range want {
				if !up.creds[c] {
					t.Errorf("the upstream never saw %q; saw %v", c, up.creds)
				}
			}
			if pl.name == PlatformBedrock && len(up.creds) < 3 {
				t.Errorf("the upstream saw no SigV4 signature: %v", up.creds)
			}
			up.mu.Unlock()
		})
	}
}

// following is a client that follows every redirect.
func following(t *testing.T) *http.Client {
	hc := httpClient(t)
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return nil }
	return hc
}

// TestRedirectRefused: a server that redirects to another host (127.0.0.2)
// gets exactly one request per attempt, the attempt fails with
// KindNotFound, Code "redirect", the 3xx status, and the other host gets
// nothing: with the SDK's default client, and with a client of the
// caller's own that follows every redirect, given in Config.HTTPClient.
// On every platform, for 301, 302, 303, 307 and 308, whole and streamed.
func TestRedirectRefused(t *testing.T) {
	var elsewhere atomic.Int64
	other := suite.ServeOn(t, "127.0.0.2:0", &elsewhere, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, okBody)
	})
	for _, pl := range platforms() {
		for _, status := range []int{301, 302, 303, 307, 308} {
			var n atomic.Int64
			from := suite.ServeOn(t, "127.0.0.1:0", &n, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Request-Id", "req_3xx")
				http.Redirect(w, r, other.URL+r.URL.Path, status)
			})
			for _, c := range []struct {
				name string
				hc   *http.Client
			}{{"the SDK's client", nil}, {"a following client", following(t)}} {
				p := pl.provider(t, from.URL, Config{}, c.hc)
				for _, stream := range []bool{false, true} {
					name := fmt.Sprintf("%s/%d/%s/stream=%v", pl.name, status, c.name, stream)
					before, beforeOther := n.Load(), elsewhere.Load()
					err := attempt(p, pl.request(), stream)
					if got := n.Load() - before; got != 1 {
						t.Errorf("%s: the configured host got %d requests; want 1", name, got)
					}
					if got := elsewhere.Load() - beforeOther; got != 0 {
						t.Errorf("%s: the other host got %d requests; want 0", name, got)
					}
					var e *llm.Error
					if !errors.As(err, &e) || e.Kind != llm.KindNotFound || e.Code != "redirect" || e.Status != status {
						t.Errorf("%s: %v (%#v); want not_found, code redirect, status %d", name, err, e, status)
						continue
					}
					if !strings.Contains(e.Message, other.URL) {
						t.Errorf("%s: %q does not say where it pointed", name, e.Message)
					}
				}
			}
		}
	}
}

// TestRedirectCallerClient: a caller who gives the SDK a client of their
// own that follows redirects (option.WithHTTPClient, which replaces the
// adapter's) still gets the attempt failed as a redirect, and a 307 or 308
// is never re-sent with the body; a 301, 302 or 303 is followed by the
// caller's client as a GET without the body (the residue doc.go states),
// whose answer is refused.
func TestRedirectCallerClient(t *testing.T) {
	var elsewhere atomic.Int64
	var bodies atomic.Int64
	other := suite.ServeOn(t, "127.0.0.2:0", &elsewhere, func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > 0 || r.Method == http.MethodPost {
			bodies.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, okBody)
	})
	for _, pl := range platforms() {
		for _, status := range []int{301, 302, 303, 307, 308} {
			var n atomic.Int64
			from := suite.ServeOn(t, "127.0.0.1:0", &n, func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, other.URL+r.URL.Path, status)
			})
			p := pl.provider(t, from.URL, Config{}, nil, option.WithHTTPClient(following(t)))
			for _, stream := range []bool{false, true} {
				name := fmt.Sprintf("%s/%d/stream=%v", pl.name, status, stream)
				beforeOther := elsewhere.Load()
				err := attempt(p, pl.request(), stream)
				var e *llm.Error
				if !errors.As(err, &e) || e.Kind != llm.KindNotFound || e.Code != "redirect" {
					t.Errorf("%s: %v (%#v); want not_found, code redirect", name, err, e)
				}
				if got := elsewhere.Load() - beforeOther; status >= 307 && got != 0 {
					t.Errorf("%s: the other host got %d requests; want 0", name, got)
				}
			}
			if n.Load() != 2 {
				t.Errorf("%s/%d: the configured host got %d requests; want 2", pl.name, status, n.Load())
			}
		}
	}
	if bodies.Load() != 0 {
		t.Errorf("the other host got the request body %d times", bodies.Load())
	}
}

// TestSecretsNeverLeakThroughAChain: one chain over the provider, with
// observe.Log, tracing (spans in memory) and LastGood over Redis, answers,
// fails over to a remembered answer, streams and fails mid-stream against
// the echoing upstream; no credential the requests carried is in any
// span's name, attributes, status or events, any log record, any Served,
// any attempt, or any value stored in Redis.
func TestSecretsNeverLeakThroughAChain(t *testing.T) {
	for _, pl := range platforms() {
		t.Run(pl.name, func(t *testing.T) {
			up := &echo{t: t, pl: pl, creds: map[string]bool{}}
			s := httptest.NewServer(up)
			defer s.Close()
			p := pl.provider(t, s.URL, Config{}, httpClient(t))

			m := miniredis.RunT(t)
			rc := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
			t.Cleanup(func() { rc.Close() })
			store, err := redisstore.NewCache(rc, redisstore.CacheConfig{Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			tel := oteltest.New()
			var logs bytes.Buffer
			logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			c, err := chain.New("hostile").TracerProvider(tel.TracerProvider).MeterProvider(tel.MeterProvider).
				Observe(observe.Log(logger)).
				Primary(chain.Target{Name: "primary", Provider: p, Model: pl.model, Retry: retry.Policy{MaxAttempts: 1}}).
				OrDegrade(degrade.LastGood(degrade.LastGoodConfig{Store: store})).
				Build()
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			req := pl.request()
			var texts []string
			served := func(res *chain.Result) {
				if res != nil {
					texts = append(texts, fmt.Sprintf("%+v", res.Served), fmt.Sprintf("%+v", res.Attempts))
					texts = append(texts, responseTexts(res.Response)...)
				}
			}

			up.mode.Store("answer")
			res, err := c.Call(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			served(res)
			if err := c.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			up.mode.Store("error")
			res, err = c.Call(ctx, req)
			if err != nil || !res.Degraded {
				t.Fatalf("the failed call was not served by LastGood: %v %+v", err, res)
			}
			served(res)
			up.mode.Store("answer")
			res, err = c.Stream(ctx, req).Result()
			if err != nil {
				t.Fatal(err)
			}
			served(res)
			up.mode.Store("midstream")
			res, err = c.Stream(ctx, req).Result()
			if err == nil {
				t.Fatal("the stream's error event was not reported")
			}
			texts = append(texts, errorTexts(err)...)
			served(res)
			if err := c.Flush(ctx); err != nil {
				t.Fatal(err)
			}

			for _, sp := range tel.Spans.GetSpans() {
				texts = append(texts, sp.Name, sp.Status.Description)
				for _, a := range sp.Attributes {
					texts = append(texts, string(a.Key)+"="+a.Value.Emit())
				}
				for _, ev := range sp.Events {
					texts = append(texts, ev.Name)
					for _, a := range ev.Attributes {
						texts = append(texts, string(a.Key)+"="+a.Value.Emit())
					}
				}
			}
			texts = append(texts, logs.String())
			keys := m.Keys()
			if len(keys) == 0 {
				t.Error("LastGood stored nothing")
			}
			for _, k := range keys {
				v, _ := m.Get(k)
				texts = append(texts, k, v)
			}
			if l := up.leaks(texts...); len(l) > 0 {
				t.Errorf("the chain's telemetry, logs or cache quote %q", l)
			}
			if len(up.creds) == 0 {
				t.Error("the upstream saw no credential")
			}
		})
	}
}

// TestStreamPanicClosesTheConnection: a panic under the stream (a body
// whose reads panic, in the caller's middleware) ends Next with an
// *llm.Error and closes the connection: the server sees its client go
// away, on every platform. So does a panic of the caller's middleware
// after the response arrived, before Stream returns.
func TestStreamPanicClosesTheConnection(t *testing.T) {
	for _, pl := range platforms() {
		for _, where := range []string{"Next", "Stream"} {
			t.Run(pl.name+"/"+where, func(t *testing.T) {
				gone := make(chan struct{})
				s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					defer close(gone)
					writeEvents(t, w, pl, evStart, evText0)
					w.(http.Flusher).Flush()
					<-r.Context().Done() // held open until the client goes away
				}))
				defer s.Close()
				var mid option.Middleware = func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
					res, err := next(r)
					if err == nil {
						if where == "Stream" {
							panic("the middleware panicked")
						}
						res.Body = panicky{res.Body}
					}
					return res, err
				}
				p := pl.provider(t, s.URL, Config{}, httpClient(t), option.WithMiddleware(mid))
				st, err := p.Stream(context.Background(), pl.request())
				if where == "Next" {
					if err != nil {
						t.Fatal(err)
					}
					_, err = st.Next()
				}
				if llm.KindOf(err) != llm.KindUnknown || err == nil || !strings.Contains(err.Error(), "panicked") {
					t.Errorf("%s: %v; want the panic as an *llm.Error", where, err)
				}
				select {
				case <-gone:
				case <-time.After(10 * time.Second):
					t.Error("the connection is still open after the panic")
					s.CloseClientConnections() // so that Close returns
				}
			})
		}
	}
}
