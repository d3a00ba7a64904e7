package storm

// The money scenario: four replicas share a $5 budget on Redis under a
// storm of 1,000 callers; the same with Redis paused mid-run.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/backstop-llm/backstop/catalog"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/cost"
	"github.com/backstop-llm/backstop/degrade"
	"github.com/backstop-llm/backstop/internal/redistest"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/redisstore"
	"github.com/backstop-llm/backstop/spend"
)

// The scenario's figures.
const (
	moneyReplicas = 4
	moneyCallers  = 1000
	// moneyMaxCalls bounds each caller's calls; a caller stops earlier,
	// at its first call degraded or refused.
	moneyMaxCalls = 50
	// moneyDense is the share of calls whose prompt is dense text (code,
	// CJK): 2 bytes a token where the budget's estimate counts 3, so its
	// real input is 1.5 times the estimate. The others run 4 bytes a
	// token, below the estimate.
	moneyDense = 0.10
	// moneyFlapTimeout is the last row's SharedConfig.Timeout, the
	// default before: too short for 250 callers a replica queuing for its
	// client's 20 connections, so that round trips time out and succeed
	// by turns while Redis answers.
	moneyFlapTimeout = 50 * time.Millisecond
	// moneyPause is how long Redis is paused (CLIENT PAUSE ALL) in the
	// paused rows: longer than the default Timeout, so that the round
	// trips under way time out.
	moneyPause = 1500 * time.Millisecond
)

// moneyKey is the budget key every call spends.
const moneyKey = "acme"

// moneyPeriod is the start of the budget's period now, in Unix seconds:
// a day's, aligned to midnight UTC (as spend.Budget aligns it).
func moneyPeriod() int64 {
	now := time.Now().Unix()
	return now - now%(24*60*60)
}

var (
	moneyLimit = cost.Dollars(5)
	// The primary's price (Claude Sonnet's list price) and the fallback's
	// (GPT-4o mini's), dollars per million tokens.
	dearPrice  = catalog.Price{Input: 3, Output: 15}
	cheapPrice = catalog.Price{Input: 0.15, Output: 0.60}
	// moneyText is what prompts are cut from: up to 20,000 tokens at 4
	// bytes a token.
	moneyText = strings.Repeat("Where is my order? It left the depot on Monday. ", 80_000/48+1)
)

// shape is one call's size, drawn by its caller and read by the model
// from the call's context: its prompt's real token count and its answer's.
type shape struct{ tokens, answer int }

type shapeKey struct{}

// ledger is what the models answered in one row: every attempt's cost,
// and by how much it passed its worst case (what the budget reserved for
// it).
type ledger struct {
	mu       sync.Mutex
	sent     int
	spent    cost.Money
	under    cost.Money // the sum of the underestimates
	maxUnder cost.Money // the largest
	maxWorst cost.Money // the largest worst case
}

// pricedModel is an in-process model at a price: it answers every request
// at once with the usage its call's shape says, as a provider reports it.
type pricedModel struct {
	name  string
	price catalog.Price
	book  *ledger
}

func (m *pricedModel) Name() string { return m.name }

func (m *pricedModel) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	s, ok := ctx.Value(shapeKey{}).(shape)
	if !ok {
		return nil, errors.New("storm: a call without its shape")
	}
	u := llm.Usage{InputTokens: s.tokens, OutputTokens: min(s.answer, req.Params.MaxTokens)}
	c := cost.Of(u, m.price).Spent
	worst := cost.WorstCase(&req, m.price, 0).Spent
	b := m.book
	b.mu.Lock()
	b.sent++
	b.spent += c
	b.maxWorst = max(b.maxWorst, worst)
	if c > worst {
		b.under += c - worst
		b.maxUnder = max(b.maxUnder, c-worst)
	}
	b.mu.Unlock()
	return &llm.Response{Text: "Your order is on its way.", Model: req.Model, Usage: u, FinishReason: "end_turn", Finish: llm.FinishStop}, nil
}

// commands is a go-redis hook counting a client's commands (its round
// trips: the stores pipeline nothing), by name.
type commands struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *commands) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *commands) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.mu.Lock()
		h.n[cmd.Name()]++
		h.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (h *commands) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.mu.Lock()
		h.n["pipeline"]++
		h.mu.Unlock()
		return next(ctx, cmds)
	}
}

