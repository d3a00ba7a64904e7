package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/agent"
	"github.com/backstop-llm/backstop/llm"
)

// lookup is a tool that is not Once: it reads an order.
func lookup(t *testing.T, ran *int) agent.Tool {
	t.Helper()
	type in struct {
		OrderID string `json:"order_id"`
	}
	type out struct {
		Status string `json:"status"`
	}
	tool, err := agent.NewTool(agent.ToolConfig{Name: "lookup", Description: "reads an order"}, func(_ context.Context, i in) (out, error) {
		*ran++
		return out{Status: "delivered " + i.OrderID}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

// TestTwoStepLoop: the model looks the order up, then refunds it, then
// answers; each call runs once with its arguments, its result goes back
// by the call's stable id, and the final conversation is valid.
func TestTwoStepLoop(t *testing.T) {
	var looked int
	var r refunds
	m := &model{name: "anthropic", fn: func(n int, req llm.Request) (*llm.Response, error) {
		switch n {
		case 0:
			return calls("Let me look.", call("toolu_a", "lookup", `{"order_id":"o-1"}`)), nil
		case 1:
			return calls("", call("toolu_b", "refund", `{"order_id":"o-1","cents":500}`)), nil
		}
		return answer("Refunded $5."), nil
	}}
	l := loop(t, agent.Config{Chain: chainOf(t, m), Tools: []agent.Tool{lookup(t, &looked), r.tool(t, agent.ToolConfig{}, nil)}})
	res, err := l.Run(context.Background(), ask("conv-1", "refund o-1"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "Refunded $5." || looked != 1 || r.count() != 1 {
		t.Fatalf("text %q, lookups %d, refunds %d", res.Text, looked, r.count())
	}
	if len(res.Steps) != 2 || res.Steps[0].Index != 1 || res.Steps[1].Index != 3 || len(res.Calls) != 3 {
		t.Fatalf("steps %+v, %d chain calls", res.Steps, len(res.Calls))
	}
	if c := res.Steps[1].Calls[0]; c.Call.ID != "call_3_0" || c.Call.Key != "conv-1/3/0" || c.Output != `{"refund_id":"r-conv-1/3/0","cents":500}` || c.Replayed || c.Recovered {
		t.Fatalf("the refund call: %+v", c)
	}
	if k := res.Steps[0].Calls[0].Call.Key; k != "" {
		t.Fatalf("a tool that is not Once has key %q", k)
	}
	reqs := m.asked()
	if got := results(reqs[1]); len(got) != 1 || got[0].CallID != "call_1_0" || got[0].Content != `{"status":"delivered o-1"}` || got[0].IsError {
		t.Fatalf("the lookup's result sent: %+v", got)
	}
	if said := reqs[1].Messages[1]; said.Role != llm.RoleAssistant || said.Content != "Let me look." || said.Parts[0].ToolCall.ID != "call_1_0" {
		t.Fatalf("the assistant turn replayed: %+v", said)
	}
	if len(reqs[0].Tools) != 2 || reqs[0].Tools[1].Name != "refund" {
		t.Fatalf("the tools sent: %+v", reqs[0].Tools)
	}
	conv := res.Conversation
	if len(conv.Messages) != 6 || conv.Messages[5].Content != "Refunded $5." {
		t.Fatalf("conversation: %+v", conv.Messages)
	}
	if err := conv.Validate(); err != nil {
		t.Fatalf("the conversation is not valid: %v", err)
	}
}

// TestTypedTool: a typed tool's schema is derived from its input type
// (required unless omitempty, descriptions from the jsonschema tag) and
// its calls' arguments are decoded into it; a given Schema is kept.
func TestTypedTool(t *testing.T) {
	type In struct {
		City  string   `json:"city" jsonschema:"the city"`
		Days  int      `json:"days,omitempty"`
		Units []string `json:"units,omitempty"`
	}
	var got In
	tool, err := agent.NewTool(agent.ToolConfig{Name: "forecast"}, func(_ context.Context, in In) (map[string]any, error) {
		got = in
		return map[string]any{"sky": "clear"}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"object","properties":{"city":{"type":"string","description":"the city"},"days":{"type":"integer"},"units":{"type":["null","array"],"items":{"type":"string"}}},"required":["city"],"additionalProperties":false}`
	if string(tool.InputSchema) != want {
		t.Fatalf("schema\n%s\nwant\n%s", tool.InputSchema, want)
	}
	out, err := tool.Run(context.Background(), agent.Call{Name: "forecast", Arguments: json.RawMessage(`{"city":"Paris","days":3,"units":["C"]}`)})
	if err != nil || string(out) != `{"sky":"clear"}` {
		t.Fatalf("run: %s, %v", out, err)
	}
	if got.City != "Paris" || got.Days != 3 || len(got.Units) != 1 {
		t.Fatalf("decoded %+v", got)
	}
	given, err := agent.NewTool(agent.ToolConfig{Name: "forecast", Schema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, In) (In, error) { return In{}, nil })
	if err != nil || string(given.InputSchema) != `{"type":"object"}` {
		t.Fatalf("a given schema: %s, %v", given.InputSchema, err)
	}
	if _, err := agent.NewTool(agent.ToolConfig{Name: "bad"}, func(context.Context, chan int) (int, error) { return 0, nil }); !errors.Is(err, llm.ErrInvalidConfig) {
		t.Fatalf("an input with no schema: %v", err)
	}
}

// TestValidate: every problem of a Config is reported at once, saying
// what to change.
func TestValidate(t *testing.T) {
	run := func(context.Context, agent.Call) (json.RawMessage, error) { return nil, nil }
	_, err := agent.New(agent.Config{MaxTurns: -1, Tools: []agent.Tool{
		{Name: "refund", Run: run, Once: true},
		{Name: "bad name!", Run: run},
		{Name: "refund", Run: run, Recover: run, Once: true, OnDuplicate: 7},
		{Name: "x"},
	}})
	if !errors.Is(err, llm.ErrInvalidConfig) {
		t.Fatalf("got %v", err)
	}
	for _, says := range []string{"Chain is nil", "MaxTurns is -1", "Once without Recover", `"bad name!": Name must be`,
		`two tools are named "refund"`, "OnDuplicate is Duplicate(7)", `"x": Run is nil`} {
		if !strings.Contains(err.Error(), says) {
			t.Errorf("the error does not say %q:\n%v", says, err)
		}
	}
}

// TestToolErrorGoesToTheModel: a tool's error is an error tool result
// with its text, and the loop goes on.
func TestToolErrorGoesToTheModel(t *testing.T) {
	m := &model{name: "anthropic", fn: func(n int, req llm.Request) (*llm.Response, error) {
		if n == 0 {
			return calls("", call("t1", "stock", `{}`)), nil
		}
		return answer("The stock service is down."), nil
	}}
	stock := agent.Tool{Name: "stock", Run: func(context.Context, agent.Call) (json.RawMessage, error) {
		return nil, errors.New("stock service: 503")
	}}
	res, err := loop(t, agent.Config{Chain: chainOf(t, m), Tools: []agent.Tool{stock}}).Run(context.Background(), ask("", "stock?"))
	if err != nil {
		t.Fatal(err)
	}
	got := results(m.asked()[1])
	if len(got) != 1 || !got[0].IsError || got[0].Content != "stock service: 503" {
		t.Fatalf("sent %+v", got)
	}
	if r := res.Steps[0].Calls[0]; !r.IsError || r.Output != "stock service: 503" || res.Text != "The stock service is down." {
		t.Fatalf("result %+v, %q", r, res.Text)
	}
}

// TestErrStopEndsTheLoop: a tool error wrapping ErrStop ends the loop:
// the model is not asked again, the other calls of the step are answered
// "not run", and the conversation ends with the step's results.
func TestErrStopEndsTheLoop(t *testing.T) {
	m := &model{name: "anthropic", fn: func(n int, req llm.Request) (*llm.Response, error) {
		return calls("", call("t1", "handoff", `{}`), call("t2", "stock", `{}`)), nil
	}}
	stocked := 0
	tools := []agent.Tool{
		{Name: "handoff", Run: func(context.Context, agent.Call) (json.RawMessage, error) {
			return nil, fmt.Errorf("%w: the customer asked for a human", agent.ErrStop)
		}},
		{Name: "stock", Run: func(context.Context, agent.Call) (json.RawMessage, error) { stocked++; return nil, nil }},
	}
	res, err := loop(t, agent.Config{Chain: chainOf(t, m), Tools: tools}).Run(context.Background(), ask("", "help"))
	if !errors.Is(err, agent.ErrStop) || !strings.Contains(err.Error(), "the customer asked for a human") {
		t.Fatalf("got %v", err)
	}
	if len(m.asked()) != 1 || stocked != 0 {
		t.Fatalf("model asked %d times, stock ran %d times", len(m.asked()), stocked)
	}
	msgs := res.Conversation.Messages
	if len(msgs) != 3 || len(msgs[2].Parts) != 2 || !strings.HasPrefix(msgs[2].Parts[1].ToolResult.Content, "not run") {
		t.Fatalf("conversation %+v", msgs)
	}
	if err := res.Conversation.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestMaxTurns: a model that keeps calling tools is stopped at MaxTurns:
// the last turn's calls are not run, and the conversation ends before it.
func TestMaxTurns(t *testing.T) {
	m := &model{name: "anthropic", fn: func(n int, req llm.Request) (*llm.Response, error) {
		return calls("", call("t", "lookup", `{"order_id":"o"}`)), nil
	}}
	var looked int
	res, err := loop(t, agent.Config{Chain: chainOf(t, m), Tools: []agent.Tool{lookup(t, &looked)}, MaxTurns: 3}).Run(context.Background(), ask("", "loop"))
	if !errors.Is(err, agent.ErrMaxTurns) {
		t.Fatalf("got %v", err)
	}
	if len(m.asked()) != 3 || looked != 2 || len(res.Steps) != 2 || len(res.Conversation.Messages) != 5 {
		t.Fatalf("asked %d, ran %d, steps %d, messages %d", len(m.asked()), looked, len(res.Steps), len(res.Conversation.Messages))
	}
}

// TestParallelToolsRunConcurrently: the Parallel calls of a turn run at
// once (each waits at a barrier for the others), and their results come
// back in call order; a call that is not Parallel runs alone.
func TestParallelToolsRunConcurrently(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &model{name: "anthropic", fn: func(n int, req llm.Request) (*llm.Response, error) {
			if n == 0 {
				return calls("", call("a", "slow", `{"n":0}`), call("b", "slow", `{"n":1}`), call("c", "slow", `{"n":2}`), call("d", "alone", `{}`)), nil
			}
			return answer("ok"), nil
		}}
		var barrier sync.WaitGroup
		barrier.Add(3)
		var mu sync.Mutex
		running, most := 0, 0
		slow := agent.Tool{Name: "slow", Parallel: true, Run: func(ctx context.Context, c agent.Call) (json.RawMessage, error) {
			barrier.Done()
			arrived := make(chan struct{})
			go func() { barrier.Wait(); close(arrived) }()
			select {
			case <-arrived:
			case <-time.After(time.Second):
				return nil, errors.New("the other calls did not run meanwhile")
			}
			return c.Arguments, nil
		}}
		alone := agent.Tool{Name: "alone", Run: func(context.Context, agent.Call) (json.RawMessage, error) {
			mu.Lock()
			running++
			most = max(most, running)
			running--
			mu.Unlock()
			return json.RawMessage(`"alone"`), nil
		}}
		res, err := loop(t, agent.Config{Chain: chainOf(t, m), Tools: []agent.Tool{slow, alone}}).Run(context.Background(), ask("", "go"))
		if err != nil {
			t.Fatal(err)
		}
		got := results(m.asked()[1])
		want := []string{`{"n":0}`, `{"n":1}`, `{"n":2}`, `"alone"`}
		for i, r := range got {
			if r.IsError || r.Content != want[i] || r.CallID != fmt.Sprintf("call_1_%d", i) {
				t.Fatalf("result %d: %+v", i, r)
			}
		}
		if len(got) != 4 || most != 1 || len(res.Steps[0].Calls) != 4 {
			t.Fatalf("results %+v", got)
		}
	})
}
