package openai_test

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
	"github.com/backstop-llm/backstop/provider/openai"
)

// A stand-in for api.openai.com: it answers every request with one
// completion.
func fakeAPI() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("x-request-id", "req_7c3e1f0a")
		w.Header().Set("x-ratelimit-remaining-requests", "4999")
		io.WriteString(w, `{"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion",
			"model":"gpt-4.1-2025-04-14","choices":[{"index":0,"message":{"role":"assistant",
			"content":"Bonjour !"},"finish_reason":"stop"}],
			"usage":{"prompt_tokens":19,"completion_tokens":4,"total_tokens":23}}`)
	}))
}

func Example() {
	srv := fakeAPI() // in production, leave BaseURL empty
	defer srv.Close()

	p, err := openai.New(openai.Config{APIKey: "sk-example", BaseURL: srv.URL})
	if err != nil {
		log.Fatal(err)
	}
	res, err := p.Complete(context.Background(), llm.Request{
		Model:    "gpt-4.1",
		System:   "Answer in French.",
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "Hello!"}},
		Params:   llm.Params{MaxTokens: 100, Temperature: llm.Float(0)},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Text)
	fmt.Println(res.Model, res.FinishReason, res.Usage.InputTokens, res.Usage.OutputTokens)
	fmt.Println(res.RequestID, res.RateLimit.Requests.Remaining)
	// Output:
	// Bonjour !
	// gpt-4.1-2025-04-14 stop 19 4
	// req_7c3e1f0a 4999
}

// An OpenAI-compatible endpoint mounted under another path, with its own
// provider name; here a quota error, which the chain never retries.
func ExampleConfig_compatible() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println(r.URL.Path, r.Header.Get("api-key") != "")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":{"message":"You exceeded your current quota.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`)
	}))
	defer srv.Close()

	p, err := openai.New(openai.Config{
		APIKey:    "azure-example-key",
		BaseURL:   srv.URL + "/openai",
		Path:      "/v1/chat/completions",
		Name:      "azure.ai.openai",
		KeyHeader: "api-key",
	})
	if err != nil {
		log.Fatal(err)
	}
	_, err = p.Complete(context.Background(), llm.Request{Model: "gpt-4.1",
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "Hello!"}}})
	var e *llm.Error
	if errors.As(err, &e) {
		fmt.Println(e.Kind, e.Status)
		fmt.Println(e.Detail) // the provider's own words: they may quote the prompt
	}
	fmt.Println(err)
	// Output:
	// /openai/v1/chat/completions true
	// quota 429
	// You exceeded your current quota.
	// azure.ai.openai: quota (HTTP 429) insufficient_quota: message withheld, may quote the request (32 bytes in Detail)
}

// A stand-in for api.openai.com that calls get_weather, then answers once
// it has the tool's result.
func fakeToolAPI() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"role":"tool"`) {
			io.WriteString(w, `{"id":"chatcmpl-2","model":"gpt-4.1","choices":[{"index":0,
				"message":{"role":"assistant","content":"It is 21°C in Paris."},"finish_reason":"stop"}]}`)
			return
		}
		io.WriteString(w, `{"id":"chatcmpl-1","model":"gpt-4.1","choices":[{"index":0,
			"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_Wz5Ue3",
			"type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
			"finish_reason":"tool_calls"}]}`)
	}))
}

// A tool call and its result: the assistant's calls go back in an
// assistant message, their results in the next user message.
func ExampleProvider_Complete_tools() {
	srv := fakeToolAPI()
	defer srv.Close()
	p, err := openai.New(openai.Config{APIKey: "sk-example", BaseURL: srv.URL})
	if err != nil {
		log.Fatal(err)
	}
	req := llm.Request{
		Model:    "gpt-4.1",
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "Weather in Paris?"}},
		Tools: []llm.Tool{{Name: "get_weather", Description: "Current weather in a city",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}},
	}
	res, err := p.Complete(context.Background(), req)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Finish, res.ToolCalls[0].Name, string(res.ToolCalls[0].Arguments))

	call := res.ToolCalls[0]
	req.Messages = append(req.Messages,
		llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{llm.ToolCallPart(call.ID, call.Name, call.Arguments)}},
		llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.ToolResultPart(call.ID, `{"celsius":21}`, false)}},
	)
	res, err = p.Complete(context.Background(), req)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Finish, res.Text)
	// Output:
	// tool_use get_weather {"city":"Paris"}
	// stop It is 21°C in Paris.
}

// A stand-in for api.openai.com that streams its answer.
func fakeStreamingAPI() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("x-request-id", "req_7c3e1f0a")
		io.WriteString(w, `data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4.1-2025-04-14","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4.1-2025-04-14","choices":[{"index":0,"delta":{"content":"Bon"},"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4.1-2025-04-14","choices":[{"index":0,"delta":{"content":"jour !"},"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4.1-2025-04-14","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}

data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4.1-2025-04-14","choices":[],"usage":{"prompt_tokens":19,"completion_tokens":4,"total_tokens":23}}

data: [DONE]

`)
	}))
}

func ExampleProvider_Stream() {
	srv := fakeStreamingAPI() // in production, leave BaseURL empty
	defer srv.Close()

	p, err := openai.New(openai.Config{APIKey: "sk-example", BaseURL: srv.URL})
	if err != nil {
		log.Fatal(err)
	}
	s, err := p.Stream(context.Background(), llm.Request{
		Model:    "gpt-4.1",
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
			log.Fatal(err) // an *llm.Error: cut short, an error event, a content filter, …
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
	// gpt-4.1-2025-04-14 stop 19 4
	// req_7c3e1f0a
}
