package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/anthropic"
)

// A stand-in for api.anthropic.com: it answers every request with one
// message.
func fakeAPI() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("request-id", "req_011CSHoEeqs5C35K2UUqR7Fy")
		io.WriteString(w, `{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant",
			"model":"claude-sonnet-4-5-20250929","content":[{"type":"text","text":"Bonjour !"}],
			"stop_reason":"end_turn","usage":{"input_tokens":12,"output_tokens":6}}`)
	}))
}

func Example() {
	srv := fakeAPI() // in production, leave BaseURL empty
	defer srv.Close()

	p, err := anthropic.New(anthropic.Config{APIKey: "sk-ant-example", BaseURL: srv.URL})
	if err != nil {
		log.Fatal(err)
	}
	res, err := p.Complete(context.Background(), llm.Request{
		Model:    "claude-sonnet-4-5",
		System:   "Answer in French.",
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "Hello!"}},
		Params:   llm.Params{MaxTokens: 100},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Text)
	fmt.Println(res.Model, res.FinishReason, res.Usage.InputTokens, res.Usage.OutputTokens)
	fmt.Println(res.RequestID)
	// Output:
	// Bonjour !
	// claude-sonnet-4-5-20250929 end_turn 12 6
	// req_011CSHoEeqs5C35K2UUqR7Fy
}

func ExampleProvider_Complete_overloaded() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("request-id", "req_011CS")
		w.Header().Set("retry-after", "4")
		w.WriteHeader(529)
		io.WriteString(w, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
	}))
	defer srv.Close()

	p, err := anthropic.New(anthropic.Config{APIKey: "sk-ant-example", BaseURL: srv.URL})
	if err != nil {
		log.Fatal(err)
	}
	_, err = p.Complete(context.Background(), llm.Request{Model: "claude-sonnet-4-5",
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "Hello!"}}})
	var e *llm.Error
	if errors.As(err, &e) {
		fmt.Println(e.Kind, e.Status, e.RetryAfter)
		fmt.Println(e.Detail) // the provider's own words: they may quote the prompt
	}
	fmt.Println(err)
	// Output:
	// overloaded 529 4s
	// Overloaded
	// anthropic: overloaded (HTTP 529) overloaded_error: message withheld, may quote the request (10 bytes in Detail) [request-id req_011CS, retry after 4s]
}

// A tool call and its result, over two requests. The stand-in for the API
// calls the tool when the conversation has no result yet, and answers with
// the result otherwise.
func ExampleProvider_Complete_tools() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(body), `"tool_result"`) {
			io.WriteString(w, `{"type":"message","role":"assistant","model":"claude-sonnet-4-5",
				"content":[{"type":"text","text":"Let me check."},
				{"type":"tool_use","id":"toolu_01A09q90qw90lq917835lq9","name":"get_weather","input":{"city":"Paris"}}],
				"stop_reason":"tool_use","usage":{"input_tokens":80,"output_tokens":40}}`)
			return
		}
		io.WriteString(w, `{"type":"message","role":"assistant","model":"claude-sonnet-4-5",
			"content":[{"type":"text","text":"It is 15°C in Paris."}],
			"stop_reason":"end_turn","usage":{"input_tokens":120,"output_tokens":10}}`)
	}))
	defer srv.Close()

	p, err := anthropic.New(anthropic.Config{APIKey: "sk-ant-example", BaseURL: srv.URL})
	if err != nil {
		log.Fatal(err)
	}
	req := llm.Request{
		Model: "claude-sonnet-4-5",
		Tools: []llm.Tool{{Name: "get_weather", Description: "The weather in a city.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}},
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "Weather in Paris?"}},
	}
	res, err := p.Complete(context.Background(), req)
	if err != nil {
		log.Fatal(err)
	}
	call := res.ToolCalls[0]
	fmt.Println(res.Finish, call.Name, string(call.Arguments))

	// Replay the call, answer it, and ask again.
	req.Messages = append(req.Messages,
		llm.Message{Role: llm.RoleAssistant, Content: res.Text, Parts: []llm.Part{{ToolCall: &call}}},
		llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.ToolResultPart(call.ID, `{"celsius": 15}`, false)}})
	if res, err = p.Complete(context.Background(), req); err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Finish, res.Text)
	// Output:
	// tool_use get_weather {"city":"Paris"}
	// stop It is 15°C in Paris.
}

// A stand-in for api.anthropic.com that streams its answer.
func fakeStreamingAPI() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("request-id", "req_011CSHoEeqs5C35K2UUqR7Fy")
		io.WriteString(w, `event: message_start
data: {"type":"message_start","message":{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5-20250929","stop_reason":null,"usage":{"input_tokens":12,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Bon"}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"jour !"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":6}}

event: message_stop
data: {"type":"message_stop"}

`)
	}))
}

func ExampleProvider_Stream() {
	srv := fakeStreamingAPI() // in production, leave BaseURL empty
	defer srv.Close()

	p, err := anthropic.New(anthropic.Config{APIKey: "sk-ant-example", BaseURL: srv.URL})
	if err != nil {
		log.Fatal(err)
	}
	s, err := p.Stream(context.Background(), llm.Request{
		Model:    "claude-sonnet-4-5",
		System:   "Answer in French.",
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "Hello!"}},
		Params:   llm.Params{MaxTokens: 100},
	})
	if err != nil {
		log.Fatal(err) // the request failed before the answer started
	}
	defer s.Close()
	for {
		c, err := s.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			log.Fatal(err) // an *llm.Error: cut short, overloaded mid-answer, …
		}
		fmt.Printf("%q\n", c.Text)
	}
	res := s.Response()
	fmt.Println(res.Text)
	fmt.Println(res.Model, res.FinishReason, res.Usage.InputTokens, res.Usage.OutputTokens)
	fmt.Println(res.RequestID)
	// Output:
	// "Bon"
	// "jour !"
	// Bonjour !
	// claude-sonnet-4-5-20250929 end_turn 12 6
	// req_011CSHoEeqs5C35K2UUqR7Fy
}
