package sdktest

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/backstop-llm/backstop/provider/fake"
	"github.com/backstop-llm/backstop/provider/internal/suite"
)

const gpt = "gpt-5.5"

func openaiClient(t *testing.T, s *fake.Server) openai.Client {
	t.Helper()
	return openai.NewClient(
		option.WithAPIKey("sk-test"),
		option.WithBaseURL(s.URL()+"/v1/"),
		option.WithHTTPClient(loopbackClient(t)),
		option.WithMaxRetries(0),
	)
}

// readOpenAIStream reads stream to its end, checking every chunk's required
// fields, and returns the chunks accumulated and how many there were.
func readOpenAIStream(t *testing.T, stream sdkStream[openai.ChatCompletionChunk]) (acc openai.ChatCompletionAccumulator, chunks int) {
	t.Helper()
	readStream(t, stream, func(ch openai.ChatCompletionChunk) error {
		checkRequired(t, "ChatCompletionChunk", ch)
		acc.AddChunk(ch)
		chunks++
		return nil
	})
	return acc, chunks
}

func TestOpenAICompletion(t *testing.T) {
	s := suite.StartFake(t)
	s.Script(gpt, fake.Answer("Hello from the fake.").Usage(20, 5).Cached(16))
	client := openaiClient(t, s)
	var resp *http.Response
	c, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    gpt,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("Hi")},
		N:        openai.Int(2), Temperature: openai.Float(0.2), MaxCompletionTokens: openai.Int(100),
	}, option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	checkRequired(t, "ChatCompletion", c)
	if len(c.Choices) != 2 || c.Choices[1].Index != 1 || c.Choices[0].Message.Content != "Hello from the fake." ||
		c.Choices[0].FinishReason != "stop" {
		t.Errorf("choices %+v", c.Choices)
	}
	for _, f := range []struct {
		name string
		ok   bool
	}{
		{"service_tier", c.JSON.ServiceTier.Valid()}, {"system_fingerprint", c.JSON.SystemFingerprint.Valid()},
		{"usage", c.JSON.Usage.Valid()}, {"prompt_tokens_details", c.Usage.JSON.PromptTokensDetails.Valid()},
		{"completion_tokens_details", c.Usage.JSON.CompletionTokensDetails.Valid()},
		{"cached_tokens", c.Usage.PromptTokensDetails.JSON.CachedTokens.Valid()},
	} {
		if !f.ok {
			t.Errorf("%s not valid", f.name)
		}
	}
	if c.Usage.PromptTokens != 20 || c.Usage.PromptTokensDetails.CachedTokens != 16 || c.Usage.TotalTokens != 25 {
		t.Errorf("usage %+v", c.Usage)
	}
	if c.Choices[0].Logprobs.JSON.Content.Raw() != "" || c.Choices[0].JSON.Logprobs.Raw() != "null" {
		t.Errorf("logprobs %q", c.Choices[0].JSON.Logprobs.Raw())
	}
	if resp == nil {
		t.Fatal("WithResponseInto gave no response")
	}
	if resp.Header.Get("x-request-id") == "" {
		t.Error("no x-request-id")
	}
	for _, kind := range []string{"requests", "tokens"} {
		if resp.Header.Get("x-ratelimit-limit-"+kind) == "" || resp.Header.Get("x-ratelimit-remaining-"+kind) == "" {
			t.Errorf("no x-ratelimit-*-%s: %v", kind, resp.Header)
		}
		if _, err := time.ParseDuration(resp.Header.Get("x-ratelimit-reset-" + kind)); err != nil {
			t.Errorf("x-ratelimit-reset-%s: %v", kind, err)
		}
	}
}

func TestOpenAIRefusal(t *testing.T) {
	s := suite.StartFake(t)
	s.Script(gpt, fake.Refusal("I can't help with that."))
	client := openaiClient(t, s)
	c, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: gpt, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")},
	})
	if err != nil {
		t.Fatal(err)
	}
	checkRequired(t, "ChatCompletion", c)
	m := c.Choices[0].Message
	if m.Refusal != "I can't help with that." || m.JSON.Content.Raw() != "null" || c.Choices[0].FinishReason != "stop" {
		t.Errorf("refusal %+v", m)
	}
}

