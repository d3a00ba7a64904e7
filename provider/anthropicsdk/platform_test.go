package anthropicsdk

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/bedrock"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/vertex"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/suite"
)

const bedrockModel = "eu.anthropic.claude-test-v1:0"

// bedrockProvider returns a provider over a Bedrock client with static
// credentials, sending to url instead of bedrock-runtime.eu-west-1.
func bedrockProvider(t *testing.T, url string) *Provider {
	t.Helper()
	t.Setenv("AWS_BEARER_TOKEN_BEDROCK", "")
	cfg := aws.Config{Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret-access-key-0123456789", "session-token-0123456789abcdef")}
	client := anthropic.NewClient(bedrock.WithConfig(cfg), option.WithBaseURL(url), option.WithMaxRetries(5))
	p, err := New(client, Config{Platform: PlatformBedrock, Region: "eu-west-1", HTTPClient: httpClient(t)})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// chunk is one Bedrock event-stream frame carrying an Anthropic event.
func chunk(t *testing.T, data string) []byte {
	t.Helper()
	payload, _ := json.Marshal(map[string]string{"bytes": base64.StdEncoding.EncodeToString([]byte(data))})
	var hs eventstream.Headers
	hs.Set(":message-type", eventstream.StringValue("event"))
	hs.Set(":event-type", eventstream.StringValue("chunk"))
	hs.Set(":content-type", eventstream.StringValue("application/json"))
	var b bytes.Buffer
	if err := eventstream.NewEncoder().Encode(&b, eventstream.Message{Headers: hs, Payload: payload}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// exception is a Bedrock event-stream exception frame.
func exception(t *testing.T, name, msg string) []byte {
	t.Helper()
	var hs eventstream.Headers
	hs.Set(":message-type", eventstream.StringValue("exception"))
	hs.Set(":exception-type", eventstream.StringValue(name))
	var b bytes.Buffer
	payload, _ := json.Marshal(map[string]string{"message": msg})
	if err := eventstream.NewEncoder().Encode(&b, eventstream.Message{Headers: hs, Payload: payload}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// sseData returns the data of each event of an SSE text.
func sseData(events ...string) []string {
	var out []string
	for _, e := range events {
		for _, ev := range strings.Split(e, "\n\n") {
			for _, line := range strings.Split(ev, "\n") {
				if d, ok := strings.CutPrefix(line, "data: "); ok {
					out = append(out, d)
				}
			}
		}
	}
	return out
}

func TestBedrock(t *testing.T) {
	var streamException string
	var s *suite.Server
	s = suite.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Amzn-Requestid", "amzn-req-1")
		switch r.URL.Path {
		case "/model/" + bedrockModel + "/invoke":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, okBody)
		case "/model/" + bedrockModel + "/invoke-with-response-stream":
			w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
			for _, d := range sseData(evStart, evText0, delta(1, "Hello"), evTool, evStop) {
				w.Write(chunk(t, d))
			}
		case "/model/throttled/invoke":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Amzn-Errortype", "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/")
			w.WriteHeader(429)
			io.WriteString(w, `{"message":"Too many requests, please wait before trying again."}`)
		case "/model/cut/invoke-with-response-stream":
			w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
			for _, d := range sseData(evStart, evText0, delta(1, "Hel")) {
				w.Write(chunk(t, d))
			}
			w.Write(exception(t, streamException, "The model stream failed"))
		default:
			w.WriteHeader(404)
		}
	})
	p := bedrockProvider(t, s.URL)
	if p.Name() != "aws.bedrock" || p.Deployment() != (llm.Deployment{Platform: "bedrock", Region: "eu-west-1"}) {
		t.Errorf("%q %+v", p.Name(), p.Deployment())
	}
	req := userReq
	req.Model = bedrockModel
	res, err := p.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "Hello, world" || res.RequestID != "amzn-req-1" || res.Usage.InputTokens != 20 {
		t.Errorf("%+v", res)
	}
	r := s.Last()
	var body map[string]any
	json.Unmarshal(r.Body, &body)
	if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential=AKIDTEST/") || !strings.Contains(r.Header.Get("Authorization"), "/eu-west-1/bedrock/aws4_request") ||
		body["model"] != nil || body["anthropic_version"] == nil || body["max_tokens"] != float64(1024) || s.Count.Load() != 1 {
		t.Errorf("request %s %v %s", r.Path, r.Header, r.Body)
	}

	// The event stream, translated by the SDK's Bedrock middleware.
	st := suite.OpenStream(t, p, context.Background(), req)
	got, err := readChunks(st)
	if err != io.EOF || len(got) != 2 || got[0].Text != "Hello" || got[1].ToolCall == nil || got[1].ToolCall.Name != "get_weather" {
		t.Fatalf("%+v %v", got, err)
	}
	if sr := st.Response(); sr.Text != "Hello" || sr.ID != "msg_01" || sr.Finish != llm.FinishStop || sr.RequestID != "amzn-req-1" {
		t.Errorf("%+v", sr)
	}

	// Bedrock's own errors, in its own shape, before and in a stream.
	req.Model = "throttled"
	s.Count.Store(0)
	e := suite.CompleteErr(t, p, context.Background(), req, testKey)
	if e.Kind != llm.KindRateLimited || e.Status != 429 || e.RequestID != "amzn-req-1" || !strings.HasPrefix(e.Type, "ThrottlingException") || s.Count.Load() != 1 {
		t.Errorf("%#v (%d requests)", e, s.Count.Load())
	}
	for _, tc := range []struct {
		exception string
		kind      llm.Kind
	}{
		{"modelStreamErrorException", llm.KindServer},
		{"throttlingException", llm.KindRateLimited},
		{"serviceUnavailableException", llm.KindOverloaded},
		{"validationException", llm.KindBadRequest},
	} {
		streamException = tc.exception
		req.Model = "cut"
		st = suite.OpenStream(t, p, context.Background(), req)
		e = suite.StreamFails(t, st, "aws.bedrock", "secret-access-key-0123456789", "Hel")
		if e.Kind != tc.kind || e.Type != tc.exception || e.Status != 200 || e.RequestID != "amzn-req-1" {
			t.Errorf("%s: %#v", tc.exception, e)
		}
	}
}

// vertexProvider returns a provider over a Vertex client with a static
// token, sending to url instead of europe-west4-aiplatform.
func vertexProvider(t *testing.T, url string) *Provider {
	t.Helper()
	creds := &google.Credentials{TokenSource: oauth2.StaticTokenSource(&oauth2.Token{AccessToken: "ya29.vertex-token-0123456789", TokenType: "Bearer"})}
	client := anthropic.NewClient(vertex.WithCredentials(context.Background(), "europe-west4", "my-project", creds),
		option.WithBaseURL(url), option.WithMaxRetries(5))
	p, err := New(client, Config{Platform: PlatformVertex, Region: "europe-west4", HTTPClient: httpClient(t)})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestVertex(t *testing.T) {
	const path = "/v1/projects/my-project/locations/europe-west4/publishers/anthropic/models/"
	s := suite.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Request-Id", "req_vertex")
		switch r.URL.Path {
		case path + "claude-test@20260101:rawPredict":
			io.WriteString(w, okBody)
		case path + "claude-test@20260101:streamRawPredict":
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, evStart+evText0+delta(1, "Hi")+evStop)
		case path + "quota:rawPredict":
			w.WriteHeader(429)
			io.WriteString(w, `{"error":{"code":429,"message":"Quota exceeded for aiplatform.googleapis.com/online_prediction_requests_per_base_model.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"30s"}]}}`)
		case path + "denied:rawPredict":
			w.WriteHeader(403)
			io.WriteString(w, `{"error":{"code":403,"message":"Permission denied for token ya29.vertex-token-0123456789","status":"PERMISSION_DENIED"}}`)
		case path + "overloaded:rawPredict":
			w.WriteHeader(529)
			io.WriteString(w, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
		default:
			w.WriteHeader(404)
		}
	})
	p := vertexProvider(t, s.URL)
	if p.Name() != "gcp.vertex_ai" || p.Deployment() != (llm.Deployment{Platform: "vertex", Region: "europe-west4"}) {
		t.Errorf("%q %+v", p.Name(), p.Deployment())
	}
	req := userReq
	req.Model = "claude-test@20260101"
	res, err := p.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "Hello, world" || res.RequestID != "req_vertex" {
		t.Errorf("%+v", res)
	}
	r := s.Last()
	var body map[string]any
	json.Unmarshal(r.Body, &body)
	if r.Header.Get("Authorization") != "Bearer ya29.vertex-token-0123456789" || body["model"] != nil || body["anthropic_version"] == nil || s.Count.Load() != 1 {
		t.Errorf("request %s %v %s", r.Path, r.Header, r.Body)
	}
	st := suite.OpenStream(t, p, context.Background(), req)
	if got, err := suite.ReadStream(st); err != io.EOF || !reflect.DeepEqual(got, []string{"Hi"}) {
		t.Errorf("%q %v", got, err)
	}

	for _, tc := range []struct {
		model string
		kind  llm.Kind
		typ   string
	}{
		{"quota", llm.KindRateLimited, "RESOURCE_EXHAUSTED"},
		{"denied", llm.KindAuth, "PERMISSION_DENIED"},
		{"overloaded", llm.KindOverloaded, "overloaded_error"},
	} {
		req.Model = tc.model
		s.Count.Store(0)
		e := suite.CompleteErr(t, p, context.Background(), req, "ya29.vertex-token-0123456789")
		if e.Kind != tc.kind || e.Type != tc.typ || s.Count.Load() != 1 || strings.Contains(e.Detail, "ya29.vertex-token") {
			t.Errorf("%s: %#v (%d requests)", tc.model, e, s.Count.Load())
		}
		if tc.model == "quota" && e.RetryAfter.Seconds() != 30 {
			t.Errorf("RetryInfo not read: %v", e.RetryAfter)
		}
	}
}

// TestPanicRecovered: a panic in the client's middleware (or the SDK)
// comes back as an *llm.Error, from Complete, Stream and Next.
func TestPanicRecovered(t *testing.T) {
	s := suite.NewServer(t, suite.SSE([]string{evStart, evText0, delta(1, "Hi"), evStop}))
	boom := option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		panic("boom " + r.Header.Get("Authorization"))
	})
	// The client's middleware panics before the request reaches the
	// provider's, which learns the key from it: Config.APIKey names it.
	p, err := New(newClient(t, s.URL, boom), Config{APIKey: testKey, HTTPClient: httpClient(t)})
	if err != nil {
		t.Fatal(err)
	}
	e := suite.CompleteErr(t, p, context.Background(), userReq, testKey)
	if e.Kind != llm.KindUnknown || !strings.Contains(e.Message, "panicked") || e.Detail != "boom Bearer [redacted]" {
		t.Errorf("%#v", e)
	}
	if _, err := p.Stream(context.Background(), userReq); llm.KindOf(err) != llm.KindUnknown || !strings.Contains(err.Error(), "panicked") {
		t.Errorf("Stream: %v", err)
	}
	// A body whose reads panic, under Next.
	mid := option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		res, err := next(r)
		if err == nil {
			res.Body = panicky{res.Body}
		}
		return res, err
	})
	st := suite.OpenStream(t, newProvider(t, s.URL, mid), context.Background(), userReq)
	if _, err := st.Next(); llm.KindOf(err) != llm.KindUnknown || !strings.Contains(err.Error(), "panicked") {
		t.Errorf("Next: %v", err)
	}
	if n := s.Count.Load(); n != 1 {
		t.Errorf("%d requests reached the server; want 1 (the stream)", n)
	}
}

