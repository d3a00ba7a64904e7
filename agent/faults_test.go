package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/agent"
	"github.com/backstop-llm/backstop/ledger"
	"github.com/backstop-llm/backstop/llm"
)

// TestExactlyOnceUnderFaults runs 300 refund conversations over two
// replicas sharing a ledger, with faults at the step boundaries: the model
// failing after the refund ran (the caller retries the whole request on
// the other replica), the refund timing out after it acted, the replica
// killed between Started and Done, and concurrent duplicates. Each
// refund is issued exactly once per key, every conversation ends with
// its receipt, and a retried step keeps its first arguments although the
// model picks new ones each time it is asked.
func TestExactlyOnceUnderFaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const conversations = 300
		rng := rand.New(rand.NewPCG(27, 1))
		type plan struct {
			failAfter int  // model failures once the refund has run
			timeout   bool // the refund acts, then outlives its Timeout
			kill      bool // the replica dies after the refund acted
			together  bool // both replicas take the first request at once
		}
		var mu sync.Mutex
		plans := map[string]*plan{}
		kills := map[string]context.CancelFunc{}
		asks := map[string]int{}
		var r refunds
		fn := func(_ int, req llm.Request) (*llm.Response, error) {
			conv := req.Messages[0].Content
			mu.Lock()
			defer mu.Unlock()
			asks[conv]++
			p := plans[conv]
			if answered(req) {
				if p.failAfter > 0 {
					p.failAfter--
					return nil, down("anthropic")
				}
				return answer("Refunded."), nil
			}
			// Each time it is asked, the model picks another amount.
			return calls("", call("toolu_1", "refund", fmt.Sprintf(`{"order_id":%q,"cents":%d}`, conv, 100*asks[conv]))), nil
		}
		body := func(ctx context.Context, in RefundIn) error {
			c, _ := agent.CallFrom(ctx)
			mu.Lock()
			p := plans[in.OrderID]
			timeout, kill := p.timeout, p.kill
			p.timeout, p.kill = false, false
			cancel := kills[in.OrderID]
			mu.Unlock()
			switch {
			case timeout:
				r.issue(c.Key)
				<-ctx.Done()
				return ctx.Err()
			case kill:
				r.issue(c.Key)
				cancel()
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		}
		shared := ledger.NewMemory()
		replicas := make([]*agent.Loop, 2)
		for i := range replicas {
			m := &model{name: "anthropic", fn: fn}
			replicas[i] = loop(t, agent.Config{Chain: chainOf(t, m), Ledger: shared, Owner: fmt.Sprint("replica-", i),
				Tools: []agent.Tool{r.tool(t, agent.ToolConfig{Timeout: time.Second}, body)}})
		}
		request := func(replica int, id string) (*agent.Result, error) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			mu.Lock()
			kills[id] = cancel
			mu.Unlock()
			return replicas[replica].Run(ctx, ask(id, id))
		}
		var faults [4]int
		for n := range conversations {
			id := fmt.Sprint("o-", n)
			p := &plan{failAfter: rng.IntN(3)}
			switch rng.IntN(4) {
			case 1:
				p.timeout = true
			case 2:
				p.kill = true
			case 3:
				p.together = true
			}
			for i, on := range []bool{p.failAfter > 0, p.timeout, p.kill, p.together} {
				if on {
					faults[i]++
				}
			}
			mu.Lock()
			plans[id] = p
			mu.Unlock()
			var first []agent.ToolRun
			var res *agent.Result
			var err error
			if p.together {
				var wg sync.WaitGroup
				var other *agent.Result
				wg.Go(func() { other, _ = request(1, id) })
				res, err = request(0, id)
				wg.Wait()
				if other != nil && len(other.Steps) > 0 {
					first = append(first, other.Steps[0].Calls...)
				}
			} else {
				res, err = request(0, id)
			}
			for try := 1; err != nil; try++ {
				if res != nil && len(res.Steps) > 0 {
					first = append(first, res.Steps[0].Calls...)
				}
				if try > 5 {
					t.Fatalf("%s: still failing: %v", id, err)
				}
				time.Sleep(15 * time.Second) // a dead replica's lease runs out
				res, err = request(try%2, id)
			}
			// Whichever replica recorded the step first, every request
			// ran its call, with its arguments, and got its receipt.
			got := res.Steps[0].Calls[0]
			key := id + "/1/0"
			var in RefundIn
			if err := json.Unmarshal(got.Call.Arguments, &in); err != nil || in.OrderID != id {
				t.Fatalf("%s: the final call %s (%v)", id, got.Call.Arguments, err)
			}
			if got.Output != fmt.Sprintf(`{"refund_id":"r-%s","cents":%d}`, key, in.Cents) {
				t.Fatalf("%s (%+v): the final call %+v", id, p, got)
			}
			if !p.together && in.Cents != 100 {
				t.Fatalf("%s: the step was asked again: %s", id, got.Call.Arguments)
			}
			for _, c := range first {
				if string(c.Call.Arguments) != string(got.Call.Arguments) || c.Output != got.Output {
					t.Fatalf("%s: an earlier request's call %+v differs from the last's %+v", id, c, got)
				}
			}
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if len(r.issued) != conversations {
			t.Fatalf("%d keys refunded of %d", len(r.issued), conversations)
		}
		for key, n := range r.issued {
			if n != 1 {
				t.Fatalf("%s refunded %d times", key, n)
			}
		}
		t.Logf("%d conversations: %d with model failures after the refund, %d refund timeouts, %d replicas killed, %d concurrent duplicates; %d recoveries",
			conversations, faults[0], faults[1], faults[2], faults[3], r.recovered)
	})
}