// seer stands between a replica's spend.Shared and Redis and sees what
// the Shared sees: the spent plus reserved Redis last reported to it (its
// seen, kept as Shared keeps it), and that seen when Redis first failed
// it, from which the Shared drew its outage allowance. In the paused rows
// it also pauses Redis once it reports half the budget spent or reserved.
type seer struct {
	spend.Store
	pause     *pauser // nil: never
	mu        sync.Mutex
	seen      cost.Money
	counted   int // the most replicas Redis counted (ReserveAs)
	failed    bool
	seenAtErr cost.Money
	countedAt int // counted when Redis first failed
}

var _ spend.ReplicaStore = (*seer)(nil)

// pauser pauses Redis once the replicas together have asked it to reserve
// half the budget: the round trip that crosses it and every later one
// wait (gate) until those under way have ended, Redis has been read (held)
// and paused, so that the pause lands there and not a storm's worth of
// round trips later (1,000 callers keep some 80 reservations in flight).
type pauser struct {
	gate   sync.RWMutex
	asked  atomic.Int64 // the amounts of the reservations asked so far
	once   sync.Once
	client *redis.Client
	store  spend.Store // on client, to read what Redis held
	at     time.Time   // when the pause began; set by once
	held   cost.Money  // the spent plus reserved on Redis then
	err    error
}

// hold runs op, after pausing Redis if op is a reservation of amount that
// makes the reservations asked reach half the budget; while the pause is
// being sent, it waits.
func (p *pauser) hold(amount cost.Money, op func()) {
	if p == nil {
		op()
		return
	}
	if amount > 0 && p.asked.Add(int64(amount)) >= int64(moneyLimit/2) {
		p.once.Do(p.pauseRedis)
	}
	p.gate.RLock()
	defer p.gate.RUnlock()
	op()
}

// pauseRedis reads what Redis holds and pauses it, once the round trips
// under way have ended.
func (p *pauser) pauseRedis() {
	p.gate.Lock()
	defer p.gate.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	spent, reserved, err := p.store.Used(ctx, moneyKey, moneyPeriod())
	p.held = spent + reserved
	if err == nil {
		err = p.client.Do(ctx, "CLIENT", "PAUSE", moneyPause.Milliseconds(), "ALL").Err()
	}
	p.at, p.err = time.Now(), err
}

func (s *seer) Reserve(ctx context.Context, key string, period int64, amount, limit cost.Money, ttl time.Duration) (ok bool, used cost.Money, err error) {
	s.pause.hold(amount, func() { ok, used, err = s.Store.Reserve(ctx, key, period, amount, limit, ttl) })
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.fail()
		return ok, used, err
	}
	s.seen = used
	return ok, used, nil
}

func (s *seer) ReserveAs(ctx context.Context, id, key string, period int64, amount, limit cost.Money, ttl time.Duration) (ok bool, used cost.Money, n int, err error) {
	s.pause.hold(amount, func() {
		ok, used, n, err = s.Store.(spend.ReplicaStore).ReserveAs(ctx, id, key, period, amount, limit, ttl)
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.fail()
		return ok, used, n, err
	}
	s.seen, s.counted = used, max(s.counted, n)
	return ok, used, n, nil
}

func (s *seer) Settle(ctx context.Context, key string, period int64, reserved, spent cost.Money, ttl time.Duration) (err error) {
	s.pause.hold(0, func() { err = s.Store.Settle(ctx, key, period, reserved, spent, ttl) })
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.fail()
		return err
	}
	s.seen = max(s.seen+spent-reserved, 0)
	return nil
}

func (s *seer) Used(ctx context.Context, key string, period int64) (spent, reserved cost.Money, err error) {
	s.pause.hold(0, func() { spent, reserved, err = s.Store.Used(ctx, key, period) })
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.fail()
		return 0, 0, err
	}
	s.seen = spent + reserved
	return spent, reserved, nil
}

// fail records the seen of the first failure. s.mu is held.
func (s *seer) fail() {
	if !s.failed {
		s.failed, s.seenAtErr, s.countedAt = true, s.seen, s.counted
	}
}

// moneyRow is one row of the money table.
type moneyRow struct {
	name     string
	mode     spend.Mode
	pause    bool
	timeout  time.Duration // SharedConfig.Timeout; 0: the default
	replicas int           // SharedConfig.Replicas; 0: the default
	// flaps: round trips may time out while Redis answers (a Timeout too
	// short for the burst), so replicas may decide locally without a
	// pause, and spend may be counted twice on Redis.
	flaps bool
}