func TestOpenAIStream(t *testing.T) {
	s := suite.StartFake(t)
	s.Script(gpt, fake.Answer("Streaming is fun, isn't it?").Usage(9, 7))
	client := openaiClient(t, s)
	acc, chunks := readOpenAIStream(t, client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model: gpt, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}))
	if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != "Streaming is fun, isn't it?" || chunks < 4 ||
		acc.Choices[0].FinishReason != "stop" || acc.Usage.CompletionTokens != 7 {
		t.Errorf("accumulated %+v usage %+v from %d chunks", acc.Choices, acc.Usage, chunks)
	}
}

func TestOpenAIToolRoundTrip(t *testing.T) {
	unstreamedAndStreamed(t, func(t *testing.T, streamed bool) {
		s := suite.StartFake(t)
		s.Script(gpt,
			fake.CallTools(fake.ToolCall{Name: "get_weather", Arguments: `{"city":"Paris"}`}),
			fake.Answer("It is sunny in Paris."))
		client := openaiClient(t, s)
		params := openai.ChatCompletionNewParams{
			Model:    gpt,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Paris?")},
			Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
				Name:        "get_weather",
				Description: openai.String("The weather in a city."),
				Parameters:  shared.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
			})},
		}
		var msg openai.ChatCompletionMessage
		var finish string
		if streamed {
			acc, _ := readOpenAIStream(t, client.Chat.Completions.NewStreaming(context.Background(), params))
			msg, finish = acc.Choices[0].Message, acc.Choices[0].FinishReason
		} else {
			c, err := client.Chat.Completions.New(context.Background(), params)
			if err != nil {
				t.Fatal(err)
			}
			checkRequired(t, "ChatCompletion", c)
			msg, finish = c.Choices[0].Message, c.Choices[0].FinishReason
		}
		if finish != "tool_calls" || len(msg.ToolCalls) != 1 {
			t.Fatalf("finish %q message %+v", finish, msg)
		}
		tc := msg.ToolCalls[0]
		if tc.ID != "call_fake_1_0" || tc.Function.Name != "get_weather" || tc.Function.Arguments != `{"city":"Paris"}` {
			t.Errorf("tool call %+v", tc)
		}
		params.Messages = append(params.Messages, msg.ToParam(), openai.ToolMessage("sunny, 24°C", tc.ID))
		final, err := client.Chat.Completions.New(context.Background(), params)
		if err != nil {
			t.Fatal(err)
		}
		if final.Choices[0].Message.Content != "It is sunny in Paris." {
			t.Errorf("final %+v", final.Choices[0])
		}
		if got := s.Calls(gpt)[1].ToolResults; len(got) != 1 || got[0] != (fake.ToolResult{ID: tc.ID, Content: "sunny, 24°C"}) {
			t.Errorf("tool results recorded %+v", got)
		}
	})
}

func TestOpenAIErrors(t *testing.T) {
	s := suite.StartFake(t)
	s.Script(gpt, fake.RateLimited("2"), fake.SpendCap())
	client := openaiClient(t, s)
	params := openai.ChatCompletionNewParams{Model: gpt, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")}}

	_, err := client.Chat.Completions.New(context.Background(), params)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Code != "rate_limit_exceeded" || apiErr.Type != "requests" {
		t.Errorf("rate limited: %v (%T)", err, err)
	}
	_, err = client.Chat.Completions.New(context.Background(), params)
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Code != "insufficient_quota" {
		t.Errorf("quota: %v", err)
	}
	// A request the fake rejects as the API would.
	params.Temperature = openai.Float(3)
	_, err = client.Chat.Completions.New(context.Background(), params)
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Code != "decimal_above_max_value" || apiErr.Param != "temperature" {
		t.Errorf("invalid request: %v", err)
	}
	if s.Requests(gpt) != 3 {
		t.Errorf("%d requests: retries are not off", s.Requests(gpt))
	}
}
