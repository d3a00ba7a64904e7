package suite

// What both adapters' Complete does as one attempt. It turns an error reply
// into an *llm.Error: classified by status when the body names nothing the
// adapter knows, with the headers every provider sends read on every error,
// a body it cannot use quoted (briefly) instead of failing, and never a
// trace of the API key, wherever a server echoes it, yet nothing else
// redacted, whatever letters the key is made of. It sends exactly one
// request, whatever happens to it; obeys the caller's context at every
// stage; checks its configuration at construction, with its defaults.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backstop-llm/backstop/internal/problems"
	"github.com/backstop-llm/backstop/llm"
)

// TestErrorClassifiedByStatus: an error of a type the adapter does not know
// (the APIs add types) is classified by its status, and keeps the type, the
// provider's message (in Detail) and the request-id header.
func TestErrorClassifiedByStatus(t *testing.T) {
	forEach(t, func(t *testing.T, a adapter) {
		for status, want := range map[int]llm.Kind{
			400: llm.KindBadRequest, 401: llm.KindAuth, 402: llm.KindQuota, 403: llm.KindAuth, 404: llm.KindNotFound,
			408: llm.KindTimeout, 409: llm.KindConflict, 413: llm.KindBadRequest, 422: llm.KindBadRequest,
			429: llm.KindRateLimited, 500: llm.KindServer, 502: llm.KindServer, 503: llm.KindOverloaded,
			504: llm.KindServer, 529: llm.KindOverloaded,
			200: llm.KindServer, // an error sent with a 200, as gateways do
		} {
			s := NewServer(t, Respond(status, a.fail(llm.KindUnknown, "what happened"), a.requestID, "req_hdr"))
			e := a.completeErr(t, a.new(t, s.URL, nil), context.Background())
			if e.Kind != want || e.Status != status || e.Type != "brand_new_error" || e.Detail != "what happened" || e.RequestID != "req_hdr" {
				t.Errorf("%d: got %+v; want Kind %v, Type brand_new_error, Detail %q, RequestID req_hdr", status, e, want, "what happened")
			}
			if llm.KindOf(e) != want {
				t.Errorf("%d: KindOf = %v; want %v", status, llm.KindOf(e), want)
			}
		}
	})
}

func TestRetryAfter(t *testing.T) {
	date := time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)
	tests := []struct {
		name     string
		header   []string
		min, max time.Duration
	}{
		{"seconds", []string{"retry-after", "17"}, 17 * time.Second, 17 * time.Second},
		{"ms", []string{"retry-after-ms", "1574", "retry-after", "2"}, 1574 * time.Millisecond, 1574 * time.Millisecond},
		{"date", []string{"retry-after", date}, 58 * time.Minute, time.Hour},
		{"garbage", []string{"retry-after", "soon"}, 0, 0},
		{"absent", nil, 0, 0},
	}
	forEach(t, func(t *testing.T, a adapter) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s := NewServer(t, Respond(429, a.fail(llm.KindRateLimited, "slow down"), tt.header...))
				e := a.completeErr(t, a.new(t, s.URL, nil), context.Background())
				if e.RetryAfter < tt.min || e.RetryAfter > tt.max || e.Kind != llm.KindRateLimited {
					t.Errorf("RetryAfter = %v, Kind %v; want rate limited, in [%v, %v]", e.RetryAfter, e.Kind, tt.min, tt.max)
				}
			})
		}
	})
}

func TestShouldRetry(t *testing.T) {
	forEach(t, func(t *testing.T, a adapter) {
		for _, tt := range []struct {
			header string
			want   string
		}{{"true", "true"}, {"false", "false"}, {" TRUE ", "true"}, {"False", "false"}, {"yes", "<nil>"}, {"1", "<nil>"}, {"", "<nil>"}} {
			s := NewServer(t, Respond(500, a.fail(llm.KindServer, "boom"), "x-should-retry", tt.header))
			e := a.completeErr(t, a.new(t, s.URL, nil), context.Background())
			got := "<nil>"
			if e.ShouldRetry != nil {
				got = fmt.Sprint(*e.ShouldRetry)
			}
			if got != tt.want {
				t.Errorf("x-should-retry %q: ShouldRetry = %s; want %s", tt.header, got, tt.want)
			}
		}
	})
}

