package chain

import (
	"time"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/budget"
	"github.com/backstop-llm/backstop/catalog"
	"github.com/backstop-llm/backstop/hedge"
	"github.com/backstop-llm/backstop/internal/latency"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/policy"
	"github.com/backstop-llm/backstop/retry"
	"github.com/backstop-llm/backstop/throttle"
)

// Target is one model behind a provider, with everything the chain needs to
// call it. It is a plain struct: zero values mean documented defaults.
type Target struct {
	// Name identifies the target in results, errors and telemetry. It must
	// be non-empty and unique in the chain.
	Name string
	// Provider makes one attempt against the model's backend. Required.
	Provider llm.Provider
	// Model is the model to request. Required.
	Model string
	// Serves is the model Model serves, when Model is a name of your own
	// rather than a model id: an Azure deployment name ("my-gpt-eu"), a
	// Bedrock application inference profile. Build compares it instead of
	// Model to check the tiers (OrDeployment serves the primary's model,
	// OrSibling another), and fails when Model is itself a recognisable
	// model id of another model. Empty: Model itself.
	Serves string
	// Region is where the target processes data ("eu", "us-east-1", …).
	// Empty means its provider's deployment region (llm.DeployedProvider),
	// or the region its provider says serves Model
	// (llm.ModelDeployedProvider), if it says. Informational unless the
	// chain restricts regions (Builder.AllowRegions).
	Region string
	// System is this target's system prompt. When empty, the caller's
	// Request.System is sent.
	System string
	// Params are this target's parameters. Each field that is set replaces
	// the caller's; Extra maps are merged, the target's keys winning.
	Params llm.Params
	// ContextWindow is the model's context window in tokens. After a
	// context-length failure the chain moves on only to targets with a
	// larger known window. 0 means the catalogue's window for the model
	// (Serves, or Model; see Builder.Catalog), or unknown when the
	// catalogue does not know it: an unknown window is never larger.
	ContextWindow int
	// Price is what the target's tokens cost, in dollars per million
	// (catalog.Price). The zero value means the catalogue's price for the
	// model (Serves, or Model; see Builder.Catalog) where the target serves
	// it (a Bedrock or Vertex regional endpoint costs more than a global
	// one) and at the service tier its Params ask for (service_tier
	// "priority" or "flex" in Params.Extra); a Price that is set replaces it whole, so set every
	// field you know. A target whose price is unknown still answers: its
	// attempts' Cost is Unpriced, and a money budget reserves what its
	// known prices say.
	Price catalog.Price
	// Retry is the retry policy on this target. The zero value means
	// retry's defaults: 3 attempts, full jitter from 500ms capped at 20s,
	// Retry-After honoured plus up to 1s, at most 30s of Retry-After.
	Retry retry.Policy
	// Timeout bounds each attempt, a stream's whole length included. 0
	// means 10 minutes on a whole answer, or on a
	// stream's wait for its first chunk, after which IdleTimeout bounds
	// it: a long answer is not cut for being long. An attempt that times
	// out fails with KindTimeout, and the call moves on to the next
	// target that can take it; the target is retried only when none can
	// (the decision table's ElsewhereFirst). A slow target is raced
	// before that: see Patience.
	Timeout time.Duration
	// FirstChunkTimeout bounds, in a Stream, the wait for an attempt's
	// first chunk (0: Timeout's bound); IdleTimeout the longest gap
	// between two chunks (0: a minute). Both failures
	// are KindTimeout, handled as Timeout's.
	FirstChunkTimeout, IdleTimeout time.Duration
	// Patience is how long an attempt may go unanswered (a stream: without
	// its first chunk) before the same request is also sent to the next
	// target of the chain that can take it now; the slow attempt goes on,
	// and the first acceptable answer serves (the racer's Attempt has
	// Hedge set; a slow attempt that loses counts as its breaker's
	// failure). With no later target able to take the call nothing is
	// raced, and the slow target is waited for up to its Timeout and the
	// call's deadline. 0 means learned: twice the target's p99 answer
	// time (first-chunk time for streams) over its latest answers, once
	// it has given 20, and never less than 30s for a whole answer or
	// 10s for a first chunk (internal/latency's Patience). Set
	// it for a target that is slow by nature from its first call (a
	// reasoning model whose first token routinely takes longer than 10s).
	// It must not be negative.
	Patience time.Duration
	// Budget limits this target's retries; it is asked before every retry,
	// never before a first attempt. Nil means a ratio budget of its own
	// with budget's defaults (retries at most 10% of first attempts over
	// 10s, with a floor of 10 per window); budget.Unlimited() switches
	// budgeting off. One Budget may be shared by several targets.
	Budget budget.Budget
	// Schema, when set, replaces the chain's Schema for this target's
	// answers (a JSON Schema, drafts 2020-12 or 7). Nil uses the chain's.
	Schema []byte
	// Throttle paces this target below its provider's rate limit: from the
	// limits you know, from the provider's rate-limit headers, and slower
	// after 429s. The zero value is throttle's default pacing: limits
	// learned from the headers, and a provider that announces none held to
	// 1.5 requests per accepted one once it rejects more than half of
	// them; a target that says nothing and rejects nothing is never paced
	// (200 callers against a 50-a-minute limit: 0.76 429s per answer
	// instead of 277, goodput 0.98). throttle.Config{Disabled: true}
	// switches it off. A call whose slot is further away than MaxWait
	// (5s), or past its deadline, moves on to the next target instead of
	// waiting. In a Headroom tier the zero value means Learn.
	Throttle throttle.Config
	// Breaker configures this target's circuit breaker. The zero value
	// means breaker's defaults: open on 50% failures of at least 20
	// attempts in 10s (counted as they start, so concurrency cannot fool
	// it), or 5 consecutive failures while fewer; open for a fixed 5s (a
	// recovered target serves again within 5s, at most 12 probes a
	// minute), then one probe. Without a fallback (the last target, no
	// degradation) a refused call with time left waits for the probe
	// (breaker.Breaker.Admit); Disabled switches it off.
	Breaker breaker.Config
	// Policies are this target's own policies (package policy): a money
	// budget, a per-tenant limit. The walk asks them before each attempt,
	// after the built-in ones (capability, Retry-After gate,
	// breaker, self-throttling, retry budget), and tells them how each
	// attempt they were asked about ended. nil adds none.
	Policies []policy.Policy
	// NativeSchema asks this target's provider for native structured
	// output: the target's Schema (or the chain's) goes out as
	// Request.ResponseSchema, and the adapter asks for schema-constrained
	// JSON. The answer is validated against the full schema all the same.
	// Build fails when there is no Schema, when the provider lacks
	// llm.CapNativeSchema, or when it cannot take this schema (an
	// llm.SchemaChecker's refusal, which says what to change). Off by
	// default.
	NativeSchema bool
	// Lacks removes capabilities from what the provider declares
	// (llm.CapableProvider; a provider that declares nothing is assumed
	// to take everything): a model without vision on a provider that
	// takes images says llm.CapImages|llm.CapImageURLs. A request that
	// carries what a target cannot take skips it, recorded with
	// ErrCapability, instead of sending a request that must fail. Build
	// adds what the catalogue says the model lacks (Builder.Catalog; gpt-4
	// takes no images), except what Takes lists.
	Lacks llm.Capabilities
	// Takes lists capabilities the catalogue says the model lacks that
	// this target takes all the same (a newer snapshot, a deployment of
	// your own): Build does not add them to Lacks. It cannot add what the
	// provider itself lacks. Zero (the default) trusts the catalogue.
	Takes llm.Capabilities
	// Weight is the target's share of its tier's calls when the tier
	// spreads them with spread.Weighted (see Builder.Spread): a target of
	// weight 2 gets twice the calls of one of weight 1. 0 means 1; it
	// must not be negative. Other strategies ignore it.
	Weight float64
	// Hedge hedges this target's attempts, replacing the tier's setting
	// (Builder.Hedge): an attempt that has not answered within the delay
	// (a stream: not sent its first chunk) is raced by the same request
	// sent to the next target of the tier, and the first acceptable
	// answer wins. The zero value takes the tier's; to switch a target
	// off in a hedged tier, use Builder.Hedge on the other tiers only.
	Hedge hedge.Config
	// Probe is an active probe: a small request of your choosing (say, one
	// short message with MaxTokens 1), sent to this target when its
	// breaker's open interval ends, while it stays open, instead of
	// letting a user's call be the probe. A success closes the breaker; a
	// failure keeps it open for a longer interval (see breaker.Config's
	// FirstOpenFor), and the next probe goes when that ends. The target's
	// Model, System and Params apply to it as to any request; Timeout
	// bounds it (10s when 0). It sets Breaker.ActiveProbe.
	// Probes run on timers: call Chain.Close when the chain is no longer
	// used (a chain dropped without it stops probing once it is
	// collected). A Probe with no Messages (the zero value) is off.
	Probe llm.Request
}

// Tier is a target's place in the chain. Tiers are ordered: the primary,
// then other deployments of the same model, sibling models on the same
// provider, other providers, and degradations.
type Tier uint8

// The tiers, in the order a chain walks them.
const (
	TierPrimary Tier = iota
	TierDeployment
	TierSibling
	TierProvider
	TierDegrade
)

// String returns the tier's name as recorded in results and telemetry.
func (t Tier) String() string {
	switch t {
	case TierPrimary:
		return "primary"
	case TierDeployment:
		return "deployment"
	case TierSibling:
		return "sibling"
	case TierProvider:
		return "provider"
	case TierDegrade:
		return "degrade"
	}
	return "unknown"
}

// method returns the builder method that adds a target of this tier.
func (t Tier) method() string {
	switch t {
	case TierPrimary:
		return "Primary"
	case TierDeployment:
		return "OrDeployment"
	case TierSibling:
		return "OrSibling"
	case TierProvider:
		return "OrProvider"
	}
	return "OrDegrade"
}

// learned returns t's latest answer times (stream: times to the first
// chunk), which its patience learns from.
func (t *target) learned(stream bool) *latency.Window {
	if stream {
		return &t.firsts
	}
	return &t.answers
}
