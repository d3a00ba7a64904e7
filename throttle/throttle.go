// Package throttle owns self-throttling: a client-side limiter per target,
// on golang.org/x/time/rate, that paces requests below the provider's limit
// instead of sending them to be rejected. The cheapest 429 is the one never
// sent.
//
// A limiter starts from the limits you know (your tier's requests and
// tokens per minute) and adapts from what the provider says: it never lets
// more through than the rate-limit headers say remain (anthropic-ratelimit-*,
// x-ratelimit-*), it learns a limit it was not told from those headers, and
// after a 429 it drops its rate to Backoff of it and climbs back to the full
// rate over Recovery, like the AWS SDK's adaptive mode. A request whose slot
// is further away than MaxWait (or past the call's deadline) is not sent:
// the chain moves on to the next target instead of waiting.
//
// By default (the zero Config) every target is paced from what its
// provider says and does, and from nothing else: a provider that announces
// no limit and rejects nothing is never held back. The limits it announces
// in its rate-limit headers are learned and kept (below). Once its 429s
// say it is over its limit (at least 10 of them, outnumbering K-1
// times its accepts, K = 1.5: the SRE book's
// condition, requests over K times accepts), they cut a learned rate
// (Backoff, Recovery), and the adaptive throttle paces it in the manner of
// the SRE book's client-side throttling, whatever its headers say: at most
// K requests per request it accepts, from a bucket refilled at
// (K*accepts + 1) per minute (accepts and 429s counted with that
// time constant), holding a second's worth, until no 429 has come for a
// minute or the 429s fall under half of K-1 per accept. A few 429s
// among many answers hold nothing back. Disabled switches all of it off.
//
// With Learn, limits are learned beside a configured one too, and until
// the first headers announcing a limit arrive the limiter sends one
// request a second, one at a time (for a provider you know announces its
// limits, so that the first instant's requests are not sent to be
// rejected); headers that say nothing of requests, beside a token limit
// (announced or configured), end that pace, and requests are paced by
// their tokens from then on. A provider that sends no rate-limit headers
// keeps Learn's provisional pace: configure its limits instead, or leave
// Learn off. A limit announced is kept as the provider keeps it:
// a bucket of the per-minute limit (unless Burst sets its size), refilled
// continuously, drained to what the headers say remain, so that a fresh
// provider bucket is used at once rather than a second's worth at a time.
// Learning a limit, or a change of it, rebuilds the limiter from what the
// provider said, and every slot granted before goes stale
// (see Limiter.Admit): whoever waits on one takes another at the new pace,
// as the chain does, instead of keeping a queue spaced at the old pace.
//
// Limiter.Headroom reports a limiter's room (the limit in force, the
// requests that could go now, the wait for the next slot) without taking
// a slot, for spreading load over targets.
//
// The zero Config is the default pacing above; Disabled is off.
package throttle

import (
	"cmp"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backstop-llm/backstop/internal/problems"

	"github.com/backstop-llm/backstop/llm"
	"golang.org/x/time/rate"
)

