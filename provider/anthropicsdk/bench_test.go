package anthropicsdk

import (
	"context"
	"net/http"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/backstop-llm/backstop/provider/internal/suite"
)

// benchHTTP answers every request in process with a 200 and okBody, so
// that the benchmarks measure the SDK and the adapter, not a network.
func benchHTTP() *http.Client {
	return &http.Client{Transport: &suite.Canned{Body: []byte(okBody), Header: http.Header{"Content-Type": {"application/json"},
		"Request-Id": {"req_bench"}, "Anthropic-Ratelimit-Requests-Remaining": {"49"}}}}
}

// benchClient is an SDK client of the Anthropic API; extra are more
// options.
func benchClient(extra ...option.RequestOption) anthropic.Client {
	return anthropic.NewClient(append([]option.RequestOption{option.WithAPIKey(testKey), option.WithBaseURL("http://bench.invalid"),
		option.WithMaxRetries(0)}, extra...)...)
}

// BenchmarkComplete is one Complete through the adapter: the request
// translated, the SDK call, the answer translated.
func BenchmarkComplete(b *testing.B) {
	p, err := New(benchClient(), Config{HTTPClient: benchHTTP()})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Complete(ctx, userReq); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSDKDirect is the same call made with the SDK alone, as a caller
// would write it: the baseline BenchmarkComplete is measured against.
func BenchmarkSDKDirect(b *testing.B) {
	client := benchClient(option.WithHTTPClient(benchHTTP()))
	ctx := context.Background()
	params := anthropic.MessageNewParams{Model: "claude-test", MaxTokens: 1024,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hi"))}}
	b.ReportAllocs()
	for b.Loop() {
		var raw *http.Response
		msg, err := client.Messages.New(ctx, params, option.WithResponseInto(&raw))
		if err != nil || msg.Content[0].Text != "Hello" || raw.Header.Get("Request-Id") != "req_bench" {
			b.Fatal(err)
		}
	}
}
