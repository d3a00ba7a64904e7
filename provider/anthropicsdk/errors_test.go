package anthropicsdk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/suite"
)

// same fails t unless got classifies a failure exactly as want (the native
// adapter's error for the same reply) does.
func same(t *testing.T, got, want *llm.Error) {
	t.Helper()
	if got.Kind != want.Kind || got.Status != want.Status || got.RetryAfter != want.RetryAfter ||
		got.RequestID != want.RequestID || got.Type != want.Type || got.Code != want.Code ||
		got.Detail != want.Detail || (got.ShouldRetry == nil) != (want.ShouldRetry == nil) ||
		got.RateLimit != want.RateLimit {
		t.Errorf("classified\n got %#v\nwant %#v (native)", got, want)
	}
}

// TestClasses runs the decision table's error classes of the Messages API
// through a client configured to retry five times: each is one request,
// classified as the native adapter classifies it, by Complete and by
// Stream alike.
func TestClasses(t *testing.T) {
	for _, c := range suite.Classes("anthropic") {
		t.Run(c.Name, func(t *testing.T) {
			h := append([]string{"Content-Type", "application/json"}, c.Header...)
			s := suite.NewServer(t, suite.Respond(c.Status, c.Body, h...))
			p := newProvider(t, s.URL)
			start := time.Now()
			e := suite.CompleteErr(t, p, context.Background(), userReq, testKey)
			if n := s.Count.Load(); n != 1 {
				t.Fatalf("Complete sent %d requests; want exactly 1", n)
			}
			if e.Kind != c.Kind || e.Status != c.Status || e.RetryAfter != time.Duration(c.RetryAfterSeconds)*time.Second || e.RequestID != "req_body" {
				t.Errorf("got %v (%#v); want kind %v, status %d, retry after %ds, request id req_body", e, e, c.Kind, c.Status, c.RetryAfterSeconds)
			}
			if time.Since(start) > time.Second {
				t.Errorf("Complete took %v: the SDK waited to retry", time.Since(start))
			}
			want := suite.CompleteErr(t, nativeProvider(t, s.URL), context.Background(), userReq, testKey)
			same(t, e, want)

			s.Count.Store(0)
			st, err := p.Stream(context.Background(), userReq)
			if err == nil {
				st.Close()
				t.Fatal("Stream started on an error reply")
			}
			var se *llm.Error
			if !errors.As(err, &se) {
				t.Fatalf("Stream error %T %v", err, err)
			}
			same(t, se, want)
			if n := s.Count.Load(); n != 1 {
				t.Fatalf("Stream sent %d requests; want exactly 1", n)
			}
		})
	}
}

// TestRetriesOff: whatever the client's retry setting, one call is one
// request, for a 529, a connection reset and a stream alike.
func TestRetriesOff(t *testing.T) {
	t.Run("529", func(t *testing.T) {
		s := suite.NewServer(t, suite.Respond(529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
			"Content-Type", "application/json", "Request-Id", "req_529", "X-Should-Retry", "true"))
		e := suite.CompleteErr(t, newProvider(t, s.URL), context.Background(), userReq, testKey)
		if n := s.Count.Load(); n != 1 {
			t.Fatalf("%d requests; want 1", n)
		}
		if e.Kind != llm.KindOverloaded || e.Status != 529 || e.RequestID != "req_529" || e.ShouldRetry == nil || !*e.ShouldRetry {
			t.Errorf("%#v", e)
		}
	})
	t.Run("reset", func(t *testing.T) {
		s := suite.NewServer(t, suite.HangUp)
		p := newProvider(t, s.URL)
		e := suite.CompleteErr(t, p, context.Background(), userReq, testKey)
		if n := s.Count.Load(); n != 1 {
			t.Fatalf("%d requests; want 1", n)
		}
		if e.Kind != llm.KindConnection || e.Status != 0 {
			t.Errorf("%#v", e)
		}
		s.Count.Store(0)
		if _, err := p.Stream(context.Background(), userReq); llm.KindOf(err) != llm.KindConnection {
			t.Errorf("Stream: %v", err)
		}
		if n := s.Count.Load(); n != 1 {
			t.Fatalf("Stream: %d requests; want 1", n)
		}
	})
}

func TestRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		header []string
		want   time.Duration
	}{
		{[]string{"Retry-After", "30"}, 30 * time.Second},
		{[]string{"Retry-After-Ms", "1500", "Retry-After", "9"}, 1500 * time.Millisecond},
		{[]string{"Retry-After", time.Now().Add(time.Hour).UTC().Format("Monday, 02-Jan-06 15:04:05 GMT")}, time.Hour},
	} {
		h := append([]string{"Content-Type", "application/json"}, tc.header...)
		s := suite.NewServer(t, suite.Respond(429, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`, h...))
		e := suite.CompleteErr(t, newProvider(t, s.URL), context.Background(), userReq, testKey)
		if e.Kind != llm.KindRateLimited || e.RetryAfter < tc.want-2*time.Second || e.RetryAfter > tc.want {
			t.Errorf("%v: RetryAfter %v; want %v", tc.header, e.RetryAfter, tc.want)
		}
	}
}

// TestErrorCodes: error.details.error_code decides, as the native adapter
// decides.
func TestErrorCodes(t *testing.T) {
	for _, tc := range []struct {
		status     int
		typ, code  string
		kind       llm.Kind
		wantCodeIs string
	}{
		{429, "rate_limit_error", "ramp_limit_exceeded", llm.KindRateLimited, "ramp_limit_exceeded"},
		{400, "invalid_request_error", "organization_on_hold", llm.KindAuth, "organization_on_hold"},
		{402, "billing_error", "linked_organization_spend_limit_reached", llm.KindQuota, "linked_organization_spend_limit_reached"},
		{400, "invalid_request_error", "request_body_timeout", llm.KindTimeout, "request_body_timeout"},
	} {
		body := `{"type":"error","error":{"type":"` + tc.typ + `","message":"m","details":{"error_code":"` + tc.code + `"}},"request_id":"req_x"}`
		s := suite.NewServer(t, suite.Respond(tc.status, body, "Content-Type", "application/json"))
		e := suite.CompleteErr(t, newProvider(t, s.URL), context.Background(), userReq, testKey)
		if e.Kind != tc.kind || e.Code != tc.wantCodeIs {
			t.Errorf("%s: %v code %q; want %v", tc.code, e.Kind, e.Code, tc.kind)
		}
		same(t, e, suite.CompleteErr(t, nativeProvider(t, s.URL), context.Background(), userReq, testKey))
	}
}

// TestUnreadableBodies: bodies that are not the API's JSON are classified
// by status and quoted, as the native adapter does.
func TestUnreadableBodies(t *testing.T) {
	for _, tc := range []struct {
		name, ct, body string
		status         int
		kind           llm.Kind
	}{
		{"proxy page", "text/html", "<html>Bad Gateway</html>", 502, llm.KindServer},
		{"empty 503", "application/json", "", 503, llm.KindOverloaded},
		{"truncated 200", "application/json", `{"id":"msg_01","content":[`, 200, llm.KindServer},
		{"200 without content", "application/json", `{"id":"msg_01","type":"message"}`, 200, llm.KindServer},
		{"error with 200", "application/json", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, 200, llm.KindOverloaded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := suite.NewServer(t, suite.Respond(tc.status, tc.body, "Content-Type", tc.ct, "Request-Id", "req_u"))
			e := suite.CompleteErr(t, newProvider(t, s.URL), context.Background(), userReq, testKey)
			if e.Kind != tc.kind || e.Status != tc.status || e.RequestID != "req_u" {
				t.Errorf("%#v; want %v", e, tc.kind)
			}
			want := suite.CompleteErr(t, nativeProvider(t, s.URL), context.Background(), userReq, testKey)
			if e.Kind != want.Kind || e.Detail != want.Detail || e.Type != want.Type {
				t.Errorf("\n got %#v\nwant %#v (native)", e, want)
			}
		})
	}
}

// TestKeyRedacted: a server echoing the key, in its message and in its
// request-id header, has it redacted everywhere.
func TestKeyRedacted(t *testing.T) {
	body := `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key ` + testKey + `"}}`
	s := suite.NewServer(t, suite.Respond(401, body, "Content-Type", "application/json", "Request-Id", "req_"+testKey))
	e := suite.CompleteErr(t, newProvider(t, s.URL), context.Background(), userReq, testKey)
	for _, f := range []string{e.Error(), e.Detail, e.RequestID, e.Message} {
		if strings.Contains(f, testKey) {
			t.Errorf("quotes the key: %q", f)
		}
	}
	if e.Kind != llm.KindAuth || !strings.Contains(e.Detail, "[redacted]") {
		t.Errorf("%#v", e)
	}
	// A key given to no one but the client is learned from the request.
	s2 := suite.NewServer(t, suite.Respond(200, `{"id":"`+testKey+`","type":"message","model":"m","content":[],"stop_reason":"end_turn"}`,
		"Content-Type", "application/json", "Request-Id", testKey))
	res, err := newProvider(t, s2.URL).Complete(context.Background(), userReq)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(res.ID, testKey) || strings.Contains(res.RequestID, testKey) {
		t.Errorf("answer metadata quotes the key: %+v", res)
	}
}

func TestCanceled(t *testing.T) {
	release := make(chan struct{})
	s := suite.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
		suite.Hold(r, release)
	})
	defer close(release)
	p := newProvider(t, s.URL)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	e := suite.CompleteErr(t, p, ctx, userReq, testKey)
	if e.Kind != llm.KindCanceled {
		t.Errorf("%#v", e)
	}
	ctx, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	if e := suite.CompleteErr(t, p, ctx, userReq, testKey); e.Kind != llm.KindTimeout {
		t.Errorf("deadline: %#v", e)
	}
	if n := s.Count.Load(); n != 2 {
		t.Errorf("%d requests; want 2", n)
	}
}

func TestTooLarge(t *testing.T) {
	s := suite.NewServer(t, suite.Respond(200, okBody, "Content-Type", "application/json"))
	p, err := New(newClient(t, s.URL), Config{MaxResponseBytes: 64, HTTPClient: httpClient(t)})
	if err != nil {
		t.Fatal(err)
	}
	e := suite.CompleteErr(t, p, context.Background(), userReq, testKey)
	if e.Kind != llm.KindServer || e.Status != 200 || !strings.Contains(e.Message, "larger than 64 bytes") {
		t.Errorf("%#v", e)
	}
}

// TestNotSent: what fails before a request leaves is classified without
// one being sent.
func TestNotSent(t *testing.T) {
	s := suite.NewServer(t, suite.Respond(200, okBody, "Content-Type", "application/json"))
	p := newProvider(t, s.URL)
	for _, req := range []llm.Request{
		{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.DocumentPart("application/msword", []byte("x"))}}}},
		{Model: "m", Messages: []llm.Message{{Role: "tool", Content: "x"}}},
		{Model: "m", Messages: userReq.Messages, Params: llm.Params{Extra: map[string]any{"bad": make(chan int)}}},
	} {
		if e := suite.CompleteErr(t, p, context.Background(), req, testKey); e.Kind != llm.KindBadRequest {
			t.Errorf("%#v", e)
		}
	}
	if n := s.Count.Load(); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