// Defaults of Config's zero fields, once throttling is on.
const (
	defaultMaxWait  = 5 * time.Second
	defaultBackoff  = 0.7
	defaultRecovery = time.Minute
	// adaptiveK is the K of the default pacing's adaptive throttle (SRE
	// book, "Handling Overload"): once a provider rejects more than K-1
	// requests per request it accepts, it is sent at most K requests per
	// request it accepts. 1.5, not the book's 2: against a
	// provider that announces nothing and admits 50 requests a minute,
	// 100 callers calling back to back get 0.64 429s per answer with 1.5
	// and 1.01 with 2 (goodput 1.0 with both; issue 24's goal is at most
	// 1), while a provider rejecting up to a third of its requests (a 5%
	// share of 429s, say) is still not paced at all.
	adaptiveK = 1.5
	// adaptiveWindow is the time constant with which the adaptive
	// throttle counts accepts (its rate is K times their rate), for
	// limits that providers keep per minute; and the adaptive throttle
	// lets go of a provider that has not answered a 429 for that long.
	adaptiveWindow = time.Minute
	// adaptiveMinRejects is how many 429s (counted as accepts are) the
	// default pacing needs before it reads them as the target being over
	// its limit, engages the adaptive throttle and cuts a learned rate: so
	// that the first response of a healthy target, when it is a 429, or a
	// few 429s among many answers, hold nothing back (the storm lab's
	// rate-limit scenario sends 150 at once).
	adaptiveMinRejects = 10
	// minFactor is the lowest share of the limit a run of 429s leaves.
	minFactor = 0.05
	// maxPerMinute bounds RequestsPerMinute and TokensPerMinute: a
	// second's worth of either is a bucket's burst, an integer, which a
	// larger limit would overflow (leaving a bucket that grants nothing).
	// No provider's tier comes near it.
	maxPerMinute = 1e12
)

var (
	// ErrThrottled is the reason a target or a retry is passed over: its
	// next slot is further away than MaxWait or the deadline.
	ErrThrottled = errors.New("self-throttled: the target's next slot is too far away")
	// errHead begins every configuration problem of the package.
	errHead = problems.Head("throttle: invalid configuration")
)

// Config configures a target's self-throttling. The zero value is the
// default pacing: limits learned from the provider's rate-limit headers,
// a rate cut after 429s, and the adaptive throttle while a provider that
// announces no limit answers 429s; nothing is paced before the provider
// announces a limit or rejects a request (see the package doc). Disabled
// switches self-throttling off.
type Config struct {
	// Disabled switches self-throttling off: no pacing, no learning, no
	// local refusals; every request is sent and the provider's 429s are
	// left to the retry policy and the Retry-After gate. Set nothing else
	// beside it.
	Disabled bool
	// RequestsPerMinute and TokensPerMinute are the provider's limits for
	// this target, if you know them (your tier's RPM and TPM). 0 means
	// unknown: taken from the provider's headers when neither is set or
	// with Learn.
	RequestsPerMinute, TokensPerMinute float64
	// Learn takes unknown limits from the provider's rate-limit headers
	// even beside a configured one (with no limit configured they are
	// learned anyway), and paces before it knows: until the first headers
	// announcing a limit it sends one request a second (for good, for a
	// provider that sends none: configure its limits instead, or leave
	// Learn off); headers that say nothing of requests, beside a token
	// limit (announced or configured), end that pace. Set it for a
	// provider you know announces its limits, so that the first instant's
	// requests are not sent to be rejected. A learned limit is kept as a
	// bucket of its per-minute size (see Burst), and learning one makes
	// the slots granted before it stale.
	Learn bool
	// Burst is how many requests may go at once. 0 means, for a
	// configured RequestsPerMinute, one second's worth of it, at least 1
	// (providers may enforce a per-minute limit over shorter intervals);
	// for a request limit learned from the headers, the announced per-minute
	// limit itself, as the provider keeps it (Anthropic keeps an RPM limit
	// as a token bucket of that size, refilled continuously), of which the
	// limiter never holds more than the headers say remain. Set Burst if
	// your provider enforces a learned limit over shorter intervals. Until
	// the first headers, Learn sends one request a second, one at a time,
	// whatever Burst is. Burst counts requests: a learned token limit's
	// bucket is always the announced limit.
	Burst int
	// maxWait is the longest a request waits for its slot; a longer wait
	// moves the call to the next target. 0 means 5s.
	MaxWait time.Duration
	// Backoff is the share of its rate a limiter keeps after a 429. 0
	// means 0.7, as the AWS SDK's adaptive mode.
	Backoff float64
	// Recovery is how long the rate takes to climb back from its lowest to
	// the limit after 429s stop. 0 means 1m.
	Recovery time.Duration
}

