package sdktest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/backstop-llm/backstop/provider/fake"
	"github.com/backstop-llm/backstop/provider/internal/suite"
)

const claude = "claude-sonnet-5-5"

// loopbackClient is an HTTP client of its own for an SDK that reaches a
// started fake over loopback; its idle connections close when the test ends.
func loopbackClient(t *testing.T) *http.Client {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// unstreamedAndStreamed runs f as two subtests: unstreamed, then streamed.
func unstreamedAndStreamed(t *testing.T, f func(t *testing.T, streamed bool)) {
	for _, streamed := range []bool{false, true} {
		name := "unstreamed"
		if streamed {
			name = "streamed"
		}
		t.Run(name, func(t *testing.T) { f(t, streamed) })
	}
}

// sdkStream is an SDK's stream of server-sent events.
type sdkStream[T any] interface {
	Next() bool
	Current() T
	Err() error
	Close() error
}

// readStream reads stream to its end, handing each event to f; an error
// from f or from the stream fails t.
func readStream[T any](t *testing.T, stream sdkStream[T], f func(T) error) {
	t.Helper()
	defer stream.Close()
	for stream.Next() {
		if err := f(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
}

func anthropicClient(t *testing.T, s *fake.Server) anthropic.Client {
	t.Helper()
	return anthropic.NewClient(
		option.WithAPIKey("sk-ant-test"),
		option.WithBaseURL(s.URL()),
		option.WithHTTPClient(loopbackClient(t)),
		option.WithMaxRetries(0),
	)
}

// readAnthropicStream reads stream to its end, checking every event's
// required fields, and returns the message the events accumulate to and how
// many content_block_delta events there were.
func readAnthropicStream(t *testing.T, stream sdkStream[anthropic.MessageStreamEventUnion]) (msg anthropic.Message, deltas int) {
	t.Helper()
	readStream(t, stream, func(ev anthropic.MessageStreamEventUnion) error {
		checkRequired(t, "event:"+ev.Type, ev.AsAny())
		if ev.Type == "content_block_delta" {
			deltas++
		}
		return msg.Accumulate(ev)
	})
	return msg, deltas
}

func userText(text string) []anthropic.MessageParam {
	return []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(text))}
}

func TestAnthropicMessage(t *testing.T) {
	s := suite.StartFake(t)
	s.Script(claude, fake.Answer("Hello from the fake.").Usage(12, 5).Cached(3)) // input_tokens 9: 12 less the 3 read from the cache
	client := anthropicClient(t, s)
	var resp *http.Response
	msg, err := client.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model: claude, MaxTokens: 1024, Messages: userText("Hi"),
		System: []anthropic.TextBlockParam{{Text: "Be brief."}},
	}, option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	checkRequired(t, "Message", msg)
	if len(msg.Content) != 1 || msg.Content[0].AsText().Text != "Hello from the fake." {
		t.Errorf("content %+v", msg.Content)
	}
	if msg.StopReason != anthropic.StopReasonEndTurn || msg.Model != claude || msg.ID != "msg_fake_1" {
		t.Errorf("stop %q model %q id %q", msg.StopReason, msg.Model, msg.ID)
	}
	if u := msg.Usage; u.InputTokens != 9 || u.OutputTokens != 5 || u.CacheReadInputTokens != 3 || u.ServiceTier != "standard" {
		t.Errorf("usage %+v", u)
	}
	if !msg.JSON.StopSequence.Valid() && msg.JSON.StopSequence.Raw() != "null" {
		t.Errorf("stop_sequence %q", msg.JSON.StopSequence.Raw())
	}
	// What the SDK sent, as the fake recorded it.
	c := s.Calls(claude)[0]
	if got := c.Header.Get("Authorization"); got != "Bearer [redacted]" {
		t.Errorf("Authorization recorded as %q", got)
	}
	if got := c.Header.Get("Anthropic-Version"); got == "" {
		t.Error("no anthropic-version")
	}
	checkAnthropicRateLimits(t, resp)
}

func checkAnthropicRateLimits(t *testing.T, resp *http.Response) {
	t.Helper()
	if resp == nil {
		t.Fatal("WithResponseInto gave no response")
	}
	if got := resp.Header.Get("request-id"); got == "" {
		t.Error("no request-id")
	}
	for _, kind := range []string{"requests", "tokens", "input-tokens", "output-tokens"} {
		p := "anthropic-ratelimit-" + kind + "-"
		if resp.Header.Get(p+"limit") == "" || resp.Header.Get(p+"remaining") == "" {
			t.Errorf("no %slimit/remaining: %v", p, resp.Header)
		}
		if _, err := time.Parse(time.RFC3339, resp.Header.Get(p+"reset")); err != nil {
			t.Errorf("%sreset: %v", p, err)
		}
	}
}

