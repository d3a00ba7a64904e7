package genai

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	gg "google.golang.org/genai"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/suite"
)

func TestNewNamesAndDeployment(t *testing.T) {
	g := newProvider(t, geminiClient(t, "http://127.0.0.1:1", nil), Config{})
	if g.Name() != "gcp.gemini" || g.Deployment() != (llm.Deployment{Platform: "gemini"}) {
		t.Errorf("Gemini API: %q %+v", g.Name(), g.Deployment())
	}
	if c := g.Capabilities(); c != llm.CapTools|llm.CapImages|llm.CapDocuments|llm.CapNativeSchema {
		t.Errorf("Gemini API capabilities: %v", c)
	}
	v := newProvider(t, vertexClient(t, "http://127.0.0.1:1", nil), Config{})
	if v.Name() != "gcp.vertex_ai" || v.Deployment() != (llm.Deployment{Platform: "vertex", Region: "europe-west4"}) {
		t.Errorf("Vertex AI: %q %+v", v.Name(), v.Deployment())
	}
	if c := v.Capabilities(); c != llm.CapAll {
		t.Errorf("Vertex AI capabilities: %v", c)
	}
	o := newProvider(t, vertexClient(t, "http://127.0.0.1:1", nil), Config{Name: "vertex-eu", Region: "europe-west4"})
	if o.Name() != "vertex-eu" || o.Deployment().Region != "europe-west4" {
		t.Errorf("overrides: %q %+v", o.Name(), o.Deployment())
	}
	// The client's Location decides; a Region saying otherwise is refused
	// (TestRegionAgainstLocation).
	// Every configuration error matches llm.ErrInvalidConfig under the
	// package's head; Validate finds what shows without the client.
	for _, tc := range []struct {
		client   *gg.Client
		cfg      Config
		validate bool // Validate alone refuses cfg
	}{
		{vertexClient(t, "http://127.0.0.1:1", nil), Config{Region: "eu"}, false},
		{nil, Config{}, false},
		{geminiClient(t, "http://127.0.0.1:1", nil), Config{Name: " x"}, true},
		{geminiClient(t, "http://127.0.0.1:1", nil), Config{MaxResponseBytes: -1}, true},
	} {
		_, err := New(tc.client, tc.cfg)
		if err == nil || !errors.Is(err, llm.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "genai: invalid configuration: ") {
			t.Errorf("%+v: %v, want an error matching llm.ErrInvalidConfig", tc.cfg, err)
		}
		if verr := tc.cfg.Validate(); (verr != nil) != tc.validate {
			t.Errorf("%+v: Validate says %v", tc.cfg, verr)
		}
	}
	if err := g.CheckResponseSchema([]byte(`{"type":"object"}`)); err != nil {
		t.Error(err)
	}
	if err := g.CheckResponseSchema([]byte(`[1]`)); err == nil {
		t.Error("a schema that is not an object was accepted")
	}
}

func TestCompleteSuccess(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, _ seen) {
		w.Header().Set("X-Goog-Request-Id", "greq-1")
		writeJSON(w, 200, okBody)
	})
	p := newProvider(t, geminiClient(t, s.URL, s.Client()), Config{})
	res, err := p.Complete(context.Background(), hello("gemini-2.5-flash"))
	if err != nil {
		t.Fatal(err)
	}
	want := llm.Response{Text: "Hi there", Model: "gemini-2.5-flash-001", ID: "resp-123", RequestID: "greq-1",
		FinishReason: "STOP", Finish: llm.FinishStop, Usage: llm.Usage{InputTokens: 7, OutputTokens: 5, CacheReadTokens: 4}}
	if res.Text != want.Text || res.Model != want.Model || res.ID != want.ID || res.RequestID != want.RequestID ||
		res.FinishReason != want.FinishReason || res.Finish != want.Finish || res.Usage != want.Usage || res.ToolCalls != nil {
		t.Errorf("got %+v\nwant %+v", *res, want)
	}
	r := s.only(t)
	if r.Method != "POST" || r.Path != "/v1beta/models/gemini-2.5-flash:generateContent" {
		t.Errorf("request %s %s", r.Method, r.Path)
	}
	if r.Header.Get("X-Goog-Api-Key") != testKey {
		t.Errorf("x-goog-api-key %q", r.Header.Get("X-Goog-Api-Key"))
	}
}

