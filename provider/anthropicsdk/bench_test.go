package anthropicsdk

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// cannedTransport answers every request in process with a 200 and okBody,
// so that the benchmarks measure the SDK and the adapter, not a network.
type cannedTransport struct{}

func (cannedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	return &http.Response{StatusCode: 200, Request: r, ContentLength: int64(len(okBody)),
		Header: http.Header{"Content-Type": {"application/json"}, "Request-Id": {"req_bench"},
			"Anthropic-Ratelimit-Requests-Remaining": {"49"}},
		Body: io.NopCloser(strings.NewReader(okBody))}, nil
}

func benchClient() anthropic.Client {
	return anthropic.NewClient(option.WithAPIKey(testKey), option.WithBaseURL("http://bench.invalid"),
		option.WithHTTPClient(&http.Client{Transport: cannedTransport{}}), option.WithMaxRetries(0))
}

// BenchmarkComplete is one Complete through the adapter: the request
// translated, the SDK call, the answer translated.
func BenchmarkComplete(b *testing.B) {
	p, err := New(benchClient(), Options{})
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
	client := benchClient()
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
