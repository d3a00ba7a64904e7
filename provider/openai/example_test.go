package openai_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"

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
