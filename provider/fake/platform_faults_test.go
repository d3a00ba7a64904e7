package fake_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/provider/fake"
)

// platform builds a valid request for one of the cloud formats.
type platform struct {
	format fake.Format
	model  string
	ridKey string // the request id header ("" none)
	req    func(ctx context.Context, base string, stream bool) *http.Request
}

func newReq(ctx context.Context, url, body string, headers ...string) *http.Request {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		panic(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return req
}

var platforms = []platform{
	{fake.Bedrock, bedrockModel, "X-Amzn-Requestid", func(ctx context.Context, base string, stream bool) *http.Request {
		return newReq(ctx, bedrockURL(base, bedrockModel, stream), bedrockBody(), "Authorization", sigV4("us-east-1"), "X-Amz-Date", amzDate)
	}},
	{fake.Vertex, vertexModel, "Request-Id", func(ctx context.Context, base string, stream bool) *http.Request {
		m := "rawPredict"
		if stream {
			m = "streamRawPredict"
		}
		return newReq(ctx, vertexURL(base, vertexModel, m), vertexBody(stream), "Authorization", "Bearer t")
	}},
	{fake.Gemini, geminiModel, "", func(ctx context.Context, base string, stream bool) *http.Request {
		u := geminiURL(base, "generateContent")
		if stream {
			u = geminiURL(base, "streamGenerateContent") + "?alt=sse"
		}
		return newReq(ctx, u, geminiBody, "X-Goog-Api-Key", "k")
	}},
	{fake.VertexGemini, geminiModel, "", func(ctx context.Context, base string, stream bool) *http.Request {
		u := vertexGeminiURL(base, "generateContent")
		if stream {
			u = vertexGeminiURL(base, "streamGenerateContent") + "?alt=sse"
		}
		return newReq(ctx, u, geminiBody, "Authorization", "Bearer t")
	}},
	{fake.Azure, azureDeployment, "Apim-Request-Id", func(ctx context.Context, base string, stream bool) *http.Request {
		body := azureBody
		if stream {
			body = `{"stream":true,"messages":[{"role":"user","content":"hi"}]}`
		}
		return newReq(ctx, azureURL(base, "2024-10-21"), body, "Api-Key", "k")
	}},
}

func TestPlatformsFaults(t *testing.T) {
	for _, p := range platforms {
		t.Run(p.format.String(), func(t *testing.T) {
			s := fake.New()
			c := s.Client()
			s.Script(p.model, fake.Answer("ok").RequestID("rid-1"), fake.ConnReset(), fake.Hang())
			r := do(t, c, p.req(context.Background(), s.URL(), false))
			if r.status != 200 || (p.ridKey != "" && r.header.Get(p.ridKey) != "rid-1") {
				t.Errorf("answer %d %v", r.status, r.header)
			}
			if _, err := c.Do(p.req(context.Background(), s.URL(), false)); !errors.Is(err, syscall.ECONNRESET) {
				t.Errorf("ConnReset: %v", err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			if _, err := c.Do(p.req(ctx, s.URL(), false)); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Hang: %v", err)
			}
			if cs := s.Calls(p.model); len(cs) != 3 || cs[0].Format != p.format {
				t.Errorf("calls %d", len(cs))
			}
		})
	}
}

// Stream pacing and stalls run in virtual time in every format.
func TestPlatformsStreamTiming(t *testing.T) {
	for _, p := range platforms {
		t.Run(p.format.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := fake.New()
				c := s.Client()
				s.Script(p.model,
					fake.Answer("one two three").Every(time.Second).FirstChunkAfter(5*time.Second).After(time.Second),
					fake.Answer("one two").StallAfter(1))
				start := time.Now()
				resp, err := c.Do(p.req(context.Background(), s.URL(), true))
				if err != nil || resp.StatusCode != 200 {
					t.Fatalf("%v", err)
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || len(b) == 0 {
					t.Fatalf("%v %q", err, b)
				}
				if el := time.Since(start); el != 8*time.Second {
					t.Errorf("stream took %v, want 8s (After 1s + first chunk 5s + 2 x 1s)", el)
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				resp, err = c.Do(p.req(ctx, s.URL(), true))
				if err != nil {
					t.Fatal(err)
				}
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
				if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 8*time.Second+time.Minute {
					t.Errorf("stall: %v after %v", err, time.Since(start))
				}
			})
		})
	}
}
