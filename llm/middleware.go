package llm

import "context"

// CompleteFunc is the signature of Provider.Complete: one attempt, the
// whole answer.
type CompleteFunc func(ctx context.Context, req Request) (*Response, error)

// StreamFunc is the signature of StreamProvider.Stream: one attempt, the
// answer in chunks.
type StreamFunc func(ctx context.Context, req Request) (Stream, error)

// Middleware is what Wrap puts around a provider's calls: your own metrics,
// access checks, request rewriting or injected faults. Each hook is given
// the provider's call (next) once, when Wrap is called, and returns the call
// to make in its place; it may call next (once per attempt, as a provider
// makes exactly one attempt), return without calling it, or change the
// request, the answer or the error on the way. A chain calls the result once
// per attempt, retries and hedges included, so a hook sees every attempt.
//
// The zero Middleware changes nothing: a nil hook leaves its call as it is.
type Middleware struct {
	// Complete wraps Provider.Complete.
	Complete func(next CompleteFunc) CompleteFunc
	// Stream wraps StreamProvider.Stream; it is not used when the wrapped
	// provider cannot stream. To see the chunks, return a Stream that
	// wraps the one next returns.
	Stream func(next StreamFunc) StreamFunc
}

// Wrap returns p with m around its calls, keeping what p declares: the
// result implements each of the optional interfaces a chain looks for
// (StreamProvider, CapableProvider, MediaProvider, SchemaChecker,
// DeployedProvider, ModelDeployedProvider) exactly when p does, forwarding
// to p. So a wrapped provider streams when p streams and only then, is
// passed over for a request that needs what p lacks, is served in p's
// deployment, and has its native schemas checked as p checks them. Name is
// p's. Other methods of p are not forwarded: keep p to call them.
//
// Wrap the result again to add another Middleware; the last one applied
// runs first. Wrap of a nil p returns nil, which a chain's Build reports as
// a target without a provider. Wrap panics, naming the hook, when a hook
// returns a nil call.
func Wrap(p Provider, m Middleware) Provider {
	if p == nil {
		return nil
	}
	w := &wrapped{p: p, complete: p.Complete}
	if m.Complete != nil {
		if w.complete = m.Complete(p.Complete); w.complete == nil {
			panic("llm.Wrap: Middleware.Complete returned a nil CompleteFunc; return next to leave Complete as it is")
		}
	}
	var has uint8
	if sp, ok := p.(StreamProvider); ok {
		has |= hasStream
		w.stream = sp.Stream
		if m.Stream != nil {
			if w.stream = m.Stream(sp.Stream); w.stream == nil {
				panic("llm.Wrap: Middleware.Stream returned a nil StreamFunc; return next to leave Stream as it is")
			}
		}
	}
	if _, ok := p.(CapableProvider); ok {
		has |= hasCaps
	}
	if _, ok := p.(MediaProvider); ok {
		has |= hasMedia
	}
	if _, ok := p.(SchemaChecker); ok {
		has |= hasSchema
	}
	if _, ok := p.(ModelDeployedProvider); ok {
		has |= hasModelDeployment
	} else if _, ok := p.(DeployedProvider); ok {
		has |= hasDeployment
	}
	return w.as(has)
}

// The optional interfaces a wrapped provider may have, as bits of a set.
// hasModelDeployment includes Deployment, so it is never set with
// hasDeployment.
const (
	hasStream uint8 = 1 << iota
	hasCaps
	hasMedia
	hasSchema
	hasDeployment
	hasModelDeployment
)

// wrapped is a provider with a Middleware around its calls. Its Name and
// Complete are every wrapped provider's; each optional interface's methods
// are on a type of its own below, with wrapped's fields, and as embeds those
// that p has into one struct, so that a type assertion on the result finds
// exactly the interfaces p implements.
//
// A new optional interface in llm needs a bit above, a type below, a check
// in Wrap and the cases of as (middleware_sets.go) doubled;
// TestWrapForwardsExactly checks every set.
type wrapped struct {
	p        Provider
	complete CompleteFunc
	stream   StreamFunc // nil when p cannot stream
}

func (w *wrapped) Name() string { return w.p.Name() }

func (w *wrapped) Complete(ctx context.Context, req Request) (*Response, error) {
	return w.complete(ctx, req)
}

type (
	streams       wrapped // StreamProvider
	capable       wrapped // CapableProvider
	media         wrapped // MediaProvider
	checks        wrapped // SchemaChecker
	deployed      wrapped // DeployedProvider
	modelDeployed wrapped // ModelDeployedProvider (and so DeployedProvider)
)

func (w *streams) Stream(ctx context.Context, req Request) (Stream, error) {
	return w.stream(ctx, req)
}

func (w *capable) Capabilities() Capabilities { return w.p.(CapableProvider).Capabilities() }

func (w *media) MediaTypes() MediaTypes { return w.p.(MediaProvider).MediaTypes() }

func (w *checks) CheckResponseSchema(schema []byte) error {
	return w.p.(SchemaChecker).CheckResponseSchema(schema)
}

func (w *deployed) Deployment() Deployment { return w.p.(DeployedProvider).Deployment() }

func (w *modelDeployed) Deployment() Deployment { return w.p.(DeployedProvider).Deployment() }

func (w *modelDeployed) ModelDeployment(model string) (Deployment, error) {
	return w.p.(ModelDeployedProvider).ModelDeployment(model)
}
