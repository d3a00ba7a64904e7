package chain_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/catalog"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/cost"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/policy"
	"github.com/backstop-llm/backstop/retry"
)

var (
	dear  = catalog.Price{Input: 5, Output: 25, CacheRead: 0.5, CacheWrite: 6.25}
	cheap = catalog.Price{Input: 1, Output: 5, CacheRead: 0.1, CacheWrite: 1.25}
)

// used answers with usage u.
func used(u llm.Usage) func(context.Context, llm.Request) (*llm.Response, error) {
	return func(_ context.Context, req llm.Request) (*llm.Response, error) {
		return &llm.Response{Text: "ok", Model: req.Model, Usage: u}, nil
	}
}

// TestEveryAttemptIsPricedAndTheCallAddsThemUp: a retried failure that
// returned no answer costs nothing, a fallback's answer costs its usage at
// its own price (cache reads priced as such), and Result.Cost adds them.
func TestEveryAttemptIsPricedAndTheCallAddsThemUp(t *testing.T) {
	u := llm.Usage{InputTokens: 2000, CacheReadTokens: 1000, OutputTokens: 100}
	c, err := chain.New("c").
		Primary(chain.Target{Name: "p", Provider: &stub{name: "a", fn: func(context.Context, llm.Request) (*llm.Response, error) {
			return nil, &llm.Error{Provider: "a", Status: 529, Kind: llm.KindOverloaded}
		}}, Model: "m1", Price: dear, Retry: retry.Policy{MaxAttempts: 1}}).
		OrProvider(chain.Target{Name: "f", Provider: &stub{name: "b", fn: used(u)}, Model: "m2", Price: cheap}).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Call(t.Context(), question)
	if err != nil {
		t.Fatal(err)
	}
	want := cost.Of(u, cheap)
	if res.Attempts[0].Cost != (cost.Cost{}) || res.Attempts[1].Cost != want {
		t.Fatalf("attempt costs %v, %v; want $0, %v", res.Attempts[0].Cost, res.Attempts[1].Cost, want)
	}
	if got := res.Cost(); got != want || want.Spent != cost.Dollars(1000*1e-6+1000*0.1e-6+100*5e-6) {
		t.Errorf("Result.Cost = %v, want %v", got, want)
	}
}

// TestAnAnswerThatFailedItsSchemaIsBilled: the re-asked answer cost what
// it cost, and the call's cost holds both.
func TestAnAnswerThatFailedItsSchemaIsBilled(t *testing.T) {
	n := 0
	p := &stub{name: "a", fn: func(_ context.Context, req llm.Request) (*llm.Response, error) {
		n++
		text := `{"answer": 1}`
		if n == 1 {
			text = `not json`
		}
		return &llm.Response{Text: text, Model: req.Model, Usage: llm.Usage{InputTokens: 100, OutputTokens: 10}}, nil
	}}
	c, err := chain.New("c").Schema([]byte(`{"type":"object"}`)).
		Primary(chain.Target{Name: "p", Provider: p, Model: "m", Price: cheap}).Build()
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Call(t.Context(), question)
	if err != nil {
		t.Fatal(err)
	}
	one := cost.Of(llm.Usage{InputTokens: 100, OutputTokens: 10}, cheap)
	if len(res.Attempts) != 2 || res.Attempts[0].Cost != one || res.Cost().Spent != 2*one.Spent {
		t.Fatalf("attempts %v, cost %v; want two attempts of %v", res.Attempts, res.Cost(), one)
	}
}

// TestAnUnknownPriceIsReportedUnknown: a model the catalogue does not know
// and a target without a Price make the cost Unpriced, not $0.
func TestAnUnknownPriceIsReportedUnknown(t *testing.T) {
	c, err := chain.New("c").Primary(chain.Target{Name: "p", Provider: &stub{name: "a", fn: used(llm.Usage{InputTokens: 10, OutputTokens: 5})}, Model: "no-such-model"}).Build()
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Call(t.Context(), question)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Cost(); !got.Unpriced || got.String() != "≥$0" {
		t.Errorf("Cost = %+v %q, want Unpriced", got, got.String())
	}
}

// TestTheCatalogueSuppliesThePrice: a target of a model the catalogue
// knows is priced without configuration, and a Price replaces it.
func TestTheCatalogueSuppliesThePrice(t *testing.T) {
	m, ok := catalog.Default().Lookup("claude-sonnet-5")
	if !ok || m.Price.Input == 0 {
		t.Fatal("the catalogue does not price claude-sonnet-5")
	}
	u := llm.Usage{InputTokens: 1000, OutputTokens: 100}
	for _, tc := range []struct {
		price catalog.Price
		want  catalog.Price
	}{{catalog.Price{}, m.Price}, {cheap, cheap}} {
		c, err := chain.New("c").Primary(chain.Target{Name: "p", Provider: &stub{name: "anthropic", fn: used(u)}, Model: "claude-sonnet-5", Price: tc.price}).Build()
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Call(t.Context(), question)
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Cost(); got != cost.Of(u, tc.want) {
			t.Errorf("price %+v: Cost = %v, want %v", tc.price, got, cost.Of(u, tc.want))
		}
	}
}

