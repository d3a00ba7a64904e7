package backstop_test

// End-to-end tests of streamed calls: the real adapters' server-sent events
// from the fake provider, through Chain.Stream.

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/degrade"
	"github.com/backstop-llm/backstop/internal/oteltest"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/anthropic"
	"github.com/backstop-llm/backstop/provider/fake"
	"github.com/backstop-llm/backstop/retry"
	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/goleak"
)

func streamChain(t *testing.T, b *chain.Builder, f *fake.Server, primary chain.Target) *chain.Chain {
	t.Helper()
	p := claude(t, f)
	primary.Name, primary.Provider, primary.Model = "sonnet", p, sonnet
	c, err := b.Primary(primary).OrSibling(chain.Target{Name: "haiku", Provider: p, Model: haiku}).Build()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func read(s *chain.Stream) (text []string, err error) {
	for c, e := range s.Chunks() {
		if e != nil {
			err = e
			continue
		}
		if c.Restart {
			text = append(text, "|RESTART|")
		}
		text = append(text, c.Text)
	}
	return text, err
}

func TestStreamErrorBeforeTheFirstChunkFallsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fake.New()
		c := streamChain(t, chain.New("support"), f, chain.Target{Retry: retry.Policy{MaxAttempts: 2}})
		f.Script(sonnet, fake.Overloaded())
		f.Script(haiku, fake.Answer("Your order ships today.").Chunks("Your ", "order ", "ships ", "today."))
		s := c.Stream(t.Context(), ask)
		text, err := read(s)
		if err != nil || strings.Join(text, "") != "Your order ships today." {
			t.Fatalf("%q %v", text, err)
		}
		res, rerr := s.Result()
		if rerr != nil || res.Served.Target != "haiku" || res.Text != "Your order ships today." || f.Requests(sonnet) != 2 || res.Attempts[0].Status != 529 {
			t.Fatalf("result %+v %v, %d primary requests, attempts %v", res.Served, rerr, f.Requests(sonnet), res.Attempts)
		}
		if !strings.Contains(string(f.Calls(haiku)[0].Body), `"stream":true`) {
			t.Fatal("the sibling was not asked to stream")
		}
	})
}

func TestStreamErrorAfterThreeChunksCarriesThePartialText(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fake.New()
		c := streamChain(t, chain.New("support"), f, chain.Target{})
		f.Script(sonnet, fake.Answer("One two three four.").Chunks("One ", "two ", "three ", "four.").ErrorAfter(3))
		s := c.Stream(t.Context(), ask)
		text, err := read(s)
		var inc *chain.IncompleteError
		if strings.Join(text, "") != "One two three " || !errors.As(err, &inc) || inc.Partial != "One two three " {
			t.Fatalf("%q %v", text, err)
		}
		// Anthropic's event: error after the 200 is classified like an error body.
		if llm.KindOf(err) != llm.KindOverloaded {
			t.Fatalf("kind %v, want overloaded", llm.KindOf(err))
		}
		if f.Requests(haiku) != 0 {
			t.Fatal("a second answer was started and would have been glued on")
		}
		res, rerr := s.Result()
		if !errors.Is(rerr, chain.ErrIncomplete) || res.Attempts[0].Kind != llm.KindOverloaded {
			t.Fatalf("result %v, attempts %v", rerr, res.Attempts)
		}
	})
}

func TestStreamRestartIsAVisibleMarker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fake.New()
		c := streamChain(t, chain.New("support").RestartStreams(true), f, chain.Target{})
		f.Script(sonnet, fake.Answer("One two three").Chunks("One ", "two ", "three").CutAfter(2))
		f.Script(haiku, fake.Answer("Fresh answer.").Chunks("Fresh ", "answer."))
		s := c.Stream(t.Context(), ask)
		text, err := read(s)
		if err != nil || strings.Join(text, "") != "One two |RESTART|Fresh answer." {
			t.Fatalf("%q %v", text, err)
		}
		res, _ := s.Result()
		if res.Text != "Fresh answer." || res.Served.Target != "haiku" {
			t.Fatalf("result %q from %q", res.Text, res.Served.Target)
		}
	})
}

func TestStreamStallEndsAsATimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fake.New()
		c := streamChain(t, chain.New("support"), f, chain.Target{IdleTimeout: 10 * time.Second})
		f.Script(sonnet, fake.Answer("One two").Chunks("One ", "two").StallAfter(1))
		start := time.Now()
		text, err := read(c.Stream(t.Context(), ask))
		if strings.Join(text, "") != "One " || llm.KindOf(err) != llm.KindTimeout || !errors.Is(err, chain.ErrIncomplete) {
			t.Fatalf("%q %v", text, err)
		}
		if d := time.Since(start); d != 10*time.Second {
			t.Fatalf("stall detected after %v, want the 10s idle timeout", d)
		}
	})
}

func TestStreamFirstChunkTimeoutMovesOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fake.New()
		c := streamChain(t, chain.New("support"), f, chain.Target{FirstChunkTimeout: 3 * time.Second, Retry: retry.Policy{MaxAttempts: 1}})
		f.Script(sonnet, fake.Answer("late").FirstChunkAfter(time.Minute))
		f.Script(haiku, fake.Answer("on time"))
		s := c.Stream(t.Context(), ask)
		text, err := read(s)
		res, _ := s.Result()
		if err != nil || strings.Join(text, "") != "on time" || res.Attempts[0].Kind != llm.KindTimeout {
			t.Fatalf("%q %v %v", text, err, res.Attempts)
		}
	})
}

func TestStreamIsValidatedAndRememberedAndTraced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tel := oteltest.New()
		f := fake.New()
		store := memory(t)
		p := claude(t, f)
		c, err := chain.New("support").Schema(answerSchema).TracerProvider(tel.TracerProvider).
			Primary(chain.Target{Name: "sonnet", Provider: p, Model: sonnet}).
			OrDegrade(degrade.LastGood(degrade.LastGoodConfig{Store: store})).Build()
		if err != nil {
			t.Fatal(err)
		}
		f.Script(sonnet, fake.Answer(good).FirstChunkAfter(2*time.Second), fake.Overloaded())
		s := c.Stream(t.Context(), ask)
		if _, err := read(s); err != nil {
			t.Fatal(err)
		}
		res, _ := s.Result()
		if string(res.JSON) != good {
			t.Fatalf("JSON %s", res.JSON)
		}
		spans := tel.Spans.GetSpans()
		attempt, call := attrs(spans[0].Attributes), attrs(spans[1].Attributes)
		if attempt[attribute.Key("gen_ai.response.time_to_first_chunk")].AsFloat64() != 2 || call[attribute.Key("backstop.stream.outcome")].AsString() != "complete" {
			t.Fatalf("attempt %v call %v", attempt, call)
		}
		// Remembered: with the model down, LastGood answers the same question.
		text, err := read(c.Stream(t.Context(), ask))
		if err != nil || strings.Join(text, "") != good {
			t.Fatalf("%q %v", text, err)
		}
	})
}

// A caller that stops reading half-way leaves nothing behind: over a real
// loopback connection, checked with goleak.
func TestStreamAbandonedHalfReadLeavesNoGoroutine(t *testing.T) {
	defer goleak.VerifyNone(t)
	f := fake.New()
	if err := f.Start(); err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	transport := &http.Transport{}
	defer transport.CloseIdleConnections()
	p, err := anthropic.New(anthropic.Config{APIKey: "k", BaseURL: f.URL(), HTTPClient: &http.Client{Transport: transport}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := chain.New("support").Primary(chain.Target{Name: "sonnet", Provider: p, Model: sonnet, IdleTimeout: time.Minute}).Build()
	if err != nil {
		t.Fatal(err)
	}
	f.Script(sonnet, fake.Answer("a b c d e f").Every(time.Millisecond))
	s := c.Stream(t.Context(), ask)
	n, text := 0, ""
	for ch, err := range s.Chunks() {
		if err != nil {
			t.Fatal(err)
		}
		text += ch.Text
		if n++; n == 2 {
			break
		}
	}
	res, err := s.Result()
	if !errors.Is(err, chain.ErrAbandoned) || res.Text != text || res.Served.Target != "sonnet" {
		t.Fatalf("%q from %q (read %q), %v", res.Text, res.Served.Target, text, err)
	}
}