// TestRateLimitOnError: the rate-limit headers are read on a 429 too, where
// a throttle needs them most.
func TestRateLimitOnError(t *testing.T) {
	forEach(t, func(t *testing.T, a adapter) {
		s := NewServer(t, Respond(429, a.fail(llm.KindRateLimited, "slow down"), a.rateHeaders...))
		e := a.completeErr(t, a.new(t, s.URL, nil), context.Background())
		if b := e.RateLimit.Tokens; !b.Reported() || b.Limit != 1000 || b.Remaining != 0 || b.Reset.IsZero() {
			t.Errorf("RateLimit.Tokens = %+v", b)
		}
	})
}

// TestUnparseableBodies: a body that is not the JSON the adapter expects (a
// proxy's page, a cut or empty body, JSON of another shape) is classified
// by status and quoted in at most a few hundred bytes.
func TestUnparseableBodies(t *testing.T) {
	html := "<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head><body>" + strings.Repeat("x", 500) + "</body></html>"
	forEach(t, func(t *testing.T, a adapter) {
		tests := append([]malformed{
			{"html 502", 502, html, llm.KindServer, `"<!DOCTYPE html>\n<html>`},
			{"html 503", 503, "<html>busy</html>", llm.KindOverloaded, `"<html>busy</html>"`},
			{"truncated 200", 200, a.ok("Hello, world")[:60], llm.KindServer, "not the expected JSON"},
			{"truncated 529", 529, a.fail(llm.KindOverloaded, "Overloaded")[:30], llm.KindOverloaded, "not the expected JSON"},
			{"truncated 429", 429, a.fail(llm.KindRateLimited, "Rate limit")[:30], llm.KindRateLimited, "not the expected JSON"},
			{"empty 200", 200, "", llm.KindServer, "empty response body"},
			{"empty 429", 429, "", llm.KindRateLimited, "empty response body"},
			{"blank 500", 500, "  \n", llm.KindServer, "empty response body"},
			{"array 200", 200, `[1,2]`, llm.KindServer, "not the expected JSON"},
			{"null 200", 200, `null`, llm.KindServer, a.noAnswer},
			{"object 200", 200, `{"hello":"world"}`, llm.KindServer, a.noAnswer},
			{"no error 500", 500, `{"message":"bad"}`, llm.KindServer, `no "error" object`},
			{"fastapi 422", 422, `{"detail":[{"loc":["body","model"],"msg":"field required"}]}`, llm.KindBadRequest, `no "error" object`},
			{"error null 500", 500, `{"error":null}`, llm.KindServer, `no "error" object`},
			{"binary 500", 500, "\xff\xfe\x00garbage", llm.KindServer, `"\xff\xfe\x00garbage"`},
		}, a.malformed...)
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s := NewServer(t, Respond(tt.status, tt.body))
				e := a.completeErr(t, a.new(t, s.URL, nil), context.Background())
				if e.Kind != tt.kind || e.Status != tt.status || !strings.Contains(e.Message+" "+e.Detail, tt.quote) {
					t.Errorf("got %+v\ndetail %q; want Kind %v, a message containing %q", e, e.Detail, tt.kind, tt.quote)
				}
				if len(e.Detail) > 400 {
					t.Errorf("message is %d bytes long: %q", len(e.Detail), e.Detail)
				}
			})
		}
	})
}

// TestOversizeBody: a body longer than MaxResponseBytes, announced or not,
// fails the attempt unread, classified by status; one of exactly the cap is
// read.
func TestOversizeBody(t *testing.T) {
	chunked := func(status int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(status)
			for i := 0; i < 100; i++ {
				io.WriteString(w, strings.Repeat("b", 100))
				w.(http.Flusher).Flush()
			}
		}
	}
	forEach(t, func(t *testing.T, a adapter) {
		big := a.ok(strings.Repeat("a", 5000))
		tests := []struct {
			name string
			h    http.HandlerFunc
			want llm.Kind
		}{
			{"content-length 200", Respond(200, big), llm.KindServer},
			{"content-length 429", Respond(429, big), llm.KindRateLimited},
			{"chunked 200", chunked(200), llm.KindServer},
			{"chunked 500", chunked(500), llm.KindServer},
			{"chunked 529", chunked(529), llm.KindOverloaded},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s := NewServer(t, tt.h)
				p := a.with(t, config{key: a.key, base: s.URL, maxBytes: 1000})
				e := a.completeErr(t, p, context.Background())
				if e.Kind != tt.want || !strings.Contains(e.Message, "larger than 1000 bytes") {
					t.Errorf("got %+v; want Kind %v and a message about the cap", e, tt.want)
				}
			})
		}
		ok := a.ok("Hello, world")
		s := NewServer(t, Respond(200, ok))
		p := a.with(t, config{key: a.key, base: s.URL, maxBytes: int64(len(ok))})
		if _, err := p.Complete(context.Background(), request); err != nil {
			t.Errorf("body of exactly MaxResponseBytes: %v", err)
		}
	})
}

