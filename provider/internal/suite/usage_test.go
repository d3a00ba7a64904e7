package suite

import (
	"context"
	"io"
	"testing"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/fake"
)

// TestFakeCacheUsage: an answer of provider/fake that read and wrote the
// prompt cache reads as the same llm.Usage through each adapter, from
// Complete and from a stream, each wire format reporting what its API
// reports (OpenAI no cache writes); and a stream cut after its first chunk
// keeps the usage its provider sent before the cut (Anthropic's
// message_start; OpenAI sends usage only at the end).
func TestFakeCacheUsage(t *testing.T) {
	want := map[string]struct{ whole, cut llm.Usage }{
		"anthropic": {llm.Usage{InputTokens: 100, OutputTokens: 7, CacheReadTokens: 60, CacheWriteTokens: 30},
			llm.Usage{InputTokens: 100, OutputTokens: 1, CacheReadTokens: 60, CacheWriteTokens: 30}},
		"openai": {llm.Usage{InputTokens: 100, OutputTokens: 7, CacheReadTokens: 60}, llm.Usage{}},
	}
	forEach(t, func(t *testing.T, a adapter) {
		w, ok := want[a.name]
		if !ok {
			t.Fatalf("no usage expected of %s", a.name)
		}
		s := StartFake(t)
		p := a.new(t, s.URL(), s.Client())
		answer := fake.Answer("Hello, world").Chunks("Hello", ", world").Usage(100, 7).Cached(60).CacheWrite(30)
		s.Script("m", answer, answer, answer.CutAfter(1))
		res, err := p.Complete(context.Background(), request)
		if err != nil || res.Usage != w.whole {
			t.Errorf("Complete: usage %+v, %v; want %+v", res, err, w.whole)
		}
		st := OpenStream(t, p, context.Background(), request)
		if _, err := ReadStream(st); err != io.EOF || st.Response().Usage != w.whole {
			t.Errorf("Stream: usage %+v, %v; want %+v", st.Response().Usage, err, w.whole)
		}
		st = OpenStream(t, p, context.Background(), request)
		if _, err := ReadStream(st); llm.KindOf(err) != llm.KindConnection || st.Response().Usage != w.cut {
			t.Errorf("cut stream: usage %+v, %v; want %+v", st.Response().Usage, err, w.cut)
		}
	})
}
