package chain_test

import (
	"context"
	"testing"
	"time"
	"unsafe"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/degrade"
	"github.com/backstop-llm/backstop/llm"
)

// healthyProvider answers every request at once with the same answer.
type healthyProvider struct{ resp llm.Response }

func (*healthyProvider) Name() string { return "anthropic" }

func (h *healthyProvider) Complete(context.Context, llm.Request) (*llm.Response, error) {
	return &h.resp, nil
}

// TestHealthyCallAllocations guards the healthy path's allocations, which
// the overhead benchmark (bench/, a module of its own) measures but does
// not hold: one Result for a call whose context carries a deadline, as a
// service's does; and what DefaultTimeout's per-attempt timer adds to a
// call whose context has none (context.WithTimeout: its context, timer
// and cancel function); and what arming the patience race costs a chain
// with a fallback. A change that allocates more on the path every
// call takes fails here first.
func TestHealthyCallAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes what allocates; run without -race")
	}
	p := &healthyProvider{resp: llm.Response{Text: "ok", Model: "claude-sonnet-5", RequestID: "req_1"}}
	c, err := chain.New("allocs").
		Primary(chain.Target{Name: "sonnet", Provider: p, Model: "claude-sonnet-5"}).
		OrDegrade(degrade.Static(llm.Response{Text: "busy"})).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	withFallback, err := chain.New("allocs-fallback").
		Primary(chain.Target{Name: "sonnet", Provider: p, Model: "claude-sonnet-5"}).
		OrProvider(chain.Target{Name: "gpt", Provider: &timed{name: "openai"}, Model: "gpt-4.1"}).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	req := llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}, Params: llm.Params{MaxTokens: 100}}
	dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name string
		c    *chain.Chain
		ctx  context.Context
		max  float64
	}{
		{"a deadline within DefaultTimeout", c, dctx, 2},
		{"no deadline", c, context.Background(), 6},
		// With a fallback, every attempt arms its patience race: a
		// cancel for the racer to end it with, and a timer.
		{"a fallback and a deadline", withFallback, dctx, 6},
	} {
		allocs := testing.AllocsPerRun(200, func() {
			if res, err := tc.c.Call(tc.ctx, req); err != nil || res.Text != "ok" {
				t.Fatalf("%v", err)
			}
		})
		t.Logf("%s: %.1f allocations", tc.name, allocs)
		if allocs > tc.max {
			t.Errorf("a healthy call with %s allocates %.0f times; at most %.0f", tc.name, allocs, tc.max)
		}
	}
}

// TestResultKeepsItsSizeClass: a healthy call allocates one Result, and
// 320 bytes is its allocator size class; a field added to Result or
// Attempt that crosses it costs every call 32 bytes more. (It was 288
// until cost.Cost took CacheLost, 8 bytes in the Attempt the Result
// holds, to 296: what leaving a warm prompt cache cost has to travel with
// every attempt's cost, to the records, the observers and the policies,
// and no field of Result or Attempt had 8 bytes of padding to give.)
func TestResultKeepsItsSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(chain.Result{}); n > 320 {
		t.Errorf("chain.Result takes %d bytes, over the 320-byte size class", n)
	}
}