func TestVertexPath(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, _ seen) {
		if strings.Contains(r.URL.Path, "stream") {
			writeSSE(w, okBody)
			return
		}
		writeJSON(w, 200, okBody)
	})
	p := newProvider(t, vertexClient(t, s.URL, s.Client()), Config{})
	res, err := p.Complete(context.Background(), hello("gemini-2.5-pro"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "Hi there" {
		t.Errorf("text %q", res.Text)
	}
	if r := s.only(t); r.Path != "/v1/projects/p/locations/europe-west4/publishers/google/models/gemini-2.5-pro:generateContent" {
		t.Errorf("path %s", r.Path)
	}
	st, err := p.Stream(context.Background(), hello("gemini-2.5-pro"))
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if r := s.requests()[1]; r.Path != "/v1/projects/p/locations/europe-west4/publishers/google/models/gemini-2.5-pro:streamGenerateContent" || r.Query != "alt=sse" {
		t.Errorf("stream path %s?%s", r.Path, r.Query)
	}
}

// errorCases are the error replies every attempt must classify, in one
// request.
var errorCases = []struct {
	name   string
	status int
	body   string
	kind   llm.Kind
	typ    string
	retry  time.Duration
}{
	{"rate limited", 429, `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED",
	  "details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_requests"}]},
	  {"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"30s"}]}}`, llm.KindRateLimited, "RESOURCE_EXHAUSTED", 30 * time.Second},
	{"daily quota", 429, `{"error":{"code":429,"message":"You exceeded your current quota: requests per day","status":"RESOURCE_EXHAUSTED"}}`,
		llm.KindQuota, "RESOURCE_EXHAUSTED", 0},
	{"overloaded", 503, `{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}`,
		llm.KindOverloaded, "UNAVAILABLE", 0},
	{"server", 500, `{"error":{"code":500,"message":"An internal error has occurred.","status":"INTERNAL"}}`, llm.KindServer, "INTERNAL", 0},
	{"bad request", 400, `{"error":{"code":400,"message":"Invalid JSON payload received. Unknown name \"foo\"","status":"INVALID_ARGUMENT"}}`,
		llm.KindBadRequest, "INVALID_ARGUMENT", 0},
	{"context length", 400, `{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}`,
		llm.KindContextLength, "INVALID_ARGUMENT", 0},
	{"auth", 403, `{"error":{"code":403,"message":"Method doesn't allow unregistered callers. key ` + testKey + `","status":"PERMISSION_DENIED"}}`,
		llm.KindAuth, "PERMISSION_DENIED", 0},
	{"unauthenticated", 401, `{"error":{"code":401,"message":"Request had invalid authentication credentials.","status":"UNAUTHENTICATED"}}`,
		llm.KindAuth, "UNAUTHENTICATED", 0},
	{"not found", 404, `{"error":{"code":404,"message":"models/gemini-9 is not found for API version v1beta","status":"NOT_FOUND"}}`,
		llm.KindNotFound, "NOT_FOUND", 0},
	{"gateway page", 502, `<html><body>Bad Gateway</body></html>`, llm.KindServer, "", 0},
}

func TestErrorClassesOneRequest(t *testing.T) {
	quietLog(t)
	for _, backend := range []string{"gemini", "vertex"} {
		for _, tc := range errorCases {
			for _, streaming := range []bool{false, true} {
				name := backend + "/" + tc.name
				if streaming {
					name += "/stream"
				}
				t.Run(name, func(t *testing.T) {
					s := newServer(t, func(w http.ResponseWriter, r *http.Request, _ seen) {
						if strings.HasPrefix(tc.body, "<") {
							w.Header().Set("Content-Type", "text/html")
							w.WriteHeader(tc.status)
							w.Write([]byte(tc.body))
							return
						}
						writeJSON(w, tc.status, tc.body)
					})
					c, opts := geminiClient(t, s.URL, s.Client()), Config{}
					if backend == "vertex" {
						// The key travels in a transport the client does not see.
						c, opts = vertexClient(t, s.URL, s.Client()), Config{APIKey: testKey}
					}
					p := newProvider(t, c, opts)
					var err error
					if streaming {
						var st llm.Stream
						st, err = p.Stream(context.Background(), hello("gemini-2.5-flash"))
						if st != nil {
							st.Close()
							t.Fatal("Stream returned a stream for an error status")
						}
					} else {
						var res *llm.Response
						res, err = p.Complete(context.Background(), hello("gemini-2.5-flash"))
						if res != nil {
							t.Fatalf("Complete returned an answer: %+v", res)
						}
					}
					f := asError(t, err)
					if f.Kind != tc.kind || f.Status != tc.status || f.Type != tc.typ || f.RetryAfter != tc.retry || f.Provider != p.Name() {
						t.Errorf("got kind %v status %d type %q retry %v provider %q; want %v %d %q %v",
							f.Kind, f.Status, f.Type, f.RetryAfter, f.Provider, tc.kind, tc.status, tc.typ, tc.retry)
					}
					if f.Detail == "" {
						t.Error("the provider's message is not in Detail")
					}
					if n := len(s.requests()); n != 1 {
						t.Errorf("%d requests for one attempt; the SDK retried", n)
					}
				})
			}
		}
	}
}

func TestTransportErrorOneRequest(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, _ seen) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close() // the connection drops with no response
		}
	})
	p := newProvider(t, geminiClient(t, s.URL, s.Client()), Config{})
	_, err := p.Complete(context.Background(), hello("gemini-2.5-flash"))
	if f := asError(t, err); f.Kind != llm.KindConnection || f.Status != 0 {
		t.Errorf("kind %v status %d: %v", f.Kind, f.Status, f)
	}
	if n := len(s.requests()); n != 1 {
		t.Errorf("%d requests; the SDK retried a dropped connection", n)
	}
}

