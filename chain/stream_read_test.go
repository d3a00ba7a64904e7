package chain_test

// Reading a Stream: once, in any order, and what a complete answer that
// fails its schema does.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/backstop-llm/backstop/cache"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/degrade"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/validate"
)

// streamAB opens a Stream of a chain whose one target streams "a", "b".
func streamAB(t *testing.T) (*streamer, *chain.Stream) {
	t.Helper()
	p := &streamer{stub: stub{name: "p"}, chunks: []string{"a", "b"}}
	c, err := chain.New("c").Primary(chain.Target{Name: "p", Provider: p, Model: "m"}).Build()
	if err != nil {
		t.Fatal(err)
	}
	return p, c.Stream(context.Background(), hi)
}

// TestRangingChunksTwiceSendsNothingMore: the second range sent the whole
// call again.
func TestRangingChunksTwiceSendsNothingMore(t *testing.T) {
	p, s := streamAB(t)
	if cs, err := collect(t, s); err != nil || texts(cs) != "ab" {
		t.Fatalf("first range: %q, %v", texts(cs), err)
	}
	cs, err := collect(t, s)
	if !errors.Is(err, chain.ErrStreamConsumed) || len(cs) != 0 {
		t.Errorf("second range: %q, %v; want ErrStreamConsumed and nothing", texts(cs), err)
	}
	if p.opened != 1 {
		t.Errorf("%d streams opened; want 1", p.opened)
	}
	if res, err := s.Result(); err != nil || res.Text != "ab" {
		t.Errorf("Result after both: %q, %v; want the first range's", res.Text, err)
	}
}

// TestResultBeforeRangingReadsTheStream: Result before ranging returned
// (nil, nil).
func TestResultBeforeRangingReadsTheStream(t *testing.T) {
	_, s := streamAB(t)
	res, err := s.Result()
	if err != nil || res == nil || res.Text != "ab" || res.Served.Target != "p" {
		t.Fatalf("Result: %+v, %v; want the whole answer", res, err)
	}
	if _, err := collect(t, s); !errors.Is(err, chain.ErrStreamConsumed) {
		t.Errorf("ranging after Result: %v; want ErrStreamConsumed", err)
	}
}

var objectSchema = []byte(`{"type":"object","required":["answer"]}`)

// TestStreamedAnswerFailingItsSchemaIsNotIncomplete: a complete streamed
// answer that failed the schema ended as ErrIncomplete ("the stream failed
// after it started", which it did not).
func TestStreamedAnswerFailingItsSchemaIsNotIncomplete(t *testing.T) {
	p := &streamer{stub: stub{name: "p"}, chunks: []string{"not ", "json"}}
	c, err := chain.New("c").Schema(objectSchema).Primary(chain.Target{Name: "p", Provider: p, Model: "m"}).Build()
	if err != nil {
		t.Fatal(err)
	}
	_, err = collect(t, c.Stream(context.Background(), hi))
	if errors.Is(err, chain.ErrIncomplete) || !errors.Is(err, validate.ErrInvalid) || llm.KindOf(err) != llm.KindInvalidOutput {
		t.Errorf("got %v; want the schema failure, not ErrIncomplete", err)
	}
}

// TestStreamedAnswerFailingItsSchemaRestartsToLastGood: with
// RestartStreams, a complete answer that fails the schema moves on, here
// to a remembered answer, after a visible restart.
func TestStreamedAnswerFailingItsSchemaRestartsToLastGood(t *testing.T) {
	store, err := cache.NewMemory(cache.MemoryConfig{MaxEntries: 10, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	p := &streamer{stub: stub{name: "p"}, chunks: []string{`{"answer":`, `"yes"}`}}
	c, err := chain.New("c").Schema(objectSchema).RestartStreams(true).
		Primary(chain.Target{Name: "p", Provider: p, Model: "m"}).
		OrDegrade(degrade.LastGood(degrade.LastGoodConfig{Store: store})).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := collect(t, c.Stream(context.Background(), hi)); err != nil {
		t.Fatal(err) // remembered
	}
	p.chunks = []string{"not ", "json"}
	s := c.Stream(context.Background(), hi)
	cs, err := collect(t, s)
	if err != nil || texts(cs) != `not json|RESTART|{"answer":"yes"}` {
		t.Fatalf("got %q, %v; want a restart to the remembered answer", texts(cs), err)
	}
	res, _ := s.Result()
	if !res.Degraded || res.Served.Target != "last-good" {
		t.Errorf("served by %+v", res.Served)
	}
}
