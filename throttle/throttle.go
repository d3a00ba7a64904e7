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
// The zero Config is off.
package throttle

import (
	"errors"
	"github.com/backstop-llm/backstop/internal/problems"
	"math"
	"sync"
	"time"

	"github.com/backstop-llm/backstop/llm"
	"golang.org/x/time/rate"
)

// Defaults of Config's zero fields, once throttling is on.
const (
	DefaultMaxWait  = 5 * time.Second
	DefaultBackoff  = 0.7
	DefaultRecovery = time.Minute
	// MinFactor is the lowest share of the limit a run of 429s leaves.
	MinFactor = 0.05
	// MaxPerMinute bounds RequestsPerMinute and TokensPerMinute: a
	// second's worth of either is a bucket's burst, an integer, which a
	// larger limit would overflow (leaving a bucket that grants nothing).
	// No provider's tier comes near it.
	MaxPerMinute = 1e12
)

var (
	// ErrThrottled is the reason a target or a retry is passed over: its
	// next slot is further away than MaxWait or the deadline.
	ErrThrottled = errors.New("self-throttled: the target's next slot is too far away")
	// ErrInvalidConfig is matched by every error Config.Validate and New
	// return. It is the same value as chain.ErrInvalidConfig and every
	// other package's invalid-configuration sentinel, so any of them
	// matches any configuration error; messages begin "throttle: invalid
	// configuration".
	ErrInvalidConfig = problems.ErrInvalidConfig
	// ErrInvalidSettings is ErrInvalidConfig.
	//
	// Deprecated: use ErrInvalidConfig. ErrInvalidSettings is the name
	// earlier versions use.
	ErrInvalidSettings = ErrInvalidConfig

	// errHead begins every configuration problem of the package.
	errHead = problems.Head("throttle: invalid configuration")
)

// Config configures a target's self-throttling. The zero value is off;
// setting RequestsPerMinute, TokensPerMinute or Learn turns it on.
type Config struct {
	// RequestsPerMinute and TokensPerMinute are the provider's limits for
	// this target, if you know them (your tier's RPM and TPM). 0 means
	// unknown: with Learn, taken from the provider's headers.
	RequestsPerMinute, TokensPerMinute float64
	// Learn takes unknown limits from the provider's rate-limit headers
	// and turns throttling on even with no limit configured.
	Learn bool
	// Burst is how many requests may go at once. 0 means one second's
	// worth of the request limit, at least 1: providers may enforce a
	// per-minute limit over shorter intervals.
	Burst int
	// MaxWait is the longest a request waits for its slot; a longer wait
	// moves the call to the next target. 0 means DefaultMaxWait (5s).
	MaxWait time.Duration
	// Backoff is the share of its rate a limiter keeps after a 429. 0
	// means DefaultBackoff (0.7, as the AWS SDK's adaptive mode).
	Backoff float64
	// Recovery is how long the rate takes to climb back from its lowest to
	// the limit after 429s stop. 0 means DefaultRecovery (1m).
	Recovery time.Duration
}

// Settings is Config.
//
// Deprecated: use Config. Settings is the name DESIGN.md and earlier
// versions use; both name the same type.
type Settings = Config

// On reports whether s turns throttling on.
func (s Config) On() bool { return s.RequestsPerMinute > 0 || s.TokensPerMinute > 0 || s.Learn }

// WithDefaults returns s with every zero field set to its default.
func (s Config) WithDefaults() Config {
	if s.MaxWait == 0 {
		s.MaxWait = DefaultMaxWait
	}
	if s.Backoff == 0 {
		s.Backoff = DefaultBackoff
	}
	if s.Recovery == 0 {
		s.Recovery = DefaultRecovery
	}
	return s
}