// TestAStreamCutAfterOutputIsBilled: a stream that fails after two chunks
// costs the output it had sent (estimated, the provider having reported
// no usage), and the restarted stream's answer costs its own.
func TestAStreamCutAfterOutputIsBilled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cut := &streamer{stub: stub{name: "a"}, chunks: []string{"0123456789abcdef", "0123456789abcdef", "x"}, failAt: 2}
		whole := &streamer{stub: stub{name: "b"}, chunks: []string{"ok"}}
		c, err := chain.New("c").
			Primary(chain.Target{Name: "p", Provider: cut, Model: "m", Price: dear, Retry: retry.Policy{MaxAttempts: 1}}).
			OrProvider(chain.Target{Name: "f", Provider: whole, Model: "m2", Price: cheap}).
			RestartStreams(true).Build()
		if err != nil {
			t.Fatal(err)
		}
		s := c.Stream(t.Context(), question)
		if _, err := collect(t, s); err != nil {
			t.Fatal(err)
		}
		res, _ := s.Result()
		first := res.Attempts[0].Cost
		// 32 bytes of text sent: 8 output tokens at $25 per million.
		if want := (cost.Cost{Spent: cost.Dollars(8 * 25e-6), Estimated: true}); first != want {
			t.Fatalf("the cut stream cost %+v, want %+v", first, want)
		}
		if got := res.Cost(); got.Spent != first.Spent+res.Attempts[1].Cost.Spent || !got.Estimated {
			t.Errorf("Result.Cost = %+v", got)
		}
	})
}

// pricer records what its target's attempts were priced at: the worst
// case asked before each, the cost told after.
type pricer struct {
	worst, spent []cost.Cost
}

func (p *pricer) Admit(_ context.Context, a *policy.Attempt) policy.Admission {
	if a.Phase == policy.Send {
		p.worst = append(p.worst, a.WorstCase())
	}
	return policy.Admission{}
}

func (p *pricer) Settle(_ context.Context, _ *policy.Attempt, _ policy.Hold, o *policy.Outcome) {
	p.spent = append(p.spent, o.Cost)
}

// TestPoliciesSeeTheWorstCaseBeforeAndTheCostAfter: a policy is asked
// with the attempt's worst case (its prompt estimated, MaxTokens at the
// target's price) and settled with what it cost.
func TestPoliciesSeeTheWorstCaseBeforeAndTheCostAfter(t *testing.T) {
	u := llm.Usage{InputTokens: 40, OutputTokens: 7}
	pr := &pricer{}
	c, err := chain.New("c").Primary(chain.Target{Name: "p", Provider: &stub{name: "a", fn: used(u)}, Model: "m", Price: cheap,
		Params: llm.Params{MaxTokens: 100}, Policies: []policy.Policy{pr}}).Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(t.Context(), question); err != nil {
		t.Fatal(err)
	}
	req := question
	req.Params.MaxTokens = 100
	want := cost.WorstCase(&req, cheap, 0)
	if len(pr.worst) != 1 || pr.worst[0] != want || want.Unpriced {
		t.Errorf("worst cases %v, want [%v]", pr.worst, want)
	}
	if len(pr.spent) != 1 || pr.spent[0] != cost.Of(u, cheap) {
		t.Errorf("settled with %v, want [%v]", pr.spent, cost.Of(u, cheap))
	}
}

// deployedUsing is a stub that says where it is deployed.
type deployedUsing struct {
	stub
	d llm.Deployment
}

func (p *deployedUsing) Deployment() llm.Deployment { return p.d }

// TestADeploymentIsPricedWhereItServes: a Bedrock regional endpoint and a
// Vertex region cost what the catalogue says they cost there; global
// endpoints cost the standard price.
func TestADeploymentIsPricedWhereItServes(t *testing.T) {
	m, _ := catalog.Default().Lookup("claude-sonnet-4-5")
	if m.PriceFor("bedrock-regional") == m.Price || m.PriceFor("vertex-regional") == m.Price {
		t.Fatal("the catalogue has no regional price for claude-sonnet-4-5")
	}
	u := llm.Usage{InputTokens: 1000, OutputTokens: 100}
	for _, tc := range []struct {
		d     llm.Deployment
		model string
		want  catalog.Price
	}{
		{llm.Deployment{Platform: "bedrock", Region: "us-east-1"}, "us.anthropic.claude-sonnet-4-5-20250929-v1:0", m.PriceFor("bedrock-regional")},
		{llm.Deployment{Platform: "bedrock", Region: "us-east-1"}, "global.anthropic.claude-sonnet-4-5-20250929-v1:0", m.Price},
		{llm.Deployment{Platform: "vertex", Region: "europe-west4"}, "claude-sonnet-4-5@20250929", m.PriceFor("vertex-regional")},
		{llm.Deployment{Platform: "vertex", Region: "global"}, "claude-sonnet-4-5@20250929", m.Price},
		{llm.Deployment{Platform: "anthropic"}, "claude-sonnet-4-5", m.Price},
	} {
		p := &deployedUsing{stub: stub{name: "anthropic", fn: used(u)}, d: tc.d}
		c, err := chain.New("c").Primary(chain.Target{Name: "p", Provider: p, Model: tc.model}).Build()
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Call(t.Context(), question)
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Cost(); got != cost.Of(u, tc.want) {
			t.Errorf("%s %s %s: Cost = %v, want %v", tc.d.Platform, tc.d.Region, tc.model, got, cost.Of(u, tc.want))
		}
	}
}

