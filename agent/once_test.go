package agent_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/agent"
	"github.com/backstop-llm/backstop/ledger"
	"github.com/backstop-llm/backstop/llm"
)

// down is an llm failure that moves a chain on to its next target.
func down(provider string) error {
	return &llm.Error{Provider: provider, Kind: llm.KindServer, Status: 500}
}

// refunder is a model that refunds order o-1 (for cents) in its first
// turn, then answers.
func refunder(cents string) func(int, llm.Request) (*llm.Response, error) {
	return func(_ int, req llm.Request) (*llm.Response, error) {
		if answered(req) {
			return answer("Refunded."), nil
		}
		return calls("", call("toolu_1", "refund", `{"order_id":"o-1","cents":`+cents+`}`)), nil
	}
}

// TestFailoverAfterTheToolRan: the primary calls the refund, then fails;
// the chain falls back to another provider mid-conversation, which
// finishes it with the refund's result: the refund ran once.
func TestFailoverAfterTheToolRan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary := &model{name: "anthropic", fn: func(n int, req llm.Request) (*llm.Response, error) {
			if n == 0 {
				return refunder("500")(n, req)
			}
			return nil, down("anthropic")
		}}
		fallback := &model{name: "openai", fn: refunder("500")}
		var r refunds
		l := loop(t, agent.Config{Chain: chainOf(t, primary, fallback), Tools: []agent.Tool{r.tool(t, agent.ToolConfig{}, nil)}})
		res, err := l.Run(context.Background(), ask("conv-1", "refund o-1"))
		if err != nil {
			t.Fatal(err)
		}
		if r.count() != 1 || res.Text != "Refunded." || res.Calls[1].Served.Target != "openai" {
			t.Fatalf("refunds %d, %q served by %q", r.count(), res.Text, res.Calls[1].Served.Target)
		}
		sent := fallback.asked()
		if len(sent) != 1 || results(sent[0])[0].CallID != "call_1_0" || !strings.Contains(results(sent[0])[0].Content, "r-conv-1/1/0") {
			t.Fatalf("the fallback was sent %+v", sent)
		}
	})
}

// TestRetriedRequestReplaysTheStep: the refund ran, then every model
// failed; the caller retries the whole request with the same
// conversation. The step is replayed from the ledger (the model is not
// asked for it, so its new arguments never matter) and so is the refund:
// the tool is not called again.
func TestRetriedRequestReplaysTheStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		failing := true
		m := &model{name: "anthropic", fn: func(n int, req llm.Request) (*llm.Response, error) {
			if answered(req) && failing {
				return nil, down("anthropic")
			}
			if n > 0 {
				// Asked the first step again, the model would refund
				// another amount.
				return refunder("900")(n, req)
			}
			return refunder("500")(n, req)
		}}
		var r refunds
		l := loop(t, agent.Config{Chain: chainOf(t, m), Tools: []agent.Tool{r.tool(t, agent.ToolConfig{}, nil)}})
		conv := ask("conv-1", "refund o-1")
		if _, err := l.Run(context.Background(), conv); err == nil {
			t.Fatal("the first request did not fail")
		}
		before := len(m.asked())
		failing = false
		res, err := l.Run(context.Background(), conv)
		if err != nil {
			t.Fatal(err)
		}
		if r.count() != 1 {
			t.Fatalf("%d refunds", r.count())
		}
		retried := m.asked()[before:]
		if len(retried) != 1 || !answered(retried[0]) {
			t.Fatalf("the retry asked the model %d times; want once, for the answer after the refund", len(retried))
		}
		st := res.Steps[0]
		if !st.Replayed || !st.Calls[0].Replayed || string(st.Calls[0].Call.Arguments) != `{"order_id":"o-1","cents":500}` {
			t.Fatalf("step %+v", st)
		}
		if got := results(retried[0])[0]; got.Content != `{"refund_id":"r-conv-1/1/0","cents":500}` {
			t.Fatalf("replayed result %+v", got)
		}
	})
}