// Validate reports every problem with s at once.
func (s Config) Validate() error {
	found := problems.New(errHead)
	bad := found.Addf
	for _, f := range []struct {
		name string
		v    float64
	}{{"RequestsPerMinute", s.RequestsPerMinute}, {"TokensPerMinute", s.TokensPerMinute}} {
		if f.v < 0 || math.IsNaN(f.v) || f.v > MaxPerMinute {
			bad("%s is %v; use your tier's limit (at most %g), or 0 for unknown", f.name, f.v, float64(MaxPerMinute))
		}
	}
	if s.Burst < 0 {
		bad("Burst is %d; use 0 for one second's worth", s.Burst)
	}
	if s.MaxWait < 0 || s.Recovery < 0 {
		bad("MaxWait (%v) and Recovery (%v) must not be negative (0 means the default)", s.MaxWait, s.Recovery)
	}
	if math.IsNaN(s.Backoff) || s.Backoff < 0 || s.Backoff >= 1 {
		bad("Backoff is %v; use a share in (0, 1), or 0 for %v", s.Backoff, DefaultBackoff)
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
}

// congestion is how close together 429s count as one event: a burst of
// them, answered to requests sent at one moment, cuts the rate once.
const congestion = time.Second

// bucket is one limit: requests or tokens per second.
type bucket struct {
	lim   *rate.Limiter // nil while the limit is unknown
	limit float64       // per second, at factor 1
}

// New returns a limiter for s, or nil when s is off. Errors match
// ErrInvalidConfig.
func New(s Config) (*Limiter, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if !s.On() {
		return nil, nil
	}
	l := &Limiter{s: s.WithDefaults(), factor: 1}
	now := time.Now()
	if s.RequestsPerMinute > 0 {
		l.requests.set(now, s.RequestsPerMinute/60, l.burst(s.RequestsPerMinute/60))
	}
	if s.RequestsPerMinute == 0 && s.Learn {
		// Until the first headers say the limit, pace at one request a
		// second rather than send everything at once.
		l.requests.set(now, 1, 1)
		l.requests.limit = 1
	}
	if s.TokensPerMinute > 0 {
		// One request may need many tokens: allow a second's worth, and
		// never less than the largest request seen (see Reserve).
		l.tokens.set(now, s.TokensPerMinute/60, int(math.Max(1, s.TokensPerMinute/60)))
	}
	return l, nil
}

func (l *Limiter) burst(perSecond float64) int {
	if l.s.Burst > 0 {
		return l.s.Burst
	}
	return int(math.Max(1, perSecond))
}

func (b *bucket) set(now time.Time, perSecond float64, burst int) {
	b.limit = perSecond
	b.lim = rate.NewLimiter(rate.Limit(perSecond), burst)
	b.lim.AllowN(now, 0) // start the clock now
}

// Reservation is a slot a limiter granted. Cancel it if the request is
// not sent after all.
type Reservation struct {
	l    *Limiter
	r, t *rate.Reservation
}

// Cancel gives the slot back.
func (r Reservation) Cancel(now time.Time) {
	if r.l == nil {
		return
	}
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	r.cancel(now)
}

func (r Reservation) cancel(now time.Time) {
	if r.r != nil {
		r.r.CancelAt(now)
	}
	if r.t != nil {
		r.t.CancelAt(now)
	}
}

// Reserve takes a slot for one request of about tokens tokens and returns
// how long to wait before sending it, rounded up to the millisecond (so
// that float arithmetic never sends a request a hair before the provider
// has its token). A slot further away than limit is not taken: Reserve
// returns ok false and leaves the limiter as it was (a slot taken and given
// back later could not always be restored exactly, and leaked slots would
// stall the target).
func (l *Limiter) Reserve(now time.Time, tokens int, limit time.Duration) (wait time.Duration, res Reservation, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recover(now)
	res.l = l
	if l.requests.lim != nil {
		res.r = l.requests.lim.ReserveN(now, 1)
		wait = res.r.DelayFrom(now)
	}
	if l.tokens.lim != nil && tokens > 0 {
		if tokens > l.tokens.lim.Burst() {
			l.tokens.lim.SetBurstAt(now, tokens)
		}
		res.t = l.tokens.lim.ReserveN(now, tokens)
		wait = max(wait, res.t.DelayFrom(now))
	}
	if r := wait % time.Millisecond; r != 0 {
		wait += time.Millisecond - r
	}
	if wait > limit {
		res.cancel(now) // the latest reservations: restored exactly
		return wait, Reservation{}, false
	}
	return wait, res, true
}

// Observe adapts the limiter to a response: rl is what the provider
// announced (from a success or a failure), throttled whether it answered
// 429.
func (l *Limiter) Observe(now time.Time, rl llm.RateLimit, throttled bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recover(now)
	l.learn(now, &l.requests, rl.Requests, l.s.RequestsPerMinute)
	tokens := rl.Tokens
	if !tokens.Reported() {
		tokens = rl.InputTokens
	}
	l.learn(now, &l.tokens, tokens, l.s.TokensPerMinute)
	if throttled {
		if now.Sub(l.cut) >= congestion || l.cut.IsZero() {
			l.factor = math.Max(MinFactor, l.factor*l.s.Backoff)
			l.updated, l.cut = now, now
			l.apply(now)
		}
		drain(now, l.requests.lim, 0)
		drain(now, l.tokens.lim, 0)
	}
}

// learn takes a limit that was not configured from the headers, and never
// lets the limiter hold more than the provider says remains.
func (l *Limiter) learn(now time.Time, b *bucket, a llm.Allowance, configured float64) {
	if !a.Reported() {
		return
	}
	if configured == 0 && l.s.Learn && a.Limit > 0 && b.limit != float64(a.Limit)/60 {
		perSecond := float64(a.Limit) / 60
		if b.lim == nil {
			b.set(now, perSecond*l.factor, l.burst(perSecond))
		} else {
			b.lim.SetLimitAt(now, rate.Limit(perSecond*l.factor))
			b.lim.SetBurstAt(now, l.burst(perSecond))
		}
		b.limit = perSecond
	}
	if a.Limit > 0 || a.Remaining > 0 {
		drain(now, b.lim, float64(a.Remaining))
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
	l.factor = math.Min(1, l.factor+float64(d)/float64(l.s.Recovery)*(1-MinFactor))
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

// MaxWait is the longest this limiter lets a request wait.
func (l *Limiter) MaxWait() time.Duration { return l.s.MaxWait }

// Factor returns the share of the limits in force now, for tests and
// telemetry: 1 when no 429 was seen recently.
func (l *Limiter) Factor() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.factor
}

// EstimateTokens estimates the tokens a request counts against a
// tokens-per-minute limit: about four bytes per token of its text, plus
// the answer it may generate (providers count max_tokens up front).
func EstimateTokens(req llm.Request) int {
	n := len(req.System)
	for _, m := range req.Messages {
		n += len(m.Content)
	}
	return n/4 + 1 + req.Params.MaxTokens
}
