package chain_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/backstop-llm/backstop/catalog"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/cost"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/observe"
	"github.com/backstop-llm/backstop/retry"
)

// TestCapPriceChecksTheListPricesAtBuild: a capped target dearer than the
// ratio allows, on any price both sides know, an unknown price on either
// side, a ratio under 1 or NaN, and the primary's tier named are Build
// errors naming the target and the figures; a target of a tier not named
// is not capped.
func TestCapPriceChecksTheListPricesAtBuild(t *testing.T) {
	a, o := &stub{name: "anthropic"}, &stub{name: "openai"}
	build := func(primary, fallback catalog.Price, capped func(*chain.Builder) *chain.Builder) error {
		b := chain.New("c").
			Primary(chain.Target{Name: "p", Provider: a, Model: "m-unknown-1", Price: primary}).
			OrProvider(chain.Target{Name: "f", Provider: o, Model: "m-unknown-2", Price: fallback})
		_, err := capped(b).Build()
		return err
	}
	capAt := func(r float64, tiers ...chain.Tier) func(*chain.Builder) *chain.Builder {
		return func(b *chain.Builder) *chain.Builder { return b.CapPrice(r, tiers...) }
	}
	for _, tc := range []struct {
		name              string
		primary, fallback catalog.Price
		capped            func(*chain.Builder) *chain.Builder
		target, want      string // "" for no error
	}{
		{"dearer than the ratio", cheap, dear, capAt(3), "f",
			"its input price $5 per million tokens is more than CapPrice's 3 × the primary's $1 ($3)"},
		{"within the ratio", cheap, dear, capAt(5), "", ""},
		{"the output only", cheap, catalog.Price{Input: 1, Output: 16}, capAt(3), "f",
			"its output price $16 per million tokens is more than CapPrice's 3 × the primary's $5 ($15)"},
		{"a cache price both know", cheap, catalog.Price{Input: 1, Output: 5, CacheRead: 0.4}, capAt(3), "f",
			"its cache read price $0.4 per million tokens is more than CapPrice's 3 × the primary's $0.1"},
		{"a cache price one side lacks", catalog.Price{Input: 1, Output: 5}, catalog.Price{Input: 1, Output: 5, CacheRead: 9}, capAt(3), "", ""},
		{"another tier capped", cheap, dear, capAt(3, chain.TierSibling), "", ""},
		{"its tier named", cheap, dear, capAt(3, chain.TierProvider), "f", "more than CapPrice's 3"},
		{"the last ratio stands", cheap, dear, func(b *chain.Builder) *chain.Builder { return b.CapPrice(2).CapPrice(5, chain.TierProvider) }, "", ""},
		{"the capped price unknown", cheap, catalog.Price{}, capAt(3), "f",
			"CapPrice caps this target but its price is unknown (input $0, output $0 per million tokens); set Target.Price"},
		{"the primary's price unknown", catalog.Price{Input: 1}, cheap, capAt(3), "f",
			"the primary's price is unknown (input $1, output $0 per million tokens); set the primary's Target.Price"},
		{"a ratio under 1", cheap, cheap, capAt(0.5), "", "CapPrice was given ratio 0.5; use a ratio of at least 1"},
		{"a NaN ratio", cheap, cheap, capAt(math.NaN()), "", "CapPrice was given ratio NaN"},
		{"the primary's tier", cheap, cheap, capAt(2, chain.TierPrimary), "", "CapPrice was given tier primary; name a fallback tier"},
	} {
		err := build(tc.primary, tc.fallback, tc.capped)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		var ce *chain.ConfigError
		if !errors.Is(err, llm.ErrInvalidConfig) || !errors.As(err, &ce) || ce.Target != tc.target || !strings.Contains(ce.Problem, tc.want) {
			t.Errorf("%s: %v; want a ConfigError of target %q saying %q", tc.name, err, tc.target, tc.want)
		}
	}
}

