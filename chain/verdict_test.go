package chain_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/degrade"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/retry"
)

// TestKindOfAnExhaustedCallIsWhereItEnded: llm.KindOf returned the first
// cause's kind (server) although the call ended on another (quota).
func TestKindOfAnExhaustedCallIsWhereItEnded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, err := chain.New("c").
			Primary(chain.Target{Name: "a", Provider: &stub{name: "a", fn: fail(llm.KindServer, 500)}, Model: "m"}).
			OrProvider(chain.Target{Name: "b", Provider: &stub{name: "b", fn: fail(llm.KindQuota, 429)}, Model: "m"}).
			OrDegrade(degrade.Func(func(context.Context, llm.Request) (*llm.Response, error) {
				return nil, &llm.Error{Provider: "backstop", Kind: llm.KindInvalidOutput}
			})).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Call(t.Context(), hi)
		if k := llm.KindOf(err); k != llm.KindQuota {
			t.Errorf("KindOf = %v; want quota, the last model target's", k)
		}
		var ex *chain.ExhaustedError
		if !errorsAs(err, &ex) || ex.Kind() != llm.KindQuota {
			t.Errorf("ExhaustedError.Kind: %v", err)
		}
		// Transient earlier: the call may succeed later.
		if v := chain.VerdictOf(err); v != retry.VerdictRetryLater || v.HTTPStatus() != 503 {
			t.Errorf("VerdictOf = %v", v)
		}
	})
}

// TestVerdictOf maps each way a call ends to what a service answers.
func TestVerdictOf(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		one := func(kind llm.Kind, status int, more ...chain.Target) error {
			b := chain.New("c").Primary(chain.Target{Name: "a", Provider: &stub{name: "a", fn: fail(kind, status)}, Model: "m",
				Retry: retry.Policy{MaxAttempts: 1}, Breaker: breaker.Config{Disabled: true}})
			for _, t := range more {
				b.OrProvider(t)
			}
			c, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Call(t.Context(), hi)
			return err
		}
		canceled, cancel := context.WithCancel(t.Context())
		cancel()
		c, _ := chain.New("c").Primary(chain.Target{Name: "a", Provider: &stub{name: "a"}, Model: "m"}).Build()
		_, cerr := c.Call(canceled, hi)
		_, nerr := c.Call(t.Context(), llm.Request{})
		for name, tc := range map[string]struct {
			err  error
			want retry.Verdict
		}{
			"bad request":         {one(llm.KindBadRequest, 400), retry.VerdictBadRequest},
			"context too long":    {one(llm.KindContextLength, 400), retry.VerdictBadRequest},
			"overloaded":          {one(llm.KindOverloaded, 529), retry.VerdictRetryLater},
			"rate limited":        {one(llm.KindRateLimited, 429), retry.VerdictRetryLater},
			"spend cap":           {one(llm.KindQuota, 429), retry.VerdictUnavailable},
			"auth then not found": {one(llm.KindAuth, 401, chain.Target{Name: "b", Provider: &stub{name: "b", fn: fail(llm.KindNotFound, 404)}, Model: "m"}), retry.VerdictUnavailable},
			"canceled":            {cerr, retry.VerdictCanceled},
			"no messages":         {nerr, retry.VerdictBadRequest},
			"ok":                  {nil, retry.VerdictOK},
		} {
			if got := chain.VerdictOf(tc.err); got != tc.want {
				t.Errorf("%s: VerdictOf(%v) = %v; want %v", name, tc.err, got, tc.want)
			}
		}
	})
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }

// TestEveryKindHasAVerdict: no kind's verdict is VerdictOK, the zero value
// an entry left out of the table would have.
func TestEveryKindHasAVerdict(t *testing.T) {
	for k := range llm.NumKinds {
		err := &llm.Error{Provider: "p", Kind: llm.Kind(k)}
		if v := chain.VerdictOf(err); v == retry.VerdictOK {
			t.Errorf("kind %v has no verdict", llm.Kind(k))
		}
	}
}
