package spend_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/catalog"
	"github.com/backstop-llm/backstop/cost"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/observe"
	"github.com/backstop-llm/backstop/policy"
	"github.com/backstop-llm/backstop/spend"
)

var price = catalog.Price{Input: 3, Output: 15}

// ask is an attempt in phase Send asking for up to maxTokens of output at
// price, at at.
func ask(at time.Time, maxTokens int) *policy.Attempt {
	req := &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "what is the cost of this?"}},
		Params: llm.Params{MaxTokens: maxTokens}}
	return &policy.Attempt{Phase: policy.Send, Target: "t", N: 1, At: at, Request: req, Price: price, MaxOutput: 64000}
}

func mustNew(t *testing.T, c spend.Config) *spend.Budget {
	t.Helper()
	b, err := spend.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestConfigValidateReportsEveryProblem(t *testing.T) {
	err := spend.Config{Limit: -1, Period: 1500 * time.Millisecond, Mode: 7}.Validate()
	if !errors.Is(err, llm.ErrInvalidConfig) {
		t.Fatalf("err %v does not match llm.ErrInvalidConfig", err)
	}
	for _, want := range []string{"Name is empty", "Limit is -$0", "Period is 1.5s; use a whole number of seconds", "Mode is Mode(7)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	if err := (spend.Config{Name: "n", Limit: 1, Period: -time.Hour}).Validate(); err == nil || !strings.Contains(err.Error(), "0 means 24h") {
		t.Errorf("a negative Period: %v", err)
	}
	if _, err := spend.New(spend.Config{Name: "n"}); !errors.Is(err, llm.ErrInvalidConfig) {
		t.Errorf("New without a Limit: %v", err)
	}
	if err := (spend.Config{Name: "n", Limit: cost.Dollar}).Validate(); err != nil {
		t.Errorf("a valid config: %v", err)
	}
}

// TestReserveSettleRelease: the worst case is reserved before the attempt,
// its cost spent after it and the rest released; an attempt not sent
// spends nothing.
func TestReserveSettleRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := cost.WithKey(context.Background(), "acme")
		b := mustNew(t, spend.Config{Name: "quota", Limit: cost.Dollar})
		a := ask(time.Now(), 1000)
		worst := a.WorstCase().Spent
		adm := b.Admit(ctx, a)
		if adm.Err != nil || adm.Hold.N != uint64(worst) || adm.Hold.Ref == nil {
			t.Fatalf("admission %+v; want a hold of %v", adm, worst)
		}
		if spent, reserved, _ := b.Used(ctx, "acme"); spent != 0 || reserved != worst {
			t.Fatalf("after Admit: spent %v, reserved %v; want %v reserved", spent, reserved, worst)
		}
		b.Settle(ctx, a, adm.Hold, &policy.Outcome{Sent: true, Cost: cost.Cost{Spent: worst / 3}})
		if spent, reserved, _ := b.Used(ctx, "acme"); spent != worst/3 || reserved != 0 {
			t.Fatalf("after Settle: spent %v, reserved %v", spent, reserved)
		}
		adm = b.Admit(ctx, a)
		b.Settle(ctx, a, adm.Hold, &policy.Outcome{Sent: false, Cost: cost.Cost{Spent: 99}})
		if spent, reserved, _ := b.Used(ctx, "acme"); spent != worst/3 || reserved != 0 {
			t.Fatalf("an attempt not sent: spent %v, reserved %v", spent, reserved)
		}
		b.Settle(ctx, a, policy.Hold{}, &policy.Outcome{Sent: true, Cost: cost.Cost{Spent: 99}})
		if spent, _, _ := b.Used(ctx, "acme"); spent != worst/3 {
			t.Fatalf("a zero Hold settled something: spent %v", spent)
		}
		if spent, _, _ := b.Used(ctx, ""); spent != 0 {
			t.Fatalf("the shared key spent %v", spent)
		}
	})
}

