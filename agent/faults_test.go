package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/agent"
	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/ledger"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/retry"
)

// TestExactlyOnceUnderFaults runs 300 refund conversations over two
// replicas sharing a ledger in memory, in synctest, with faults at the step
// boundaries (see runFaults; TestExactlyOnceOverRedis runs the same on
// Redis).
func TestExactlyOnceUnderFaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		shared := ledger.NewMemory()
		runFaults(t, faultRig{conversations: 300, parallel: 20, seed: 27,
			ledgers: [2]ledger.Ledger{shared, shared}, final: shared, timeout: time.Second, patience: time.Minute})
	})
}

// faultRig is what runFaults runs on.
type faultRig struct {
	conversations int
	parallel      int // conversations under way at once
	seed          uint64
	// ledgers are the replicas' own, on one shared store; final reads
	// the store itself (no cache between) once every conversation ended.
	ledgers [2]ledger.Ledger
	final   ledger.Ledger
	// timeout and lease are the refund tool's Timeout and Lease.
	timeout, lease time.Duration
	// patience bounds each conversation, its retries included.
	patience time.Duration
}

// faultCounts is what runFaults planned and saw.
type faultCounts struct {
	failAfter, timeouts, kills, together, refusing int // conversations planned so
	issues, recoveries                             int // the refund's side effects, its Recover calls
	retries, replays, waited, refused              int // whole requests retried, calls replayed, live duplicates met waiting, ErrDuplicate
}

func (c faultCounts) String() string {
	return fmt.Sprintf("plans: %d with model failures after the refund, %d refund timeouts, %d replicas killed after the refund, %d concurrent duplicates (%d refusing); "+
		"%d refunds issued, %d recoveries, %d whole-request retries, %d calls replayed, %d live duplicates waited for, %d refused",
		c.failAfter, c.timeouts, c.kills, c.together, c.refusing, c.issues, c.recoveries, c.retries, c.replays, c.waited, c.refused)
}