// duplicate runs two replicas (two Loops on one ledger) on the same
// conversation, the second while the first's refund is running, and
// returns their results once the first's refund is let go.
func duplicate(t *testing.T, mode agent.Duplicate) (r *refunds, a, b *agent.Result, errA, errB error) {
	r = &refunds{}
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hold := func(ctx context.Context, _ RefundIn) error {
		once.Do(func() { close(started) })
		<-release
		return nil
	}
	shared := ledger.NewMemory()
	replica := func(owner string) *agent.Loop {
		m := &model{name: "anthropic", fn: refunder("500")}
		return loop(t, agent.Config{Chain: chainOf(t, m), Ledger: shared, Owner: owner,
			Tools: []agent.Tool{r.tool(t, agent.ToolConfig{OnDuplicate: mode}, hold)}})
	}
	one, two := replica("replica-1"), replica("replica-2")
	var wg sync.WaitGroup
	wg.Go(func() { a, errA = one.Run(context.Background(), ask("conv-1", "refund o-1")) })
	<-started
	wg.Go(func() { b, errB = two.Run(context.Background(), ask("conv-1", "refund o-1")) })
	synctest.Wait()
	time.Sleep(10 * time.Second)
	close(release)
	wg.Wait()
	return r, a, b, errA, errB
}

// TestConcurrentDuplicateWaits: the second replica, finding the refund
// in progress, waits for its result and replays it.
func TestConcurrentDuplicateWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, a, b, errA, errB := duplicate(t, agent.Wait)
		if errA != nil || errB != nil {
			t.Fatal(errA, errB)
		}
		if r.count() != 1 || a.Steps[0].Calls[0].Replayed || !b.Steps[0].Calls[0].Replayed || !b.Steps[0].Replayed {
			t.Fatalf("refunds %d; first %+v; second %+v", r.count(), a.Steps[0], b.Steps[0])
		}
		if a.Steps[0].Calls[0].Output != b.Steps[0].Calls[0].Output {
			t.Fatalf("outputs %q and %q", a.Steps[0].Calls[0].Output, b.Steps[0].Calls[0].Output)
		}
	})
}

// TestConcurrentDuplicateRefused: with Refuse, the second replica's loop
// ends with ErrDuplicate; the model is not told (it would call again).
func TestConcurrentDuplicateRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _, b, errA, errB := duplicate(t, agent.Refuse)
		if errA != nil || !errors.Is(errB, agent.ErrDuplicate) || !strings.Contains(errB.Error(), "replica-1") {
			t.Fatal(errA, errB)
		}
		if r.count() != 1 || len(b.Steps) != 0 || len(b.Conversation.Messages) != 1 {
			t.Fatalf("refunds %d; second %+v", r.count(), b)
		}
	})
}

// TestOutcomeUnknownIsRecovered: a replica dies between Started and Done
// (its context ends while the refund runs); once its lease ran out, the
// retried request hands the call to Recover, never to the tool.
func TestOutcomeUnknownIsRecovered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r refunds
		shared := ledger.NewMemory()
		dying := true
		hang := func(ctx context.Context, _ RefundIn) error {
			if dying {
				r.issue("conv-1/1/0") // the refund went through; the answer never came
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		}
		tool := r.tool(t, agent.ToolConfig{Timeout: 30 * time.Second}, hang)
		m := &model{name: "anthropic", fn: refunder("500")}
		dead := loop(t, agent.Config{Chain: chainOf(t, m), Ledger: shared, Owner: "dead", Tools: []agent.Tool{tool}})
		ctx, kill := context.WithCancel(context.Background())
		go func() { time.Sleep(time.Second); kill() }()
		if _, err := dead.Run(ctx, ask("conv-1", "refund o-1")); !errors.Is(err, context.Canceled) {
			t.Fatalf("the dying run: %v", err)
		}
		if e, _ := shared.Get(context.Background(), "conv-1/1/0"); e.State != ledger.Started || e.Owner != "dead" {
			t.Fatalf("the key after the death: %+v", e)
		}
		dying = false
		alive := loop(t, agent.Config{Chain: chainOf(t, m), Ledger: shared, Owner: "alive", Tools: []agent.Tool{tool}})
		res, err := alive.Run(context.Background(), ask("conv-1", "refund o-1"))
		if err != nil {
			t.Fatal(err)
		}
		c := res.Steps[0].Calls[0]
		if !c.Recovered || c.Replayed || r.count() != 1 || r.recovered != 1 || c.Output != `{"refund_id":"r-conv-1/1/0","cents":500}` {
			t.Fatalf("call %+v; refunds %d, recoveries %d", c, r.count(), r.recovered)
		}
		if e, _ := shared.Get(context.Background(), "conv-1/1/0"); e.State != ledger.Done || e.Owner != "alive" {
			t.Fatalf("the key after recovery: %+v", e)
		}
		if time.Since(time.Unix(946684800, 0)) < 70*time.Second {
			t.Fatalf("recovered before the lease (2 × 30 s + 10 s) ran out")
		}
	})
}