// TestABudgetOfExactlyOneCall: the second call's worst case does not fit;
// its refusal says which budget, which key, how much, and when it resets.
func TestABudgetOfExactlyOneCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := cost.WithKey(context.Background(), "acme")
		time.Sleep(5 * time.Hour) // periods align to UTC: this one started at midnight
		a := ask(time.Now(), 1000)
		worst := a.WorstCase().Spent
		for _, mode := range []spend.Mode{spend.Degrade, spend.Refuse} {
			b := mustNew(t, spend.Config{Name: "quota", Limit: worst, Mode: mode})
			first := b.Admit(ctx, a)
			if first.Err != nil {
				t.Fatalf("%v: the one call it covers: %v", mode, first.Err)
			}
			second := b.Admit(ctx, a)
			var e *spend.ExceededError
			if !errors.As(second.Err, &e) || !errors.Is(second.Err, spend.ErrExceeded) {
				t.Fatalf("%v: second call: %+v", mode, second)
			}
			reset := time.Date(2000, 1, 2, 0, 0, 0, 0, time.UTC)
			if *e != (spend.ExceededError{Budget: "quota", Key: "acme", Limit: worst, Used: worst, Need: worst, Reset: reset}) {
				t.Errorf("%v: %+v", mode, *e)
			}
			if second.Cause != observe.SkipSpend || second.Stop != (mode == spend.Refuse) || second.Hold != (policy.Hold{}) {
				t.Errorf("%v: cause %v, stop %v, hold %+v", mode, second.Cause, second.Stop, second.Hold)
			}
			if want := `budget quota for "acme": ` + worst.String() + " of " + worst.String() + " spent or reserved; this attempt may cost " + worst.String(); second.Reason != want {
				t.Errorf("reason %q\nwant   %q", second.Reason, want)
			}
			// The first settles below its worst case: the second fits now.
			b.Settle(ctx, a, first.Hold, &policy.Outcome{Sent: true, Cost: cost.Cost{Spent: worst / 2}})
			if b.Admit(ctx, ask(time.Now(), 400)).Err != nil {
				t.Errorf("%v: a smaller attempt does not fit what the first left", mode)
			}
		}
	})
}

// TestPeriodsAlignToTheEpochAndReset: a 1h budget starts afresh on the
// hour, UTC; a reservation settles into the period it was made in even
// when the attempt ends in the next.
func TestPeriodsAlignToTheEpochAndReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		time.Sleep(59*time.Minute + 50*time.Second)
		a := ask(time.Now(), 1000)
		worst := a.WorstCase().Spent
		b := mustNew(t, spend.Config{Name: "hourly", Limit: worst, Period: time.Hour})
		adm := b.Admit(ctx, a)
		if adm.Err != nil {
			t.Fatal(adm.Err)
		}
		time.Sleep(20 * time.Second) // into the next hour
		if spent, reserved, _ := b.Used(ctx, ""); spent != 0 || reserved != 0 {
			t.Fatalf("the new hour starts with %v spent, %v reserved", spent, reserved)
		}
		next := b.Admit(ctx, ask(time.Now(), 1000))
		if next.Err != nil {
			t.Fatalf("the new hour refuses: %v", next.Err)
		}
		b.Settle(ctx, a, adm.Hold, &policy.Outcome{Sent: true, Cost: cost.Cost{Spent: worst}})
		if spent, reserved, _ := b.Used(ctx, ""); spent != 0 || reserved != worst {
			t.Fatalf("the old hour's attempt settled into the new: spent %v, reserved %v", spent, reserved)
		}
		e := new(spend.ExceededError)
		if !errors.As(b.Admit(ctx, ask(time.Now(), 1000)).Err, &e) || e.Reset != time.Date(2000, 1, 1, 2, 0, 0, 0, time.UTC) {
			t.Fatalf("reset %v", e.Reset)
		}
	})
}

// TestUnknownPrice: an attempt whose worst case is unknown reserves, and
// settles, what is known of it; with StrictPrices it is refused with
// ErrUnpriced, a pass-over whatever the Mode.
func TestUnknownPrice(t *testing.T) {
	ctx := context.Background()
	a := ask(time.Now(), 0)
	a.MaxOutput = 0 // no output limit known, and the request sets none
	w := a.WorstCase()
	if !w.Unpriced || w.Spent == 0 {
		t.Fatalf("worst case %+v; want the prompt's part, unpriced", w)
	}
	b := mustNew(t, spend.Config{Name: "lax", Limit: cost.Dollar})
	adm := b.Admit(ctx, a)
	if adm.Err != nil || adm.Hold.N != uint64(w.Spent) {
		t.Fatalf("lax: %+v; want the known part, %v, reserved", adm, w.Spent)
	}
	b.Settle(ctx, a, adm.Hold, &policy.Outcome{Sent: true, Cost: cost.Cost{Spent: 5 * w.Spent, Unpriced: true}})
	if spent, reserved, _ := b.Used(ctx, ""); spent != 5*w.Spent || reserved != 0 {
		t.Fatalf("lax: spent %v reserved %v", spent, reserved)
	}
	a.Price = catalog.Price{}
	if adm := b.Admit(ctx, a); adm.Err != nil || adm.Hold.N != 0 || adm.Hold.Ref == nil {
		t.Fatalf("no price at all: %+v; want admitted, nothing reserved, its cost settled", adm)
	}
	strict := mustNew(t, spend.Config{Name: "strict", Limit: cost.Dollar, Mode: spend.Refuse, StrictPrices: true})
	adm = strict.Admit(ctx, a)
	if !errors.Is(adm.Err, spend.ErrUnpriced) || adm.Stop || adm.Cause != observe.SkipSpend || errors.Is(adm.Err, spend.ErrExceeded) {
		t.Fatalf("strict: %+v", adm)
	}
	if adm := strict.Admit(ctx, ask(time.Now(), 100)); adm.Err != nil {
		t.Fatalf("strict, a priced attempt: %v", adm.Err)
	}
}