// runFaults runs refund conversations over two replicas (two Loops, owners
// replica-0 and replica-1) on rig's ledgers, with faults at the step
// boundaries: the model failing after the refund ran, the refund timing
// out after it acted, the replica killed between Started and Done (its
// request's context ends; the key stays Started), and concurrent
// duplicates (the same request on both replicas at once, the refund
// waiting for or refusing the other). The caller retries each failed
// request on the other replica. Each refund is issued exactly once per
// key; an unknown outcome (a timeout, a kill) is handed to Recover, once,
// which finds that one refund; every conversation ends with its receipt;
// a retried step keeps its first arguments although the model picks new
// ones each time it is asked; and the ledger holds every step and call
// Done.
func runFaults(t *testing.T, rig faultRig) {
	t.Helper()
	type plan struct {
		failAfter int  // model failures once the refund has run
		timeout   bool // the refund acts, then outlives its Timeout
		kill      bool // the replica dies after the refund acted
		together  bool // both replicas take the first request at once
		refuse    bool // together, and the refund refuses a duplicate
	}
	rng := rand.New(rand.NewPCG(rig.seed, 1))
	var counts faultCounts
	plans := map[string]*plan{}  // as the fakes play them out
	planned := map[string]plan{} // as planned
	ids := make([]string, rig.conversations)
	for n := range ids {
		id := fmt.Sprint("o-", n)
		ids[n] = id
		p := &plan{failAfter: rng.IntN(3)}
		switch rng.IntN(4) {
		case 1:
			p.timeout = true
		case 2:
			p.kill = true
		case 3:
			p.together, p.refuse = true, rng.IntN(2) == 1
		}
		plans[id], planned[id] = p, *p
		for i, on := range []bool{p.failAfter > 0, p.timeout, p.kill, p.together, p.refuse} {
			if on {
				*[]*int{&counts.failAfter, &counts.timeouts, &counts.kills, &counts.together, &counts.refusing}[i]++
			}
		}
	}

	var dups duplicates
	var mu sync.Mutex // guards plans' contents, kills, asks
	kills := map[string]context.CancelFunc{}
	asks := map[string]int{}
	var r refunds
	fn := func(_ int, req llm.Request) (*llm.Response, error) {
		conv := req.Messages[0].Content
		mu.Lock()
		defer mu.Unlock()
		asks[conv]++
		p := plans[conv]
		if answered(req) {
			if p.failAfter > 0 {
				p.failAfter--
				return nil, down("anthropic")
			}
			return answer("Refunded."), nil
		}
		name := "refund"
		if p.refuse {
			name = "refund_refusing"
		}
		// Each time it is asked, the model picks another amount.
		return calls("", call("toolu_1", name, fmt.Sprintf(`{"order_id":%q,"cents":%d}`, conv, 100*asks[conv]))), nil
	}
	body := func(ctx context.Context, in RefundIn) error {
		c, _ := agent.CallFrom(ctx)
		mu.Lock()
		p := plans[in.OrderID]
		timeout, kill, together := p.timeout, p.kill, p.together
		p.timeout, p.kill = false, false
		cancel := kills[in.OrderID]
		mu.Unlock()
		switch {
		case together:
			// Hold the key until the other replica's request meets it.
			select {
			case <-dups.seen(c.Key):
			case <-ctx.Done():
				return ctx.Err()
			}
		case timeout:
			r.issue(c.Key)
			<-ctx.Done()
			return ctx.Err()
		case kill:
			r.issue(c.Key)
			cancel()
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}
	cfg := agent.ToolConfig{Timeout: rig.timeout, Lease: rig.lease}
	refusing := cfg
	refusing.Name, refusing.OnDuplicate = "refund_refusing", agent.Refuse
	replicas := make([]*agent.Loop, 2)
	for i := range replicas {
		m := &model{name: "anthropic", fn: fn}
		replicas[i] = loop(t, agent.Config{Chain: bareChain(t, m), Ledger: watch{rig.ledgers[i], &dups}, Owner: fmt.Sprint("replica-", i),
			Tools: []agent.Tool{r.tool(t, cfg, body), r.tool(t, refusing, body)}})
	}

	var tally sync.Mutex // guards counts' replays, retries, refused
	request := func(ctx context.Context, replica int, id string) (*agent.Result, error) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		mu.Lock()
		kills[id] = cancel
		mu.Unlock()
		res, err := replicas[replica].Run(ctx, ask(id, id))
		tally.Lock()
		defer tally.Unlock()
		for _, s := range res.Steps {
			for _, c := range s.Calls {
				if c.Replayed {
					counts.replays++
				}
			}
		}
		if errors.Is(err, agent.ErrDuplicate) {
			counts.refused++
		}
		return res, err
	}
	converse := func(id string) error {
		// A loop that never ends fails the conversation.
		ctx, cancel := context.WithTimeout(context.Background(), rig.patience)
		defer cancel()
		p := planned[id]
		var first []agent.ToolRun
		var res *agent.Result
		var err error
		if p.together {
			var wg sync.WaitGroup
			var other *agent.Result
			wg.Go(func() { other, _ = request(ctx, 1, id) })
			res, err = request(ctx, 0, id)
			wg.Wait()
			if len(other.Steps) > 0 {
				first = append(first, other.Steps[0].Calls...)
			}
		} else {
			res, err = request(ctx, 0, id)
		}
		for try := 1; err != nil; try++ {
			if len(res.Steps) > 0 {
				first = append(first, res.Steps[0].Calls...)
			}
			if try > 5 {
				return fmt.Errorf("still failing: %w", err)
			}
			tally.Lock()
			counts.retries++
			tally.Unlock()
			// The caller retries the whole request on the other replica.
			res, err = request(ctx, try%2, id)
		}
		// Whichever replica recorded the step first, every request ran
		// its call, with its arguments, and got its receipt.
		got := res.Steps[0].Calls[0]
		var in RefundIn
		if err := json.Unmarshal(got.Call.Arguments, &in); err != nil || in.OrderID != id {
			return fmt.Errorf("the final call %s (%v)", got.Call.Arguments, err)
		}
		if want := fmt.Sprintf(`{"refund_id":"r-%s/1/0","cents":%d}`, id, in.Cents); got.IsError || got.Output != want {
			return fmt.Errorf("(%+v): the final call %+v; want the receipt %s", p, got, want)
		}
		if !p.together && in.Cents != 100 {
			return fmt.Errorf("the step was asked again: %s", got.Call.Arguments)
		}
		for _, c := range first {
			if string(c.Call.Arguments) != string(got.Call.Arguments) || c.Output != got.Output {
				return fmt.Errorf("an earlier request's call %+v differs from the last's %+v", c, got)
			}
		}
		return nil
	}

	sem := make(chan struct{}, rig.parallel)
	var wg sync.WaitGroup
	for _, id := range ids {
		sem <- struct{}{}
		if t.Failed() {
			break // fail in seconds, not after every conversation's patience
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := converse(id); err != nil {
				t.Errorf("%s: %v", id, err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range ids {
		p, key := planned[id], id+"/1/0"
		// Exactly one refund per key, and Recover only where the outcome
		// was unknown, once, finding it (else its error is the receipt).
		if n := r.issued[key]; n != 1 {
			t.Errorf("%s refunded %d times", key, n)
		}
		unknown := 0
		if p.timeout || p.kill {
			unknown = 1
		}
		if n := r.recoveries[key]; n != unknown {
			t.Errorf("%s (%+v): %d recoveries; want %d", key, p, n, unknown)
		}
		for _, k := range []string{url.PathEscape(id) + "/1", key} {
			if e, err := rig.final.Get(context.Background(), k); err != nil || e.State != ledger.Done {
				t.Errorf("the ledger holds %s as %v (%v); want done", k, e.State, err)
			}
		}
		if dups.met(key) && p.together && !p.refuse {
			counts.waited++
		}
	}
	if len(r.issued) != rig.conversations {
		t.Errorf("%d keys refunded of %d", len(r.issued), rig.conversations)
	}
	for _, n := range r.issued {
		counts.issues += n
	}
	counts.recoveries = r.recovered
	if counts.refused == 0 || counts.waited == 0 {
		t.Errorf("no duplicate was refused (%d) or waited for (%d): the test does not test them", counts.refused, counts.waited)
	}
	t.Logf("%d conversations over 2 replicas: %v", rig.conversations, counts)
}

// bareChain is a chain of m alone, one attempt a call, no breaker: each
// model failure fails the loop's Run, for its caller to retry; the
// chain's own retries and a breaker that many failures open (a call then
// waits 5 s for its probe) are not what runFaults counts.
func bareChain(t *testing.T, m llm.Provider) *chain.Chain {
	t.Helper()
	c, err := chain.New("agent").Primary(chain.Target{Name: m.Name(), Provider: m, Model: m.Name() + "-model",
		Retry: retry.Policy{MaxAttempts: 1}, Breaker: breaker.Config{Disabled: true}}).Build()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// duplicates keeps the call keys whose Begin found another owner's live
// lease.
type duplicates struct {
	mu   sync.Mutex
	keys map[string]chan struct{} // closed once met
}

// seen returns a channel closed once a Begin met a live duplicate on key.
func (d *duplicates) seen(key string) <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.keys == nil {
		d.keys = map[string]chan struct{}{}
	}
	if d.keys[key] == nil {
		d.keys[key] = make(chan struct{})
	}
	return d.keys[key]
}

// met reports whether a Begin met a live duplicate on key.
func (d *duplicates) met(key string) bool {
	select {
	case <-d.seen(key):
		return true
	default:
		return false
	}
}

// meet notes that a Begin met a live duplicate on key.
func (d *duplicates) meet(key string) {
	d.seen(key)
	d.mu.Lock()
	defer d.mu.Unlock()
	ch := d.keys[key]
	select {
	case <-ch:
	default:
		close(ch)
	}
}

// watch is a ledger that notes the live duplicates its Begins meet.
type watch struct {
	ledger.Ledger
	dups *duplicates
}

func (w watch) Begin(ctx context.Context, key, owner string, lease time.Duration, takeover bool) (ledger.Entry, error) {
	e, err := w.Ledger.Begin(ctx, key, owner, lease, takeover)
	if err == nil && e.State == ledger.Started && e.Owner != owner && !e.Expired(time.Now()) {
		w.dups.meet(key)
	}
	return e, err
}
