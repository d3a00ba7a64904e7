package anthropic_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"

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
