package agent_test

import (
	"context"
	"errors"
	"testing"

	"github.com/backstop-llm/backstop/agent"
	"github.com/backstop-llm/backstop/ledger"
	"github.com/backstop-llm/backstop/llm"
)

// TestAToolThatPanicsEndsTheLoop: a tool's panic, even in a parallel
// batch on a goroutine of the loop's, ends the loop with a *PanicError
// instead of the process; it is not sent to the model; a Once tool's key
// is left Started, its outcome unknown, for Recover to answer later.
func TestAToolThatPanicsEndsTheLoop(t *testing.T) {
	m := &model{name: "anthropic", fn: func(_ int, req llm.Request) (*llm.Response, error) {
		if answered(req) {
			return answer("done"), nil
		}
		return calls("", call("t1", "look", `{}`), call("t2", "look", `{}`)), nil
	}}
	look, err := agent.NewTool(agent.ToolConfig{Name: "look", Description: "looks", Parallel: true},
		func(context.Context, struct{}) (struct{}, error) { panic("boom") })
	if err != nil {
		t.Fatal(err)
	}
	_, err = loop(t, agent.Config{Chain: chainOf(t, m), Tools: []agent.Tool{look}}).Run(context.Background(), ask("c-1", "look"))
	var pe *agent.PanicError
	if !errors.As(err, &pe) || pe.Tool != "look" || pe.Value != "boom" || len(pe.Stack) == 0 {
		t.Fatalf("Run = %v; want a *PanicError of look with its stack", err)
	}
	if n := len(m.asked()); n != 1 {
		t.Errorf("the model was asked %d times; the panic must not go back to it", n)
	}

	var r refunds
	once := r.tool(t, agent.ToolConfig{}, func(context.Context, RefundIn) error { panic("mid-refund") })
	led := ledger.NewMemory()
	m2 := &model{name: "anthropic", fn: func(_ int, req llm.Request) (*llm.Response, error) {
		return calls("", call("t1", "refund", `{"order_id":"o-1","cents":5}`)), nil
	}}
	_, err = loop(t, agent.Config{Chain: chainOf(t, m2), Tools: []agent.Tool{once}, Ledger: led}).Run(context.Background(), ask("c-2", "refund"))
	if !errors.As(err, &pe) || pe.Value != "mid-refund" {
		t.Fatalf("Run = %v; want the refund's *PanicError", err)
	}
	if e, _ := led.Get(context.Background(), "c-2/1/0"); e.State != ledger.Started {
		t.Errorf("the panicked refund's key is %v; want started (outcome unknown)", e.State)
	}
}