// TestKeyRedaction: a server echoing a realistic key in any field of an
// error body, in a header, in a page or a body that cannot be read gets no
// trace of it into the error, its text, its fields or its cause.
func TestKeyRedaction(t *testing.T) {
	forEach(t, func(t *testing.T, a adapter) {
		key := a.key
		tests := []struct {
			name   string
			status int
			body   string
			header []string
		}{
			{"message", 401, a.fail(llm.KindAuth, "Incorrect API key provided: "+key+"."), nil},
			{"message ending with it", 401, a.fail(llm.KindAuth, "invalid x-api-key: "+key), nil},
			{"every field", 400, a.everyField(key), nil},
			{"string error", 401, `{"error":"bad key ` + key + `"}`, nil},
			{"header", 429, a.fail(llm.KindRateLimited, "x"), []string{a.requestID, key}},
			{"html", 502, "<html>your key " + key + " is wrong</html>", nil},
			{"key across the quote cut", 502, strings.Repeat("<", 190) + key + strings.Repeat(">", 100), nil},
			{"200 unparseable", 200, cutAfter(a.ok(key), key), nil},
			{"200 refusal", 200, a.refusal("no, " + key), nil},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s := NewServer(t, Respond(tt.status, tt.body, tt.header...))
				e := a.completeErr(t, a.new(t, s.URL, nil), context.Background())
				for _, f := range []string{e.Error(), e.Type, e.Code, e.Message, e.Detail, e.RequestID, fmt.Sprintf("%+v %#v", e, e)} {
					if strings.Contains(f, key[:16]) {
						t.Errorf("error quotes the key: %s", f)
					}
				}
				if u := errors.Unwrap(e); u != nil && strings.Contains(u.Error(), key) {
					t.Errorf("cause quotes the key: %v", u)
				}
			})
		}
	})
}

// TestKeyRedactedFromTransportError: a BaseURL carrying the key (a gateway
// that takes it in the path) is quoted by the transport's error; the
// adapter's error redacts it and still unwraps to the cause.
func TestKeyRedactedFromTransportError(t *testing.T) {
	forEach(t, func(t *testing.T, a adapter) {
		s := httptest.NewServer(http.NotFoundHandler())
		url := s.URL
		s.Close() // connection refused from now on
		e := a.completeErr(t, a.new(t, url+"/"+a.key, nil), context.Background())
		if e.Kind != llm.KindConnection || e.Status != 0 {
			t.Errorf("got %+v; want a connection error", e)
		}
		var op *net.OpError
		if !errors.As(e, &op) {
			t.Errorf("cause %v does not unwrap to the *net.OpError", e.Err)
		}
		if strings.Contains(fmt.Sprintf("%v %+v", e, e), a.key) {
			t.Errorf("error quotes the key: %+v", e)
		}
	})
}

// TestShortKeyRedactedOnlyAsAToken: a key of a few characters (a
// placeholder for a local server) is redacted where a server echoes it as
// a value, yet a request id, an id or a model name that merely contains its
// letters comes through intact: redaction never corrupts other data.
func TestShortKeyRedactedOnlyAsAToken(t *testing.T) {
	forEach(t, func(t *testing.T, a adapter) {
		const short = "k"
		shortKey := func(base string) llm.StreamProvider { return a.with(t, config{key: short, base: base}) }
		// The answer's metadata, whole and streamed, is as a provider with
		// a long key reads it.
		s := NewServer(t, Respond(200, a.ok("fine"), a.requestID, "req_fake_19"))
		want, err := a.new(t, s.URL, nil).Complete(context.Background(), request)
		if err != nil {
			t.Fatal(err)
		}
		res, err := shortKey(s.URL).Complete(context.Background(), request)
		if err != nil {
			t.Fatal(err)
		}
		if res.RequestID != "req_fake_19" || res.ID != want.ID || res.Model != want.Model || res.FinishReason != want.FinishReason {
			t.Errorf("answer %+v; want request-id req_fake_19 and %+v", res, want)
		}
		s = NewServer(t, SSE([]string{a.events("fake_19")}, a.requestID, "req_fake_19"))
		st := OpenStream(t, shortKey(s.URL), context.Background(), request)
		if _, err := ReadStream(st); err != io.EOF || st.Response().RequestID != "req_fake_19" ||
			!strings.HasSuffix(st.Response().ID, "fake_19") || !strings.HasSuffix(st.Response().Model, "fake_19") {
			t.Errorf("streamed answer %+v, %v; want request-id req_fake_19, id and model ending fake_19", st.Response(), err)
		}
		// An error keeps what holds the letters, loses what is the key.
		s = NewServer(t, Respond(429, a.fail(llm.KindRateLimited, "slow down, key=k; see req_fake_19"), a.requestID, "req_fake_19"))
		e := CompleteErr(t, shortKey(s.URL), context.Background(), request, "key=k;")
		if e.RequestID != "req_fake_19" || e.Detail != "slow down, key=[redacted]; see req_fake_19" {
			t.Errorf("got RequestID %q, Detail %q", e.RequestID, e.Detail)
		}
		s = NewServer(t, Respond(401, a.fail(llm.KindAuth, "invalid x-api-key: k"), a.requestID, short))
		e = CompleteErr(t, shortKey(s.URL), context.Background(), request, "key: k")
		if e.RequestID != "[redacted]" || e.Detail != "invalid x-api-key: [redacted]" {
			t.Errorf("got RequestID %q, Detail %q; want the key redacted from both", e.RequestID, e.Detail)
		}
	})
}

