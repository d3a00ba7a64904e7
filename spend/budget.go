package spend

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backstop-llm/backstop/cost"
	"github.com/backstop-llm/backstop/internal/problems"
	"github.com/backstop-llm/backstop/observe"
	"github.com/backstop-llm/backstop/policy"
)

// defaultPeriod is the Period of a Config that leaves it 0.
const defaultPeriod = 24 * time.Hour

// keep is how long past its end a period's spend is kept, for the
// attempts still in flight when it ended to settle into it.
const keep = time.Hour

// errHead begins every configuration problem of the package.
var errHead = problems.Head("spend: invalid configuration")

// ErrExceeded is matched, with errors.Is, by every *ExceededError: a
// budget could not cover an attempt.
var ErrExceeded = errors.New("spend: budget exceeded")

// ErrUnpriced is the refusal of an attempt whose worst case is unknown
// (an unknown price or output limit) by a budget with StrictPrices.
var ErrUnpriced = errors.New("spend: the attempt's worst case is unknown (no price or output limit for its model)")

// Mode is what a call does when a budget cannot cover an attempt.
type Mode uint8

// The modes.
const (
	// Degrade, the zero value: the attempt's target is passed over and
	// the call moves on to the next target whose worst case fits, then to
	// the chain's degradations (degrade.LastGood, degrade.Static); when
	// none answers, the call fails with an error joining the
	// *ExceededError of each target passed over (chain.ErrExhausted).
	Degrade Mode = iota
	// Refuse: the call ends at once with the *ExceededError (in a
	// chain.TargetError): no other target is tried, no degradation
	// answers.
	Refuse
)

