package sdktest

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/bedrock"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/vertex"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/azure"
	oaopt "github.com/openai/openai-go/v3/option"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
	"google.golang.org/genai"

	"github.com/backstop-llm/backstop/provider/fake"
	"github.com/backstop-llm/backstop/provider/internal/suite"
)

// The cloud platforms' SDK clients, driven in-process: the fake's Transport
// serves every request whatever its host.

// bearer adds an OAuth token to every request, as Google's auth transport
// would, for clients given their own *http.Client.
type bearer struct{ base http.RoundTripper }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer ya29.test")
	return b.base.RoundTrip(r)
}

// hi is a short message to model m.
func hi(m string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{Model: m, MaxTokens: 64, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}
}

// wantMessage sends hi to model m on c and fails t unless the answer is
// text, with every required field.
func wantMessage(t *testing.T, c anthropic.Client, m, text string) {
	t.Helper()
	msg, err := c.Messages.New(context.Background(), hi(m))
	if err != nil || msg.Content[0].Text != text {
		t.Fatalf("%v %+v", err, msg)
	}
	checkRequired(t, "Message", msg)
}

// wantStatus sends hi to model m on c and fails t unless the SDK returns an
// API error with status code.
func wantStatus(t *testing.T, c anthropic.Client, m string, code int) {
	t.Helper()
	_, err := c.Messages.New(context.Background(), hi(m))
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != code {
		t.Fatalf("%d: %v", code, err)
	}
	t.Logf("%d: %v", code, err)
}

func TestBedrockSDK(t *testing.T) {
	s := fake.New()
	s.Region("eu-west-1")
	const m = "eu.anthropic.claude-sonnet-4-5-20250929-v1:0"
	s.Script(m, fake.Answer("hello bedrock"), fake.Answer("streamed hello there").ToolCalls(fake.ToolCall{Name: "f", Arguments: `{"a":1}`}),
		fake.Answer("a b c").ErrorAfter(1).Type("throttlingException").Message("slow"), fake.RateLimited("2"))
	cfg := aws.Config{Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "SECRET", "")}
	c := anthropic.NewClient(bedrock.WithConfig(cfg), option.WithBaseURL(s.URL()), option.WithHTTPClient(s.Client()), option.WithMaxRetries(0))
	ctx := context.Background()
	wantMessage(t, c, m, "hello bedrock")
	acc, _ := readAnthropicStream(t, c.Messages.NewStreaming(ctx, hi(m)))
	if acc.Content[0].Text != "streamed hello there" || acc.Content[1].Name != "f" || string(acc.StopReason) != "tool_use" {
		t.Fatalf("%+v", acc)
	}
	st := c.Messages.NewStreaming(ctx, hi(m))
	for st.Next() {
	}
	if st.Err() == nil || !strings.Contains(st.Err().Error(), "throttlingException") {
		t.Fatalf("stream error: %v", st.Err())
	}
	t.Logf("stream error: %v", st.Err())
	wantStatus(t, c, m, 429)
	// the wrong region is refused
	c2 := anthropic.NewClient(bedrock.WithConfig(aws.Config{Region: "us-east-1", Credentials: cfg.Credentials}), option.WithBaseURL(s.URL()),
		option.WithHTTPClient(s.Client()), option.WithMaxRetries(0))
	wantStatus(t, c2, m, 403)
}

func TestVertexSDK(t *testing.T) {
	s := fake.New()
	const m = "claude-sonnet-4-5@20250929"
	s.Script(m, fake.Answer("hello vertex"), fake.Answer("streamed vertex"), fake.RateLimited("30"))
	creds := &google.Credentials{ProjectID: "proj", TokenSource: oauth2.StaticTokenSource(&oauth2.Token{AccessToken: "ya29.t"})}
	ctx := context.Background()
	// The HTTP client comes first, so that WithCredentials wraps it with the token.
	c := anthropic.NewClient(option.WithHTTPClient(s.Client()), vertex.WithCredentials(ctx, "us-east5", "proj", creds),
		option.WithBaseURL(s.URL()), option.WithMaxRetries(0))
	wantMessage(t, c, m, "hello vertex")
	acc, _ := readAnthropicStream(t, c.Messages.NewStreaming(ctx, hi(m)))
	if acc.Content[0].Text != "streamed vertex" {
		t.Fatalf("%+v", acc)
	}
	wantStatus(t, c, m, 429)
	if cs := s.Calls(m); len(cs) != 3 || cs[0].Format != fake.Vertex {
		t.Fatalf("calls %d", len(cs))
	}
}