func TestCanceled(t *testing.T) {
	forEach(t, func(t *testing.T, a adapter) {
		started := make(chan struct{})
		s := NewServer(t, func(w http.ResponseWriter, r *http.Request) {
			close(started)
			<-r.Context().Done()
		})
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			<-started
			cancel()
		}()
		e := a.completeErr(t, a.new(t, s.URL, nil), ctx)
		if e.Kind != llm.KindCanceled || !errors.Is(e, context.Canceled) || llm.KindOf(e) != llm.KindCanceled {
			t.Errorf("got %+v; want KindCanceled wrapping context.Canceled", e)
		}
	})
}

func TestCanceledBeforeSend(t *testing.T) {
	forEach(t, func(t *testing.T, a adapter) {
		s := NewServer(t, Respond(200, a.ok("Hello")))
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		e := a.completeErr(t, a.new(t, s.URL, nil), ctx)
		if e.Kind != llm.KindCanceled || s.Count.Load() != 0 {
			t.Errorf("got %+v after %d requests; want KindCanceled and none sent", e, s.Count.Load())
		}
	})
}

// cancelAfterHeaders cancels the call as soon as the response headers are in.
type cancelAfterHeaders struct{ cancel context.CancelFunc }

func (c cancelAfterHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	c.cancel()
	return resp, err
}

// TestCanceledMidBody: a call canceled while its body arrives is canceled,
// not a connection failure, and keeps the status.
func TestCanceledMidBody(t *testing.T) {
	forEach(t, func(t *testing.T, a adapter) {
		s := NewServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "1000")
			w.WriteHeader(200)
			io.WriteString(w, a.ok("Hello, world")[:50])
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		})
		ctx, cancel := context.WithCancel(context.Background())
		p := a.new(t, s.URL, &http.Client{Transport: cancelAfterHeaders{cancel}})
		e := a.completeErr(t, p, ctx)
		if e.Kind != llm.KindCanceled || e.Status != 200 || !errors.Is(e, context.Canceled) {
			t.Errorf("got %+v; want KindCanceled with the status", e)
		}
	})
}

