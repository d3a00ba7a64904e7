// Package llm is backstop's shared vocabulary: the request a chain sends, the
// response a provider returns, the Provider interface every model backend
// implements, and the error type and Kind classification that drive every
// retry, breaker and fallback decision.
//
// The package has no dependencies inside the module, so a custom Provider (an
// official SDK with its own retries switched off, a local model, a gateway)
// needs only this package to plug into a chain.
package llm