// TestPeekAndPlanHoldNothing: Peek and Plan ask no store and hold
// nothing; once a reservation found the key with nothing left, Peek
// refuses without Stop and Plan (a retry, before its backoff) with it,
// until a reservation of the key is granted again.
func TestPeekAndPlanHoldNothing(t *testing.T) {
	ctx := context.Background()
	a := ask(time.Now(), 1000)
	worst := a.WorstCase().Spent
	b := mustNew(t, spend.Config{Name: "q", Limit: worst + 1, Mode: spend.Refuse})
	peek := &policy.Attempt{Phase: policy.Peek, Target: "t", N: 1, Price: price}
	plan := &policy.Attempt{Phase: policy.Plan, Target: "t", N: 2, Price: price}
	if adm := b.Admit(ctx, peek); adm != (policy.Admission{}) {
		t.Fatalf("peek on an empty budget: %+v", adm)
	}
	held := b.Admit(ctx, a)
	if adm := b.Admit(ctx, peek); adm.Err != nil {
		t.Fatalf("peek with $0.000000001 left: %v", adm.Err)
	}
	b.Settle(ctx, a, held.Hold, &policy.Outcome{Sent: true, Cost: cost.Cost{Spent: worst + 1}})
	if adm := b.Admit(ctx, peek); adm.Err != nil {
		t.Fatalf("peek before a reservation found the key spent: %v (it asks no store)", adm.Err)
	}
	if adm := b.Admit(ctx, ask(time.Now(), 1000)); !errors.Is(adm.Err, spend.ErrExceeded) {
		t.Fatalf("a first attempt on a spent budget: %+v", adm)
	}
	adm := b.Admit(ctx, peek)
	if !errors.Is(adm.Err, spend.ErrExceeded) || adm.Stop || adm.Hold != (policy.Hold{}) {
		t.Fatalf("peek on a spent budget: %+v", adm)
	}
	// A retry on a spent budget is refused before its backoff, not after:
	// with Refuse, that ends the call.
	if adm := b.Admit(ctx, plan); !errors.Is(adm.Err, spend.ErrExceeded) || !adm.Stop || adm.Hold != (policy.Hold{}) {
		t.Fatalf("plan on a spent budget: %+v", adm)
	}
	if spent, reserved, _ := b.Used(ctx, ""); spent != worst+1 || reserved != 0 {
		t.Fatalf("peek or plan held something: %v %v", spent, reserved)
	}
}

// failing is a Store whose every call fails.
type failing struct{ settled int }

func (f *failing) Reserve(context.Context, string, int64, cost.Money, cost.Money, time.Duration) (bool, cost.Money, error) {
	return false, 0, errors.New("down")
}
func (f *failing) Settle(context.Context, string, int64, cost.Money, cost.Money, time.Duration) error {
	f.settled++
	return errors.New("down")
}
func (f *failing) Used(context.Context, string, int64) (cost.Money, cost.Money, error) {
	return 0, 0, errors.New("down")
}

