package openai_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/openai"
)

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
