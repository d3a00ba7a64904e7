package tracing

import "go.opentelemetry.io/otel/attribute"

// scopeName is the instrumentation scope of backstop's tracer and meter.
const scopeName = "github.com/backstop-llm/backstop"

// Span names. The call span is "backstop.call {chain}" (kind INTERNAL); each
// attempt is a child "chat {model}" (kind CLIENT), as the OpenTelemetry GenAI
// conventions name inference spans; each degradation tried is a child
// "backstop.degrade {name}" (kind INTERNAL). A failed call's error.type is
// "exhausted" (every target failed), "canceled", "over_budget" (a money
// budget refused it), or the kind that stopped it ("bad_request",
// "content_filter").
const (
	callSpanPrefix    = "backstop.call "
	attemptSpanPrefix = "chat "
	degradeSpanPrefix = "backstop.degrade "
)

// Attribute keys of the OpenTelemetry semantic conventions (GenAI as
// released in semantic-conventions v1.41.0, HTTP, error).
const (
	genAIOperationName         = attribute.Key("gen_ai.operation.name")
	genAIProviderName          = attribute.Key("gen_ai.provider.name")
	genAIRequestModel          = attribute.Key("gen_ai.request.model")
	genAIRequestMaxTokens      = attribute.Key("gen_ai.request.max_tokens")
	genAIRequestTemperature    = attribute.Key("gen_ai.request.temperature")
	genAIRequestTopP           = attribute.Key("gen_ai.request.top_p")
	genAIResponseModel         = attribute.Key("gen_ai.response.model")
	genAIResponseID            = attribute.Key("gen_ai.response.id")
	genAIResponseFinishReasons = attribute.Key("gen_ai.response.finish_reasons")
	genAIUsageInputTokens      = attribute.Key("gen_ai.usage.input_tokens")
	genAIUsageOutputTokens     = attribute.Key("gen_ai.usage.output_tokens")
	genAITokenType             = attribute.Key("gen_ai.token.type")
	genAIInputMessages         = attribute.Key("gen_ai.input.messages")
	genAIOutputMessages        = attribute.Key("gen_ai.output.messages")
	genAISystemInstructions    = attribute.Key("gen_ai.system_instructions")
	genAITimeToFirstChunk      = attribute.Key("gen_ai.response.time_to_first_chunk")
	httpRequestResendCount     = attribute.Key("http.request.resend_count")
	httpResponseStatusCode     = attribute.Key("http.response.status_code")
	keyErrorType               = attribute.Key("error.type")
)

// backstop's own attribute keys.
const (
	keyChain           = attribute.Key("backstop.chain")
	keyTarget          = attribute.Key("backstop.target")
	keyTier            = attribute.Key("backstop.tier")
	keyAttempt         = attribute.Key("backstop.attempt")
	keyRequestID       = attribute.Key("backstop.request_id")
	keyErrorKind       = attribute.Key("backstop.error.kind")
	keyDecision        = attribute.Key("backstop.decision")
	keyReason          = attribute.Key("backstop.reason")
	keyWait            = attribute.Key("backstop.wait")        // seconds, float
	keyRetryAfter      = attribute.Key("backstop.retry_after") // seconds, float
	keyFrom            = attribute.Key("backstop.from")
	keyTo              = attribute.Key("backstop.to")
	keyServedTarget    = attribute.Key("backstop.served.target")
	keyServedTier      = attribute.Key("backstop.served.tier")
	keyServedRequestID = attribute.Key("backstop.served.request_id")
	keyAttempts        = attribute.Key("backstop.attempts")
	keyFallbacks       = attribute.Key("backstop.fallbacks")
	keyDegraded        = attribute.Key("backstop.degraded")
	keyAge             = attribute.Key("backstop.age") // seconds, float
	keyOutcome         = attribute.Key("backstop.outcome")
	keyBreakerState    = attribute.Key("backstop.breaker.state")
	keyGateUntil       = attribute.Key("backstop.gate.until")
	keyValidationPath  = attribute.Key("backstop.validation.path")    // string[]
	keyValidationKey   = attribute.Key("backstop.validation.keyword") // string[]
	keyStreamOutcome   = attribute.Key("backstop.stream.outcome")     // complete, incomplete, restarted, abandoned
	keySharedStore     = attribute.Key("backstop.shared.store")       // budget, breaker
	// keySpreadStrategy and keySpreadChoice say, on an attempt span of a
	// tier that spreads its calls, which strategy chose the target and
	// why ("least-loaded 1/3: 0 in flight, eu-1 had 4").
	keySpreadStrategy = attribute.Key("backstop.spread.strategy")
	keySpreadChoice   = attribute.Key("backstop.spread.choice")
	// keyHedge marks a hedge's attempt span (true); keyHedgeOf names the
	// target whose attempt it races, keyHedgeDelay how long that attempt
	// had gone unanswered (seconds, float). keyHedgeLost marks an attempt
	// canceled because the other attempt of its race answered first: not
	// an error.
	keyHedge      = attribute.Key("backstop.hedge")
	keyHedgeOf    = attribute.Key("backstop.hedge.of")
	keyHedgeDelay = attribute.Key("backstop.hedge.delay")
	keyHedgeLost  = attribute.Key("backstop.hedge.lost")
	// keyCost is what an attempt (on its span) or a call (on the call
	// span: all its attempts) cost, in US dollars (float). It is what the
	// known prices account for: keyCostUnpriced (true) marks a figure
	// missing tokens whose price is unknown, a lower bound, and the figure
	// is left out when no token had a price, so that an unknown cost never
	// reads as 0; keyCostEstimated (true) marks one with estimated tokens
	// (a stream cut short, a hedge that lost its race). keyCostOverhead,
	// on the call span, is the part of keyCost that did not pay for the
	// answer served: the retries, fallbacks, re-asks and hedges (all of
	// keyCost when nothing, or a degradation, served).
	keyCost          = attribute.Key("backstop.cost")
	keyCostOverhead  = attribute.Key("backstop.cost.overhead")
	keyCostUnpriced  = attribute.Key("backstop.cost.unpriced")
	keyCostEstimated = attribute.Key("backstop.cost.estimated")
	// keyCostCacheLost is the part of keyCost that leaving the warm
	// prompt cache of the conversation added (cost.Cost.CacheLost), in
	// US dollars; absent when none.
	keyCostCacheLost = attribute.Key("backstop.cost.cache_lost")
	// keyBudgetKey is the caller's key of whose money a call spends
	// (cost.WithKey), on the call span and the cost metrics; absent when
	// the call's context has none.
	keyBudgetKey = attribute.Key("backstop.budget.key")
)

