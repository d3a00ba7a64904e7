package sse_test

import (
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/backstop-llm/backstop/agent"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/anthropic"
	"github.com/backstop-llm/backstop/provider/fake"
	"github.com/backstop-llm/backstop/sse"
)

// refundLoop is a tool loop over the fake provider whose model calls a
// Once refund tool, then answers; refunds counts the tool's runs.
func refundLoop(t *testing.T, refunds *atomic.Int32) *agent.Loop {
	t.Helper()
	s := fake.New()
	t.Cleanup(s.Close)
	s.Script("claude-sonnet-5-5",
		fake.CallTools(fake.ToolCall{Name: "refund", Arguments: `{"order_id":"o-1"}`}),
		fake.Answer("Refunded order o-1."))
	claude, err := anthropic.New(anthropic.Config{APIKey: "sk-ant-test", BaseURL: s.URL(), HTTPClient: s.Client()})
	if err != nil {
		t.Fatal(err)
	}
	c := build(t, chain.New("support").Primary(chain.Target{Name: "claude", Provider: claude, Model: "claude-sonnet-5-5"}))
	type in struct {
		OrderID string `json:"order_id"`
	}
	type out struct {
		RefundID string `json:"refund_id"`
	}
	refund, err := agent.NewTool(agent.ToolConfig{Name: "refund", Description: "Refunds an order.", Once: true,
		Recover: agent.Func(func(context.Context, in) (out, error) { return out{RefundID: "looked up"}, nil })},
		func(context.Context, in) (out, error) {
			refunds.Add(1)
			return out{RefundID: "re_1"}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	l, err := agent.New(agent.Config{Chain: c, Tools: []agent.Tool{refund}})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestLoopOverHTTP: a tool loop streamed to a real HTTP client: the tool's
// start and end (id and name, no arguments or result), the answer, then
// "done"; the same request again replays the refund ("replayed": true)
// without running the tool.
func TestLoopOverHTTP(t *testing.T) {
	var refunds atomic.Int32
	l := refundLoop(t, &refunds)
	conv := agent.Conversation{ID: "ticket-42", Request: llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "Refund o-1."}}}}
	srv := httptest.NewServer(sse.Handler(func(r *http.Request) iter.Seq2[sse.Event, error] {
		return sse.Loop(l.Stream(r.Context(), conv))
	}))
	t.Cleanup(srv.Close)
	for i, replayed := range []string{"", `,"replayed":true`} {
		evs := newReader(open(t, context.Background(), srv.URL).Body).all(t)
		var text strings.Builder
		var rest []got
		for _, ev := range evs {
			if ev.Name != "text" {
				rest = append(rest, ev)
				continue
			}
			var d sse.TextData
			if err := json.Unmarshal([]byte(ev.Data), &d); err != nil {
				t.Fatal(err)
			}
			text.WriteString(d.Text)
		}
		want := []got{
			{"tool_started", `{"id":"call_1_0","name":"refund"}`},
			{"tool_finished", `{"id":"call_1_0","name":"refund"` + replayed + `}`},
		}
		if len(rest) != 3 || rest[2].Name != "done" || text.String() != "Refunded order o-1." {
			t.Fatalf("request %d: events %v; want %v, the answer's text, then done", i+1, evs, want)
		}
		expect(t, rest[:2], want)
	}
	if n := refunds.Load(); n != 1 {
		t.Errorf("the refund ran %d times over two requests; want 1", n)
	}
}

// TestLoopErrorOverHTTP: a loop that fails ends with an "error" event
// chosen by the verdict, not the provider's words, and no "done".
func TestLoopErrorOverHTTP(t *testing.T) {
	s := fake.New()
	t.Cleanup(s.Close)
	s.Script("claude-sonnet-5-5", fake.Status(400))
	claude, err := anthropic.New(anthropic.Config{APIKey: "sk-ant-test", BaseURL: s.URL(), HTTPClient: s.Client()})
	if err != nil {
		t.Fatal(err)
	}
	c := build(t, chain.New("support").Primary(chain.Target{Name: "claude", Provider: claude, Model: "claude-sonnet-5-5"}))
	l, err := agent.New(agent.Config{Chain: c})
	if err != nil {
		t.Fatal(err)
	}
	conv := agent.Conversation{ID: "ticket-7", Request: llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "my secret question"}}}}
	srv := httptest.NewServer(sse.Handler(func(r *http.Request) iter.Seq2[sse.Event, error] {
		return sse.Loop(l.Stream(r.Context(), conv))
	}))
	t.Cleanup(srv.Close)
	evs := newReader(open(t, context.Background(), srv.URL).Body).all(t)
	expect(t, evs, []got{{"error", `{"message":"This request cannot be answered.","verdict":"bad_request","status":400}`}})
}
