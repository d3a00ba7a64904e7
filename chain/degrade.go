package chain

import (
	"context"
	"errors"

	"github.com/backstop-llm/backstop/llm"
)

// Degradation answers when every model target has failed: a static answer,
// a function of the request, a last-known-good answer. Degradations run in
// the order added, even after the chain's deadline has passed, each with its
// own short timeout (see Builder.DegradeTimeout); the first to answer serves
// the call with Result.Degraded set.
type Degradation interface {
	// Name identifies the degradation in results and telemetry; unique in
	// the chain.
	Name() string
	// Degrade answers req or returns an error to pass to the next one.
	Degrade(ctx context.Context, req llm.Request) (*llm.Response, error)
}

// Static returns a degradation that always answers resp, named "static".
func Static(resp llm.Response) Degradation { return staticDegradation{resp} }

type staticDegradation struct{ resp llm.Response }

func (staticDegradation) Name() string { return "static" }

func (s staticDegradation) Degrade(context.Context, llm.Request) (*llm.Response, error) {
	r := s.resp
	return &r, nil
}

// Func returns a degradation that answers with fn, named "func". fn must
// honour ctx; an error passes the call to the next degradation.
func Func(fn func(context.Context, llm.Request) (*llm.Response, error)) Degradation {
	return funcDegradation(fn)
}

type funcDegradation func(context.Context, llm.Request) (*llm.Response, error)

func (funcDegradation) Name() string { return "func" }

func (f funcDegradation) Degrade(ctx context.Context, req llm.Request) (*llm.Response, error) {
	resp, err := f(ctx, req)
	if err == nil && resp == nil {
		return nil, errNilResponse
	}
	return resp, err
}

var errNilResponse = errors.New("degradation returned neither an answer nor an error")

// Named renames d, for a chain with several degradations of one kind.
func Named(name string, d Degradation) Degradation { return namedDegradation{name, d} }

type namedDegradation struct {
	name string
	Degradation
}

func (n namedDegradation) Name() string { return n.name }
