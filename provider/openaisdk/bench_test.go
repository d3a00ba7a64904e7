package openaisdk

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/suite"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// benchClient answers every request in process with a 200 and chatOK: no
// sockets, so the benchmark measures the adapter and the SDK alone.
func benchClient() openai.Client {
	canned := &suite.Canned{Body: []byte(chatOK), Header: http.Header{"Content-Type": {"application/json"},
		"X-Request-Id": {"req_b"}, "X-Ratelimit-Limit-Requests": {"500"}, "X-Ratelimit-Remaining-Requests": {"499"}}}
	return openai.NewClient(option.WithAPIKey(testKey), option.WithBaseURL("https://api.example.test/v1"),
		option.WithHTTPClient(&http.Client{Transport: canned}))
}

func benchRequest() llm.Request {
	return llm.Request{Model: "gpt-4o", System: "Be brief.", Params: llm.Params{MaxTokens: 64},
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "Hi"}}}
}

// directParams is benchRequest as a caller of the SDK would write it.
func directParams() openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{Model: "gpt-4o", MaxCompletionTokens: openai.Int(64),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("Hi")}}
}

// BenchmarkComplete compares one Complete through the adapter with the
// same call made with the SDK directly (reading the same answer fields),
// over an in-process transport. The ratio benchmark reports
// adapter-ns/direct-ns as "ratio".
func BenchmarkComplete(b *testing.B) {
	ctx := context.Background()
	p, err := New(benchClient(), Config{APIKey: testKey})
	if err != nil {
		b.Fatal(err)
	}
	client := benchClient()
	adapter := func() {
		res, err := p.Complete(ctx, benchRequest())
		if err != nil || res.Text != "Hello!" {
			b.Fatal(res, err)
		}
	}
	direct := func() {
		cc, err := client.Chat.Completions.New(ctx, directParams())
		if err != nil || cc.Choices[0].Message.Content != "Hello!" {
			b.Fatal(cc, err)
		}
	}
	b.Run("adapter", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			adapter()
		}
	})
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			direct()
		}
	})
	b.Run("ratio", func(b *testing.B) {
		var ta, td time.Duration
		for b.Loop() {
			t0 := time.Now()
			adapter()
			t1 := time.Now()
			direct()
			ta, td = ta+t1.Sub(t0), td+time.Since(t1)
		}
		b.ReportMetric(float64(ta)/float64(td), "ratio")
	})
}