func TestCanceled(t *testing.T) {
	release := make(chan struct{})
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, _ seen) {
		suite.Hold(r, release)
	})
	defer close(release)
	p := newProvider(t, geminiClient(t, s.URL, s.Client()), Config{})

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := p.Complete(ctx, hello("gemini-2.5-flash"))
	if f := asError(t, err); f.Kind != llm.KindCanceled {
		t.Errorf("canceled before: kind %v", f.Kind)
	}
	if n := len(s.requests()); n != 0 {
		t.Errorf("%d requests sent with a canceled context", n)
	}

	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err = p.Complete(ctx, hello("gemini-2.5-flash"))
	if f := asError(t, err); f.Kind != llm.KindCanceled || !errors.Is(f, context.Canceled) {
		t.Errorf("canceled during: kind %v: %v", f.Kind, f)
	}

	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = p.Complete(ctx, hello("gemini-2.5-flash"))
	if f := asError(t, err); f.Kind != llm.KindTimeout {
		t.Errorf("deadline: kind %v: %v", f.Kind, f)
	}
	if n := len(s.requests()); n != 2 {
		t.Errorf("%d requests for two attempts", n)
	}
}

func TestContentFilter(t *testing.T) {
	cases := map[string]struct {
		body, typ string
	}{
		"candidate": {`{"candidates":[{"finishReason":"SAFETY","finishMessage":"unsafe","safetyRatings":[{"category":"HARM_CATEGORY_DANGEROUS_CONTENT","probability":"HIGH","blocked":true}]}],
			"usageMetadata":{"promptTokenCount":5},"modelVersion":"gemini-2.5-flash"}`, "SAFETY"},
		"prohibited": {`{"candidates":[{"content":{"role":"model","parts":[{"text":"partial"}]},"finishReason":"PROHIBITED_CONTENT"}]}`, "PROHIBITED_CONTENT"},
		"prompt":     {`{"promptFeedback":{"blockReason":"SAFETY","blockReasonMessage":"the prompt is unsafe"},"usageMetadata":{"promptTokenCount":5}}`, "SAFETY"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := newServer(t, func(w http.ResponseWriter, r *http.Request, _ seen) {
				if strings.Contains(r.URL.Path, "stream") {
					writeSSE(w, tc.body)
					return
				}
				writeJSON(w, 200, tc.body)
			})
			p := newProvider(t, geminiClient(t, s.URL, s.Client()), Config{})
			res, err := p.Complete(context.Background(), hello("gemini-2.5-flash"))
			if f := asError(t, err); res != nil || f.Kind != llm.KindContentFilter || f.Type != tc.typ {
				t.Errorf("Complete: %+v, kind %v type %q", res, f.Kind, f.Type)
			}
			st, err := p.Stream(context.Background(), hello("gemini-2.5-flash"))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			for {
				_, err = st.Next()
				if err != nil {
					break
				}
			}
			if f := asError(t, err); f.Kind != llm.KindContentFilter || f.Type != tc.typ {
				t.Errorf("Stream: kind %v type %q", f.Kind, f.Type)
			}
		})
	}
}