func TestDeadline(t *testing.T) {
	forEach(t, func(t *testing.T, a adapter) {
		s := NewServer(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		e := a.completeErr(t, a.new(t, s.URL, nil), ctx)
		if e.Kind != llm.KindTimeout || !errors.Is(e, context.DeadlineExceeded) {
			t.Errorf("got %+v; want KindTimeout wrapping context.DeadlineExceeded", e)
		}
	})
}

// TestOneRequestPerComplete: an error status (even one asking for a retry)
// and a reset connection, fresh or kept alive, are one request each: the
// adapter never retries.
func TestOneRequestPerComplete(t *testing.T) {
	forEach(t, func(t *testing.T, a adapter) {
		var mode atomic.Value
		mode.Store("ok")
		s := NewServer(t, func(w http.ResponseWriter, r *http.Request) {
			switch mode.Load() {
			case "ok":
				Respond(200, a.ok("Hello"))(w, r)
			case "429":
				Respond(429, a.fail(llm.KindRateLimited, "slow"), "retry-after-ms", "10", "x-should-retry", "true")(w, r)
			case "503":
				Respond(503, a.fail(llm.KindOverloaded, "overloaded"))(w, r)
			case "529":
				Respond(529, a.fail(llm.KindOverloaded, "Overloaded"), "retry-after", "1", "x-should-retry", "true")(w, r)
			case "reset":
				HangUp(w, r)
			}
		})
		p := a.new(t, s.URL, nil)
		// The first call leaves a keep-alive connection for the next to reuse.
		if _, err := p.Complete(context.Background(), request); err != nil {
			t.Fatal(err)
		}
		want := map[string]llm.Kind{"429": llm.KindRateLimited, "503": llm.KindOverloaded, "529": llm.KindOverloaded, "reset": llm.KindConnection}
		for _, m := range []string{"529", "reset", "reset", "529", "429", "reset", "503", "reset", "429"} {
			mode.Store(m)
			before := s.Count.Load()
			e := a.completeErr(t, p, context.Background())
			if n := s.Count.Load() - before; n != 1 {
				t.Errorf("%s: %d requests; want exactly 1", m, n)
			}
			if e.Kind != want[m] {
				t.Errorf("%s: got %+v; want %v", m, e, want[m])
			}
		}
	})
}

// TestBodyCutShort: a 200 whose body ends before its Content-Length lost
// the answer in transit: a connection failure, with the status and the
// request id.
func TestBodyCutShort(t *testing.T) {
	forEach(t, func(t *testing.T, a adapter) {
		s := NewServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "1000")
			w.Header().Set(a.requestID, "req_cut")
			w.WriteHeader(200)
			io.WriteString(w, a.ok("Hello, world")[:50])
			w.(http.Flusher).Flush()
			HangUp(w, r)
		})
		e := a.completeErr(t, a.new(t, s.URL, nil), context.Background())
		if e.Kind != llm.KindConnection || e.Status != 200 || e.RequestID != "req_cut" || e.Err == nil {
			t.Errorf("got %+v; want a connection error with status and request id", e)
		}
	})
}

// TestEncodeError: a Params.Extra that cannot be encoded is a bad request
// naming it, and nothing is sent.
func TestEncodeError(t *testing.T) {
	forEach(t, func(t *testing.T, a adapter) {
		for _, bad := range []any{make(chan int), func() {}} {
			s := NewServer(t, Respond(200, a.ok("Hello")))
			req := request
			req.Params.Extra = map[string]any{"bad": bad}
			_, err := a.new(t, s.URL, nil).Complete(context.Background(), req)
			var le *llm.Error
			if !errors.As(err, &le) || le.Kind != llm.KindBadRequest || !strings.Contains(le.Message, `Params.Extra["bad"]`) {
				t.Errorf("%T: got %v; want a bad request naming the Extra key", bad, err)
			}
			if n := s.Count.Load(); n != 0 {
				t.Errorf("%T: %d requests; a body that cannot be encoded must not be sent", bad, n)
			}
		}
	})
}

// TestNew: a configuration mistake fails at construction, prefixed with
// the adapter's name and saying what to change.
func TestNew(t *testing.T) {
	tests := []struct {
		cfg  config
		want string // in the error; "" for success
	}{
		{config{key: "k"}, ""},
		{config{key: "k", base: "http://localhost:8080/prefix/"}, ""},
		{config{}, "APIKey is empty"},
		{config{key: "k\n"}, "control character"},
		{config{key: "k\r\n"}, "control character"},
		{config{key: " k"}, "spaces"},
		{config{key: "k", base: "api.example.com"}, "must start with https://"},
		{config{key: "k", base: "ftp://api.example.com"}, `got scheme "ftp"`},
		{config{key: "k", base: "ws://api.example.com"}, `got scheme "ws"`},
		{config{key: "k", base: "localhost:8080"}, "must start with https://"},
		{config{key: "k", base: "https://"}, "no host"},
		{config{key: "k", base: "https://h/?x=1"}, "query"},
		{config{key: "k", base: "https://h/#frag"}, "query or fragment"},
		{config{key: "k", base: "https://h:port"}, "not a valid URL"},
		{config{key: "k", maxBytes: -1}, "MaxResponseBytes"},
		{config{key: "k", maxBytes: -5}, "MaxResponseBytes"},
		// A BaseURL read from a file with its spaces: a trailing one after
		// a path prefix would be sent as %20.
		{config{key: "k", base: " https://h"}, "BaseURL"},
		{config{key: "k", base: "https://h/prefix "}, "spaces"},
		// Headers net/http would refuse on every request, failing every
		// attempt as a transport error instead of the construction.
		{config{key: "k", header: http.Header{"X-Team": {"a\nb"}}}, `Config.Header["X-Team"]`},
		{config{key: "k", header: http.Header{"X Team": {"a"}}}, `Config.Header name "X Team"`},
		{config{key: "k", header: http.Header{"X-Team:": {"a"}}}, "not a header name"},
		{config{key: "k", header: http.Header{"": {"a"}}}, "not a header name"},
		// Two spellings of one header: which one is sent would depend on
		// the map's order.
		{config{key: "k", header: http.Header{"x-team": {"a"}, "X-Team": {"b"}}}, "one header"},
		{config{key: "k", header: http.Header{"X-Team": {"a\tb"}, "x-other": {"ü"}}}, ""},
	}
	forEach(t, func(t *testing.T, a adapter) {
		for _, tt := range tests {
			p, err := a.open(tt.cfg)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("New(%+v): %v", tt.cfg, err)
			case tt.want == "" && p.Name() != a.name:
				t.Errorf("Name = %q; want %q", p.Name(), a.name)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), a.name+": ")):
				t.Errorf("New(%+v) = %v; want an error containing %q", tt.cfg, err, tt.want)
			}
		}
	})
}

