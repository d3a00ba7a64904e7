package chain_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/observe"
	"github.com/backstop-llm/backstop/policy"
	"github.com/backstop-llm/backstop/retry"
)

// ledger is a user's policy (a money budget, say): it refuses once its
// allowance is spent, holds a number for every attempt it admits, waits
// when asked to, and keeps what it is told.
type ledger struct {
	mu      sync.Mutex
	allow   int           // attempts it admits in Send; then it refuses
	wait    time.Duration // how long it makes each Send wait
	asked   []policy.Phase
	next    uint64
	settled []settlement
}

type settlement struct {
	n      int
	hold   uint64
	sent   bool
	tokens int
	kind   llm.Kind
}

var errSpent = errors.New("the tenant's allowance is spent")

func (l *ledger) Admit(ctx context.Context, a *policy.Attempt) policy.Admission {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.asked = append(l.asked, a.Phase)
	if a.Phase != policy.Send {
		return policy.Admission{}
	}
	if l.allow == 0 {
		return policy.Admission{Err: errSpent, Reason: "allowance spent", Cause: observe.SkipBudget}
	}
	l.allow--
	if l.wait > 0 {
		time.Sleep(l.wait)
	}
	l.next++
	return policy.Admission{Hold: policy.Hold{N: l.next}, Waited: l.wait}
}

func (l *ledger) Settle(_ context.Context, a *policy.Attempt, h policy.Hold, o *policy.Outcome) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := settlement{n: a.N, hold: h.N, sent: o.Sent, kind: o.Kind}
	if o.Response != nil {
		s.tokens = o.Response.Usage.OutputTokens
	}
	l.settled = append(l.settled, s)
}

// TestATargetsOwnPolicyRefusesWithItsReason: a policy of the user's
// (Target.Policies) refuses the primary's attempt; the call moves on to
// the next target without sending the primary anything, and the record
// and the causes carry the policy's reason and error.
func TestATargetsOwnPolicyRefusesWithItsReason(t *testing.T) {
	sent := 0
	primary := &stub{name: "anthropic", fn: func(context.Context, llm.Request) (*llm.Response, error) {
		sent++
		return &llm.Response{Text: "primary"}, nil
	}}
	backup := &stub{name: "openai", fn: func(context.Context, llm.Request) (*llm.Response, error) {
		return &llm.Response{Text: "backup"}, nil
	}}
	spent := &ledger{}
	c, err := chain.New("tenant").
		Primary(chain.Target{Name: "sonnet", Provider: primary, Model: "claude-sonnet-5", Policies: []policy.Policy{spent}}).
		OrProvider(chain.Target{Name: "gpt", Provider: backup, Model: "gpt-4.1"}).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Call(t.Context(), question)
	if err != nil || res.Text != "backup" {
		t.Fatalf("got %q, %v; want the backup's answer", res.Text, err)
	}
	if sent != 0 {
		t.Fatalf("the primary was sent %d requests; its policy refused them", sent)
	}
	skip := res.Attempts[0]
	if skip.Decision != chain.DecisionSkip || skip.Reason != "allowance spent" || !errors.Is(skip.Err, errSpent) {
		t.Fatalf("the primary's record is %+v; want a skip with the policy's reason and error", skip)
	}
	if len(spent.settled) != 1 || spent.settled[0].sent {
		t.Fatalf("the refused attempt was settled %+v; want once, not sent", spent.settled)
	}
}

// TestEveryAttemptIsSettledOnceWithItsHold: a policy is asked about every
// attempt (a retry in Plan, then in Send) and told of each once, with the
// Hold it gave and the answer's usage; the wait it asks is the attempt's.
func TestEveryAttemptIsSettledOnceWithItsHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		p := &stub{name: "anthropic", fn: func(context.Context, llm.Request) (*llm.Response, error) {
			calls++
			if calls == 1 {
				return nil, &llm.Error{Provider: "stub", Status: 529, Kind: llm.KindOverloaded}
			}
			return &llm.Response{Text: "ok", Usage: llm.Usage{OutputTokens: 42}}, nil
		}}
		l := &ledger{allow: 5, wait: 300 * time.Millisecond}
		c, err := chain.New("settled").
			Primary(chain.Target{Name: "sonnet", Provider: p, Model: "claude-sonnet-5", Policies: []policy.Policy{l},
				Retry: retry.Policy{Base: time.Second, Cap: time.Second}}).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Call(t.Context(), question)
		if err != nil || res.Text != "ok" {
			t.Fatalf("got %q, %v", res.Text, err)
		}
		want := []policy.Phase{policy.Send, policy.Plan, policy.Send}
		if len(l.asked) != len(want) {
			t.Fatalf("asked in phases %v; want %v", l.asked, want)
		}
		for i := range want {
			if l.asked[i] != want[i] {
				t.Fatalf("asked in phases %v; want %v", l.asked, want)
			}
		}
		wantSettled := []settlement{
			{n: 1, hold: 1, sent: true, kind: llm.KindOverloaded},
			{n: 2, hold: 2, sent: true, tokens: 42},
		}
		if len(l.settled) != len(wantSettled) {
			t.Fatalf("settled %+v; want %+v", l.settled, wantSettled)
		}
		for i := range wantSettled {
			if l.settled[i] != wantSettled[i] {
				t.Fatalf("settled %+v; want %+v", l.settled, wantSettled)
			}
		}
		if got := res.Attempts[0].Wait; got != 300*time.Millisecond {
			t.Fatalf("the first attempt waited %v; want the policy's 300ms", got)
		}
		if got := res.Attempts[1].Wait; got < 300*time.Millisecond {
			t.Fatalf("the retry waited %v; want its backoff and the policy's 300ms", got)
		}
	})
}

// TestARetryNotSentIsReleased: a retry the policies admitted in Plan whose
// backoff the caller cuts short is settled as not sent, so that what a
// policy held for it (a withdrawn allowance) is given back.
func TestARetryNotSentIsReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &stub{name: "anthropic", fn: func(context.Context, llm.Request) (*llm.Response, error) {
			return nil, &llm.Error{Provider: "stub", Status: 529, Kind: llm.KindOverloaded}
		}}
		withdrawn := &planHold{}
		c, err := chain.New("released").
			Primary(chain.Target{Name: "sonnet", Provider: p, Model: "claude-sonnet-5", Policies: []policy.Policy{withdrawn},
				Retry: retry.Policy{Base: 2 * time.Second, Cap: 2 * time.Second, Jitter: retry.NoJitter}}).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(time.Second, cancel) // during the 2s backoff
		_, err = c.Call(ctx, question)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v; want the caller's cancellation", err)
		}
		if withdrawn.released != 1 {
			t.Fatalf("%d retries were released; want the one whose backoff was cut", withdrawn.released)
		}
		if withdrawn.held != 0 {
			t.Fatalf("%d withdrawals were never given back", withdrawn.held)
		}
		if withdrawn.withdrew == 0 {
			t.Fatal("no retry was withdrawn in Plan")
		}
	})
}

// planHold withdraws in Plan (as a retry budget does) and gives back what
// a retry not sent held.
type planHold struct{ withdrew, held, released int }

func (p *planHold) Admit(_ context.Context, a *policy.Attempt) policy.Admission {
	if a.Phase != policy.Plan {
		return policy.Admission{}
	}
	p.withdrew++
	p.held++
	return policy.Admission{Hold: policy.Hold{N: 1}}
}

func (p *planHold) Settle(_ context.Context, _ *policy.Attempt, h policy.Hold, o *policy.Outcome) {
	if h.N == 1 {
		p.held--
		if !o.Sent {
			p.released++
		}
	}
}