// moneyRun is what a row measured.
type moneyRun struct {
	calls, primary, fallback, degraded, refused int
	sent                                        int        // attempts sent to a model
	skips                                       int        // attempts a budget refused
	costs                                       cost.Money // the calls' Result.Cost, added up
	spent, reserved                             cost.Money // on Redis at the end, after Flush
	under, maxUnder, maxWorst                   cost.Money
	bound                                       cost.Money   // what spent may reach
	held                                        cost.Money   // what Redis held when paused
	seen                                        []cost.Money // what each replica had last seen on it then
	counted                                     []int        // and how many replicas Redis had counted
	local                                       int          // replicas that decided locally
	trips                                       map[string]int
	elapsed                                     time.Duration
}

// roundTrips counts the stores' round trips (not the connections' set-up).
func (r moneyRun) roundTrips() int {
	n := 0
	for _, name := range storeCommands {
		n += r.trips[name]
	}
	return n
}

// TestStormMoney: 4 replicas, each its own chain, budget, spend.Shared and
// Redis client (as 4 processes), share a budget of $5 a period on one key
// on a real Redis; 1,000 callers, 250 a replica, call until a call is
// degraded or refused (at most 50 calls each). Each call's prompt is 200 to
// 20,000 tokens of text (a tenth of them dense: their real token count is
// 1.5 times what the budget estimates), MaxTokens 256 to 4,096, the answer a
// random share of MaxTokens (a deterministic PRNG per caller). The chain is
// a primary at $3/$15 per million tokens, a fallback at $0.15/$0.60 on
// another provider, then degrade.Static; the models answer in process, at
// once, reporting the call's real usage.
//
// It asserts the reservation's guarantee: spend at the end passes the
// budget by at most what the attempts in flight at the last reservation
// cost beyond their worst case, bounded here by the sum of every
// attempt's underestimate; every attempt's cost reaches Redis, and no
// reservation is left; while Redis answers, no replica decides locally and
// each attempt sent costs 2 round trips (a refused reservation 1).
//
// Then Redis is paused (CLIENT PAUSE ALL, on a private redis-server) for
// 1.5s once the replicas have asked to reserve half the budget: each
// replica decides locally within its outage allowance, (limit - u) / N,
// u what it last saw on Redis, N the larger of Replicas and the replicas
// Redis counted (4: the default and Replicas 4 are the same here). It
// asserts spend at the end within H + Σ (limit - u_r) / N_r + the
// underestimates, H what Redis held when paused, and that Flush, once
// Redis answers again, brings every attempt's cost to Redis.
//
// Last, a Timeout of 50ms (the default before) without a pause: round
// trips time out and succeed by turns on a healthy Redis; it asserts the
// same bound, limit + Σ (limit - u_r) / N_r + the underestimates, and
// that no spend is lost (some may be counted twice).
//
// The asserted rows run on SharedConfig{}, every default.
//
// It is not a synctest test: it talks to a real Redis, and waits, in real
// time, for the pause to end. Without a Redis it skips, saying how to start
// one; under CI=true it fails.
func TestStormMoney(t *testing.T) {
	rows := []moneyRow{
		// Under the race detector, ten times slower, 250ms may pass while
		// Redis answers: the bound is still asserted.
		{name: "degrade, SharedConfig{}", mode: spend.Degrade, flaps: raceEnabled},
		{name: "refuse, SharedConfig{}", mode: spend.Refuse, flaps: raceEnabled},
		{name: "degrade, Redis paused, SharedConfig{}", mode: spend.Degrade, pause: true},
		{name: "degrade, Redis paused, Replicas 4", mode: spend.Degrade, pause: true, replicas: moneyReplicas},
		{name: "degrade, Timeout 50ms", mode: spend.Degrade, timeout: moneyFlapTimeout, flaps: true},
	}
	tb := table{
		title: fmt.Sprintf("Money: %d replicas share a budget of %v on Redis, %d concurrent callers, calls of varied size", moneyReplicas, moneyLimit, moneyCallers),
		shows: "Spend at the end of the run against the budget, how the calls were served as it ran out, and Redis round trips, with Redis answering and paused.",
		head: []string{"row", "calls", "spent", "spent - budget", "bound", "largest underestimate", "on Redis after Flush", "replicas local",
			"primary", "fallback", "degraded", "refused", "round trips per call", "scripts per attempt sent", "time"},
	}
	var runs []moneyRun
	for _, row := range rows {
		var run moneyRun
		t.Run(row.name, func(t *testing.T) {
			run = moneyStorm(t, row)
		})
		runs = append(runs, run)
		n := float64(max(run.calls, 1))
		var perAttempt any = "-" // the refusals made locally are no EVALSHA
		if run.local == 0 {
			perAttempt = float64(run.trips["evalsha"]-run.skips) / float64(max(run.sent, 1))
		}
		onRedis := run.spent.String()
		if run.reserved != 0 {
			onRedis += " + " + run.reserved.String() + " reserved"
		}
		bound := run.bound.String()
		if run.costs > run.bound {
			bound += " (passed)"
		}
		tb.row(row.name, run.calls, run.costs.String(), (run.costs - moneyLimit).String(), bound, run.maxUnder.String(), onRedis, run.local,
			float64(run.primary)/n, float64(run.fallback)/n, float64(run.degraded)/n, float64(run.refused)/n,
			float64(run.roundTrips())/n, perAttempt, run.elapsed)
	}
	if t.Failed() {
		return
	}
	tb.note("Spent: every call's Result.Cost added up; on Redis after Flush: what the budget's store then held. Replicas local:")
	tb.note("how many replicas decided locally at some point (a round trip had timed out).")
	tb.note("Budget %v a period on one key; primary $%v/$%v per million input/output tokens, fallback $%v/$%v, then degrade.Static.",
		moneyLimit, dearPrice.Input, dearPrice.Output, cheapPrice.Input, cheapPrice.Output)
	tb.note("Each attempt reserves its worst case (the prompt estimated at 3 bytes a token, plus MaxTokens: at most %v here),", runs[0].maxWorst)
	tb.note("then settles its cost. %d%% of the prompts are dense text whose real token count is 1.5 times the estimate: the", int(moneyDense*100))
	tb.note("largest underestimate is the most one attempt cost beyond its reservation. Bound: the budget plus every attempt's")
	tb.note("underestimate (the guarantee: those in flight at the last reservation), plus (budget - u_r) / N_r for each replica r")
	tb.note("that decided locally, u_r what it had last seen on Redis when it first did, N_r the larger of Replicas and the")
	tb.note("replicas Redis had counted then (its outage allowance, drawn once a period); in the paused rows H, what Redis held")
	tb.note("when paused, instead of the budget: H %v, u_r %s, N_r %v; H %v, u_r %s, N_r %v.",
		runs[2].held, moneyList(runs[2].seen), runs[2].counted, runs[3].held, moneyList(runs[3].seen), runs[3].counted)
	tb.note("Each caller calls until a call is degraded or refused: about %d of the calls are. Fractions of the calls.", moneyCallers)
	tb.note("Round trips: the stores' commands on the 4 replicas' clients (first row: %s; besides, 20 connections a client,", tripsNote(runs[0].trips))
	tb.note("each a HELLO and a CLIENT SETINFO). A reservation is one EVALSHA, refused (a skip) or not, which also records the")
	tb.note("replica and counts those of the last minute; a settlement one, unless it rides with another's on the same key:")
	tb.note("scripts per attempt sent is (EVALSHA - refusals) / attempts sent, while Redis answers. Deciding whether to race")
	tb.note("an attempt or plan a retry asks no store (a budget remembers which keys it found spent): the HMGET is the lab's own read.")
	tb.note("SharedConfig{} rows: every default (Timeout 250ms, Replicas counted on Redis, ProbeEvery 1s).")
	tb.note("Paused rows: a private redis-server, CLIENT PAUSE %v ALL once the replicas had asked to reserve half the budget;", moneyPause)
	tb.note("a round trip times out after 250ms (the default Timeout), then each replica decides locally for ProbeEvery (1s). After")
	tb.note("the pause, Flush wrote what each had spent meanwhile: Redis then held every attempt's cost, nothing reserved.")
	tb.note("Timeout 50ms row: the default before, and no pause. 250 calls arriving at once on each replica (dialing its")
	tb.note("client's 20 connections) may wait longer than that on 2 shared cores, varying from run to run: a replica whose round")
	tb.note("trip timed out decides locally while Redis is healthy (u_r %s, N_r %v), and its next round trips", moneyList(runs[4].seen), runs[4].counted)
	tb.note("succeed and time out by turns; its allowance, drawn once, holds the bound, but one that timed out before any count")
	tb.note("takes N_r = 1. A round trip that timed out after Redis applied it leaves its reservation held, or its spend")
	tb.note("counted twice, on Redis (spend.Shared's documented cases); no spend is lost.")
	tb.print(t)
	writeMarkdown(t, &tb, moneyMDBegin, moneyMDEnd)
}