// String returns "degrade" or "refuse".
func (m Mode) String() string {
	switch m {
	case Degrade:
		return "degrade"
	case Refuse:
		return "refuse"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// Config configures a Budget. Its zero fields take the defaults each
// documents; Name and Limit must be set.
type Config struct {
	// Name names the budget in its errors and the attempts' records
	// ("team-quota"). Required.
	Name string
	// Limit is the most each key may spend per Period. Required, above 0.
	Limit cost.Money
	// Period is how long a key's spend counts against its Limit. 0 means
	// 24h; otherwise a whole number of seconds. Periods are aligned to
	// multiples of Period since the Unix epoch, in UTC: a 24h budget
	// starts afresh at midnight UTC, a 1h budget on the hour, whatever the
	// time the process started.
	Period time.Duration
	// Key returns the key a call spends: a tenant, a user, a feature.
	// nil means cost.Key (the key cost.WithKey put on the context). A
	// call whose key is "" spends the budget's shared "" key: every call
	// without a key shares one Limit.
	Key func(context.Context) string
	// Mode is what a call does when the budget cannot cover an attempt:
	// Degrade (the zero value) or Refuse.
	Mode Mode
	// Store keeps the spend. nil means NewMemory(): in process, each
	// replica its own. redisstore's spend store, wrapped by Shared,
	// shares it between replicas.
	Store Store
	// StrictPrices refuses an attempt whose worst case is unknown (its
	// target has no price, or its model no output limit and the request
	// no MaxTokens) with ErrUnpriced: the target is passed over, whatever
	// the Mode. Off by default: such an attempt reserves, and then
	// settles, the part of its cost that is known (nothing when no price
	// is known at all), so the budget cannot bound it.
	StrictPrices bool
}

// Validate reports every problem with c at once, each wrapping
// llm.ErrInvalidConfig: an empty Name, a Limit of $0 or less, a negative
// Period or one that is not a whole number of seconds, an unknown Mode.
func (c Config) Validate() error {
	found := problems.In(errHead, fmt.Sprintf("budget %q", c.Name))
	if c.Name == "" {
		found.Addf("Name is empty; name the budget (its errors and records say it)")
	}
	if c.Limit <= 0 {
		found.Addf("Limit is %v; set the most a key may spend per Period, above $0 (cost.Dollars(5) for $5)", c.Limit)
	}
	switch {
	case c.Period < 0:
		found.Addf("Period is %v; it must not be negative (0 means %v)", c.Period, defaultPeriod)
	case c.Period%time.Second != 0:
		found.Addf("Period is %v; use a whole number of seconds", c.Period)
	}
	if c.Mode > Refuse {
		found.Addf("Mode is %v; use spend.Degrade or spend.Refuse", c.Mode)
	}
	return found.Err()
}

// Budget is a money budget: a limit on what each key may spend per
// period, as a policy.Policy of a chain's targets (chain.Builder.Spend).
//
// Before an attempt is sent (policy.Send), it reserves the attempt's worst
// case (policy.Attempt.WorstCase) for the call's key, in the period the
// attempt starts in, if the key's spend and reservations leave room for it
// within Limit; otherwise it refuses the attempt with an *ExceededError,
// as Mode says. Once the attempt ends, it settles: the reservation is
// released and what the attempt cost (policy.Outcome.Cost: a failed
// attempt that was billed, a stream cut after output, a hedge that lost
// its race, cost what they cost) is spent; an attempt not sent spends
// nothing. A key's spend therefore passes Limit only by what the
// attempts in flight at the limit cost beyond their worst case (a prompt
// underestimated, a price known only in part): one attempt's
// underestimate with one in flight, however many calls race for the rest.
//
// A store that fails does not block calls: an attempt whose reservation
// failed is let through, and neither its reservation nor its cost is
// counted; an error settling is dropped (the reservation is held until
// the period is forgotten). Shared wraps a Store with the health handling
// of the other shared stores.
//
// It is safe for concurrent use, and may serve several chains.
type Budget struct {
	name   string
	limit  cost.Money
	period int64 // seconds
	ttl    time.Duration
	key    func(context.Context) string
	mode   Mode
	store  Store
	strict bool
	// out holds, by key, the period in which a reservation found the key
	// with nothing left (spent and reserved at the Limit), until one of
	// the key's reservations is granted again: Peek and Plan read it, so
	// that a hedge, a patience racer or a retry is refused before it is
	// planned, without a round trip to the store. outs is set once out
	// holds anything, sparing a granted reservation the map.
	out  sync.Map // string → int64
	outs atomic.Bool
	// last is the reservation of the last attempt admitted: the next
	// one, of the same key in the same period as is usual, holds it
	// again instead of allocating its own (a reservation is immutable).
	last atomic.Pointer[reservation]
}

// New returns the budget c configures, or every problem with c, each
// wrapping llm.ErrInvalidConfig.
func New(c Config) (*Budget, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.Period == 0 {
		c.Period = defaultPeriod
	}
	if c.Key == nil {
		c.Key = cost.Key
	}
	if c.Store == nil {
		c.Store = NewMemory()
	}
	return &Budget{name: c.Name, limit: c.Limit, period: int64(c.Period / time.Second), ttl: c.Period + keep,
		key: c.Key, mode: c.Mode, store: c.Store, strict: c.StrictPrices}, nil
}

// reservation is what a Budget holds for an attempt it admitted (in a
// policy.Hold, with the amount reserved in N): the key and period it
// settles into, whatever the context and the clock say by then.
type reservation struct {
	key    string
	period int64
	tally  *tally // in a Memory store: where it settles; nil in another
}

// Admit reserves attempt a's worst case in policy.Send, and refuses it
// when the key's Limit cannot cover it (see Budget). In policy.Peek and
// policy.Plan it refuses, holding nothing, when the key has nothing left
// at all: a retry on a spent budget is refused before its backoff, not
// after it (its worst case is priced when it is sent).
func (b *Budget) Admit(ctx context.Context, a *policy.Attempt) policy.Admission {
	switch a.Phase {
	case policy.Send:
	case policy.Peek, policy.Plan:
		return b.peek(ctx, a)
	default:
		return policy.Admission{}
	}
	worst := a.WorstCase()
	if worst.Unpriced && b.strict {
		return policy.Admission{Err: fmt.Errorf("budget %q: %w", b.name, ErrUnpriced), Cause: observe.SkipSpend,
			Reason: "budget " + b.name + ": this attempt's worst case is unknown (StrictPrices)"}
	}
	key := b.key(ctx)
	period, reset := b.periodAt(a.At)
	var ok bool
	var used cost.Money
	var err error
	var t *tally
	if m, in := b.store.(*memory); in { // its tally settles without a lookup
		t, ok, used = m.reserve(key, period, worst.Spent, b.limit, b.ttl)
	} else {
		ok, used, err = b.store.Reserve(ctx, key, period, worst.Spent, b.limit, b.ttl)
	}
	switch {
	case err != nil:
		return policy.Admission{} // a store outage never blocks a call; nothing to settle
	case !ok:
		if used >= b.limit { // nothing left at all: Peek and Plan refuse too
			b.out.Store(key, period)
			b.outs.Store(true)
		}
		return b.refuse(key, used, worst.Spent, reset, a.Phase)
	}
	if b.outs.Load() {
		b.out.Delete(key) // room again
	}
	r := b.last.Load()
	if r == nil || r.key != key || r.period != period || r.tally != t {
		r = &reservation{key: key, period: period, tally: t}
		b.last.Store(r)
	}
	return policy.Admission{Hold: policy.Hold{Ref: r, N: uint64(worst.Spent)}}
}

// peek answers Admit in policy.Peek and policy.Plan, holding nothing and
// asking the store nothing: refused when the key's last reservation in
// this period found nothing left (out), admitted otherwise. It is
// advisory: the attempt itself, if sent, reserves in Send.
func (b *Budget) peek(ctx context.Context, a *policy.Attempt) policy.Admission {
	if !b.outs.Load() {
		return policy.Admission{}
	}
	key := b.key(ctx)
	p, ok := b.out.Load(key)
	period, reset := b.periodAt(a.At)
	if !ok || p.(int64) != period {
		return policy.Admission{}
	}
	return b.refuse(key, b.limit, 0, reset, a.Phase)
}

// refuse is the refusal of an attempt that may cost need, key having used
// used of the limit.
func (b *Budget) refuse(key string, used, need cost.Money, reset time.Time, ph policy.Phase) policy.Admission {
	e := &ExceededError{Budget: b.name, Key: key, Limit: b.limit, Used: used, Need: need, Reset: reset}
	return policy.Admission{Err: e, Cause: observe.SkipSpend, Stop: b.mode == Refuse && ph != policy.Peek,
		Reason: fmt.Sprintf("budget %s for %q: %v of %v spent or reserved; this attempt may cost %v", b.name, key, used, b.limit, need)}
}

// Settle releases what Admit reserved for a and spends what a cost
// (nothing when it was not sent). An attempt it holds nothing for (not
// admitted, or admitted while the store failed) settles nothing.
func (b *Budget) Settle(ctx context.Context, _ *policy.Attempt, h policy.Hold, o *policy.Outcome) {
	r, ok := h.Ref.(*reservation)
	if !ok {
		return
	}
	var spent cost.Money
	if o.Sent {
		spent = o.Cost.Spent
	}
	if ctx.Err() != nil {
		ctx = context.WithoutCancel(ctx) // a canceled call still settles what it reserved
	}
	if r.tally != nil {
		b.store.(*memory).settle(r.tally, cost.Money(h.N), spent)
		return
	}
	_ = b.store.Settle(ctx, r.key, r.period, cost.Money(h.N), spent, b.ttl)
}

// Used reports what key has spent and holds reserved in the current
// period.
func (b *Budget) Used(ctx context.Context, key string) (spent, reserved cost.Money, err error) {
	period, _ := b.periodAt(time.Time{})
	return b.store.Used(ctx, key, period)
}

// periodAt returns the period at (zero: now) is in, in Unix seconds, and
// when it ends.
func (b *Budget) periodAt(at time.Time) (int64, time.Time) {
	if at.IsZero() {
		at = time.Now()
	}
	s := at.Unix()
	start := s - s%b.period
	if s%b.period < 0 {
		start -= b.period
	}
	return start, time.Unix(start+b.period, 0).UTC()
}

// ExceededError is the refusal of an attempt a budget could not cover: the
// key's spend and reservations in the current period (Used) and the
// attempt's worst case (Need) would pass Limit. It matches ErrExceeded.
// Reset is when the period ends and the key's spend starts afresh: the
// Retry-After a service answers with.
type ExceededError struct {
	Budget, Key       string
	Limit, Used, Need cost.Money
	Reset             time.Time
}

// Error says which budget, for which key, and by how much.
func (e *ExceededError) Error() string {
	return fmt.Sprintf("spend: budget %q for key %q: %v of %v spent or reserved, the attempt may cost %v; the period resets at %s",
		e.Budget, e.Key, e.Used, e.Limit, e.Need, e.Reset.UTC().Format(time.RFC3339))
}

// Is reports whether target is ErrExceeded.
func (e *ExceededError) Is(target error) bool { return target == ErrExceeded }
