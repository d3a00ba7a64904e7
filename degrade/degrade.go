package degrade

import (
	"context"
	"fmt"
	"time"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/validate"
)

// Degradation answers when every model target has failed: a static answer,
// a function of the request, a last-known-good answer. A chain runs its
// degradations in the order added, even after its deadline has passed,
// each with its own short timeout (chain.Builder.DegradeTimeout); the first
// to answer serves the call with chain.Result.Degraded set.
type Degradation interface {
	// Name identifies the degradation in results and telemetry; unique in
	// the chain.
	Name() string
	// Degrade answers req or returns an error to pass to the next one.
	Degrade(ctx context.Context, req llm.Request) (*llm.Response, error)
}

// Binder is implemented by a degradation that needs to know the chain it
// serves. chain.Builder.Build calls Bind once per chain, with the chain's
// name and its Schema (nil without one), and uses the degradation Bind
// returns in d's place; an error fails Build, reported under the
// degradation's name. One Binder may so serve several chains.
type Binder interface {
	Bind(chain string, schema *validate.Schema) (Degradation, error)
}

// Rememberer is implemented by a degradation that serves answers the chain
// gave before (LastGood's, once bound). The chain tells it of every answer
// a model target serves, once validated (Remember: it must not wait on a
// remote store; the chain ignores its error, the answer is served anyway),
// asks it for an answer with its age in place of Degrade (Recall: the age
// is chain.Result.Age), and waits for what it still has to write in
// chain.Chain.Flush (Flush).
type Rememberer interface {
	Degradation
	Remember(ctx context.Context, req llm.Request, target string, resp *llm.Response) error
	Recall(ctx context.Context, req llm.Request) (resp *llm.Response, age time.Duration, err error)
	Flush(ctx context.Context) error
}

// Static returns a degradation that always answers resp, named "static".
// Bound to a chain with a Schema, it checks resp against it: an answer
// that does not pass fails Build.
func Static(resp llm.Response) Degradation { return static{resp} }

type static struct{ resp llm.Response }

func (static) Name() string { return "static" }

func (s static) Degrade(context.Context, llm.Request) (*llm.Response, error) {
	r := s.resp
	return &r, nil
}

// Bind checks the answer against the chain's schema.
func (s static) Bind(_ string, schema *validate.Schema) (Degradation, error) {
	if schema != nil {
		if _, err := schema.Validate(s.resp.Text); err != nil {
			return nil, fmt.Errorf("the Static answer does not pass the chain's Schema; fix the answer or the schema: %w", err)
		}
	}
	return s, nil
}

// Func returns a degradation that answers with fn, named "func". fn must
// honour ctx; an error, or no answer at all, passes the call to the next
// degradation.
func Func(fn func(context.Context, llm.Request) (*llm.Response, error)) Degradation {
	return function(fn)
}

type function func(context.Context, llm.Request) (*llm.Response, error)

func (function) Name() string { return "func" }

func (f function) Degrade(ctx context.Context, req llm.Request) (*llm.Response, error) {
	return f(ctx, req)
}

// Named renames d, for a chain with several degradations of one kind. It
// keeps what d is: a Binder stays one, and so does a Rememberer.
func Named(name string, d Degradation) Degradation {
	if r, ok := d.(Rememberer); ok {
		return namedRememberer{name, r}
	}
	return named{name, d}
}

type named struct {
	name string
	Degradation
}

func (n named) Name() string { return n.name }

// Bind binds the degradation renamed, when it is a Binder.
func (n named) Bind(chain string, schema *validate.Schema) (Degradation, error) {
	return bindNamed(n.name, n.Degradation, chain, schema)
}

type namedRememberer struct {
	name string
	Rememberer
}

func (n namedRememberer) Name() string { return n.name }

// Bind binds the degradation renamed, when it is a Binder.
func (n namedRememberer) Bind(chain string, schema *validate.Schema) (Degradation, error) {
	return bindNamed(n.name, n.Rememberer, chain, schema)
}

func bindNamed(name string, d Degradation, chain string, schema *validate.Schema) (Degradation, error) {
	b, ok := d.(Binder)
	if !ok {
		return Named(name, d), nil
	}
	bound, err := b.Bind(chain, schema)
	if err != nil {
		return nil, err
	}
	return Named(name, bound), nil
}
