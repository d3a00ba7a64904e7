package storm

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/budget"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/provider/fake"
)

// Stacked layers: layerActions user actions, one every layerEvery, each
// through retry layers around a provider that answers 503 to everything.
const (
	layerActions = 100
	layerEvery   = 100 * time.Millisecond
	layerBase    = 100 * time.Millisecond // each hand-written layer's backoff base
)

// action is one user action; it returns the requests it sent.
type action func(ctx context.Context) int

// setup prepares the actions of one row on the fake deployment f.
type setup func(t *testing.T, f *fake.Server) action

// layersRun is the requests the provider received, in all and at most
// for one action.
type layersRun struct {
	total, most int
}

func stack(t *testing.T, s setup) layersRun {
	var run layersRun
	synctest.Test(t, func(t *testing.T) {
		f := fake.New()
		f.Script(primaryModel, fake.Status(503))
		act := s(t, f)
		var mu sync.Mutex
		arrivals(layerActions, layerEvery, func(int) {
			n := act(t.Context())
			mu.Lock()
			defer mu.Unlock()
			run.most = max(run.most, n)
		})
		run.total = f.Requests(primaryModel)
	})
	return run
}

// layered is an action through layers hand-written layers of tries
// attempts each, around the adapter.
func layered(layers, tries int) setup {
	return func(t *testing.T, f *fake.Server) action {
		p := claude(t, f)
		req := ask
		req.Model = primaryModel
		return func(ctx context.Context) int {
			var n atomic.Int64
			call := func(ctx context.Context) error {
				n.Add(1)
				_, err := p.Complete(ctx, req)
				return err
			}
			for range layers {
				inner := call
				call = func(ctx context.Context) error { return layer(ctx, tries, layerBase, inner) }
			}
			_ = call(ctx)
			return int(n.Load())
		}
	}
}

// backstop is an action through a chain whose only target is the primary,
// under outer hand-written layers of 4 tries each.
func backstop(target chain.Target, outer int) setup {
	return func(t *testing.T, f *fake.Server) action {
		c := build(t, f, target, false) // one chain, shared by every action
		return func(ctx context.Context) int {
			var n atomic.Int64
			call := func(ctx context.Context) error {
				res, err := c.Call(ctx, ask)
				n.Add(int64(sent(res, "primary")))
				return err
			}
			for range outer {
				inner := call
				call = func(ctx context.Context) error { return layer(ctx, 4, layerBase, inner) }
			}
			_ = call(ctx)
			return int(n.Load())
		}
	}
}

func TestStormStackedLayers(t *testing.T) {
	tb := table{
		title: fmt.Sprintf("Stacked layers: %d actions, one every %v, against a provider that answers 503 to everything", layerActions, layerEvery),
		shows: "Requests reaching the provider per action: retry layers multiply; backstop as the single layer bounds them.",
		head:  []string{"retry layers", "expected", "per action", "most in one action", "requests"},
	}
	off := breaker.Config{Disabled: true}
	rows := []struct {
		name, expected string
		setup          setup
	}{
		{"3 layers x 4 tries (1 + 3 retries each)", "4^3 = 64", layered(3, 4)},
		{"3 layers x 3 tries (1 + 2 retries each)", "3^3 = 27", layered(3, 3)},
		{"backstop alone: 3 attempts, no budget, breaker off", "3", backstop(chain.Target{Budget: budget.Unlimited(), Breaker: off}, 0)},
		{"backstop alone: 3 attempts, ratio budget, breaker off", "1.1", backstop(chain.Target{Breaker: off}, 0)},
		{"backstop alone: defaults (budget and breaker)", "-", backstop(chain.Target{}, 0)},
		{"2 layers x 4 tries above backstop (budget, breaker off)", "16 x 1.1", backstop(chain.Target{Breaker: off}, 2)},
	}
	runs := make([]layersRun, len(rows))
	for i, r := range rows {
		runs[i] = stack(t, r.setup)
		tb.row(r.name, r.expected, ratio(runs[i].total, layerActions), runs[i].most, runs[i].total)
	}
	tb.note("Hand-written layers wait a fully jittered %v * 2^n between tries. The README's 64 counts layers that each retry 3", layerBase)
	tb.note("times (1 + 3 tries); layers of 3 attempts give 27. backstop counts the first attempt in MaxAttempts (3); its budget")
	tb.note("caps retries at about 10%% of first attempts, but it cannot see layers above it: they multiply the calls it is given.")
	tb.print(t)

	if r := runs[0]; r.most != 64 || r.total != 64*layerActions {
		t.Errorf("3 layers of 4 tries: %d requests, at most %d per action; want 64 per action", r.total, r.most)
	}
	for i := 2; i <= 4; i++ {
		if r := runs[i]; r.most > 3 {
			t.Errorf("%s: up to %d requests per action, want at most 3", rows[i].name, r.most)
		}
	}
	if r := runs[3]; ratio(r.total, layerActions) > 1.1 {
		t.Errorf("backstop with its budget: %.2f requests per action, want at most 1.1", ratio(r.total, layerActions))
	}
}
