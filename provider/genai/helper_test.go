package genai

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
	gg "google.golang.org/genai"

	"github.com/backstop-llm/backstop/llm"
)

// testKey is long enough to be redacted wherever it appears.
const testKey = "AIzaSyTEST-0123456789abcdefghij"

func TestMain(m *testing.M) {
	// The SDK reads these when a config leaves a field empty; a developer's
	// own settings must not leak into the tests.
	for _, v := range []string{"GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION",
		"GOOGLE_CLOUD_REGION", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_ENTERPRISE", "GOOGLE_GEMINI_BASE_URL", "GOOGLE_VERTEX_BASE_URL"} {
		os.Unsetenv(v)
	}
	// go.opencensus.io (pulled in by cloud.google.com/go/auth, which the
	// SDK imports) starts a worker in its package init that never exits:
	// not a goroutine any test starts.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}

// seen is one request the test server received.
type seen struct {
	Method, Path, Query string
	Header              http.Header
	Body                map[string]any
}

// server emulates the Gemini API and Vertex AI: every request is recorded,
// and answered by handle.
type server struct {
	*httptest.Server
	mu     sync.Mutex
	reqs   []seen
	handle func(w http.ResponseWriter, r *http.Request, s seen)
}

func newServer(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, s seen)) *server {
	t.Helper()
	s := &server{handle: handle}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rec := seen{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone()}
		if len(b) > 0 {
			if err := json.Unmarshal(b, &rec.Body); err != nil {
				t.Errorf("request body is not JSON: %v: %s", err, b)
			}
		}
		s.mu.Lock()
		s.reqs = append(s.reqs, rec)
		s.mu.Unlock()
		s.handle(w, r, rec)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) requests() []seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seen(nil), s.reqs...)
}

// last returns the only request, failing unless exactly one arrived.
func (s *server) only(t *testing.T) seen {
	t.Helper()
	r := s.requests()
	if len(r) != 1 {
		t.Fatalf("the server received %d requests, want exactly 1", len(r))
	}
	return r[0]
}

// retryEverything are retry options as aggressive as the SDK takes: the
// adapter must override them.
var retryEverything = &gg.HTTPRetryOptions{
	Attempts:        gg.Ptr[int32](5),
	InitialDelay:    gg.Ptr(0.001),
	MaxDelay:        gg.Ptr(0.001),
	HTTPStatusCodes: []int32{400, 403, 404, 408, 429, 500, 502, 503, 504},
}

// geminiClient is a Gemini API client pointed at url, built with retries on.
func geminiClient(t testing.TB, url string, hc *http.Client) *gg.Client {
	t.Helper()
	c, err := gg.NewClient(context.Background(), &gg.ClientConfig{
		Backend:     gg.BackendGeminiAPI,
		APIKey:      testKey,
		HTTPClient:  hc,
		HTTPOptions: gg.HTTPOptions{BaseURL: url, RetryOptions: retryEverything},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// vertexClient is a Vertex AI client (project p, location europe-west4,
// API version v1) pointed at url, built with retries on.
func vertexClient(t testing.TB, url string, hc *http.Client) *gg.Client {
	t.Helper()
	if hc == nil {
		hc = &http.Client{}
	}
	c, err := gg.NewClient(context.Background(), &gg.ClientConfig{
		Backend:     gg.BackendVertexAI,
		Project:     "p",
		Location:    "europe-west4",
		HTTPClient:  hc, // stands for an authenticating client: no ADC lookup
		HTTPOptions: gg.HTTPOptions{BaseURL: url, APIVersion: "v1", RetryOptions: retryEverything},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newProvider(t testing.TB, c *gg.Client, opts Config) *Provider {
	t.Helper()
	p, err := New(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// hello is a one-turn request.
func hello(model string) llm.Request {
	return llm.Request{Model: model, Messages: []llm.Message{{Role: llm.RoleUser, Content: "Hello"}}}
}

// writeJSON answers with status and the JSON body.
func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

// writeSSE answers 200 with one data event per body.
func writeSSE(w http.ResponseWriter, bodies ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	for _, b := range bodies {
		fmt.Fprintf(w, "data: %s\r\n\r\n", b)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
}

// okBody is a complete answer.
const okBody = `{
 "candidates": [{"content": {"role": "model", "parts": [{"text": "Hi "}, {"text": "there", "thought": false}, {"text": "(thinking)", "thought": true}]},
   "finishReason": "STOP", "index": 0}],
 "usageMetadata": {"promptTokenCount": 7, "cachedContentTokenCount": 4, "candidatesTokenCount": 3, "thoughtsTokenCount": 2, "totalTokenCount": 12},
 "modelVersion": "gemini-2.5-flash-001",
 "responseId": "resp-123"
}`

// get walks a decoded JSON body: keys for objects, ints for arrays.
func get(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, k := range path {
		switch k := k.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("at %v: %T is not an object", k, v)
			}
			v = m[k]
		case int:
			a, ok := v.([]any)
			if !ok || k >= len(a) {
				t.Fatalf("at [%d]: %v is not an array that long", k, v)
			}
			v = a[k]
		}
	}
	return v
}

// asError returns err as an *llm.Error, failing otherwise.
func asError(t *testing.T, err error) *llm.Error {
	t.Helper()
	f, ok := err.(*llm.Error)
	if !ok {
		t.Fatalf("error %T %v is not an *llm.Error", err, err)
	}
	if strings.Contains(f.Error(), testKey) || strings.Contains(f.Detail, testKey) || strings.Contains(f.Message, testKey) {
		t.Fatalf("the error quotes the API key: %q / %q", f.Error(), f.Detail)
	}
	return f
}