func TestAnthropicStream(t *testing.T) {
	s := suite.StartFake(t)
	s.Script(claude, fake.Answer("Streaming is fun, isn't it?"))
	client := anthropicClient(t, s)
	msg, deltas := readAnthropicStream(t, client.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{
		Model: claude, MaxTokens: 1024, Messages: userText("Hi"),
	}))
	if len(msg.Content) != 1 || msg.Content[0].Text != "Streaming is fun, isn't it?" || deltas < 2 {
		t.Errorf("accumulated %+v from %d deltas", msg.Content, deltas)
	}
	if msg.StopReason != anthropic.StopReasonEndTurn || msg.Usage.OutputTokens == 0 {
		t.Errorf("stop %q usage %+v", msg.StopReason, msg.Usage)
	}
}

var weatherTool = []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
	Name:        "get_weather",
	Description: anthropic.String("The weather in a city."),
	InputSchema: anthropic.ToolInputSchemaParam{
		Properties: map[string]any{"city": map[string]any{"type": "string"}},
		Required:   []string{"city"},
	},
}}}

func TestAnthropicToolRoundTrip(t *testing.T) {
	unstreamedAndStreamed(t, func(t *testing.T, streamed bool) {
		s := suite.StartFake(t)
		s.Script(claude,
			fake.Answer("Let me check.").ToolCalls(fake.ToolCall{Name: "get_weather", Arguments: `{"city":"Paris"}`}),
			fake.Answer("It is sunny in Paris."))
		client := anthropicClient(t, s)
		params := anthropic.MessageNewParams{Model: claude, MaxTokens: 1024, Messages: userText("Weather in Paris?"), Tools: weatherTool}
		var msg anthropic.Message
		if streamed {
			msg, _ = readAnthropicStream(t, client.Messages.NewStreaming(context.Background(), params))
		} else {
			m, err := client.Messages.New(context.Background(), params)
			if err != nil {
				t.Fatal(err)
			}
			checkRequired(t, "Message", m)
			msg = *m
		}
		if msg.StopReason != anthropic.StopReasonToolUse || len(msg.Content) != 2 {
			t.Fatalf("stop %q content %+v", msg.StopReason, msg.Content)
		}
		use, ok := msg.Content[1].AsAny().(anthropic.ToolUseBlock)
		if !ok {
			t.Fatalf("content[1] is %T", msg.Content[1].AsAny())
		}
		var in struct{ City string }
		if err := json.Unmarshal(use.Input, &in); err != nil || in.City != "Paris" || use.Name != "get_weather" || use.ID != "toolu_fake_1_0" {
			t.Errorf("tool use %+v (%s): %v", use, use.Input, err)
		}

		params.Messages = append(params.Messages, msg.ToParam(),
			anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, "sunny, 24°C", false)))
		final, err := client.Messages.New(context.Background(), params)
		if err != nil {
			t.Fatal(err)
		}
		if final.Content[0].Text != "It is sunny in Paris." || final.StopReason != anthropic.StopReasonEndTurn {
			t.Errorf("final %+v", final)
		}
		calls := s.Calls(claude)
		if got := calls[1].ToolResults; len(got) != 1 || got[0] != (fake.ToolResult{ID: use.ID, Content: "sunny, 24°C"}) {
			t.Errorf("tool results recorded %+v", got)
		}
		if got := calls[1].Tools; len(got) != 1 || got[0] != "get_weather" {
			t.Errorf("tools recorded %v", got)
		}
	})
}

func TestAnthropicErrors(t *testing.T) {
	s := suite.StartFake(t)
	s.Script(claude, fake.Overloaded(), fake.SpendCap())
	client := anthropicClient(t, s)
	params := anthropic.MessageNewParams{Model: claude, MaxTokens: 1024, Messages: userText("Hi")}

	_, err := client.Messages.New(context.Background(), params)
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 529 || apiErr.Type() != "overloaded_error" || apiErr.RequestID != "req_fake_1" {
		t.Errorf("overloaded: %v (%T)", err, err)
	}
	_, err = client.Messages.New(context.Background(), params)
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Type() != "rate_limit_error" ||
		apiErr.Details.ErrorCode != "enforced_spend_limit_reached" {
		t.Errorf("spend cap: %v, details %+v", err, apiErr.Details)
	}
	// A request the fake rejects as the API would: the deprecated
	// temperature, which v2.15.0's params lack, out of range.
	_, err = client.Messages.New(context.Background(), params, option.WithJSONSet("temperature", 1.5))
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Type() != "invalid_request_error" {
		t.Errorf("invalid request: %v", err)
	}
	if s.Requests(claude) != 3 {
		t.Errorf("%d requests: retries are not off", s.Requests(claude))
	}
}
