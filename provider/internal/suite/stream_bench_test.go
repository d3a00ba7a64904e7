package suite

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
type benchReplay struct {
	body      []byte
	requestID string
}

func (r *benchReplay) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	return &http.Response{StatusCode: 200, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"text/event-stream"}, r.requestID: {"req_bench"}},
		ContentLength: -1, Body: io.NopCloser(bytes.NewReader(r.body)), Request: req}, nil
}

// tinyDeltas is a of n text deltas of 4 bytes each, as its API writes them
// (for OpenAI, with the usage chunk that stream_options.include_usage asks
// for), replayed in process.
func (a adapter) tinyDeltas(t testing.TB, n int) llm.StreamProvider {
	t.Helper()
	var b strings.Builder
	b.WriteString(a.start)
	delta := a.text("abcd")
	for range n {
		b.WriteString(delta)
	}
	b.WriteString(a.end)
	return a.new(t, "http://bench.invalid",
		&http.Client{Transport: &benchReplay{body: []byte(b.String()), requestID: a.requestID}})
}

// readTiny reads one Stream of p to its end and checks it carried size
// bytes of text.
func readTiny(t testing.TB, p llm.StreamProvider, ctx context.Context, size int) {
	t.Helper()
	s, err := p.Stream(ctx, request)
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
	if got := len(s.Response().Text); got != size {
		t.Fatalf("%d bytes, want %d", got, size)
	}
}

// BenchmarkStreamTinyDeltas reads answers of 1,000 to 100,000 text deltas of
// 4 bytes through each adapter's Stream: the cost per answer byte must be
// flat in the number of deltas.
func BenchmarkStreamTinyDeltas(b *testing.B) {
	for _, a := range adapters {
		for _, n := range []int{1000, 10000, 100000} {
			b.Run(fmt.Sprintf("%s/chunks=%d", a.name, n), func(b *testing.B) {
				p := a.tinyDeltas(b, n)
				ctx := context.Background()
				size := 4 * n
				b.ReportAllocs()
				b.SetBytes(int64(size))
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				iters := 0
				for b.Loop() {
					readTiny(b, p, ctx, size)
					iters++
				}
				runtime.ReadMemStats(&after)
				bytes := float64(iters) * float64(size)
				b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/bytes, "allocB/byte")
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/bytes, "ns/byte")
			})
		}
	}
}

// streamAlloc is the bytes allocated by one Stream of n deltas of a, read
// to its end.
func streamAlloc(t *testing.T, a adapter, n int) uint64 {
	t.Helper()
	p := a.tinyDeltas(t, n)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	readTiny(t, p, t.Context(), 4*n)
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A stream of tiny deltas allocates in proportion to its length: ten times
// the deltas, about ten times the bytes (a cost per delta that grew with
// the text so far would make it a hundred).
func TestStreamAllocatesLinearly(t *testing.T) {
	forEach(t, func(t *testing.T, a adapter) {
		small, large := streamAlloc(t, a, 1600), streamAlloc(t, a, 16000)
		if float64(large) > 20*float64(small) {
			t.Fatalf("1,600 deltas allocated %d bytes, 16,000 allocated %d: %.1fx for 10x the deltas", small, large, float64(large)/float64(small))
		}
	})
}
