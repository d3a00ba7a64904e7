package chain

// The escalation cap: Builder.CapPrice and its check at Build. The cap's
// mechanics are internal/pricecap's.

import (
	"github.com/backstop-llm/backstop/internal/pricecap"
)

// priceCap is one CapPrice: its ratio and the tiers it names (none: every
// fallback tier).
type priceCap struct {
	ratio float64
	tiers []Tier
}

// CapPrice caps the price of the targets of tiers (TierDeployment,
// TierSibling, TierProvider; every fallback tier when none is named) at
// ratio times the primary's, so that an incident cannot silently move
// the traffic to a model ten times as expensive: with CapPrice(3), a
// fallback may cost at most three times what the primary would.
//
// Build checks the list prices (Target.Price, or the catalogue's): each
// capped target's input and output prices (and its cache prices, when
// both it and the primary know them) must be at most ratio times the
// primary's. A capped target or a primary whose price is unknown is a
// Build error: set its Target.Price. ratio must be at least 1.
//
// At call time each attempt on a capped target is priced before it is
// sent: when its worst case for the request (cost.WorstCase: the
// estimated prompt and the output limit at its prices) is more than
// ratio times the primary's worst case for the same request, it is
// skipped with ErrPriceCap (observe.SkipPrice; the Attempt's Reason gives
// both figures). The two differ from the list prices when targets set
// their own Params.MaxTokens or System, or their models' output limits
// differ and the request sets no MaxTokens: the primary is priced on the
// same conversation with the System and MaxTokens it would send (its own,
// or the caller's). A hedge or a retry on a capped target is priced the
// same way. A call later CapPrice naming the same
// tier replaces its ratio. Chains without a cap pay nothing for it.
func (b *Builder) CapPrice(ratio float64, tiers ...Tier) *Builder {
	b.caps = append(b.caps, priceCap{ratio: ratio, tiers: tiers})
	return b
}

// capPrices checks what CapPrice was given and each capped target's list
// price against the primary's, and gives each capped target its Cap.
func (p *build) capPrices() {
	if len(p.b.caps) == 0 {
		return
	}
	var ratios [TierDegrade]float64 // by tier; 0: uncapped
	for _, pc := range p.b.caps {
		if bad := pricecap.BadRatio(pc.ratio); bad != "" {
			p.fail("", "%s", bad)
			continue
		}
		tiers := pc.tiers
		if len(tiers) == 0 {
			tiers = []Tier{TierDeployment, TierSibling, TierProvider}
		}
		for _, t := range tiers {
			if t == TierPrimary || t >= TierDegrade {
				p.fail("", "CapPrice was given tier %v; name a fallback tier (TierDeployment, TierSibling, TierProvider), or none for all of them", t)
				continue
			}
			ratios[t] = pc.ratio
		}
	}
	var primary *target
	for _, t := range p.c.targets {
		if t.tier == TierPrimary {
			primary = t
			break
		}
	}
	if primary == nil {
		return // reported by checkEntry
	}
	for _, t := range p.c.targets {
		if t.tier == TierPrimary || ratios[t.tier] == 0 {
			continue
		}
		r := ratios[t.tier]
		if problem := pricecap.Problem(r, t.Price, primary.Price); problem != "" {
			p.fail(t.Name, "%s", problem)
			continue
		}
		t.cap = &pricecap.Cap{Ratio: r, Price: primary.Price, MaxOutput: primary.maxOutput,
			System: primary.System, MaxTokens: primary.Params.MaxTokens}
	}
}