// TestAServiceTierIsPricedAsSuch: a target whose Params ask for OpenAI's
// priority tier is priced at the catalogue's priority price.
func TestAServiceTierIsPricedAsSuch(t *testing.T) {
	m, _ := catalog.Default().Lookup("gpt-5")
	if m.PriceFor("priority") == m.Price {
		t.Fatal("the catalogue has no priority price for gpt-5")
	}
	u := llm.Usage{InputTokens: 1000, OutputTokens: 100}
	c, err := chain.New("c").Primary(chain.Target{Name: "p", Provider: &stub{name: "openai", fn: used(u)}, Model: "gpt-5",
		Params: llm.Params{Extra: map[string]any{"service_tier": "priority"}}}).Build()
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Call(t.Context(), question)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := res.Cost(), cost.Of(u, m.PriceFor("priority")); got != want {
		t.Errorf("Cost = %v, want %v (priority)", got, want)
	}
}

// TestASpendBreakerOpensOnCutStreams: streams cut after output fail, and
// each is billed for what it sent; with MaxFailedSpend the target's
// breaker opens on the money they burned, well before its failure count
// would, and the next call goes to the fallback without a request.
func TestASpendBreakerOpensOnCutStreams(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		chunk := strings.Repeat("0123456789abcdef", 4) // 64 bytes: 16 output tokens
		cut := &streamer{stub: stub{name: "a"}, chunks: []string{chunk, chunk, "x"}, failAt: 2}
		whole := &streamer{stub: stub{name: "b"}, chunks: []string{"ok"}}
		each := cost.Dollars(32 * 25e-6) // 32 tokens at $25 a million
		c, err := chain.New("c").
			Primary(chain.Target{Name: "p", Provider: cut, Model: "m", Price: dear, Retry: retry.Policy{MaxAttempts: 1},
				Breaker: breaker.Config{MaxFailedSpend: 2*each - 1, ConsecutiveFailures: 1000}}).
			OrProvider(chain.Target{Name: "f", Provider: whole, Model: "m2", Price: cheap}).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			s := c.Stream(t.Context(), question)
			collect(t, s)
			res, _ := s.Result()
			if res.Attempts[0].Target != "p" || res.Attempts[0].Cost.Spent != each {
				t.Fatalf("call %d: %v, cost %v; want p cut and billed %v", i, res.Attempts[0], res.Attempts[0].Cost, each)
			}
		}
		s := c.Stream(t.Context(), question)
		if _, err := collect(t, s); err != nil {
			t.Fatal(err)
		}
		res, _ := s.Result()
		if a := res.Attempts[0]; a.Target != "p" || a.Decision != chain.DecisionSkip || cut.opened != 2 {
			t.Fatalf("after two billed failures: %v (p opened %d streams); want p passed over by its breaker", a, cut.opened)
		}
	})
}

// TestAnAttemptItsTimeoutCutIsPricedByItsPrompt: an attempt that timed
// out without an answer had its prompt read: it costs its estimated
// prompt at the input price, marked Estimated, not $0.
func TestAnAttemptItsTimeoutCutIsPricedByItsPrompt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := &stub{name: "a", fn: func(ctx context.Context, _ llm.Request) (*llm.Response, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}}
		c, err := chain.New("c").
			Primary(chain.Target{Name: "p", Provider: slow, Model: "m", Price: dear, Timeout: time.Second, Retry: retry.Policy{MaxAttempts: 1}}).
			OrProvider(chain.Target{Name: "f", Provider: &stub{name: "b"}, Model: "m2", Price: cheap}).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Call(t.Context(), question)
		if err != nil {
			t.Fatal(err)
		}
		sent := question
		sent.Model = "m"
		want := cost.Unanswered(&sent, dear)
		if a := res.Attempts[0]; a.Kind != llm.KindTimeout || a.Cost != want || !want.Estimated || want.Spent == 0 {
			t.Fatalf("the timed-out attempt: %v, cost %+v; want %+v", a, a.Cost, want)
		}
	})
}
