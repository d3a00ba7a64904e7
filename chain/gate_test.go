package chain_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/budget"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
)

// TestBudgetRefusedRetryLeavesTheGateOpen: a 429 asking for a second,
// whose retry the retry budget refuses, ends that call's retry and
// nothing more: the next call is sent to the primary. The gate is the
// provider's word on when it takes requests again, and one call's budget
// is not; closing it at 5% 429s kept a healthy primary gated most of the
// time.
func TestBudgetRefusedRetryLeavesTheGateOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		limited := func(context.Context) (*llm.Response, error) {
			return nil, &llm.Error{Provider: "stub", Status: 429, Kind: llm.KindRateLimited, RetryAfter: time.Second}
		}
		primary := &scripted{name: "p", script: []func(context.Context) (*llm.Response, error){limited, answers}}
		fallback := &scripted{name: "f", script: []func(context.Context) (*llm.Response, error){answers}}
		none, err := budget.NewRatio(budget.RatioConfig{Ratio: 0.01, MinRetries: -1})
		if err != nil {
			t.Fatal(err)
		}
		c, err := chain.New("gate").
			Primary(chain.Target{Name: "primary", Provider: primary, Model: "m", Budget: none}).
			OrProvider(chain.Target{Name: "fallback", Provider: fallback, Model: "m"}).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		req := llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}
		first, err := c.Call(context.Background(), req)
		if err != nil || first.Served.Target != "fallback" {
			t.Fatalf("first call: %v, served by %+v; want the fallback after a refused retry", err, first)
		}
		second, err := c.Call(context.Background(), req)
		if err != nil || second.Served.Target != "primary" {
			t.Fatalf("second call: %v, served by %q; want the primary, its gate open", err, second.Served.Target)
		}
	})
}