// on reports whether s turns throttling on: every Config but a Disabled
// one, the zero value included.
func (s Config) on() bool { return !s.Disabled }

// learns reports whether a limiter of s learns limits from the headers:
// with Learn, or with no limit configured (the default pacing), while a
// limit is left to learn.
func (s Config) learns() bool {
	return (s.Learn || s.RequestsPerMinute == 0 && s.TokensPerMinute == 0) && (s.RequestsPerMinute == 0 || s.TokensPerMinute == 0)
}

// withDefaults returns s with every zero field set to its default.
func (s Config) withDefaults() Config {
	s.MaxWait = cmp.Or(s.MaxWait, defaultMaxWait)
	s.Backoff = cmp.Or(s.Backoff, defaultBackoff)
	s.Recovery = cmp.Or(s.Recovery, defaultRecovery)
	return s
}

// Validate reports every problem with s at once.
func (s Config) Validate() error {
	found := problems.New(errHead)
	bad := found.Addf
	if s.Disabled && s != (Config{Disabled: true}) {
		bad("Disabled is set beside other fields; remove Disabled to throttle with them, or the other fields to switch throttling off")
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"RequestsPerMinute", s.RequestsPerMinute}, {"TokensPerMinute", s.TokensPerMinute}} {
		if f.v < 0 || math.IsNaN(f.v) || f.v > maxPerMinute {
			bad("%s is %v; use your tier's limit (at most %g), or 0 for unknown", f.name, f.v, float64(maxPerMinute))
		}
	}
	if s.Burst < 0 {
		bad("Burst is %d; use 0 for the default", s.Burst)
	}
	problems.NotNegative(found, "MaxWait", s.MaxWait, defaultMaxWait)
	problems.NotNegative(found, "Recovery", s.Recovery, defaultRecovery)
	if math.IsNaN(s.Backoff) || s.Backoff < 0 || s.Backoff >= 1 {
		bad("Backoff is %v; use a share in (0, 1), or 0 for %v", s.Backoff, defaultBackoff)
	}
	return found.Err()
}

// Limiter paces one target. It is safe for concurrent use.
type Limiter struct {
	s Config

	mu       sync.Mutex
	requests bucket
	tokens   bucket
	factor   float64   // share of the limits in force, in [MinFactor, 1]
	updated  time.Time // when factor last changed
	cut      time.Time // when the last 429 cut the factor
	epoch    *epoch    // the slots granted since the last rebuild; nil when nothing is learned

	// The adaptive throttle (see adaptiveK): accepted counts the requests
	// answered with anything but a 429, fading with time constant
	// adaptiveWindow from counted; rejected is the last 429's time;
	// adaptive is its bucket, nil while it paces nothing.
	accepted float64
	refused  float64 // the 429s, counted as accepted is
	counted  time.Time
	rejected time.Time
	adaptive *rate.Limiter
	auto     bool // the default pacing: nothing configured, Learn off

	// idle is set while the limiter paces nothing (no bucket, the
	// adaptive throttle not engaged): reserve grants every slot at once,
	// and observe of an answer that announces nothing only counts it, in
	// fresh (folded into accepted under mu at least once a second, by
	// fade), without taking mu, so that a target that says nothing pays
	// next to nothing for its pacing.
	idle   atomic.Bool
	fresh  atomic.Int64
	folded atomic.Int64 // when fade last ran, in Unix nanoseconds
}

// settle sets idle from the limiter's state; l.mu is held.
func (l *Limiter) settle() {
	l.idle.Store(l.requests.lim == nil && l.tokens.lim == nil && l.adaptive == nil)
}

// congestion is how close together 429s count as one event: a burst of
// them, answered to requests sent at one moment, cuts the rate once.
const congestion = time.Second

// bucket is one limit: requests or tokens per second.
type bucket struct {
	lim   *rate.Limiter // nil while the limit is unknown
	limit float64       // per second, at factor 1
	known bool          // limit was configured or learned (not the provisional pace)
}