type panicky struct{ io.ReadCloser }

func (panicky) Read([]byte) (int, error) { panic("read panicked") }

func TestNew(t *testing.T) {
	c := newClient(t, "http://127.0.0.1:1")
	for _, tc := range []struct {
		client anthropic.Client
		opts   Config
		ok     bool
		name   string
	}{
		{c, Config{}, true, "anthropic"},
		{c, Config{Name: "claude-eu"}, true, "claude-eu"},
		{c, Config{Platform: "bedrock"}, false, ""},
		{c, Config{Platform: "vertex", Region: "global"}, true, "gcp.vertex_ai"},
		{c, Config{Platform: "azure"}, false, ""},
		{c, Config{MaxResponseBytes: -1}, false, ""},
		{anthropic.Client{}, Config{}, false, ""},
	} {
		p, err := New(tc.client, tc.opts)
		if (err == nil) != tc.ok || err == nil && p.Name() != tc.name {
			t.Errorf("%+v: %v", tc.opts, err)
		}
		if err != nil && (!strings.HasPrefix(err.Error(), "anthropicsdk: invalid configuration: ") || !errors.Is(err, llm.ErrInvalidConfig)) {
			t.Errorf("error %q does not match llm.ErrInvalidConfig under the package's head", err)
		}
		if verr := tc.opts.Validate(); tc.client.Options != nil && (verr == nil) != tc.ok {
			t.Errorf("%+v: Validate says %v, New %v", tc.opts, verr, err)
		}
	}
	p, _ := New(c, Config{})
	if p.Capabilities() != llm.CapAll || p.CheckResponseSchema([]byte(`{"type":"object","minimum":1}`)) == nil || p.CheckResponseSchema([]byte(`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false}`)) != nil || p.Deployment() != (llm.Deployment{Platform: "anthropic"}) {
		t.Error("capabilities, schema or deployment")
	}
}
