// Package tracing owns backstop's OpenTelemetry instrumentation: the spans,
// events and metrics a chain records, and every attribute name they use
// (names.go); nothing else names telemetry. It is an observer of the
// walk's events (package observe): every chain has one, made with New from
// the Builder's TracerProvider, MeterProvider and CaptureContent, before
// the observers given to Builder.Observe. Its exported surface is what a
// user configures (Config) and the Observer itself; the span, attribute,
// event and metric names are unexported here and listed, as strings, in
// docs/operations.md (the instrumentation scope is
// "github.com/backstop-llm/backstop").
//
// A call is one span, "backstop.call {chain}" (INTERNAL), with one child per
// attempt, "chat {model}" (CLIENT), following the GenAI semantic
// conventions as released in semantic-conventions v1.41.0, and one child per
// degradation tried. Retries, fallbacks, skips (breaker, budget,
// Retry-After gate) and schema failures are events on the call span, so a
// trace answers, after an incident: which targets were tried, what each
// answered, how long the chain waited and why, which model served, and the
// request-id to give the provider's support.
//
// What each attempt and each call cost is recorded too (backstop.cost on
// the spans, in US dollars, and the backstop.cost counter by target and
// by the caller's budget key, cost.Key): a cost is not content, so it is
// always recorded. An unknown price is never recorded as 0: the figure
// holds what the known prices account for, flagged unpriced, and
// attempts with unpriced tokens are counted apart (backstop.unpriced).
//
// Providers default to the otel globals. While no SDK is installed (the
// globals are the API's no-op delegates) or when the no-op providers are
// passed explicitly, the chain records nothing and pays one pointer
// comparison per call. Prompts and answers are recorded only with
// CaptureContent; API keys never are.
package tracing