func TestGeminiSDK(t *testing.T) {
	for _, vx := range []bool{false, true} {
		s := fake.New()
		const m = "gemini-2.5-flash"
		s.Script(m, fake.Answer("hello gemini"), fake.Answer("streamed gemini text"),
			fake.CallTools(fake.ToolCall{Name: "get_weather", Arguments: `{"city":"Paris"}`}), fake.RateLimited("30"),
			fake.Answer("a b c").ErrorAfter(1))
		ctx := context.Background()
		cfg := &genai.ClientConfig{APIKey: "AIza-k", Backend: genai.BackendGeminiAPI, HTTPOptions: genai.HTTPOptions{BaseURL: s.URL()}, HTTPClient: s.Client()}
		if vx {
			cfg = &genai.ClientConfig{Backend: genai.BackendVertexAI, Project: "p", Location: "us-central1",
				HTTPOptions: genai.HTTPOptions{BaseURL: s.URL()}, HTTPClient: &http.Client{Transport: bearer{s.Transport()}}}
		}
		c, err := genai.NewClient(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		r, err := c.Models.GenerateContent(ctx, m, genai.Text("hi"), &genai.GenerateContentConfig{MaxOutputTokens: 64, SystemInstruction: genai.NewContentFromText("be brief", genai.RoleUser)})
		if err != nil || r.Text() != "hello gemini" || r.UsageMetadata.TotalTokenCount == 0 {
			t.Fatalf("vertex=%v %v %+v", vx, err, r)
		}
		var sb strings.Builder
		for chunk, err := range c.Models.GenerateContentStream(ctx, m, genai.Text("hi"), nil) {
			if err != nil {
				t.Fatal(err)
			}
			sb.WriteString(chunk.Text())
		}
		if sb.String() != "streamed gemini text" {
			t.Fatalf("stream %q", sb.String())
		}
		r, err = c.Models.GenerateContent(ctx, m, genai.Text("hi"), &genai.GenerateContentConfig{Tools: []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{{Name: "get_weather"}}}}})
		if err != nil || len(r.FunctionCalls()) != 1 || r.FunctionCalls()[0].Args["city"] != "Paris" {
			t.Fatalf("tools %v %+v", err, r)
		}
		_, err = c.Models.GenerateContent(ctx, m, genai.Text("hi"), nil)
		var ae genai.APIError
		if !errors.As(err, &ae) || ae.Code != 429 || ae.Status != "RESOURCE_EXHAUSTED" || ae.Details[0]["retryDelay"] != "30s" {
			t.Fatalf("429 %v", err)
		}
		var serr error
		for _, err := range c.Models.GenerateContentStream(ctx, m, genai.Text("hi"), nil) {
			if err != nil {
				serr = err
				break
			}
		}
		if !errors.As(serr, &ae) || ae.Code != 503 {
			t.Fatalf("stream error %v", serr)
		}
		want := fake.Gemini
		if vx {
			want = fake.VertexGemini
		}
		if cs := s.Calls(m); len(cs) != 5 || cs[0].Format != want || cs[2].Tools[0] != "get_weather" {
			t.Fatalf("calls %+v", cs)
		}
	}
}

func TestAzureSDK(t *testing.T) {
	s := suite.StartFake(t) // the SDK sends a key over HTTP to loopback only, on a transport of its own
	const d = "my-gpt"
	s.Script(d, fake.Answer("hello azure"), fake.Answer("streamed azure"), fake.RateLimited("3"))
	c := openai.NewClient(azure.WithEndpoint(s.URL(), "2024-10-21"), azure.WithAPIKey("k"), azure.WithUnsafeAllowHTTP(),
		oaopt.WithHTTPClient(loopbackClient(t)), oaopt.WithMaxRetries(0))
	ctx := context.Background()
	p := openai.ChatCompletionNewParams{Model: d, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
	r, err := c.Chat.Completions.New(ctx, p)
	if err != nil || r.Choices[0].Message.Content != "hello azure" {
		t.Fatalf("%v %+v", err, r)
	}
	st := c.Chat.Completions.NewStreaming(ctx, p)
	var sb strings.Builder
	for st.Next() {
		if len(st.Current().Choices) > 0 {
			sb.WriteString(st.Current().Choices[0].Delta.Content)
		}
	}
	if st.Err() != nil || sb.String() != "streamed azure" {
		t.Fatalf("%v %q", st.Err(), sb.String())
	}
	_, err = c.Chat.Completions.New(ctx, p)
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 429 {
		t.Fatalf("429 %v", err)
	}
	t.Logf("429: %v", err)
	if cs := s.Calls(d); len(cs) != 3 || cs[0].Format != fake.Azure {
		t.Fatalf("calls %+v", cs)
	}
}
