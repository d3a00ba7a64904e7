package genai

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	gg "google.golang.org/genai"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/fake"
	"github.com/backstop-llm/backstop/provider/internal/suite"
)

// bearer adds an access token to every request, standing for the
// authenticating client a Vertex AI caller brings.
type bearer struct{ next http.RoundTripper }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer ya29.fake-token")
	return b.next.RoundTrip(r)
}

// TestFake drives both backends against provider/fake, which renders each
// outcome in the Gemini API's and Vertex AI's wire formats: one request per
// call despite the client's retries, classified alike.
func TestFake(t *testing.T) {
	platforms := []struct {
		name   string
		format fake.Format
		client func(t *testing.T, url string) *gg.Client
	}{
		{NameGemini, fake.Gemini, func(t *testing.T, url string) *gg.Client {
			return geminiClient(t, url, nil)
		}},
		{NameVertex, fake.VertexGemini, func(t *testing.T, url string) *gg.Client {
			return vertexClient(t, url, &http.Client{Transport: bearer{http.DefaultTransport}})
		}},
	}
	// In "rate limited" the fake sends both a Retry-After: 7 header and
	// RetryInfo (retryDelay "7s"); the SDK's APIError carries no headers,
	// so the delay is RetryInfo's. The fake's message is the Gemini API's
	// own for per-minute limits too ("You exceeded your current quota,
	// please check your plan and billing details."): with a RetryInfo it
	// is a rate limit, not a quota.
	outcomes := append(suite.FakeOutcomes(),
		// With RESOURCE_EXHAUSTED's generic message it is a rate limit.
		suite.FakeOutcome{Name: "rate limited, generic message", Outcome: fake.RateLimited("7").Message("Resource has been exhausted (e.g. check quota)."),
			Kind: llm.KindRateLimited, RetryAfter: 7 * time.Second})
	const model = "gemini-fake"
	for _, pl := range platforms {
		t.Run(pl.name, func(t *testing.T) {
			s := suite.StartFake(t)
			p := newProvider(t, pl.client(t, s.URL()), Config{})
			if p.Name() != pl.name {
				t.Fatalf("Name %q", p.Name())
			}

			// The cached content read (Gemini reports no writes: those
			// stay plain prompt tokens), from Complete and Stream; a
			// stream cut after its first chunk keeps the usage it sent.
			answer := fake.Answer("Hello from the fake.").Chunks("Hello", " from the fake.").Usage(12, 5).Cached(4).CacheWrite(3)
			usage := llm.Usage{InputTokens: 12, OutputTokens: 5, CacheReadTokens: 4}
			s.Script(model, answer, answer, answer.CutAfter(1))
			res, err := p.Complete(context.Background(), hello(model))
			if err != nil {
				t.Fatal(err)
			}
			if res.Text != "Hello from the fake." || res.Usage != usage ||
				res.Finish != llm.FinishStop || res.ID == "" {
				t.Errorf("answer %+v", res)
			}
			if c := s.Calls(model); len(c) != 1 || c[0].Format != pl.format {
				t.Fatalf("calls %+v; want one of format %v", c, pl.format)
			}
			st := suite.OpenStream(t, p, context.Background(), hello(model))
			if _, err := suite.ReadStream(st); err != io.EOF || st.Response().Usage != usage {
				t.Errorf("stream: %v, usage %+v; want %+v", err, st.Response().Usage, usage)
			}
			st = suite.OpenStream(t, p, context.Background(), hello(model))
			cut := llm.Usage{InputTokens: 12, CacheReadTokens: 4}
			if _, err := suite.ReadStream(st); llm.KindOf(err) != llm.KindConnection || st.Response().Usage != cut {
				t.Errorf("cut stream: %v, usage %+v; want %+v", err, st.Response().Usage, cut)
			}

			for _, o := range outcomes {
				s.Script(model, o.Outcome)
				n := s.Requests(model)
				res, err := p.Complete(context.Background(), hello(model))
				if res != nil {
					t.Errorf("%s: an answer %+v", o.Name, res)
				}
				if err == nil {
					t.Errorf("%s: no error", o.Name)
				} else if f := asError(t, err); f.Kind != o.Kind || f.Provider != pl.name || f.RetryAfter != o.RetryAfter {
					t.Errorf("%s: %v (kind %v, retry %v); want %v, retry %v", o.Name, err, f.Kind, f.RetryAfter, o.Kind, o.RetryAfter)
				}
				if got := s.Requests(model) - n; got != 1 {
					t.Errorf("%s: %d requests; want 1", o.Name, got)
				}
			}

			s.Script(model, fake.Answer("a b c").ErrorAfter(1))
			n := s.Requests(model)
			st, err = p.Stream(context.Background(), hello(model))
			if err != nil {
				t.Fatal(err)
			}
			cs, err := drain(t, st)
			if len(cs) != 1 || cs[0].Text != "a" || st.Response().Text != "a" { // pieces are "a", " b", " c"
				t.Errorf("chunks before the error %+v; want the first alone", cs)
			}
			if err == io.EOF || llm.KindOf(err) == llm.KindUnknown {
				t.Errorf("mid-stream error: %v", err)
			} else if f := asError(t, err); f.Kind != llm.KindOverloaded || f.Type != "UNAVAILABLE" {
				t.Errorf("mid-stream error: kind %v type %q", f.Kind, f.Type)
			}
			st.Close()
			if got := s.Requests(model) - n; got != 1 {
				t.Errorf("stream: %d requests; want 1", got)
			}
		})
	}
}