// Event names, recorded on the call span.
const (
	eventRetry            = "backstop.retry"
	eventFallback         = "backstop.fallback"
	eventBreakerRejected  = "backstop.breaker.rejected"
	eventBudgetExhausted  = "backstop.budget.exhausted"
	eventGateClosed       = "backstop.gate.closed"
	eventValidationFailed = "backstop.validation.failed"
	// eventSpendRefused says a money budget could not cover an attempt
	// (backstop.reason: the budget, the key's spend and the attempt's
	// worst case); eventPriceCapped that an attempt's worst case passed
	// its tier's price cap (chain.Builder.CapPrice).
	eventSpendRefused = "backstop.spend.refused"
	eventPriceCapped  = "backstop.price.capped"
	// eventHedge says a hedge was sent (backstop.from: the target whose
	// attempt it races, backstop.to: the hedge's, backstop.hedge.delay).
	eventHedge = "backstop.hedge"
	// eventSharedLocal says the call decided with this replica's own
	// breakers and gates: the shared state (Redis) did not answer.
	eventSharedLocal = "backstop.shared.local"
)

// Metric names.
const (
	metricCalls             = "backstop.calls"              // counter: calls by outcome and served tier
	metricAttempts          = "backstop.attempts"           // counter: attempts sent, by target and outcome
	metricRetries           = "backstop.retries"            // counter: retries sent, by target and reason
	metricFallbacks         = "backstop.fallbacks"          // counter: moves to the next target, by reason
	metricBudgetExhausted   = "backstop.budget.exhausted"   // counter: retries refused by a budget
	metricSpendRefused      = "backstop.spend.refused"      // counter: attempts a money budget could not cover, by target and budget key
	metricBreakerChanges    = "backstop.breaker.changes"    // counter: breaker state changes, by new state
	metricSharedUnavailable = "backstop.shared.unavailable" // counter: times a shared store (Redis) stopped answering, by store
	metricRetriesPerCall    = "backstop.call.retries"       // histogram: retries a successful call took
	metricHedges            = "backstop.hedges"             // counter: hedges sent, by target
	metricCost              = "backstop.cost"               // float counter ({USD}): what attempts cost, by target and budget key
	metricCacheLost         = "backstop.cost.cache_lost"    // float counter ({USD}): the part of backstop.cost a lost prompt cache added
	metricUnpriced          = "backstop.unpriced"           // counter: attempts with tokens of unknown price, by target and budget key
	metricOperationSeconds  = "gen_ai.client.operation.duration"
	metricTokenUsage        = "gen_ai.client.token.usage"
)
