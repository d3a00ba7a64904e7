// Package pricecap is the escalation cap on a chain's fallback targets
// (chain.Builder.CapPrice): a capped target may cost at most a ratio of
// what the chain's primary costs, so that an incident cannot move the
// traffic to a model ten times as expensive without anyone deciding it.
//
// At Build, Problem compares the list prices. At call time a Cap, a
// policy of each capped target (and of no other), compares the worst cases
// of the request in hand: the capped target's (policy.Attempt.WorstCase)
// with the primary's for the same request, which differ from the list
// prices when the targets set their own Params.MaxTokens or System, or
// when their models' output limits differ and the request sets none.
//
// chain exports the refusal's error as chain.ErrPriceCap.
package pricecap

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/backstop-llm/backstop/catalog"
	"github.com/backstop-llm/backstop/cost"
	"github.com/backstop-llm/backstop/observe"
	"github.com/backstop-llm/backstop/policy"
)

// ErrPriceCap is the refusal of a capped target whose worst case for the
// request is more than its ratio of the primary's.
var ErrPriceCap = errors.New("the target costs more than its price cap allows")

// Problem compares a capped target's list price with the primary's at
// Build: it returns what is wrong and what to change, or "" when every
// price of the target is at most ratio times the primary's. Input and
// output must be known on both (an unknown price cannot be capped); the
// cache prices are compared when both are known.
func Problem(ratio float64, price, primary catalog.Price) string {
	switch {
	case price.Input <= 0 || price.Output <= 0:
		return fmt.Sprintf("CapPrice caps this target but its price is unknown (input $%s, output $%s per million tokens); set Target.Price, or add its model's price with Builder.Catalog",
			figure(price.Input), figure(price.Output))
	case primary.Input <= 0 || primary.Output <= 0:
		return fmt.Sprintf("CapPrice caps this target at %s × the primary's price, but the primary's price is unknown (input $%s, output $%s per million tokens); set the primary's Target.Price, or add its model's price with Builder.Catalog",
			figure(ratio), figure(primary.Input), figure(primary.Output))
	}
	for _, p := range [...]struct {
		name        string
		own, thePri float64
	}{{"input", price.Input, primary.Input}, {"output", price.Output, primary.Output},
		{"cache read", price.CacheRead, primary.CacheRead}, {"cache write", price.CacheWrite, primary.CacheWrite}} {
		if p.own > 0 && p.thePri > 0 && p.own > ratio*p.thePri {
			return fmt.Sprintf("its %s price $%s per million tokens is more than CapPrice's %s × the primary's $%s ($%s); raise the ratio, or move the target out of the capped tiers",
				p.name, figure(p.own), figure(ratio), figure(p.thePri), figure(ratio*p.thePri))
		}
	}
	return ""
}

// figure formats a price or a ratio with as many decimals as it needs.
func figure(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// BadRatio returns what is wrong with a CapPrice ratio, or "".
func BadRatio(ratio float64) string {
	if math.IsNaN(ratio) || ratio < 1 {
		return fmt.Sprintf("CapPrice was given ratio %v; use a ratio of at least 1 (1: no dearer than the primary; 2: at most twice its price)", ratio)
	}
	return ""
}

// Cap is one capped target's price cap, a policy.Policy: it refuses an
// attempt whose worst case (policy.Attempt.WorstCase) is more than Ratio
// times the primary's worst case for the same request. It holds and
// learns nothing.
type Cap struct {
	// Ratio is the most the target may cost, as a multiple of the
	// primary's cost.
	Ratio float64
	// Price and MaxOutput are the primary's price and its model's output
	// limit (0: unknown); System and MaxTokens what the primary sends in
	// place of the caller's ("" and 0: the caller's).
	Price     catalog.Price
	MaxOutput int
	System    string
	MaxTokens int
}

// Admit refuses an attempt in Send that would cost more than the cap
// allows. In Plan and Peek the request is not known: it admits, and Send
// decides.
//
// The primary is priced on the conversation a.Request holds (a re-ask's
// turns included), with the System and MaxTokens it would send: its own
// where it sets them, else the caller's (a.Caller; without one, those of
// a.Request). The output counted is the request's MaxTokens, else the
// model's output limit; a side whose limit is unknown counts the other
// side's, and the comparison is of prices alone.
func (c *Cap) Admit(_ context.Context, a *policy.Attempt) policy.Admission {
	req := a.Request
	if req == nil {
		return policy.Admission{}
	}
	caller := a.Caller
	if caller == nil {
		caller = req
	}
	primaryOut := c.MaxTokens
	if primaryOut <= 0 {
		primaryOut = caller.Params.MaxTokens
	}
	if primaryOut <= 0 {
		primaryOut = c.MaxOutput
	}
	out := req.Params.MaxTokens
	if out <= 0 {
		out = a.MaxOutput
	}
	switch {
	case out <= 0:
		out = primaryOut
	case primaryOut <= 0:
		primaryOut = out
	}
	own := cost.WorstCase(req, a.Price, out)
	pr := *req
	pr.System = c.System
	if pr.System == "" {
		pr.System = caller.System
	}
	pr.Params.MaxTokens = primaryOut
	theirs := cost.WorstCase(&pr, c.Price, primaryOut)
	if float64(own.Spent) <= c.Ratio*float64(theirs.Spent) {
		return policy.Admission{}
	}
	reason := fmt.Sprintf("worst case %s is more than %s × the primary's %s (%s)",
		own.Spent, figure(c.Ratio), theirs.Spent, cost.Money(c.Ratio*float64(theirs.Spent)))
	return policy.Admission{Err: fmt.Errorf("%w: %s", ErrPriceCap, reason), Reason: reason, Cause: observe.SkipPrice}
}

// Settle does nothing: the cap holds nothing.
func (*Cap) Settle(context.Context, *policy.Attempt, policy.Hold, *policy.Outcome) {}
