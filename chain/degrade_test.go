package chain_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/degrade"
	"github.com/backstop-llm/backstop/llm"
)

// hang is a degradation that answers only when its context ends.
func hang(name string) degrade.Degradation {
	return degrade.Named(name, degrade.Func(func(ctx context.Context, _ llm.Request) (*llm.Response, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}))
}

// TestDegradationsOutliveTheDeadlineByOneDegradeTimeoutInAll: with a 1s
// deadline and two hanging degradations, the call ended after 5s (each
// degradation its full 2s). Together they may run one DegradeTimeout past
// the deadline; a Static answer after them still answers.
func TestDegradationsOutliveTheDeadlineByOneDegradeTimeoutInAll(t *testing.T) {
	failing := &stub{name: "p", fn: func(ctx context.Context, _ llm.Request) (*llm.Response, error) {
		<-ctx.Done() // hangs until the deadline
		return nil, ctx.Err()
	}}
	for _, how := range []string{"caller's deadline", "chain's Deadline"} {
		synctest.Test(t, func(t *testing.T) {
			b := chain.New("c").
				Primary(chain.Target{Name: "p", Provider: failing, Model: "m"}).
				OrDegrade(hang("first")).
				OrDegrade(hang("second")).
				OrDegrade(degrade.Static(llm.Response{Text: "sorry"}))
			ctx := t.Context()
			if how == "chain's Deadline" {
				b.Deadline(time.Second)
			} else {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, time.Second)
				defer cancel()
			}
			c, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			res, err := c.Call(ctx, llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "q"}}})
			took := time.Since(start)
			if err != nil || res.Text != "sorry" {
				t.Fatalf("%s: got %v, %+v; want the static answer", how, err, res)
			}
			if want := time.Second + chain.DefaultDegradeTimeout; took != want {
				t.Errorf("%s: the call took %v; want %v (the deadline, then one DegradeTimeout in all)", how, took, want)
			}
			var first, second time.Duration
			for _, a := range res.Attempts {
				switch a.Target {
				case "first":
					first = a.Duration
				case "second":
					second = a.Duration
					if !errors.Is(a.Err, context.DeadlineExceeded) {
						t.Errorf("%s: second degradation's error %v; want its deadline", how, a.Err)
					}
				}
			}
			if first != chain.DefaultDegradeTimeout || second != 0 {
				t.Errorf("%s: the degradations ran %v and %v; want %v and 0", how, first, second, chain.DefaultDegradeTimeout)
			}
		})
	}
}

// TestDegradationsBeforeTheDeadlineKeepTheirOwnTimeout: a chain that fails
// early leaves its degradations their DegradeTimeout each, up to one
// DegradeTimeout past the deadline.
func TestDegradationsBeforeTheDeadlineKeepTheirOwnTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bad := &stub{name: "p", fn: func(context.Context, llm.Request) (*llm.Response, error) {
			return nil, &llm.Error{Provider: "p", Status: 401, Kind: llm.KindAuth}
		}}
		c, err := chain.New("c").Deadline(10 * time.Second).DegradeTimeout(time.Second).
			Primary(chain.Target{Name: "p", Provider: bad, Model: "m"}).
			OrDegrade(hang("first")).
			OrDegrade(hang("second")).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = c.Call(t.Context(), llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "q"}}})
		if !errors.Is(err, chain.ErrExhausted) {
			t.Fatalf("got %v; want ErrExhausted", err)
		}
		if took := time.Since(start); took != 2*time.Second {
			t.Errorf("took %v; want 2s (1s each, well before the deadline)", took)
		}
	})
}

func TestDegradationsRunInOrderAfterEveryModelFailed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &stub{name: "x", fn: fail(llm.KindAuth, 401)}
		broken := degrade.Func(func(context.Context, llm.Request) (*llm.Response, error) { return nil, errors.New("cache miss") })
		c, err := chain.New("c").Primary(chain.Target{Name: "p", Provider: p, Model: "m"}).
			OrDegrade(broken).
			OrDegrade(degrade.Static(llm.Response{Text: "we are busy"})).Build()
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Call(t.Context(), question)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Degraded || res.Text != "we are busy" || res.Served.Target != "static" || res.Served.Tier != chain.TierDegrade {
			t.Fatalf("result = %+v", res)
		}
		var names []string
		for _, a := range res.Attempts {
			names = append(names, a.Target)
		}
		if len(names) != 3 || names[0] != "p" || names[1] != "func" || names[2] != "static" {
			t.Fatalf("attempts %v", names)
		}
	})
}

func TestDegradationRunsAfterTheDeadlineWithItsOwnTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hang := &stub{name: "x", fn: func(ctx context.Context, _ llm.Request) (*llm.Response, error) {
			<-ctx.Done()
			return nil, &llm.Error{Provider: "x", Kind: llm.KindOf(ctx.Err()), Err: ctx.Err()}
		}}
		var degradeDeadline time.Duration
		slowCache := degrade.Func(func(ctx context.Context, _ llm.Request) (*llm.Response, error) {
			dl, _ := ctx.Deadline()
			degradeDeadline = time.Until(dl)
			return &llm.Response{Text: "cached"}, nil
		})
		c, _ := chain.New("c").Deadline(10 * time.Second).DegradeTimeout(time.Second).
			Primary(chain.Target{Name: "p", Provider: hang, Model: "m"}).
			OrSibling(chain.Target{Name: "s", Provider: hang, Model: "n"}).
			OrDegrade(slowCache).Build()
		start := time.Now()
		res, err := c.Call(t.Context(), question)
		if err != nil {
			t.Fatal(err)
		}
		if time.Since(start) != 10*time.Second {
			t.Fatalf("call took %v, want the 10s deadline", time.Since(start))
		}
		if res.Text != "cached" || degradeDeadline != time.Second {
			t.Fatalf("text %q, degradation had %v", res.Text, degradeDeadline)
		}
		if a := res.Attempts[1]; a.Target != "s" || a.Decision != chain.DecisionSkip || !errors.Is(a.Err, chain.ErrDeadline) {
			t.Fatalf("sibling should be skipped for the deadline: %+v", a)
		}
	})
}

// A degradation that returns neither an answer nor an error passes the
// call on, and its record says so.
func TestDegradationWithoutAnAnswerPassesOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &stub{name: "x", fn: fail(llm.KindAuth, 401)}
		empty := degrade.Func(func(context.Context, llm.Request) (*llm.Response, error) { return nil, nil })
		c, err := chain.New("c").Primary(chain.Target{Name: "p", Provider: p, Model: "m"}).
			OrDegrade(empty).
			OrDegrade(degrade.Static(llm.Response{Text: "we are busy"})).Build()
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Call(t.Context(), question)
		if err != nil || res.Text != "we are busy" {
			t.Fatalf("%+v, %v", res, err)
		}
		if a := res.Attempts[1]; a.Target != "func" || a.Decision != chain.DecisionNext || a.Reason != "it returned neither an answer nor an error" {
			t.Fatalf("the empty degradation's record: %+v", a)
		}
	})
}
