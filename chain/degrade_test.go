package chain_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
)

// hang is a degradation that answers only when its context ends.
func hang(name string) chain.Degradation {
	return chain.Named(name, chain.Func(func(ctx context.Context, _ llm.Request) (*llm.Response, error) {
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
				OrDegrade(chain.Static(llm.Response{Text: "sorry"}))
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
