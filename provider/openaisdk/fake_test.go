package openaisdk

import (
	"context"
	"errors"
	"io"
	"reflect"
	"testing"
	"time"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/fake"
	"github.com/backstop-llm/backstop/provider/internal/suite"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/azure"
	"github.com/openai/openai-go/v3/option"
)

// TestFake runs the same outcomes through the OpenAI and Azure clients
// against provider/fake, which renders each in the platform's wire format:
// one request per call although the clients retry 5 times, classified
// alike. The fake serves Chat Completions only (no /v1/responses), so the
// Responses API is not driven here.
func TestFake(t *testing.T) {
	s := suite.StartFake(t)
	const azureKey = "azure-key-0123456789abcdef"
	az, err := New(openai.NewClient(azure.WithEndpoint(s.URL(), "2024-10-21"), azure.WithAPIKey(azureKey),
		azure.WithUnsafeAllowHTTP(), option.WithMaxRetries(5), option.WithMaxRetryDelay(time.Millisecond)),
		Config{Platform: PlatformAzure, APIKey: azureKey})
	if err != nil {
		t.Fatal(err)
	}
	platforms := []struct {
		name, model, key string
		format           fake.Format
		p                *Provider
	}{
		{"openai", "gpt-fake", testKey, fake.OpenAI, newProvider(t, s.URL(), APIChat)},
		// Azure scripts are keyed by the deployment, which the model names.
		{"azure.ai.openai", "my-deployment", azureKey, fake.Azure, az},
	}
	for _, pl := range platforms {
		t.Run(pl.name, func(t *testing.T) {
			if pl.p.Name() != pl.name {
				t.Fatalf("Name %q", pl.p.Name())
			}
			req := hello()
			req.Model = pl.model

			// A success: text, usage, request id and rate limit.
			// The prompt cache read (OpenAI reports no writes: those
			// stay plain prompt tokens), from Complete and Stream.
			answer := fake.Answer("Hello from the fake.").Usage(12, 5).Cached(4).CacheWrite(3)
			usage := llm.Usage{InputTokens: 12, OutputTokens: 5, CacheReadTokens: 4}
			s.Script(pl.model, answer, answer)
			res, err := pl.p.Complete(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if res.Text != "Hello from the fake." || res.Usage != usage ||
				res.RequestID == "" || res.Finish != llm.FinishStop {
				t.Errorf("%+v", res)
			}
			st := suite.OpenStream(t, pl.p, context.Background(), req)
			if _, err := suite.ReadStream(st); err != io.EOF || st.Response().Usage != usage {
				t.Errorf("stream: %v, usage %+v; want %+v", err, st.Response().Usage, usage)
			}
			if rl := res.RateLimit; rl.Requests.Limit == 0 || rl.Tokens.Limit == 0 || rl.Requests.Reset.IsZero() {
				t.Errorf("rate limit %+v", rl)
			}

			// Each error outcome, classified, in one request.
			for _, o := range suite.FakeOutcomes() {
				s.Script(pl.model, o.Outcome)
				n := s.Requests(pl.model)
				e := suite.CompleteErr(t, pl.p, context.Background(), req, pl.key)
				if e.Kind != o.Kind {
					t.Errorf("%s: kind %v (%#v); want %v", o.Name, e.Kind, e, o.Kind)
				}
				if got := e.RetryAfter.Truncate(time.Second); o.RetryAfter != 0 && got != o.RetryAfter {
					t.Errorf("%s: RetryAfter %v; want %v", o.Name, e.RetryAfter, o.RetryAfter)
				}
				if got := s.Requests(pl.model) - n; got != 1 {
					t.Errorf("%s: %d requests; want 1", o.Name, got)
				}
			}

			// A stream that fails after its first chunk.
			s.Script(pl.model, fake.Answer("a b c").ErrorAfter(1))
			n := s.Requests(pl.model)
			st = suite.OpenStream(t, pl.p, context.Background(), req)
			got, err := suite.ReadStream(st)
			if err == nil || err == io.EOF || llm.KindOf(err) == llm.KindUnknown {
				t.Errorf("stream error event: %v", err)
			}
			var e *llm.Error
			if !errors.As(err, &e) || e.Provider != pl.name {
				t.Errorf("stream error %#v", err)
			}
			if len(got) != 1 || got[0] != "a " && got[0] != "a" {
				t.Errorf("chunks before the error %q; want the first", got)
			}
			if d := s.Requests(pl.model) - n; d != 1 {
				t.Errorf("stream: %d requests; want 1", d)
			}

			// A tool round trip.
			// A model of its own, so that its Calls are the round trip's.
			tm := pl.model + "-tools"
			s.Script(tm,
				fake.CallTools(fake.ToolCall{Name: "get_weather", Arguments: `{"city":"Paris"}`}),
				fake.Answer("It is sunny in Paris."))
			treq := toolRequest()
			treq.Model = tm
			treq.ToolChoice = llm.ToolChoice{}
			treq.Messages = treq.Messages[:1]
			res, err = pl.p.Complete(context.Background(), treq)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.ToolCalls) != 1 || res.Finish != llm.FinishToolUse {
				t.Fatalf("tool calls %+v finish %v", res.ToolCalls, res.Finish)
			}
			call := res.ToolCalls[0]
			if call.ID == "" || call.Name != "get_weather" || !reflect.DeepEqual(decode(t, call.Arguments), map[string]any{"city": "Paris"}) {
				t.Errorf("tool call %+v", call)
			}
			treq.Messages = append(treq.Messages,
				llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{llm.ToolCallPart(call.ID, call.Name, call.Arguments)}},
				llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.ToolResultPart(call.ID, "sunny", false)}})
			res, err = pl.p.Complete(context.Background(), treq)
			if err != nil {
				t.Fatal(err)
			}
			if res.Text != "It is sunny in Paris." {
				t.Errorf("answer %+v", res)
			}
			calls := s.Calls(tm)
			if len(calls) != 2 {
				t.Fatalf("%d calls; want 2", len(calls))
			}
			if calls[0].Format != pl.format {
				t.Errorf("format %v; want %v", calls[0].Format, pl.format)
			}
			if !reflect.DeepEqual(calls[0].Tools, []string{"get_weather"}) {
				t.Errorf("tools declared %q", calls[0].Tools)
			}
			if want := []fake.ToolResult{{ID: call.ID, Content: "sunny"}}; !reflect.DeepEqual(calls[1].ToolResults, want) {
				t.Errorf("tool results %+v; want %+v", calls[1].ToolResults, want)
			}
		})
	}
}
