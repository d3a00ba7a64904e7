package anthropicsdk_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/anthropicsdk"
)

func Example() {
	// A stand-in for api.anthropic.com.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("request-id", "req_011CSHoEeqs5C35K2UUqR7Fy")
		io.WriteString(w, `{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant",
			"model":"claude-sonnet-4-5-20250929","content":[{"type":"text","text":"Bonjour !"}],
			"stop_reason":"end_turn","usage":{"input_tokens":12,"output_tokens":6}}`)
	}))
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()

	// In production: anthropic.NewClient(option.WithAPIKey(key)), or a
	// Bedrock or Vertex client.
	client := anthropic.NewClient(option.WithAPIKey("sk-ant-example"), option.WithBaseURL(srv.URL))
	// Give the provider your HTTP client, not the SDK: it puts a copy that
	// refuses redirects under the SDK.
	p, err := anthropicsdk.New(client, anthropicsdk.Config{HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		log.Fatal(err)
	}
	res, err := p.Complete(context.Background(), llm.Request{
		Model:    "claude-sonnet-4-5",
		System:   "Answer in French.",
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "Hello!"}},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Text)
	fmt.Println(res.Model, res.Finish, res.Usage.InputTokens, res.Usage.OutputTokens)
	fmt.Println(p.Name(), res.RequestID)
	// Output:
	// Bonjour !
	// claude-sonnet-4-5-20250929 stop 12 6
	// anthropic req_011CSHoEeqs5C35K2UUqR7Fy
}

// A client built to retry still makes one request per call: the chain
// decides what to retry, from the classified error.
func ExampleProvider_Complete_overloaded() {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("request-id", "req_011CS")
		w.Header().Set("retry-after", "4")
		w.WriteHeader(529)
		io.WriteString(w, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
	}))
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()

	client := anthropic.NewClient(option.WithAPIKey("sk-ant-example"), option.WithBaseURL(srv.URL), option.WithMaxRetries(5))
	p, err := anthropicsdk.New(client, anthropicsdk.Config{HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		log.Fatal(err)
	}
	_, err = p.Complete(context.Background(), llm.Request{Model: "claude-sonnet-4-5",
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "Hello!"}}})
	var e *llm.Error
	if errors.As(err, &e) {
		fmt.Println(e.Kind, e.Status, e.RetryAfter, e.RequestID)
	}
	fmt.Println(requests.Load(), "request")
	// Output:
	// overloaded 529 4s req_011CS
	// 1 request
}