// epoch is a learning limiter's buckets from one rebuild to the next.
// Every reservation taken in it goes stale when the next begins; pending
// keeps the slots it granted so that a bucket rebuilt without new headers
// can leave out what they took (their holders take it again).
//
// pending is keyed by each slot's reservation from the request bucket, or
// from the token bucket in an epoch without a request bucket (the provider
// announced a token limit alone), so that taking a slot allocates nothing
// beyond what rate.Limiter.ReserveN does. A slot took one request from the
// request bucket when the epoch has one; a slot that took nothing from
// either is not kept.
type epoch struct {
	stale   chan struct{} // closed when the epoch ends
	pending map[*rate.Reservation]slot
	swept   int // len(pending) after the last sweep
}

// slot is what one reservation took from the buckets beside its request;
// the request goes at at.
type slot struct {
	at     time.Time
	tokens int
}

func newEpoch() *epoch {
	return &epoch{stale: make(chan struct{}), pending: make(map[*rate.Reservation]slot)}
}

// hold records s under r, first forgetting the slots already reached once
// pending has doubled since the last sweep (so that it stays about as
// large as the queue).
func (e *epoch) hold(now time.Time, r *rate.Reservation, s slot) {
	if len(e.pending) >= 2*e.swept+64 {
		for k, p := range e.pending {
			if !p.at.After(now) {
				delete(e.pending, k)
			}
		}
		e.swept = len(e.pending)
	}
	e.pending[r] = s
}

// owed is what the slots not yet reached at now took from each bucket.
func (e *epoch) owed(now time.Time) (requests, tokens float64) {
	for _, p := range e.pending {
		if p.at.After(now) {
			requests++
			tokens += float64(p.tokens)
		}
	}
	return requests, tokens
}

// New returns a limiter for s, or nil when s is off. Errors wrap
// llm.ErrInvalidConfig.
func New(s Config) (*Limiter, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if !s.on() {
		return nil, nil
	}
	l := &Limiter{s: s.withDefaults(), factor: 1, auto: s.RequestsPerMinute == 0 && s.TokensPerMinute == 0 && !s.Learn}
	now := time.Now()
	if s.RequestsPerMinute > 0 {
		l.requests.set(now, s.RequestsPerMinute/60, l.burst(s.RequestsPerMinute/60))
		l.requests.known = true
	}
	if s.RequestsPerMinute == 0 && s.Learn {
		// Until the first headers say the limit, pace at one request a
		// second rather than send everything at once.
		l.requests.set(now, 1, 1)
		l.requests.limit = 1
	}
	if s.TokensPerMinute > 0 {
		// One request may need many tokens: allow a second's worth, and
		// never less than the largest request seen (see reserve).
		l.tokens.set(now, s.TokensPerMinute/60, int(math.Max(1, s.TokensPerMinute/60)))
		l.tokens.known = true
	}
	if s.learns() {
		l.epoch = newEpoch()
	}
	l.settle()
	return l, nil
}

func (l *Limiter) burst(perSecond float64) int {
	if l.s.Burst > 0 {
		return l.s.Burst
	}
	return int(math.Max(1, perSecond))
}

// set makes b a full bucket of perSecond and burst.
func (b *bucket) set(now time.Time, perSecond float64, burst int) {
	b.limit = perSecond
	b.lim = fill(now, perSecond, burst, float64(burst))
}

// reservation is a slot a limiter granted. Release it if the request is
// not sent after all; take another if it goes stale while you wait.
type reservation struct {
	l       *Limiter
	r, t, a *rate.Reservation // requests, tokens, the adaptive throttle
	e       *epoch            // the epoch it was taken in; nil when it can never go stale
}

