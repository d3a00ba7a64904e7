package tracing

import "go.opentelemetry.io/otel/attribute"

// ScopeName is the instrumentation scope of backstop's tracer and meter.
const ScopeName = "github.com/backstop-llm/backstop"

// Span names. The call span is "backstop.call {chain}" (kind INTERNAL); each
// attempt is a child "chat {model}" (kind CLIENT), as the OpenTelemetry GenAI
// conventions name inference spans; each degradation tried is a child
// "backstop.degrade {name}" (kind INTERNAL). A failed call's error.type is
// "exhausted" (every target failed), "canceled", or the kind that stopped
// it ("bad_request", "content_filter").
const (
	CallSpanPrefix    = "backstop.call "
	AttemptSpanPrefix = "chat "
	DegradeSpanPrefix = "backstop.degrade "
)

// Attribute keys of the OpenTelemetry semantic conventions (GenAI as
// released in semantic-conventions v1.41.0, HTTP, error).
const (
	GenAIOperationName         = attribute.Key("gen_ai.operation.name")
	GenAIProviderName          = attribute.Key("gen_ai.provider.name")
	GenAIRequestModel          = attribute.Key("gen_ai.request.model")
	GenAIRequestMaxTokens      = attribute.Key("gen_ai.request.max_tokens")
	GenAIRequestTemperature    = attribute.Key("gen_ai.request.temperature")
	GenAIRequestTopP           = attribute.Key("gen_ai.request.top_p")
	GenAIRequestStopSequences  = attribute.Key("gen_ai.request.stop_sequences")
	GenAIResponseModel         = attribute.Key("gen_ai.response.model")
	GenAIResponseID            = attribute.Key("gen_ai.response.id")
	GenAIResponseFinishReasons = attribute.Key("gen_ai.response.finish_reasons")
	GenAIUsageInputTokens      = attribute.Key("gen_ai.usage.input_tokens")
	GenAIUsageOutputTokens     = attribute.Key("gen_ai.usage.output_tokens")
	GenAITokenType             = attribute.Key("gen_ai.token.type")
	GenAIInputMessages         = attribute.Key("gen_ai.input.messages")
	GenAIOutputMessages        = attribute.Key("gen_ai.output.messages")
	GenAISystemInstructions    = attribute.Key("gen_ai.system_instructions")
	GenAITimeToFirstChunk      = attribute.Key("gen_ai.response.time_to_first_chunk")
	HTTPRequestResendCount     = attribute.Key("http.request.resend_count")
	HTTPResponseStatusCode     = attribute.Key("http.response.status_code")
	ErrorType                  = attribute.Key("error.type")
)

// backstop's own attribute keys.
const (
	KeyChain           = attribute.Key("backstop.chain")
	KeyTarget          = attribute.Key("backstop.target")
	KeyTier            = attribute.Key("backstop.tier")
	KeyAttempt         = attribute.Key("backstop.attempt")
	KeyRequestID       = attribute.Key("backstop.request_id")
	KeyErrorKind       = attribute.Key("backstop.error.kind")
	KeyDecision        = attribute.Key("backstop.decision")
	KeyReason          = attribute.Key("backstop.reason")
	KeyWait            = attribute.Key("backstop.wait")        // seconds, float
	KeyRetryAfter      = attribute.Key("backstop.retry_after") // seconds, float
	KeyFrom            = attribute.Key("backstop.from")
	KeyTo              = attribute.Key("backstop.to")
	KeyServedTarget    = attribute.Key("backstop.served.target")
	KeyServedTier      = attribute.Key("backstop.served.tier")
	KeyServedRequestID = attribute.Key("backstop.served.request_id")
	KeyAttempts        = attribute.Key("backstop.attempts")
	KeyFallbacks       = attribute.Key("backstop.fallbacks")
	KeyDegraded        = attribute.Key("backstop.degraded")
	KeyAge             = attribute.Key("backstop.age") // seconds, float
	KeyOutcome         = attribute.Key("backstop.outcome")
	KeyBreakerState    = attribute.Key("backstop.breaker.state")
	KeyGateUntil       = attribute.Key("backstop.gate.until")
	KeyValidationPath  = attribute.Key("backstop.validation.path")    // string[]
	KeyValidationKey   = attribute.Key("backstop.validation.keyword") // string[]
	KeyStreamOutcome   = attribute.Key("backstop.stream.outcome")     // complete, incomplete, restarted, abandoned
	KeySharedStore     = attribute.Key("backstop.shared.store")       // budget, breaker
	// KeySpreadStrategy and KeySpreadChoice say, on an attempt span of a
	// tier that spreads its calls, which strategy chose the target and
	// why ("least-loaded 1/3: 0 in flight, eu-1 had 4").
	KeySpreadStrategy = attribute.Key("backstop.spread.strategy")
	KeySpreadChoice   = attribute.Key("backstop.spread.choice")
	// KeyHedge marks a hedge's attempt span (true); KeyHedgeOf names the
	// target whose attempt it races, KeyHedgeDelay how long that attempt
	// had gone unanswered (seconds, float). KeyHedgeLost marks an attempt
	// canceled because the other attempt of its race answered first: not
	// an error.
	KeyHedge      = attribute.Key("backstop.hedge")
	KeyHedgeOf    = attribute.Key("backstop.hedge.of")
	KeyHedgeDelay = attribute.Key("backstop.hedge.delay")
	KeyHedgeLost  = attribute.Key("backstop.hedge.lost")
)

// Event names, recorded on the call span.
const (
	EventRetry            = "backstop.retry"
	EventFallback         = "backstop.fallback"
	EventBreakerRejected  = "backstop.breaker.rejected"
	EventBudgetExhausted  = "backstop.budget.exhausted"
	EventGateClosed       = "backstop.gate.closed"
	EventValidationFailed = "backstop.validation.failed"
	// EventHedge says a hedge was sent (backstop.from: the target whose
	// attempt it races, backstop.to: the hedge's, backstop.hedge.delay).
	EventHedge = "backstop.hedge"
	// EventSharedLocal says the call decided with this replica's own
	// breakers and gates: the shared state (Redis) did not answer.
	EventSharedLocal = "backstop.shared.local"
)

// Metric names.
const (
	MetricCalls             = "backstop.calls"              // counter: calls by outcome and served tier
	MetricAttempts          = "backstop.attempts"           // counter: attempts sent, by target and outcome
	MetricRetries           = "backstop.retries"            // counter: retries sent, by target and reason
	MetricFallbacks         = "backstop.fallbacks"          // counter: moves to the next target, by reason
	MetricBudgetExhausted   = "backstop.budget.exhausted"   // counter: retries refused by a budget
	MetricBreakerChanges    = "backstop.breaker.changes"    // counter: breaker state changes, by new state
	MetricSharedUnavailable = "backstop.shared.unavailable" // counter: times a shared store (Redis) stopped answering, by store
	MetricRetriesPerCall    = "backstop.call.retries"       // histogram: retries a successful call took
	MetricHedges            = "backstop.hedges"             // counter: hedges sent, by target
	MetricOperationSeconds  = "gen_ai.client.operation.duration"
	MetricTokenUsage        = "gen_ai.client.token.usage"
)