func TestNoCandidates(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, _ seen) { writeJSON(w, 200, `{"modelVersion":"x"}`) })
	p := newProvider(t, geminiClient(t, s.URL, s.Client()), Config{})
	_, err := p.Complete(context.Background(), hello("gemini-2.5-flash"))
	if f := asError(t, err); f.Kind != llm.KindServer {
		t.Errorf("kind %v", f.Kind)
	}
}

func TestMalformedBody(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, _ seen) {
		writeJSON(w, 200, `{"candidates": [{"content": "prompt text `+testKey+`"`)
	})
	p := newProvider(t, geminiClient(t, s.URL, s.Client()), Config{})
	_, err := p.Complete(context.Background(), hello("gemini-2.5-flash"))
	f := asError(t, err)
	if f.Kind != llm.KindServer || strings.Contains(f.Error(), "prompt text") || !strings.Contains(f.Detail, "prompt text") {
		t.Errorf("kind %v, Error %q, Detail %q", f.Kind, f.Error(), f.Detail)
	}
}

// panicTransport panics inside the SDK's call.
type panicTransport struct{}

func (panicTransport) RoundTrip(*http.Request) (*http.Response, error) {
	panic("transport exploded " + testKey)
}

func TestPanicRecovered(t *testing.T) {
	p := newProvider(t, geminiClient(t, "http://127.0.0.1:1", &http.Client{Transport: panicTransport{}}), Config{})
	res, err := p.Complete(context.Background(), hello("gemini-2.5-flash"))
	if f := asError(t, err); res != nil || f.Kind != llm.KindUnknown || !strings.Contains(f.Message, "panicked") ||
		!strings.Contains(f.Detail, "transport exploded") {
		t.Errorf("Complete: %+v %v (detail %q)", res, f, f.Detail)
	}
	st, err := p.Stream(context.Background(), hello("gemini-2.5-flash"))
	if f := asError(t, err); st != nil || f.Kind != llm.KindUnknown || !strings.Contains(f.Message, "panicked") {
		t.Errorf("Stream: %v %v", st, f)
	}
}

func TestRedactsExtraSecret(t *testing.T) {
	const other = "another-secret-0123456789"
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, _ seen) {
		writeJSON(w, 400, `{"error":{"code":400,"message":"bad key `+other+` and `+testKey+`","status":"INVALID_ARGUMENT"}}`)
	})
	p := newProvider(t, geminiClient(t, s.URL, s.Client()), Config{APIKey: other})
	_, err := p.Complete(context.Background(), hello("gemini-2.5-flash"))
	f := asError(t, err)
	if strings.Contains(f.Detail, other) || !strings.Contains(f.Detail, "[redacted]") {
		t.Errorf("detail %q", f.Detail)
	}
}

// TestClientSettingsDoNotLeak checks that the per-request options the
// adapter sets leave the client as it was: its own calls still retry.
func TestClientSettingsDoNotLeak(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, _ seen) {
		writeJSON(w, 503, `{"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}}`)
	})
	c := geminiClient(t, s.URL, s.Client())
	p := newProvider(t, c, Config{})
	if _, err := p.Complete(context.Background(), hello("gemini-2.5-flash")); err == nil {
		t.Fatal("no error")
	}
	_, _ = c.Models.GenerateContent(context.Background(), "gemini-2.5-flash", gg.Text("Hello"), nil)
	if n := len(s.requests()); n != 1+5 {
		t.Errorf("%d requests; want 1 from the adapter and 5 from the client's own retrying call", n)
	}
}
