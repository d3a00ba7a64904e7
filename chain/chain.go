package chain

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/degrade"
	"github.com/backstop-llm/backstop/internal/affinity"
	"github.com/backstop-llm/backstop/internal/answer"
	"github.com/backstop-llm/backstop/internal/callobs"
	"github.com/backstop-llm/backstop/internal/capability"
	"github.com/backstop-llm/backstop/internal/rank"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/observe"
	"github.com/backstop-llm/backstop/validate"
)

// Chain is a built fallback chain. It is safe for concurrent use; build one
// per use case and share it.
type Chain struct {
	name            string
	deadline        time.Duration
	degradeTimeout  time.Duration
	contentFallback bool
	restart         bool
	targets         []*target
	fits            []*capability.Target // each target's fit, for the chain-wide media check
	spreads         bool                 // a group spreads its calls
	lacks           bool                 // a model target cannot carry everything a request may hold
	picky           bool                 // a model target takes only some media types
	degrades        []degrader
	memories        []degrade.Rememberer // told of every validated model answer
	schema          *validate.Schema
	observer        observe.Observer // the tracing observer, then Builder.Observe's, joined
	state           callobs.State    // the state events' share of observer
	shared          *breaker.Shared  // nil unless Builder.Shared
	epoch           time.Time        // origin of clock
	answers         answer.Checker   // checks answers; keeps the tools' InputSchemas compiled
	warnings        []string         // see Warnings
	probes          []func()         // stop the targets' active probes (Target.Probe): see Close

	// layout is the groups as the walk ranks them; nil unless spreads.
	layout *rank.Layout
	// warm remembers which targets hold conversations' prompt caches
	// (affinity.go); nil until an answer reports cache tokens.
	warm atomic.Pointer[affinity.Table]
}

// Warnings lists what Build found legal but likely unintended: today, a
// target that cannot carry what an earlier one takes (tools, images,
// documents, a native schema), which a request carrying it skips. Log them
// when the chain is built; nil when there is nothing to say.
func (c *Chain) Warnings() []string { return c.warnings }

// degrader is a degradation as Build bound it to the chain.
type degrader struct {
	name string
	d    degrade.Degradation
	mem  degrade.Rememberer // d itself when it remembers answers (LastGood)
	ob   observe.Target
}

// clock reads the monotonic clock alone, which costs half of time.Now.
func (c *Chain) clock() time.Duration { return time.Since(c.epoch) }

// Name returns the chain's name.
func (c *Chain) Name() string { return c.name }

// Call walks the chain for req and returns the first answer, with how it was
// reached. Each model target gets req with its own Model, and its own System
// and Params where set; it is retried as its policy and the decision table
// say, then the chain moves on. When every model target has failed (or the
// deadline has passed), the degradations run in order.
//
// The error, when there is one, is one of: an error matching ErrExhausted
// that joins every target's cause; the failure of a target whose kind stops
// the chain (a bad request, a content refusal without ContentFallback),
// reachable as *TargetError and *llm.Error; or the caller's context error
// when ctx was canceled. The Result is returned in every case, with the
// attempts made.
func (c *Chain) Call(ctx context.Context, req llm.Request) (*Result, error) {
	ctx, obs := callobs.Start(ctx, c.observer, observe.CallStart{Chain: c.name})
	w := walks.Get().(*walk)
	w.start(c, ctx, obs, sender{})
	s, err := w.run(&req)
	w.done()
	w.end(s, err, "")
	res := w.res
	*w = walk{} // holds nothing of this call in the pool
	walks.Put(w)
	return res, err
}

func (c *Chain) stopped(err error) error {
	return fmt.Errorf("chain %q: stopped: %w", c.name, err)
}

// canceled returns the caller's context error when the caller canceled; a
// caller's deadline is treated like the chain's (the walk ends, degradations
// run) and reports nil.
func canceled(caller context.Context) error {
	if err := caller.Err(); errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