// TestNewReportsEveryProblem: New reports every problem of a Config at
// once, each under the adapter's name, and its error matches the module's
// invalid-configuration sentinel, as every constructor's does.
func TestNewReportsEveryProblem(t *testing.T) {
	forEach(t, func(t *testing.T, a adapter) {
		_, err := a.open(config{key: "k\n", base: "ftp://h", maxBytes: -1, header: http.Header{"X-A": {"\r"}}})
		if !errors.Is(err, problems.ErrInvalidConfig) {
			t.Fatalf("New: %v; want an error matching the invalid-configuration sentinel", err)
		}
		lines := strings.Split(err.Error(), "\n")
		for i, want := range []string{"APIKey", "BaseURL", "MaxResponseBytes", "Header"} {
			if len(lines) != 4 || !strings.HasPrefix(lines[i], a.name+": invalid configuration: ") || !strings.Contains(lines[i], want) {
				t.Fatalf("New: %q; want 4 lines, the %dth about %s, each under %q", err, i+1, want, a.name+": invalid configuration: ")
			}
		}
	})
}

// replay is a RoundTripper answering 200 with body, recording the URL.
type replay struct {
	body []byte
	url  string
}

func (r *replay) RoundTrip(req *http.Request) (*http.Response, error) {
	r.url = req.URL.String()
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
		ContentLength: int64(len(r.body)), Body: io.NopCloser(bytes.NewReader(r.body)), Request: req}, nil
}

// TestDefaults: with no BaseURL and no MaxResponseBytes, the adapter sends
// to the provider's documented endpoint and reads bodies of up to 8 MiB.
func TestDefaults(t *testing.T) {
	forEach(t, func(t *testing.T, a adapter) {
		const max = 8 << 20
		fill := max - len(a.ok(""))
		for _, tt := range []struct {
			size int
			ok   bool
		}{{max, true}, {max + 1, false}} {
			rt := &replay{body: []byte(a.ok(strings.Repeat("a", fill+tt.size-max)))}
			p := a.new(t, "", &http.Client{Transport: rt})
			res, err := p.Complete(context.Background(), request)
			if rt.url != a.defaultURL {
				t.Errorf("sent to %s; want %s", rt.url, a.defaultURL)
			}
			switch {
			case tt.ok && (err != nil || len(res.Text) != fill):
				t.Errorf("a body of %d bytes: %v", tt.size, err)
			case !tt.ok && (err == nil || !strings.Contains(err.Error(), "larger than 8388608 bytes")):
				t.Errorf("a body of %d bytes: %v; want it refused", tt.size, err)
			}
		}
	})
}

// TestConcurrent: one provider serves concurrent calls (run with -race).
func TestConcurrent(t *testing.T) {
	forEach(t, func(t *testing.T, a adapter) {
		s := NewServer(t, Respond(200, a.ok("Hello")))
		p := a.new(t, s.URL, nil)
		var wg sync.WaitGroup
		for i := 0; i < 20; i++ {
			wg.Go(func() {
				if _, err := p.Complete(context.Background(), request); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if n := s.Count.Load(); n != 20 {
			t.Errorf("%d requests; want 20", n)
		}
	})
}
