package llm

import "context"

// Provider is one model backend. Complete makes exactly one attempt: one
// HTTP request, no retries inside. Retries, waits and fallbacks belong to the
// chain, so that retry layers never stack.
//
// A failed attempt should return an *Error whose Kind classifies the failure;
// any other error is classified with KindOf. Implementations must be safe for
// concurrent use and must return promptly when ctx is done.
type Provider interface {
	// Name identifies the provider's vendor as the OpenTelemetry GenAI
	// conventions name it (gen_ai.provider.name): "anthropic", "openai",
	// "aws.bedrock", … Targets of one vendor share a name.
	Name() string
	// Complete sends one request and returns the answer or the failure.
	// The Response returned is the caller's from then on (a chain hands
	// it on as its Result's Response): return a new one per call, never
	// one that the provider keeps or shares.
	Complete(ctx context.Context, req Request) (*Response, error)
}