// stale returns a channel that is closed when the slot no longer
// reflects the limiter: the limiter learned a new limit from the
// provider's headers and rebuilt its buckets after the reservation was
// taken. A stale slot was spaced at the old pace (before the first
// headers, Learn's provisional one request a second); the limiter's
// buckets no longer count it, so a request sent at its time is one the
// limiter does not know of. Whoever waits for the slot should select on
// stale beside its timer and, when stale is closed first, release the
// reservation (which then changes nothing) and reserve again. Once the
// request is sent, stale no longer matters.
//
// stale returns nil, a channel that is never ready, for a reservation
// that can never go stale: the zero reservation, one granted at once by a
// limiter that paced nothing then (the default pacing before the
// provider says or does anything), or one from a limiter that learns
// nothing (a limit configured without Learn, or both).
func (r reservation) stale() <-chan struct{} {
	if r.e == nil {
		return nil
	}
	return r.e.stale
}

// release gives the slot back. Cancelling a stale reservation changes
// nothing: its slot was in buckets the limiter has since rebuilt without
// it.
func (r reservation) release(now time.Time) {
	if r.l == nil {
		return
	}
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	if r.e != nil {
		delete(r.e.pending, r.key())
	}
	r.cancel(now)
}

// key is what keys r's slot in its epoch's pending (see epoch): its
// request bucket's reservation, else its token bucket's; nil when it took
// from neither.
func (r reservation) key() *rate.Reservation { return cmp.Or(r.r, r.t) }

func (r reservation) cancel(now time.Time) {
	if r.r != nil {
		r.r.CancelAt(now)
	}
	if r.t != nil {
		r.t.CancelAt(now)
	}
	if r.a != nil {
		r.a.CancelAt(now)
	}
}