// TestCapPriceRefusesADearerWorstCaseAtCallTime: the fallback's list
// price is within the cap, but it sets its own MaxTokens: its worst case
// for the request is more than twice the primary's, and it is skipped
// with ErrPriceCap, SkipPrice and both figures; within the cap it serves.
func TestCapPriceRefusesADearerWorstCaseAtCallTime(t *testing.T) {
	for _, tc := range []struct {
		maxTokens int
		refused   bool
	}{{1000, true}, {150, false}} {
		var skips []observe.Skip
		c, err := chain.New("c").CapPrice(2).Observe(&observe.Funcs{OnSkip: func(s observe.Skip) { skips = append(skips, s) }}).
			Primary(chain.Target{Name: "p", Provider: &stub{name: "a", fn: fail(llm.KindOverloaded, 529)}, Model: "m1", Price: cheap,
				Retry: retry.Policy{MaxAttempts: 1}}).
			OrProvider(chain.Target{Name: "f", Provider: &stub{name: "b", fn: used(llm.Usage{InputTokens: 10, OutputTokens: 5})}, Model: "m2", Price: cheap,
				Params: llm.Params{MaxTokens: tc.maxTokens}}).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Call(t.Context(), question) // MaxTokens 100
		if !tc.refused {
			if err != nil || res.Attempts[len(res.Attempts)-1].Target != "f" {
				t.Errorf("MaxTokens %d: %v, %v; want f to serve", tc.maxTokens, res, err)
			}
			continue
		}
		if !errors.Is(err, chain.ErrPriceCap) {
			t.Fatalf("MaxTokens %d: %v %v; want ErrPriceCap", tc.maxTokens, res, err)
		}
		in := cost.EstimateInput(&question)
		own := cost.Dollars(float64(in)*1.25e-6 + 1000*5e-6) // the prompt at the cache-write price
		theirs := cost.Dollars(float64(in)*1.25e-6 + 100*5e-6)
		reason := "worst case " + own.String() + " is more than 2 × the primary's " + theirs.String() + " (" + (2 * theirs).String() + ")"
		var last chain.Attempt
		if res != nil {
			last = res.Attempts[len(res.Attempts)-1]
		}
		if last.Target != "f" || last.Decision != chain.DecisionSkip || last.Reason != reason || !errors.Is(last.Err, chain.ErrPriceCap) {
			t.Errorf("f's record %+v; want a skip with ErrPriceCap and %q", last, reason)
		}
		if len(skips) != 1 || skips[0].Cause != observe.SkipPrice || skips[0].Cause.String() != "price" || skips[0].Reason != reason {
			t.Errorf("skips %+v; want one SkipPrice saying %q", skips, reason)
		}
	}
}

// TestCapPriceCountsTheModelsOutputLimits: a request without MaxTokens may
// cost each model's output limit; a fallback priced as the primary whose
// model may answer sixteen times as long is over a cap of 3.
func TestCapPriceCountsTheModelsOutputLimits(t *testing.T) {
	cat, err := catalog.New(catalog.Model{ID: "short-1", MaxOutput: 8_000}, catalog.Model{ID: "long-1", MaxOutput: 128_000})
	if err != nil {
		t.Fatal(err)
	}
	c, err := chain.New("c").Catalog(cat).CapPrice(3).
		Primary(chain.Target{Name: "p", Provider: &stub{name: "a", fn: fail(llm.KindOverloaded, 529)}, Model: "short-1", Price: cheap,
			Retry: retry.Policy{MaxAttempts: 1}}).
		OrSibling(chain.Target{Name: "long", Provider: &stub{name: "a"}, Model: "long-1", Price: cheap}).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	req := question
	req.Params.MaxTokens = 0
	if _, err := c.Call(t.Context(), req); !errors.Is(err, chain.ErrPriceCap) {
		t.Errorf("no MaxTokens: %v; want ErrPriceCap", err)
	}
	req.Params.MaxTokens = 500 // both bounded alike: the prices decide
	if res, err := c.Call(t.Context(), req); err != nil || res.Attempts[len(res.Attempts)-1].Target != "long" {
		t.Errorf("MaxTokens 500: %v, %v; want long to serve", res, err)
	}
}
