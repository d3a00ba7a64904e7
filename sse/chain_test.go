package sse_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/sse"
)

// serve streams c's answer to question with sse.Chain, the stream made
// with the request's context; the handler's outcome (Write's error, the
// stream's Result error) arrives on the channel returned.
func serve(t *testing.T, c *chain.Chain, req llm.Request) (*httptest.Server, chan [2]error) {
	t.Helper()
	ended := make(chan [2]error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := c.Stream(r.Context(), req)
		werr := sse.Write(w, r, sse.Chain(s))
		_, rerr := s.Result()
		ended <- [2]error{werr, rerr}
	}))
	t.Cleanup(srv.Close)
	return srv, ended
}

func build(t *testing.T, b *chain.Builder) *chain.Chain {
	t.Helper()
	c, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func expect(t *testing.T, evs []got, want []got) {
	t.Helper()
	if len(evs) != len(want) {
		t.Fatalf("events\n%v\nwant\n%v", evs, want)
	}
	for i := range want {
		if evs[i] != want[i] {
			t.Errorf("event %d: %v, want %v", i, evs[i], want[i])
		}
	}
}

// A chain that restarts its answer on the fallback (RestartStreams): the
// text so far, "restart", the fallback's text, then "done" naming the
// fallback.
func TestChainRestart(t *testing.T) {
	overloaded := &llm.Error{Provider: "a", Status: 200, Kind: llm.KindOverloaded, Message: "Overloaded"}
	a := &sprov{name: "a", steps: append(texts("One ", "two "), step{err: overloaded})}
	b := &sprov{name: "b", steps: texts("Fresh ", "answer.")}
	c := build(t, chain.New("c").RestartStreams(true).
		Primary(chain.Target{Name: "primary", Provider: a, Model: "m"}).
		OrProvider(chain.Target{Name: "fallback", Provider: b, Model: "m"}))
	srv, ended := serve(t, c, question)
	evs := newReader(open(t, t.Context(), srv.URL).Body).all(t)
	expect(t, evs, []got{
		{"text", `{"text":"One "}`},
		{"text", `{"text":"two "}`},
		{"restart", `{}`},
		{"text", `{"text":"Fresh "}`},
		{"text", `{"text":"answer."}`},
		{"done", `{"target":"fallback","provider":"b","model":"m-b","cost":"≥~$0"}`},
	})
	if e := <-ended; e[0] != nil || e[1] != nil {
		t.Fatalf("Write %v, Result %v; want nil, nil", e[0], e[1])
	}
}

// A stream cut short without RestartStreams ends with an "error" event:
// the verdict and its status, a message saying the answer was cut, and
// nothing of the provider's message (which quotes the prompt here).
// A call refused before its first chunk is the same, with its verdict.
func TestChainError(t *testing.T) {
	leak := "my secret question"
	cut := &llm.Error{Provider: "a", Status: 200, Kind: llm.KindOverloaded, Message: "overloaded reading " + leak}
	bad := &llm.Error{Provider: "a", Status: 400, Kind: llm.KindBadRequest, Message: "invalid: " + leak}
	for _, tc := range []struct {
		name  string
		steps []step
		want  []got
	}{
		{"cut", append(texts("One "), step{err: cut}), []got{
			{"text", `{"text":"One "}`},
			{"error", `{"message":"The answer was cut short; try again shortly.","verdict":"retry_later","status":503}`},
		}},
		{"refused", []step{{err: bad}}, []got{
			{"error", `{"message":"This request cannot be answered.","verdict":"bad_request","status":400}`},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &sprov{name: "a", steps: tc.steps}
			c := build(t, chain.New("c").Primary(chain.Target{Name: "primary", Provider: a, Model: "m"}))
			srv, ended := serve(t, c, question)
			evs := newReader(open(t, t.Context(), srv.URL).Body).all(t)
			expect(t, evs, tc.want)
			for _, ev := range evs {
				if strings.Contains(ev.Data, "secret") {
					t.Errorf("event %v quotes the provider's message", ev)
				}
			}
			if e := <-ended; e[0] == nil || e[0] != e[1] {
				t.Fatalf("Write %v, Result %v: want the stream's error from both", e[0], e[1])
			}
		})
	}
}

// The answer's tool calls are listed in "done" once checked, never sent
// as tool activity: nothing runs them while the chain streams.
func TestChainToolCalls(t *testing.T) {
	call := &llm.ToolCall{ID: "call_1", Name: "refund", Arguments: []byte(`{"order":"A-1","amount":"my secret"}`)}
	a := &sprov{name: "a", steps: []step{{text: "Refunding."}, {call: call}}}
	c := build(t, chain.New("c").Primary(chain.Target{Name: "primary", Provider: a, Model: "m"}))
	req := question
	req.Tools = []llm.Tool{{Name: "refund", InputSchema: []byte(`{"type":"object","properties":{"order":{"type":"string"}},"required":["order"]}`)}}
	srv, ended := serve(t, c, req)
	evs := newReader(open(t, t.Context(), srv.URL).Body).all(t)
	expect(t, evs, []got{
		{"text", `{"text":"Refunding."}`},
		{"done", `{"target":"primary","provider":"a","model":"m-a","cost":"$0","tool_calls":[{"id":"call_1","name":"refund"}]}`},
	})
	if e := <-ended; e[0] != nil || e[1] != nil {
		t.Fatalf("Write %v, Result %v", e[0], e[1])
	}
}

// A browser that leaves mid-answer cancels the provider's stream (made
// with r.Context()), Write returns the context's error, and the stream is
// abandoned or canceled: nothing is left running (goleak).
func TestChainClientLeaves(t *testing.T) {
	a := &sprov{name: "a", steps: []step{{text: "One "}, {block: true}}, ctxEnd: make(chan struct{})}
	c := build(t, chain.New("c").Primary(chain.Target{Name: "primary", Provider: a, Model: "m"}))
	srv, ended := serve(t, c, question)
	ctx, cancel := context.WithCancel(t.Context())
	if ev, err := newReader(open(t, ctx, srv.URL).Body).next(); err != nil || ev.Name != "text" {
		t.Fatalf("first event %v, %v", ev, err)
	}
	cancel()
	<-a.ctxEnd // the provider's stream saw its context end
	e := <-ended
	if !errors.Is(e[0], context.Canceled) {
		t.Errorf("Write = %v, want context.Canceled", e[0])
	}
	if !errors.Is(e[1], chain.ErrAbandoned) && !errors.Is(e[1], context.Canceled) {
		t.Errorf("Result = %v, want the stream abandoned or canceled", e[1])
	}
}