// TestFakeTools runs a tool round trip against provider/fake on both
// backends: the call comes back as a ToolCall, and its result goes out as a
// functionResponse the fake records.
func TestFakeTools(t *testing.T) {
	for _, vertex := range []bool{false, true} {
		name := NameGemini
		if vertex {
			name = NameVertex
		}
		t.Run(name, func(t *testing.T) {
			s := suite.StartFake(t)
			c := geminiClient(t, s.URL(), nil)
			if vertex {
				c = vertexClient(t, s.URL(), &http.Client{Transport: bearer{http.DefaultTransport}})
			}
			p := newProvider(t, c, Config{})
			const model = "gemini-fake-tools"
			s.Script(model,
				fake.CallTools(fake.ToolCall{Name: "get_weather", Arguments: `{"city":"Paris"}`}),
				fake.Answer("It is sunny in Paris."))

			req := hello(model)
			req.Tools = []llm.Tool{{Name: "get_weather", Description: "The weather in a city."}}
			res, err := p.Complete(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.ToolCalls) != 1 || res.Finish != llm.FinishToolUse {
				t.Fatalf("answer %+v", res)
			}
			tc := res.ToolCalls[0]
			if tc.ID != "call_0" || tc.Name != "get_weather" || string(tc.Arguments) != `{"city":"Paris"}` {
				t.Errorf("call %+v", tc)
			}

			req.Messages = append(req.Messages,
				llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{{ToolCall: &tc}}},
				llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.ToolResultPart(tc.ID, "sunny, 21°C", false)}})
			if err := req.Validate(); err != nil {
				t.Fatal(err)
			}
			res, err = p.Complete(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if res.Text != "It is sunny in Paris." || len(res.ToolCalls) != 0 || res.Finish != llm.FinishStop {
				t.Errorf("second answer %+v", res)
			}
			calls := s.Calls(model)
			if len(calls) != 2 {
				t.Fatalf("%d calls; want 2", len(calls))
			}
			if len(calls[0].Tools) != 1 || calls[0].Tools[0] != "get_weather" {
				t.Errorf("declared tools %v", calls[0].Tools)
			}
			want := fake.ToolResult{ID: "call_0", Content: `{"output":"sunny, 21°C"}`}
			if r := calls[1].ToolResults; len(r) != 1 || r[0] != want {
				t.Errorf("tool results %+v; want %+v", r, want)
			}
		})
	}
}