// TestLongComplete: a Complete the SDK would refuse as too long for one
// response (max_tokens 64000, or over a model's non-streaming limit) is
// sent, as the native adapter sends it.
func TestLongComplete(t *testing.T) {
	s := suite.NewServer(t, suite.Respond(200, okBody, "Content-Type", "application/json"))
	p := newProvider(t, s.URL)
	for _, req := range []llm.Request{
		{Model: "claude-test", Messages: userReq.Messages, Params: llm.Params{MaxTokens: 64000}},
		{Model: "claude-opus-4-0", Messages: userReq.Messages, Params: llm.Params{MaxTokens: 10000}},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err := p.Complete(ctx, req)
		cancel()
		if err != nil {
			t.Fatalf("%d tokens: %v", req.Params.MaxTokens, err)
		}
		if b := string(s.Last().Body); !strings.Contains(b, fmt.Sprintf(`"max_tokens":%d`, req.Params.MaxTokens)) {
			t.Errorf("body %s", b)
		}
		if _, err := p.Complete(context.Background(), req); err != nil {
			t.Fatalf("without a deadline: %v", err)
		}
	}
	if n := s.Count.Load(); n != 4 {
		t.Errorf("%d requests; want 4", n)
	}
}

// TestBodyCutShort: a body that ends before its Content-Length is lost in
// transit for a 2xx (KindConnection), and still says what the status says
// for an error, as the native adapter classifies them.
func TestBodyCutShort(t *testing.T) {
	for _, tc := range []struct {
		status int
		kind   llm.Kind
	}{{200, llm.KindConnection}, {500, llm.KindServer}, {429, llm.KindRateLimited}} {
		s := suite.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", "1000")
			w.Header().Set("Request-Id", "req_cut")
			w.WriteHeader(tc.status)
			io.WriteString(w, `{"id":"msg_01","content":[`)
			w.(http.Flusher).Flush()
			c, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				c.Close()
			}
		})
		e := suite.CompleteErr(t, newProvider(t, s.URL), context.Background(), userReq, testKey)
		if e.Kind != tc.kind || e.Status != tc.status || e.RequestID != "req_cut" || s.Count.Load() != 1 {
			t.Errorf("%d: %#v", tc.status, e)
		}
		want := suite.CompleteErr(t, nativeProvider(t, s.URL), context.Background(), userReq, testKey)
		if want.Kind != e.Kind {
			t.Errorf("%d: %v; native %v", tc.status, e.Kind, want.Kind)
		}
	}
}

// TestRedirect: a redirect the client refuses to follow (its CheckRedirect)
// fails with KindNotFound naming where it pointed, as the native adapter's
// refused redirects do; one the client follows is the client's business.
func TestRedirect(t *testing.T) {
	s := suite.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "https://elsewhere.test/v1/messages")
		w.Header().Set("Request-Id", "req_3xx")
		w.WriteHeader(307)
	})
	hc := httpClient(t)
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	p := newProvider(t, s.URL, option.WithHTTPClient(hc))
	e := suite.CompleteErr(t, p, context.Background(), userReq, testKey)
	if e.Kind != llm.KindNotFound || e.Status != 307 || e.Code != "redirect" || e.RequestID != "req_3xx" ||
		!strings.Contains(e.Message, "elsewhere.test") || s.Count.Load() != 1 {
		t.Errorf("%#v", e)
	}
	if _, err := p.Stream(context.Background(), userReq); llm.KindOf(err) != llm.KindNotFound {
		t.Errorf("Stream: %v", err)
	}
}
