package anthropic

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/backstop-llm/backstop/llm"
)

// benchReplay is an in-process http.RoundTripper answering every request
// with the same event stream, so that a benchmark measures the adapter, not
// a network.
type benchReplay struct{ body []byte }

func (r *benchReplay) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	return &http.Response{StatusCode: 200, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"text/event-stream"}, "Request-Id": {"req_bench"}},
		ContentLength: -1, Body: io.NopCloser(bytes.NewReader(r.body)), Request: req}, nil
}

// benchDeltas is a Messages API event stream whose answer is n text_delta
// events of 4 bytes each, as the API writes them.
func benchDeltas(n int) []byte {
	var b strings.Builder
	b.WriteString("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-test\",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n")
	b.WriteString("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
	for range n {
		b.WriteString("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"abcd\"}}\n\n")
	}
	b.WriteString("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n")
	b.WriteString("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":15}}\n\n")
	b.WriteString("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	return []byte(b.String())
}

// BenchmarkStreamTinyDeltas reads answers of 1,000 to 100,000 text deltas of
// 4 bytes through Stream: the cost per answer byte must be flat in the
// number of deltas.
func BenchmarkStreamTinyDeltas(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprintf("chunks=%d", n), func(b *testing.B) {
			p, err := New(Config{APIKey: "k", BaseURL: "http://bench.invalid",
				HTTPClient: &http.Client{Transport: &benchReplay{body: benchDeltas(n)}}})
			if err != nil {
				b.Fatal(err)
			}
			req := llm.Request{Model: "claude-test", Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}
			ctx := context.Background()
			size := 4 * n
			b.ReportAllocs()
			b.SetBytes(int64(size))
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			iters := 0
			for b.Loop() {
				s, err := p.Stream(ctx, req)
				if err != nil {
					b.Fatal(err)
				}
				for {
					_, err := s.Next()
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				if got := len(s.Response().Text); got != size {
					b.Fatalf("%d bytes, want %d", got, size)
				}
				s.Close()
				iters++
			}
			runtime.ReadMemStats(&after)
			bytes := float64(iters) * float64(size)
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/bytes, "allocB/byte")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/bytes, "ns/byte")
		})
	}
}

// streamAlloc is the bytes allocated by one Stream of n deltas, read to
// its end.
func streamAlloc(t *testing.T, n int) uint64 {
	t.Helper()
	p, err := New(Config{APIKey: "k", BaseURL: "http://bench.invalid",
		HTTPClient: &http.Client{Transport: &benchReplay{body: benchDeltas(n)}}})
	if err != nil {
		t.Fatal(err)
	}
	req := llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	s, err := p.Stream(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for {
		if _, err := s.Next(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if got := len(s.Response().Text); got != 4*n {
		t.Fatalf("%d bytes, want %d", got, 4*n)
	}
	return after.TotalAlloc - before.TotalAlloc
}

// A stream of tiny deltas allocates in proportion to its length: ten times
// the deltas, about ten times the bytes (a cost per delta that grew with
// the text so far would make it a hundred).
func TestStreamAllocatesLinearly(t *testing.T) {
	small, large := streamAlloc(t, 1600), streamAlloc(t, 16000)
	if float64(large) > 20*float64(small) {
		t.Fatalf("1,600 deltas allocated %d bytes, 16,000 allocated %d: %.1fx for 10x the deltas", small, large, float64(large)/float64(small))
	}
}