// TestAStoreOutageNeverBlocks: an attempt whose reservation failed is let
// through, and nothing is settled for it.
func TestAStoreOutageNeverBlocks(t *testing.T) {
	f := &failing{}
	b := mustNew(t, spend.Config{Name: "q", Limit: 1, Mode: spend.Refuse, Store: f})
	a := ask(time.Now(), 1000)
	adm := b.Admit(context.Background(), a)
	if adm != (policy.Admission{}) {
		t.Fatalf("admission %+v; want admitted, holding nothing", adm)
	}
	b.Settle(context.Background(), a, adm.Hold, &policy.Outcome{Sent: true, Cost: cost.Cost{Spent: 5}})
	if f.settled != 0 {
		t.Errorf("settled %d times an attempt it did not reserve", f.settled)
	}
	if adm := b.Admit(context.Background(), &policy.Attempt{Phase: policy.Peek}); adm.Err != nil {
		t.Errorf("peek during an outage: %v", adm.Err)
	}
}

// TestASettleAfterCancellationStillSettles: a caller that canceled does not
// leave the reservation held.
func TestASettleAfterCancellationStillSettles(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	b := mustNew(t, spend.Config{Name: "q", Limit: cost.Dollar})
	a := ask(time.Now(), 1000)
	adm := b.Admit(ctx, a)
	cancel()
	b.Settle(ctx, a, adm.Hold, &policy.Outcome{})
	if _, reserved, _ := b.Used(context.Background(), ""); reserved != 0 {
		t.Fatalf("reserved %v after a canceled attempt settled", reserved)
	}
}

// TestBudgetUnderConcurrency: 200 goroutines race for one key's limit,
// one attempt costing more than its worst case; the spend never passes
// the limit by more than that attempt's underestimate, and every
// reservation comes back (run with -race).
func TestBudgetUnderConcurrency(t *testing.T) {
	ctx := cost.WithKey(context.Background(), "tenant")
	a0 := ask(time.Now(), 1000)
	worst := a0.WorstCase().Spent
	limit := 100 * worst
	b := mustNew(t, spend.Config{Name: "q", Limit: limit})
	var wg sync.WaitGroup
	for g := range 200 {
		wg.Go(func() {
			for i := range 20 {
				a := ask(time.Now(), 1000)
				adm := b.Admit(ctx, a)
				if adm.Err != nil {
					if !errors.Is(adm.Err, spend.ErrExceeded) {
						t.Error(adm.Err)
					}
					continue
				}
				c := worst / 2
				if g == 199 && i == 19 {
					c = worst + worst/10 // an underestimated worst case: 10% more
				}
				b.Settle(ctx, a, adm.Hold, &policy.Outcome{Sent: i%7 != 0, Cost: cost.Cost{Spent: c}})
			}
		})
	}
	wg.Wait()
	spent, reserved, _ := b.Used(ctx, "tenant")
	if reserved != 0 {
		t.Errorf("%v still reserved", reserved)
	}
	if spent > limit+worst/10 || spent < limit/2 {
		t.Errorf("spent %v of %v; want at most one attempt's underestimate (%v) above it, and most of it", spent, limit, worst/10)
	}
}

// TestPeekForgetsAKeyOnceItHasRoomAgain: the mark a refused reservation
// leaves lasts until a reservation of the key is granted again.
func TestPeekForgetsAKeyOnceItHasRoomAgain(t *testing.T) {
	ctx := context.Background()
	worst := ask(time.Now(), 1000).WorstCase().Spent
	b := mustNew(t, spend.Config{Name: "q", Limit: 2 * worst})
	peek := &policy.Attempt{Phase: policy.Peek, Target: "t", N: 1, Price: price}
	a1, a2 := ask(time.Now(), 1000), ask(time.Now(), 1000)
	h1, h2 := b.Admit(ctx, a1), b.Admit(ctx, a2)
	if h1.Err != nil || h2.Err != nil {
		t.Fatalf("two reservations within the limit: %v, %v", h1.Err, h2.Err)
	}
	if adm := b.Admit(ctx, ask(time.Now(), 1000)); !errors.Is(adm.Err, spend.ErrExceeded) {
		t.Fatalf("a third: %+v", adm)
	}
	if adm := b.Admit(ctx, peek); !errors.Is(adm.Err, spend.ErrExceeded) {
		t.Fatalf("peek with nothing left: %+v", adm)
	}
	b.Settle(ctx, a1, h1.Hold, &policy.Outcome{}) // not sent: its reservation comes back
	a4 := ask(time.Now(), 1000)
	if adm := b.Admit(ctx, a4); adm.Err != nil {
		t.Fatalf("a reservation once one came back: %v", adm.Err)
	}
	if adm := b.Admit(ctx, peek); adm.Err != nil {
		t.Fatalf("peek after a reservation was granted again: %v", adm.Err)
	}
}