// moneyList formats amounts as a list.
func moneyList(ms []cost.Money) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = m.String()
	}
	return strings.Join(parts, ", ")
}

// tripsNote lists the stores' round trips by command.
func tripsNote(trips map[string]int) string {
	var parts []string
	for _, name := range storeCommands {
		if trips[name] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", trips[name], strings.ToUpper(name)))
		}
	}
	return strings.Join(parts, ", ")
}

// storeCommands are the commands a spend store sends: its two scripts (an
// EVAL after an EVALSHA only when the server did not know the script yet)
// and Used's HMGET.
var storeCommands = []string{"evalsha", "eval", "hmget"}

// moneyStorm runs one row and checks its guarantees.
func moneyStorm(t *testing.T, row moneyRow) moneyRun {
	addr := redistest.Addr(t)
	prefix := redistest.Prefix(t) + "spend"
	var pause *pauser
	if row.pause {
		// A server of the row's own: pausing the shared one would stall
		// every other test using it.
		addr = redistest.StartServer(t).Addr()
		client := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = client.Close() })
		rs, err := redisstore.New(client)
		if err != nil {
			t.Fatal(err)
		}
		pause = &pauser{client: client, store: rs.Spend(prefix)}
	}
	book := &ledger{}
	dear := &pricedModel{name: "anthropic", price: dearPrice, book: book}
	cheap := &pricedModel{name: "openai", price: cheapPrice, book: book}

	type replica struct {
		chain  *chain.Chain
		budget *spend.Budget
		shared *spend.Shared
		seer   *seer
		hook   *commands
		errs   redistest.Errors
	}
	reps := make([]*replica, moneyReplicas)
	for i := range reps {
		r := &replica{hook: &commands{n: map[string]int{}}}
		client := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		client.AddHook(r.hook)
		t.Cleanup(func() { _ = client.Close() })
		rs, err := redisstore.New(client)
		if err != nil {
			t.Fatal(err)
		}
		r.seer = &seer{Store: rs.Spend(prefix), pause: pause}
		r.shared, err = spend.NewShared(r.seer, spend.SharedConfig{Timeout: row.timeout, Replicas: row.replicas, OnError: r.errs.Add})
		if err != nil {
			t.Fatal(err)
		}
		r.budget, err = spend.New(spend.Config{Name: "tenant", Limit: moneyLimit, Period: 24 * time.Hour, Mode: row.mode,
			Key: func(context.Context) string { return moneyKey }, Store: r.shared})
		if err != nil {
			t.Fatal(err)
		}
		r.chain, err = chain.New("storm-money").
			Primary(chain.Target{Name: "primary", Provider: dear, Model: "claude-sonnet-4-5", Price: dearPrice}).
			OrProvider(chain.Target{Name: "fallback", Provider: cheap, Model: "gpt-4o-mini", Price: cheapPrice}).
			OrDegrade(degrade.Static(llm.Response{Text: "We are busy; try again tomorrow."})).
			Spend(r.budget).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		reps[i] = r
	}

	var run moneyRun
	var mu sync.Mutex
	start := time.Now()
	var wg sync.WaitGroup
	for c := range moneyCallers {
		r := reps[c%moneyReplicas]
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(row.mode)<<1|b2u(row.pause), uint64(c)))
			for range moneyMaxCalls {
				tokens := 200 + rng.IntN(20_000-200+1)
				size := 4 * tokens
				if rng.Float64() < moneyDense {
					size = 2 * tokens
				}
				maxTokens := 256 + rng.IntN(4096-256+1)
				s := shape{tokens: tokens, answer: int(rng.Float64() * float64(maxTokens))}
				req := llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: moneyText[:size]}},
					Params: llm.Params{MaxTokens: maxTokens}}
				res, err := r.chain.Call(context.WithValue(context.Background(), shapeKey{}, s), req)
				mu.Lock()
				run.calls++
				if res != nil {
					run.costs += res.Cost().Spent
					for _, a := range res.Attempts {
						if a.Decision == chain.DecisionSkip && errors.Is(a.Err, spend.ErrExceeded) {
							run.skips++
						}
					}
				}
				stop := true
				switch {
				case err != nil && errors.Is(err, spend.ErrExceeded) && row.mode == spend.Refuse:
					run.refused++
				case err != nil:
					t.Errorf("call: %v", err)
				case res.Degraded:
					run.degraded++
				case res.Served.Target == "primary":
					run.primary++
					stop = false
				case res.Served.Target == "fallback":
					run.fallback++
					stop = false
				default:
					t.Errorf("served by %q", res.Served.Target)
				}
				mu.Unlock()
				if stop {
					return
				}
			}
		})
	}
	wg.Wait()
	run.elapsed = time.Since(start)

	ctx := context.Background()
	if row.pause {
		if pause.at.IsZero() || pause.err != nil {
			t.Fatalf("Redis was not paused (%v)", pause.err)
		}
		// Wait for the pause to end (real time: Redis is paused for real).
		time.Sleep(time.Until(pause.at.Add(moneyPause + 50*time.Millisecond)))
	}
	for i, r := range reps {
		if err := r.shared.Flush(ctx); err != nil {
			t.Fatalf("replica %d: Flush: %v", i, err)
		}
	}
	// Read on Redis itself: a Shared that failed leaves Redis alone for
	// ProbeEvery.
	spent, reserved, err := reps[0].seer.Used(ctx, moneyKey, moneyPeriod())
	if err != nil {
		t.Fatalf("Used: %v", err)
	}
	run.spent, run.reserved = spent, reserved
	run.sent, run.under, run.maxUnder, run.maxWorst = book.sent, book.under, book.maxUnder, book.maxWorst
	run.trips = map[string]int{}
	for _, r := range reps {
		r.hook.mu.Lock()
		for name, n := range r.hook.n {
			run.trips[name] += n
		}
		r.hook.mu.Unlock()
		if len(r.errs.Get()) > 0 {
			run.local++
		}
	}

	// Every attempt's cost reaches Redis, once, and no reservation is
	// left, unless a round trip timed out while Redis answered: then spend
	// may be counted twice and a reservation held (see spend.Shared), but
	// none is lost.
	if run.costs != book.spent {
		t.Errorf("the calls' Result.Cost add up to %v; the models billed %v", run.costs, book.spent)
	}
	switch {
	case row.flaps && spent < run.costs:
		t.Errorf("Redis holds %v spent after Flush; want at least the calls' cost, %v", spent, run.costs)
	case !row.flaps && (spent != run.costs || reserved != 0):
		t.Errorf("Redis holds %v spent, %v reserved after Flush; want the calls' cost, %v, and nothing reserved", spent, reserved, run.costs)
	}

	// The bound on what the calls spent: the budget (what Redis held when
	// paused), plus each replica's outage allowance when it decided
	// locally (drawn once in the period: divided by the larger of
	// Replicas and the replicas Redis had counted), plus what the attempts
	// cost beyond their reservations.
	run.bound = moneyLimit + run.under
	if row.pause {
		run.held = pause.held
		run.bound = run.held + run.under
	}
	for _, r := range reps {
		r.seer.mu.Lock()
		if r.seer.failed {
			n := max(row.replicas, r.seer.countedAt, 1)
			run.seen = append(run.seen, r.seer.seenAtErr)
			run.counted = append(run.counted, n)
			run.bound += max(moneyLimit-r.seer.seenAtErr, 0) / cost.Money(n)
		}
		r.seer.mu.Unlock()
	}
	switch {
	case row.pause && run.local != moneyReplicas:
		t.Errorf("%d replicas of %d decided locally during the pause", run.local, moneyReplicas)
	case !row.pause && !row.flaps && run.local > 0:
		t.Errorf("%d replicas decided locally while Redis answered (SharedConfig.Timeout %v too short for this machine?)", run.local, row.timeout)
	case run.local == 0:
		// One round trip a reservation, granted or refused, and at most
		// one a settlement (one may carry another's on the same key).
		if scripts, most := run.trips["evalsha"], 2*run.sent+run.skips; scripts > most || scripts < run.sent+run.skips {
			t.Errorf("%d EVALSHA for %d attempts sent and %d refused; want between %d and %d", scripts, run.sent, run.skips, run.sent+run.skips, most)
		}
	}
	if run.costs > run.bound {
		t.Errorf("spent %v: over the budget %v by %v, past the bound %v", run.costs, moneyLimit, run.costs-moneyLimit, run.bound)
	}
	if run.costs < moneyLimit*9/10 && row.mode == spend.Degrade && run.local == 0 {
		t.Errorf("spent %v of %v: the budget stopped well short of its limit", run.costs, moneyLimit)
	}
	return run
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// The markers between which STORM_MD's file holds the money table:
//
//	STORM_MD=../../docs/performance.md go -C examples/storm test -run StormMoney .
const (
	moneyMDBegin = "<!-- storm: money -->"
	moneyMDEnd   = "<!-- /storm: money -->"
)
