package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/agent"
	"github.com/backstop-llm/backstop/ledger"
	"github.com/backstop-llm/backstop/llm"
)

// TestLeaseShortensTakeover: a tool's Lease is how long a dead replica
// holds its call's key: another replica recovers it once the Lease, not
// the default 2 × Timeout + 10 s, has run out.
func TestLeaseShortensTakeover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r refunds
		shared := ledger.NewMemory()
		dying := true
		hang := func(ctx context.Context, _ RefundIn) error {
			if dying {
				r.issue("conv-1/1/0")
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		}
		tool := r.tool(t, agent.ToolConfig{Timeout: time.Second, Lease: 3 * time.Second}, hang)
		m := &model{name: "anthropic", fn: refunder("500")}
		dead := loop(t, agent.Config{Chain: chainOf(t, m), Ledger: shared, Owner: "dead", Tools: []agent.Tool{tool}})
		ctx, kill := context.WithCancel(context.Background())
		go func() { time.Sleep(100 * time.Millisecond); kill() }()
		start := time.Now()
		if _, err := dead.Run(ctx, ask("conv-1", "refund o-1")); !errors.Is(err, context.Canceled) {
			t.Fatalf("the dying run: %v", err)
		}
		dying = false
		alive := loop(t, agent.Config{Chain: chainOf(t, m), Ledger: shared, Owner: "alive", Tools: []agent.Tool{tool}})
		res, err := alive.Run(context.Background(), ask("conv-1", "refund o-1"))
		if err != nil {
			t.Fatal(err)
		}
		if c := res.Steps[0].Calls[0]; !c.Recovered || r.count() != 1 || r.recovered != 1 {
			t.Fatalf("call %+v; refunds %d, recoveries %d", c, r.count(), r.recovered)
		}
		// The alive replica polls the key with a backoff up to 1 s.
		if took := time.Since(start); took < 3*time.Second || took > 5*time.Second {
			t.Fatalf("recovered after %v; want the 3 s Lease (and a poll)", took)
		}
	})
}

// TestLeaseValidate: a Lease that is negative, or that a call still
// running could outlive (not more than twice Timeout), is refused.
func TestLeaseValidate(t *testing.T) {
	rec := func(context.Context, agent.Call) (json.RawMessage, error) { return nil, nil }
	refund := func(context.Context, RefundIn) (RefundOut, error) { return RefundOut{}, nil }
	for _, c := range []struct {
		timeout, lease time.Duration
		says           string
	}{
		{time.Second, -time.Second, "Lease is -1s; it must not be negative"},
		{time.Second, 2 * time.Second, "Lease is 2s, not more than twice Timeout (1s)"},
		{0, time.Minute, "Lease is 1m0s, not more than twice Timeout (1m0s)"},
	} {
		_, err := agent.NewTool(agent.ToolConfig{Name: "refund", Once: true, Timeout: c.timeout, Lease: c.lease, Recover: rec}, refund)
		if !errors.Is(err, llm.ErrInvalidConfig) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("Timeout %v, Lease %v: got %v, want %q", c.timeout, c.lease, err, c.says)
		}
	}
	if _, err := agent.NewTool(agent.ToolConfig{Name: "refund", Once: true, Timeout: time.Second, Lease: 2*time.Second + time.Millisecond, Recover: rec}, refund); err != nil {
		t.Errorf("a Lease just over twice Timeout: %v", err)
	}
}