// reserve takes a slot for one request of about tokens tokens and returns
// how long to wait before sending it, rounded up to the millisecond (so
// that float arithmetic never sends a request a hair before the provider
// has its token). A slot further away than limit is not taken: reserve
// returns ok false, with that wait, and leaves the limiter as it was (a
// slot taken and given back later could not always be restored exactly,
// and leaked slots would stall the target). Under the default pacing the
// adaptive throttle's bucket paces requests too while it is engaged (see
// adaptiveK), its slots refused alike.
func (l *Limiter) reserve(now time.Time, tokens int, limit time.Duration) (wait time.Duration, res reservation, ok bool) {
	if l.idle.Load() {
		return 0, reservation{}, true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.settle()
	l.recover(now)
	res.l = l
	if l.requests.lim != nil {
		res.r = l.requests.lim.ReserveN(now, 1)
		wait = res.r.DelayFrom(now)
	}
	if a := l.adapt(now); a != nil {
		res.a = a.ReserveN(now, 1)
		wait = max(wait, res.a.DelayFrom(now))
	}
	if l.tokens.lim != nil && tokens > 0 {
		if tokens > l.tokens.lim.Burst() {
			l.tokens.lim.SetBurstAt(now, tokens)
		}
		res.t = l.tokens.lim.ReserveN(now, tokens)
		wait = max(wait, res.t.DelayFrom(now))
	}
	wait = ceilMillis(wait)
	if wait > limit {
		res.cancel(now) // the latest reservations: restored exactly
		return wait, reservation{}, false
	}
	if l.epoch != nil {
		res.e = l.epoch
		s := slot{at: now.Add(wait)}
		if res.t != nil {
			s.tokens = tokens
		}
		if key := res.key(); key != nil {
			l.epoch.hold(now, key, s)
		}
	}
	return wait, res, true
}

// observe adapts the limiter to a response: rl is what the provider
// announced (from a success or a failure), throttled whether it answered
// 429.
//
// A limit the headers announce for the first time, or
// differently from before, rebuilds the limiter's buckets from what the
// provider said, and every reservation taken before goes stale. So do the
// first headers that announce a token limit and no request limit: they
// end the provisional request pace. Every response counts, as an accept
// or a 429, toward the adaptive throttle (see adaptiveK).
func (l *Limiter) observe(now time.Time, rl llm.RateLimit, throttled bool) {
	if !throttled && l.idle.Load() && !rl.Requests.Reported() && !rl.Tokens.Reported() && !rl.InputTokens.Reported() &&
		now.UnixNano()-l.folded.Load() < int64(time.Second) {
		l.fresh.Add(1) // an accept, with nothing to learn
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.settle()
	l.recover(now)
	tokens := rl.Tokens
	if !tokens.Reported() {
		tokens = rl.InputTokens
	}
	if l.epoch != nil {
		r := l.learnt(&l.requests, rl.Requests, l.s.RequestsPerMinute)
		t := l.learnt(&l.tokens, tokens, l.s.TokensPerMinute)
		// Headers that say nothing of requests, beside a token limit
		// (announced now or known), end the provisional request pace:
		// tokens pace requests from then on, even when the headers teach
		// nothing new (a configured token limit).
		endPace := !l.requests.known && l.requests.lim != nil && !rl.Requests.Reported() && (t > 0 || l.tokens.known)
		if r > 0 || t > 0 || endPace {
			l.rebuild(now, r, t, endPace)
		}
	}
	heed(now, l.requests.lim, rl.Requests)
	heed(now, l.tokens.lim, tokens)
	l.fade(now)
	if !throttled {
		l.accepted++
		return
	}
	l.refused++
	l.rejected = now
	over := l.overLimit()
	if l.auto && over && l.adaptive == nil {
		// The provider rejects more than K-1 requests per request it
		// accepts: pace it at K times what it accepts.
		r := l.adaptiveRate()
		l.adaptive = fill(now, float64(r), adaptiveBurst(r), float64(adaptiveBurst(r)))
	}
	// The default pacing cuts the rate only for 429s that say the target
	// is over its limit, not for a few among many answers.
	if !l.auto || over {
		if now.Sub(l.cut) >= congestion || l.cut.IsZero() {
			l.factor = math.Max(minFactor, l.factor*l.s.Backoff)
			l.updated, l.cut = now, now
			l.apply(now)
		}
		drain(now, l.requests.lim, 0)
		drain(now, l.tokens.lim, 0)
	}
}

// fade brings the adaptive throttle's counts to now, with the accepts
// counted in fresh (as of now: at most a second late).
func (l *Limiter) fade(now time.Time) {
	if d := now.Sub(l.counted); d > 0 {
		if !l.counted.IsZero() {
			f := math.Exp(-float64(d) / float64(adaptiveWindow))
			l.accepted *= f
			l.refused *= f
		}
		l.counted = now
	}
	l.accepted += float64(l.fresh.Swap(0))
	l.folded.Store(now.UnixNano())
}

// overLimit reports whether the 429s counted say the target is over its
// limit: at least adaptiveMinRejects of them, outnumbering K-1 times the
// accepts (the SRE book's condition, requests over K times accepts).
func (l *Limiter) overLimit() bool {
	return l.refused >= adaptiveMinRejects && l.refused > (adaptiveK-1)*l.accepted
}

// adaptiveRate is the adaptive throttle's rate: K times the rate of the
// requests accepted, plus one request per adaptiveWindow so that a
// provider that has accepted nothing yet is still asked.
func (l *Limiter) adaptiveRate() rate.Limit {
	return rate.Limit((adaptiveK*l.accepted + 1) / adaptiveWindow.Seconds())
}

// adapt returns the adaptive throttle's bucket at now, its rate brought
// to the accepts counted, or nil. observe engages it when overLimit; it
// lets go when no 429 came within adaptiveWindow, or when the 429s fall
// under half of K-1 times the accepts (hysteresis: at its pace the target
// answers about K-1 429s per accept).
func (l *Limiter) adapt(now time.Time) *rate.Limiter {
	if l.adaptive == nil {
		return nil
	}
	l.fade(now)
	if now.Sub(l.rejected) >= adaptiveWindow || 2*l.refused < (adaptiveK-1)*l.accepted {
		l.adaptive = nil
		return nil
	}
	r := l.adaptiveRate()
	l.adaptive.SetLimitAt(now, r)
	l.adaptive.SetBurstAt(now, adaptiveBurst(r))
	return l.adaptive
}

// adaptiveBurst is how many requests the adaptive throttle lets go at
// once at rate r: a second's worth, at least 1, as for a configured limit.
func adaptiveBurst(r rate.Limit) int { return int(math.Max(1, float64(r))) }

// learnt returns the per-minute limit a announces for b when the limiter
// is to learn it (b's limit was not configured, and a differs from what b
// paces at), else 0. observe calls it only on a learning limiter (one with
// an epoch, which New gives only to one that learns).
func (l *Limiter) learnt(b *bucket, a llm.Allowance, configured float64) int32 {
	if configured != 0 || !a.Reported() || a.Limit <= 0 {
		return 0
	}
	if b.known && b.limit == float64(a.Limit)/60 {
		return 0
	}
	return a.Limit
}

// rebuild starts a new epoch, without the provisional request pace when
// endPace is set: a bucket whose limit was learned (requests
// or tokens per minute, 0 for none) is rebuilt as the provider keeps it, a
// bucket of the per-minute limit (a configured Burst wins for requests),
// full (observe then drains it to what the provider says remains); any
// other bucket is rebuilt holding what it holds now plus what the slots
// not yet reached took, since their holders, seeing stale, take them
// again.
func (l *Limiter) rebuild(now time.Time, requests, tokens int32, endPace bool) {
	owedR, owedT := l.epoch.owed(now)
	if endPace {
		// Learn's provisional request pace ends: requests are paced by
		// their tokens alone (until a request limit is announced).
		l.requests = bucket{}
	}
	requestBurst := cmp.Or(l.s.Burst, int(requests)) // a configured Burst wins
	for _, b := range []struct {
		b       *bucket
		learned int32
		burst   int
		owed    float64
	}{{&l.requests, requests, requestBurst, owedR}, {&l.tokens, tokens, int(tokens), owedT}} {
		switch {
		case b.learned > 0:
			perSecond := float64(b.learned) / 60
			b.b.limit, b.b.known = perSecond, true
			b.b.lim = fill(now, perSecond*l.factor, b.burst, float64(b.burst))
		case b.b.lim != nil:
			burst := b.b.lim.Burst()
			held := math.Max(0, math.Min(float64(burst), b.b.lim.TokensAt(now)+b.owed))
			b.b.lim = fill(now, b.b.limit*l.factor, burst, held)
		}
	}
	close(l.epoch.stale)
	l.epoch = newEpoch()
}

// fill returns a bucket of perSecond and burst that holds tokens (in
// [0, burst]) at now.
func fill(now time.Time, perSecond float64, burst int, tokens float64) *rate.Limiter {
	lim := rate.NewLimiter(rate.Limit(perSecond), burst)
	lim.AllowN(now, 0) // start the clock now
	drain(now, lim, tokens)
	return lim
}

// heed never lets lim hold more than a says remains.
func heed(now time.Time, lim *rate.Limiter, a llm.Allowance) {
	if a.Reported() && (a.Limit > 0 || a.Remaining > 0) {
		drain(now, lim, float64(a.Remaining))
	}
}

// drain takes tokens from lim until at most keep are left.
func drain(now time.Time, lim *rate.Limiter, keep float64) {
	if lim == nil {
		return
	}
	if excess := lim.TokensAt(now) - keep; excess >= 1 {
		lim.ReserveN(now, int(excess))
	}
}

// recover climbs the factor back towards 1, linearly over Recovery.
func (l *Limiter) recover(now time.Time) {
	if l.factor >= 1 {
		return
	}
	d := now.Sub(l.updated)
	if d <= 0 {
		return
	}
	l.factor = math.Min(1, l.factor+float64(d)/float64(l.s.Recovery)*(1-minFactor))
	l.updated = now
	l.apply(now)
}

func (l *Limiter) apply(now time.Time) {
	if l.requests.lim != nil {
		l.requests.lim.SetLimitAt(now, rate.Limit(l.requests.limit*l.factor))
	}
	if l.tokens.lim != nil {
		l.tokens.lim.SetLimitAt(now, rate.Limit(l.tokens.limit*l.factor))
	}
}

// Headroom is what a limiter knows of its target's room now: enough to
// spread load over targets without taking a slot, by preferring targets
// with Available requests (or the shortest Wait) and weighing them by
// PerMinute.
type Headroom struct {
	// Known reports whether a request limit is configured or learned.
	// Until the first headers, a Learn limiter sends one request a second
	// as a guess: Known is false and PerMinute 0 then, while Available
	// and Wait describe that provisional pace.
	Known bool
	// PerMinute is the request limit in force, per minute: the configured
	// or learned limit times the share of it a recent 429 left (see
	// Backoff and Recovery). 0 when not Known.
	PerMinute float64
	// Available is how many requests could go now without waiting: what
	// the request bucket holds, fractions included. Below 1 the next
	// request waits; negative while granted slots are queued (about that
	// many requests wait for theirs). +Inf when the limiter has no request
	// limit (a token limit only).
	Available float64
	// Wait is how long the next request would wait for its slot, as
	// reserve would return it: 0 when one could go now. It counts the
	// request bucket and the token bucket for a request of one token; a
	// larger request may wait longer for a token limit.
	Wait time.Duration
}

// Headroom reports the limiter's room at now. It takes no slot and
// changes nothing (beyond the climb back from a 429 that every method
// applies as time passes). A nil Limiter, a target with throttling off,
// has unlimited room: Known false, Available +Inf, Wait 0.
func (l *Limiter) Headroom(now time.Time) Headroom {
	if l == nil {
		return Headroom{Available: math.Inf(1)}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recover(now)
	h := Headroom{Known: l.requests.known, Available: math.Inf(1)}
	if h.Known {
		h.PerMinute = l.requests.limit * l.factor * 60
	}
	if lim := l.requests.lim; lim != nil {
		h.Available = lim.TokensAt(now)
		h.Wait = until(lim, h.Available)
	}
	if lim := l.tokens.lim; lim != nil {
		h.Wait = max(h.Wait, until(lim, lim.TokensAt(now)))
	}
	h.Wait = ceilMillis(h.Wait)
	return h
}

// until is how long lim, holding tokens, takes to hold one.
func until(lim *rate.Limiter, tokens float64) time.Duration {
	if tokens >= 1 {
		return 0
	}
	return time.Duration((1 - tokens) / float64(lim.Limit()) * float64(time.Second))
}

// paces reports whether reserve may make a request wait now: false while
// the limiter knows no limit and has seen no rejections (the default's
// state for a provider that says nothing), when a caller may skip
// estimating the request's tokens for a reserve that grants a slot at once.
func (l *Limiter) paces() bool { return !l.idle.Load() }

// currentFactor returns the share of the limits in force now, for tests and
// telemetry: 1 when no 429 was seen recently.
func (l *Limiter) currentFactor() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.factor
}

// estimateTokens estimates the tokens a request counts against a
// tokens-per-minute limit: about four bytes per token of its text, plus
// the answer it may generate (providers count max_tokens up front).
func estimateTokens(req llm.Request) int {
	n := len(req.System)
	for _, m := range req.Messages {
		n += len(m.Content)
	}
	return n/4 + 1 + req.Params.MaxTokens
}

// ceilMillis rounds d up to the millisecond, so that float arithmetic
// never sends a request a hair before the provider has its token.
func ceilMillis(d time.Duration) time.Duration {
	if r := d % time.Millisecond; r != 0 {
		d += time.Millisecond - r
	}
	return d
}
