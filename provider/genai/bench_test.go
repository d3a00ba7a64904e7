package genai

import (
	"context"
	"net/http"
	"os"
	"testing"
	"time"

	gg "google.golang.org/genai"

	"github.com/backstop-llm/backstop/provider/internal/suite"
)

// benchClient answers every request with okBody, in process.
func benchClient(b *testing.B) *gg.Client {
	canned := &suite.Canned{Body: []byte(okBody), Header: http.Header{"Content-Type": {"application/json"}, "X-Goog-Request-Id": {"greq"}}}
	return geminiClient(b, "http://gemini.invalid", &http.Client{Transport: canned})
}

// benchAdapter is Complete through the adapter.
func benchAdapter(b *testing.B) {
	p := newProvider(b, benchClient(b), Config{})
	req := hello("gemini-2.5-flash")
	req.System = "Be brief."
	req.Params.MaxTokens = 64
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res, err := p.Complete(ctx, req)
		if err != nil || res.Text != "Hi there" {
			b.Fatal(res, err)
		}
	}
}

// benchDirect is the same call made with the SDK directly (with the same
// one-attempt options the adapter sets, so that both do the same work).
func benchDirect(b *testing.B) {
	c := benchClient(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		cfg := &gg.GenerateContentConfig{
			HTTPOptions:           &gg.HTTPOptions{RetryOptions: &gg.HTTPRetryOptions{Attempts: gg.Ptr[int32](1)}},
			AutomaticContinuation: gg.Ptr(false),
			SystemInstruction:     &gg.Content{Role: gg.RoleUser, Parts: []*gg.Part{{Text: "Be brief."}}},
			MaxOutputTokens:       64,
		}
		r, err := c.Models.GenerateContent(ctx, "gemini-2.5-flash",
			[]*gg.Content{{Role: gg.RoleUser, Parts: []*gg.Part{{Text: "Hello"}}}}, cfg)
		if err != nil || r.Text() != "Hi there" {
			b.Fatal(r, err)
		}
	}
}

func BenchmarkComplete(b *testing.B) {
	b.Run("adapter", benchAdapter)
	b.Run("direct", benchDirect)
}

// TestCompleteRatio measures the adapter's cost over the direct SDK call
// with testing.Benchmark (which cannot run inside a benchmark) and logs
// the ratios. It runs only with GENAI_BENCH_RATIO=1:
//
//	GENAI_BENCH_RATIO=1 go test -run CompleteRatio -v
func TestCompleteRatio(t *testing.T) {
	if os.Getenv("GENAI_BENCH_RATIO") == "" {
		t.Skip("set GENAI_BENCH_RATIO=1 to measure")
	}
	for range 3 {
		d := testing.Benchmark(benchDirect)
		a := testing.Benchmark(benchAdapter)
		t.Logf("adapter %v/op %d allocs %d B; direct %v/op %d allocs %d B; ratio time %.3f allocs %.3f bytes %.3f",
			time.Duration(a.NsPerOp()), a.AllocsPerOp(), a.AllocedBytesPerOp(),
			time.Duration(d.NsPerOp()), d.AllocsPerOp(), d.AllocedBytesPerOp(),
			float64(a.NsPerOp())/float64(d.NsPerOp()), float64(a.AllocsPerOp())/float64(d.AllocsPerOp()),
			float64(a.AllocedBytesPerOp())/float64(d.AllocedBytesPerOp()))
	}
}