// TestTimeoutIsRecovered: a refund that outlives its Timeout has an
// unknown outcome: Recover answers it at once, in process.
func TestTimeoutIsRecovered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r refunds
		hang := func(ctx context.Context, _ RefundIn) error {
			<-ctx.Done()
			return ctx.Err()
		}
		m := &model{name: "anthropic", fn: refunder("500")}
		l := loop(t, agent.Config{Chain: chainOf(t, m), Tools: []agent.Tool{r.tool(t, agent.ToolConfig{Timeout: 5 * time.Second}, hang)}})
		res, err := l.Run(context.Background(), ask("conv-1", "refund o-1"))
		if err != nil {
			t.Fatal(err)
		}
		c := res.Steps[0].Calls[0]
		if !c.Recovered || r.recovered != 1 || !c.IsError || c.Output != "no refund was issued for o-1" {
			t.Fatalf("call %+v, recoveries %d", c, r.recovered)
		}
	})
}

// flaky is a ledger whose calls' keys (not its steps') are unavailable.
type flaky struct{ ledger.Ledger }

func (f flaky) Begin(ctx context.Context, key, owner string, lease time.Duration, takeover bool) (ledger.Entry, error) {
	if strings.Count(key, "/") == 2 {
		return ledger.Entry{}, errors.Join(ledger.ErrUnavailable, errors.New("redis: connection refused"))
	}
	return f.Ledger.Begin(ctx, key, owner, lease, takeover)
}

// TestLedgerUnavailable: a Once tool never runs blind: with its ledger
// unavailable, the loop ends with the ledger's error.
func TestLedgerUnavailable(t *testing.T) {
	var r refunds
	m := &model{name: "anthropic", fn: refunder("500")}
	l := loop(t, agent.Config{Chain: chainOf(t, m), Ledger: flaky{ledger.NewMemory()}, Tools: []agent.Tool{r.tool(t, agent.ToolConfig{}, nil)}})
	res, err := l.Run(context.Background(), ask("conv-1", "refund o-1"))
	if !errors.Is(err, ledger.ErrUnavailable) {
		t.Fatalf("got %v", err)
	}
	if r.count() != 0 || len(res.Conversation.Messages) != 1 {
		t.Fatalf("refunds %d, conversation %+v", r.count(), res.Conversation.Messages)
	}
}

// TestOnceNeedsAConversationID: a loop with a Once tool refuses a
// conversation without an id, before asking the model.
func TestOnceNeedsAConversationID(t *testing.T) {
	var r refunds
	m := &model{name: "anthropic", fn: refunder("500")}
	l := loop(t, agent.Config{Chain: chainOf(t, m), Tools: []agent.Tool{r.tool(t, agent.ToolConfig{}, nil)}})
	if _, err := l.Run(context.Background(), ask("", "refund o-1")); err == nil || !strings.Contains(err.Error(), "Conversation.ID is empty") || len(m.asked()) != 0 {
		t.Fatalf("got %v, model asked %d times", err, len(m.asked()))
	}
}

// TestCallerLeavesAfterTheToolSucceeded: a refund that succeeded while
// its caller left is recorded all the same: the retry replays it, and
// Recover is not needed.
func TestCallerLeavesAfterTheToolSucceeded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r refunds
		ctx, leave := context.WithCancel(context.Background())
		m := &model{name: "anthropic", fn: refunder("500")}
		l := loop(t, agent.Config{Chain: chainOf(t, m), Tools: []agent.Tool{r.tool(t, agent.ToolConfig{}, func(context.Context, RefundIn) error {
			leave()
			return nil
		})}})
		if _, err := l.Run(ctx, ask("conv-1", "refund o-1")); !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v", err)
		}
		res, err := l.Run(context.Background(), ask("conv-1", "refund o-1"))
		if err != nil {
			t.Fatal(err)
		}
		if c := res.Steps[0].Calls[0]; !c.Replayed || c.Recovered || r.count() != 1 || r.recovered != 0 {
			t.Fatalf("call %+v; refunds %d, recoveries %d", c, r.count(), r.recovered)
		}
	})
}
