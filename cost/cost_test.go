package cost_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/backstop-llm/backstop/catalog"
	"github.com/backstop-llm/backstop/cost"
	"github.com/backstop-llm/backstop/llm"
)

var sonnet = catalog.Price{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}

func TestMoneyFormatsAndConverts(t *testing.T) {
	for _, c := range []struct {
		m    cost.Money
		want string
	}{
		{5 * cost.Dollar, "$5"}, {cost.Dollars(0.0042), "$0.0042"}, {cost.Dollars(0.000001), "$0.000001"},
		{cost.Dollars(0.0000004), "$0"}, {cost.Dollars(-0.5), "-$0.5"}, {0, "$0"},
	} {
		if got := c.m.String(); got != c.want {
			t.Errorf("%d.String() = %q, want %q", int64(c.m), got, c.want)
		}
	}
	if got := cost.Dollars(1.25).Dollars(); got != 1.25 {
		t.Errorf("Dollars(1.25).Dollars() = %v", got)
	}
	if cost.Dollars(math.Inf(1)) != math.MaxInt64 || cost.Dollars(math.NaN()) != 0 || cost.Dollars(math.Inf(-1)) != math.MinInt64 {
		t.Error("Dollars does not clamp infinities and NaN")
	}
}

func TestOfPricesCacheTokensApart(t *testing.T) {
	u := llm.Usage{InputTokens: 10_000, CacheReadTokens: 6_000, CacheWriteTokens: 2_000, OutputTokens: 1_000}
	// 2,000 plain at $3, 6,000 read at $0.30, 2,000 written at $3.75, 1,000 out at $15 (per million).
	want := cost.Dollars(2000*3e-6 + 6000*0.3e-6 + 2000*3.75e-6 + 1000*15e-6)
	got := cost.Of(u, sonnet)
	if got.Spent != want || got.Unpriced || got.Estimated {
		t.Fatalf("Of = %+v, want Spent %v, priced, reported", got, want)
	}
	if got.String() != "$0.0303" {
		t.Errorf("String = %q", got.String())
	}
}

func TestAnUnknownPriceIsUnpricedNotFree(t *testing.T) {
	u := llm.Usage{InputTokens: 1000, CacheReadTokens: 500, OutputTokens: 100}
	c := cost.Of(u, catalog.Price{Input: 3, Output: 15}) // cache read price unknown
	if !c.Unpriced || c.Spent != cost.Dollars(500*3e-6+100*15e-6) {
		t.Fatalf("Of = %+v: want the known part and Unpriced", c)
	}
	if c.String() != "≥$0.003" {
		t.Errorf("String = %q", c.String())
	}
	if c := cost.Of(u, catalog.Price{}); !c.Unpriced || c.Spent != 0 {
		t.Errorf("no price at all: %+v", c)
	}
	if c := cost.Of(llm.Usage{}, catalog.Price{}); c.Unpriced {
		t.Errorf("no tokens at no known price cost nothing, known: %+v", c)
	}
}

func TestAddKeepsTheFlags(t *testing.T) {
	a := cost.Cost{Spent: 10, Estimated: true}
	b := cost.Cost{Spent: 5, Unpriced: true}
	if got := a.Add(b); got != (cost.Cost{Spent: 15, Unpriced: true, Estimated: true}) || got.String() != "≥~$0" {
		t.Errorf("Add = %+v %q", got, got.String())
	}
}

func TestWorstCaseBoundsTheAttempt(t *testing.T) {
	req := llm.Request{System: "be brief", Messages: []llm.Message{{Role: llm.RoleUser, Content: "what is 2+2?"}},
		Params: llm.Params{MaxTokens: 1000}}
	in := cost.EstimateInput(&req)
	if want := (len("be brief") + len("what is 2+2?") + 2) / 3; in != want {
		t.Fatalf("EstimateInput = %d, want %d", in, want)
	}
	w := cost.WorstCase(&req, sonnet, 64000)
	// The prompt at the cache-write price (dearer than input), the output at MaxTokens.
	if want := cost.Dollars(float64(in)*3.75e-6 + 1000*15e-6); w.Spent != want || !w.Estimated || w.Unpriced {
		t.Fatalf("WorstCase = %+v, want %v estimated", w, want)
	}
	req.Params.MaxTokens = 0
	if w := cost.WorstCase(&req, sonnet, 64000); w.Spent != cost.Dollars(float64(in)*3.75e-6+64000*15e-6) {
		t.Errorf("without MaxTokens the model's output limit bounds it: %+v", w)
	}
	if w := cost.WorstCase(&req, sonnet, 0); !w.Unpriced {
		t.Errorf("no output limit known: the worst case is no bound, want Unpriced: %+v", w)
	}
}

func TestEstimateInputCountsEveryPart(t *testing.T) {
	req := llm.Request{
		Tools: []llm.Tool{{Name: "refund", Description: "refunds", InputSchema: []byte(`{"type":"object"}`)}},
		Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{
			llm.TextPart("look"), llm.ImagePart("image/png", make([]byte, 50_000)), llm.ImageURLPart("https://example.test/a.png"),
			{Media: &llm.Media{MediaType: "application/pdf", Data: make([]byte, 3000)}},
			{ToolCall: &llm.ToolCall{ID: "1", Name: "refund", Arguments: []byte(`{"id":7}`)}},
			{ToolResult: &llm.ToolResult{CallID: "1", Content: "done"}},
		}}},
	}
	bytes := len("refund") + len("refunds") + len(`{"type":"object"}`) + len("look") + 3000 + len("refund") + len(`{"id":7}`) + len("done")
	if got, want := cost.EstimateInput(&req), 1600+1600+(bytes+2)/3; got != want {
		t.Errorf("EstimateInput = %d, want %d", got, want)
	}
}

func TestKeyTravelsOnTheContext(t *testing.T) {
	ctx := context.Background()
	if cost.Key(ctx) != "" {
		t.Fatal("a bare context has a key")
	}
	if got := cost.Key(cost.WithKey(ctx, "tenant-42")); got != "tenant-42" {
		t.Errorf("Key = %q", got)
	}
}

func ExampleOf() {
	price := catalog.Price{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75} // dollars per million tokens
	c := cost.Of(llm.Usage{InputTokens: 12_000, CacheReadTokens: 10_000, OutputTokens: 800}, price)
	fmt.Println(c)
	// Output: $0.021
}

// TestAddSumsWhatALostCacheAdded: CacheLost adds up with the attempts, and
// String shows it apart, as a part of the total.
func TestAddSumsWhatALostCacheAdded(t *testing.T) {
	a := cost.Cost{Spent: cost.Dollars(0.01)}
	b := cost.Cost{Spent: cost.Dollars(0.02), CacheLost: cost.Dollars(0.015)}
	got := a.Add(b).Add(cost.Cost{CacheLost: cost.Dollars(0.005)})
	if got.CacheLost != cost.Dollars(0.02) || got.Spent != cost.Dollars(0.03) {
		t.Fatalf("Add = %+v; want $0.03 spent, $0.02 of it cache lost", got)
	}
	if s := got.String(); s != "$0.03 (cache lost $0.02)" {
		t.Errorf("String = %q", s)
	}
	if s := a.String(); s != "$0.01" {
		t.Errorf("String without a lost cache = %q", s)
	}
}
