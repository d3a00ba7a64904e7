package spend

import (
	"context"
	"sync"
	"time"

	"github.com/backstop-llm/backstop/cost"
)

// NewMemory returns a Store that keeps the spend in process: a map keyed
// by budget key and period, guarded by a mutex, right for one process
// (each replica would keep its own; see redisstore for many). A period
// is forgotten once ttl has passed after its last change, lazily: when
// the store is next changed, at most once per minute. It never fails.
func NewMemory() Store { return &memory{m: map[slot]*tally{}, base: time.Now()} }

// sweepEvery is how often, at most, a Memory looks for periods to forget.
const sweepEvery = time.Minute

// memory is NewMemory's Store. Its clock is the monotonic time since
// base (one clock read per change, cheaper than time.Now).
type memory struct {
	mu    sync.Mutex
	m     map[slot]*tally
	base  time.Time
	swept time.Duration // when expired periods were last looked for
}

// slot is one key's spend in one period.
type slot struct {
	key    string
	period int64
}

// tally is what a slot holds, and until when it is kept (on the
// store's clock).
type tally struct {
	spent, reserved cost.Money
	expires         time.Duration
}

// Reserve implements Store.
func (s *memory) Reserve(_ context.Context, key string, period int64, amount, limit cost.Money, ttl time.Duration) (bool, cost.Money, error) {
	_, ok, used := s.reserve(key, period, amount, limit, ttl)
	return ok, used, nil
}

// reserve is Reserve, returning the tally it reserved on (nil when it did
// not), for a Budget to settle with settle: without a lookup, or a clock
// reading (the reservation renewed the period's ttl).
func (s *memory) reserve(key string, period int64, amount, limit cost.Money, ttl time.Duration) (*tally, bool, cost.Money) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.at(key, period, ttl)
	used := t.spent + t.reserved
	if amount > limit-used { // as used+amount > limit, without overflowing
		return nil, false, used
	}
	t.reserved += amount
	return t, true, used + amount
}

// settle is Settle on the tally reserve returned. Were the period
// forgotten since (its ttl passed during the attempt), the settlement
// goes with it.
func (s *memory) settle(t *tally, reserved, spent cost.Money) {
	s.mu.Lock()
	t.reserved -= reserved
	t.spent += spent
	s.mu.Unlock()
}

// Settle implements Store.
func (s *memory) Settle(_ context.Context, key string, period int64, reserved, spent cost.Money, ttl time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.at(key, period, ttl)
	t.reserved -= reserved
	t.spent += spent
	return nil
}

// Used implements Store.
func (s *memory) Used(_ context.Context, key string, period int64) (cost.Money, cost.Money, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.m[slot{key, period}]
	if !ok || time.Since(s.base) >= t.expires {
		return 0, 0, nil
	}
	return t.spent, t.reserved, nil
}

// at returns the tally of key in period, made (or renewed, when it
// expired) and kept for ttl from now; it forgets the expired periods once
// a sweepEvery. s.mu is held.
func (s *memory) at(key string, period int64, ttl time.Duration) *tally {
	now := time.Since(s.base)
	if now-s.swept >= sweepEvery {
		s.swept = now
		for k, t := range s.m {
			if now >= t.expires {
				delete(s.m, k)
			}
		}
	}
	k := slot{key, period}
	t, ok := s.m[k]
	if !ok || now >= t.expires {
		t = &tally{}
		s.m[k] = t
	}
	t.expires = now + ttl
	return t
}
