package breaker

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backstop-llm/backstop/cost"
	"github.com/backstop-llm/backstop/internal/problems"
	"github.com/backstop-llm/backstop/internal/window"
	"github.com/backstop-llm/backstop/retry"
	"github.com/sony/gobreaker/v2"
)

// Defaults of a zero Config.
const (
	defaultConsecutiveFailures = 5
	defaultFailureRatio        = 0.5
	defaultMinRequests         = 20
	defaultWindow              = 10 * time.Second
	defaultBuckets             = 10
	defaultFirstOpenFor        = 5 * time.Second
	defaultOpenFor             = 5 * time.Second
	defaultProbes              = 1
	defaultMaxGate             = 15 * time.Minute

	// jitterShare sets the random lengthening of the openings of a breaker
	// that a Shared tracks: each opening lasts up to a quarter (jitterShare) longer
	// (up to 1.25s on the default 5s), drawn afresh at each. Replicas whose
	// breakers opened together (a total outage trips them all within one
	// Refresh) would otherwise publish openings that end within
	// Shared.slackBound of each other and each probe the target; drawn apart,
	// the ones whose opening ends sooner defer their probe to the one whose
	// ends last (see Shared.Sync). The lengthening keeps a replica's probes
	// at most 12 a minute on the default interval. A breaker that is not
	// shared keeps its exact interval.
	jitterShare = 4

	// maxBuckets is the most buckets Window / BucketPeriod may make. The
	// window keeps one bucket each (24 bytes) and sums all of them on every
	// failure, so the count bounds both the memory of a target's breaker
	// and the work of each failure: 1,000 is 24 KB and a scan of about a
	// microsecond, where 30s of 1ns buckets would ask for 720 GB.
	maxBuckets = 1000
)

var (
	// ErrOpen is the reason a target is skipped while its breaker is open,
	// or half-open with its probe already in flight.
	ErrOpen = errors.New("circuit breaker open: the target failed repeatedly and is skipped until a probe succeeds")
	// ErrOpenElsewhere is the reason a target is skipped while another
	// replica holds its breaker open (see Shared.Sync). It
	// matches ErrOpen too.
	ErrOpenElsewhere = fmt.Errorf("%w (opened by another replica)", ErrOpen)

	// errNotOpen is what probe returns when there is nothing to probe:
	// the breaker is closed (or disabled), and attempts go through. It does
	// not match ErrOpen. A breaker that another replica holds open (see
	// Shared.Sync) is closed here: that replica probes it.
	errNotOpen = errors.New("circuit breaker not open: nothing to probe, attempts go through")

	errProbing  = fmt.Errorf("%w (half-open: the probe is already in flight)", ErrOpen)
	errNotDue   = fmt.Errorf("%w (the probe is not due yet: see ProbeAt)", ErrOpen)
	errFailure  = errors.New("breaker: failure")
	errExcluded = errors.New("breaker: excluded")
)

// Config configures one target's breaker. The zero value means the
// documented defaults, field by field.
type Config struct {
	// Disabled switches the breaker off: every attempt goes through and
	// nothing is counted. The Retry-After gate still works.
	Disabled bool
	// ConsecutiveFailures opens the breaker after this many failures in a
	// row while the window holds fewer than MinRequests attempts (thin
	// traffic); with more, the ratio decides alone, since under
	// concurrency fast failures finish in a row ahead of slow successes
	// (50 callers on a primary failing 30% in 10ms served 1.6% of calls
	// with the consecutive rule, 71.4% without). 0 means 5.
	ConsecutiveFailures uint32
	// FailureRatio and MinRequests open the breaker when at least
	// FailureRatio of the attempts in the window failed, once the window
	// holds at least MinRequests attempts. Attempts count when they start
	// and failures when they end, so attempts in flight are in the
	// denominator and fast failures cannot outrun slow successes. 0 means
	// 0.5 and 20.
	FailureRatio float64
	MinRequests  uint32
	// Window is the rolling window the ratio is computed over, counted in
	// buckets of BucketPeriod (gobreaker's rolling window). 0 means
	// 10s and Window/10 (1s).
	Window, BucketPeriod time.Duration
	// FirstOpenFor and OpenFor set how long the breaker stays open before
	// it lets a probe through. The first opening after the breaker was
	// closed lasts FirstOpenFor; each probe that fails opens it again for
	// twice as long as the last time, up to OpenFor; a probe that succeeds
	// closes it, and the next opening lasts FirstOpenFor again. A short
	// outage thus costs the target a few seconds of traffic, and a long
	// one sees fewer probes than a fixed interval would send: with
	// FirstOpenFor 5s and OpenFor 60s, a target down for 5 minutes is
	// probed at 5, 15, 35, 75, 135, 195 and 255s (7 probes).
	//
	// The defaults are a fixed 5s: a target back after an outage of any
	// length is tried again within 5s (the doubling to 60s left one back
	// after a 60s outage untried for 20s and more), at 12 probes a minute
	// at most.
	//
	// 0 means 5s for OpenFor, and for FirstOpenFor
	// 5s, or OpenFor if that is shorter (so a Config
	// that sets only an OpenFor under 5s keeps a fixed interval).
	// FirstOpenFor longer than OpenFor is an error; set FirstOpenFor to
	// OpenFor for a fixed interval, the behaviour of earlier versions.
	// Neither may be negative.
	FirstOpenFor, OpenFor time.Duration
	// Probes is how many calls a half-open breaker lets through, and how
	// many consecutive successes close it. 0 means 1.
	Probes uint32
	// ActiveProbe keeps users' attempts off a target that is not known to
	// have recovered: while the breaker is open or half-open, Allow
	// refuses every attempt with ErrOpen, even once the open interval has
	// passed, and only the probes of Breaker.StartProbing take the
	// half-open probe slot (a small request of the caller's choosing, sent
	// when ProbeAt says). A probe that succeeds closes the breaker and
	// attempts go through again; one that fails opens it again, for twice
	// as long. Something must send those probes: with ActiveProbe and no
	// StartProbing, a breaker that opens never closes. Without
	// ActiveProbe, the first attempt after the open interval is the probe
	// (and StartProbing's may take the slot too).
	ActiveProbe bool
	// MaxGate is the longest a Retry-After closes the target's gate; a
	// longer request (or a garbage header) closes it this long, after which
	// one call rediscovers. 0 means 15m.
	MaxGate time.Duration
	// MaxFailedSpend opens the breaker on money: once the failures it
	// counts (those the decision table counts against the target; the
	// same verdicts as the failure ratio's) have cost this much in the
	// last Window (policy.Outcome.Cost.Spent: a stream cut after output,
	// a prompt the provider read before it failed), the failure that
	// reaches it opens the breaker as a spend cap does (retry.Trip): the
	// same opening, probe and state changes as a failure-count trip.
	// Successes, answers that failed their schema, refusals and
	// excluded attempts do not count. The sum starts again when the
	// breaker closes. 0 (the default) switches it off; negative is an
	// error.
	MaxFailedSpend cost.Money
	// OnStateChange, if set, is called on every transition with the
	// breaker's name, in order; a move to half-open is told once the open
	// interval has passed (when State would first say so). It runs under
	// the breaker's lock: keep it short and never call back into the
	// breaker.
	OnStateChange func(name string, from, to State)
}

// errHead begins every configuration problem of the package.
var errHead = problems.Head("breaker: invalid configuration")

// WithDefaults returns s with every zero field set to its default.
func (s Config) WithDefaults() Config {
	s.ConsecutiveFailures = cmp.Or(s.ConsecutiveFailures, defaultConsecutiveFailures)
	s.FailureRatio = cmp.Or(s.FailureRatio, defaultFailureRatio)
	s.MinRequests = cmp.Or(s.MinRequests, defaultMinRequests)
	s.Window = cmp.Or(s.Window, defaultWindow)
	s.BucketPeriod = cmp.Or(s.BucketPeriod, s.Window/defaultBuckets)
	s.OpenFor = cmp.Or(s.OpenFor, defaultOpenFor)
	s.FirstOpenFor = cmp.Or(s.FirstOpenFor, min(defaultFirstOpenFor, s.OpenFor))
	s.Probes = cmp.Or(s.Probes, defaultProbes)
	s.MaxGate = cmp.Or(s.MaxGate, defaultMaxGate)
	return s
}

// Validate reports every problem with s at once.
func (s Config) Validate() error {
	found := problems.New(errHead)
	bad := found.Addf
	if math.IsNaN(s.FailureRatio) || s.FailureRatio < 0 || s.FailureRatio > 1 {
		bad("FailureRatio is %v; use a value in (0, 1], or 0 for %v", s.FailureRatio, defaultFailureRatio)
	}
	problems.NotNegative(found, "Window", s.Window, "the default")
	problems.NotNegative(found, "BucketPeriod", s.BucketPeriod, "the default")
	problems.NotNegative(found, "FirstOpenFor", s.FirstOpenFor, "the default")
	problems.NotNegative(found, "OpenFor", s.OpenFor, "the default")
	problems.NotNegative(found, "MaxGate", s.MaxGate, "the default")
	if s.MaxFailedSpend < 0 {
		bad("MaxFailedSpend is %v; use a positive amount (cost.Dollars(5)), or 0 for no spend breaker", s.MaxFailedSpend)
	}
	d := s.WithDefaults()
	if s.FirstOpenFor >= 0 && s.OpenFor >= 0 && d.FirstOpenFor > d.OpenFor {
		openFor := d.OpenFor.String()
		if s.OpenFor == 0 {
			openFor += ", the default"
		}
		bad("FirstOpenFor (%v) is longer than OpenFor (%s), the longest an opening lasts; lower FirstOpenFor or raise OpenFor (set FirstOpenFor to OpenFor for a fixed interval)",
			d.FirstOpenFor, openFor)
	}
	if s.Window >= 0 && s.BucketPeriod >= 0 {
		switch {
		case d.BucketPeriod > d.Window:
			bad("BucketPeriod (%v) is longer than Window (%v); use a fraction of the window", d.BucketPeriod, d.Window)
		case d.Window/max(d.BucketPeriod, 1) > maxBuckets: // a period under 1ns is taken as 1ns
			bad("Window (%v) / BucketPeriod (%v) makes %d buckets, more than the %d allowed; use a BucketPeriod of at least %v, or 0 for Window/%d",
				d.Window, d.BucketPeriod, d.Window/max(d.BucketPeriod, 1), maxBuckets, (d.Window+maxBuckets-1)/maxBuckets, defaultBuckets)
		}
	}
	return found.Err()
}

// State is a breaker's state.
type State int8

// The states of a breaker.
const (
	Closed State = iota
	HalfOpen
	Open
)

// String returns "closed", "half-open" or "open".
func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case HalfOpen:
		return "half-open"
	case Open:
		return "open"
	}
	return "unknown"
}

func fromGobreaker(s gobreaker.State) State {
	switch s {
	case gobreaker.StateHalfOpen:
		return HalfOpen
	case gobreaker.StateOpen:
		return Open
	}
	return Closed
}

// Breaker is one target's circuit breaker. It is safe for concurrent use.
//
// gobreaker runs the state machine: open, half-open, the probes, the
// consecutive-failure count. The failure ratio is counted here, over a
// rolling window, because of the healthy path: while the breaker is closed
// and gobreaker has seen no failure since its last success, an attempt
// neither asks gobreaker nor reports to it (which would take its lock and
// read the clock twice); it only counts in the window. The first failure
// makes the breaker "dirty": from then on every attempt goes through
// gobreaker until a success has reset its consecutive-failure count. A
// failure of an attempt that started on the healthy path is reported to
// gobreaker late, through a ticket taken when it fails.
//
// The open interval grows here too. gobreaker's Timeout is FirstOpenFor;
// each opening's own interval (FirstOpenFor, doubled after each failed
// probe up to OpenFor) is counted from its OnStateChange, and until it has
// passed the breaker holds itself open: Allow, probe and State answer
// without asking gobreaker. gobreaker may still move to half-open earlier
// (its Timeout has passed, and the report of an attempt from before the
// opening reaches it): the breaker then stays open all the same, and tells
// OnStateChange of the move once the interval has passed.
type Breaker struct {
	cb       *gobreaker.TwoStepCircuitBreaker[struct{}]
	settings Config
	window   *window.Window // kind 0: attempts counted, kind 1: failures
	// spent sums what the failures cost (kind 0, nanodollars) over the
	// Window, for MaxFailedSpend; nil when it is off.
	spent *window.Window

	// closed mirrors gobreaker's state, set by OnStateChange under its lock.
	closed atomic.Bool
	// changes counts state changes, so that a failure of a healthy-path
	// attempt that started before one is not reported to the new state.
	changes atomic.Uint64
	// fails counts failures reported to gobreaker; clean is the value it
	// had when a success last left gobreaker with no consecutive failure.
	// The healthy path is taken while they are equal.
	fails, clean atomic.Uint64

	// elsewhere is another replica's publication that the breaker is open
	// while it holds the breaker open (see openElsewhere); nil when
	// none does. seen is the last publication applied, kept after it
	// ended, so that reading it again does not apply it again; nil when
	// the last read found none.
	elsewhere, seen atomic.Pointer[publication]
	// change is the last state change not yet taken by takeChange,
	// as State+1; 0 when there is none.
	change atomic.Int32

	// jitter is set by Shared.Track: each opening then lasts a random
	// share of up to jitterShare longer (see onStateChange).
	jitter atomic.Bool
	// prober sends the active probes (StartProbing): each opening
	// schedules one. nil without StartProbing.
	prober atomic.Pointer[prober]
	// shared is the Shared that tracks the breaker (set by Track, before
	// any call): Settle publishes its changes through it, and a call
	// waiting for its probe keeps its poller reading. nil when not shared.
	shared *Shared

	// trips counts the Trip reports under way. readyToTrip answers true
	// while it is positive: see trip.
	trips atomic.Int32

	// base is the origin of until, read from time.Now (so with a monotonic
	// reading) when the breaker was made.
	base time.Time
	// interval is the length of the current opening, or of the next one
	// while the breaker is closed. until is when the current opening ends,
	// as time since base: the breaker holds itself open until then. Both
	// are written under tellMu (by onStateChange), until before closed.
	interval, until atomic.Int64
	// extra is the current opening's random lengthening (see
	// jitterShare): it lasts interval + extra. Written with interval.
	extra atomic.Int64
	// ownEnd is when this replica's publication of the current opening
	// ends, as time since base: the opening's end plus its interval,
	// later if Shared published it late (see published).
	ownEnd atomic.Int64
	// deferred is set while gobreaker is half-open but the opening's
	// interval had not passed when it moved: the move is told to
	// OnStateChange (see tellDeferred) once it has.
	deferred atomic.Bool
	// tellMu orders what OnStateChange is told: onStateChange holds it
	// (under gobreaker's lock), and so does tellDeferred (without it).
	tellMu sync.Mutex

	// For Wait: changed is closed (and replaced) at every state change;
	// opens counts the openings; recovered is when the breaker last closed
	// (as time since base), released how many waiters the ramp has let go
	// since.
	changed   atomic.Pointer[chan struct{}]
	opens     atomic.Uint64
	recovered atomic.Int64
	released  atomic.Uint64
}

// New returns a breaker named name (the target's name, passed to
// OnStateChange) configured by s, or s's problems, each wrapping
// llm.ErrInvalidConfig.
func New(name string, s Config) (*Breaker, error) { return newBreaker(name, s, nil) }

// newBreaker is New, with adjust (when not nil) given the settings of the
// gobreaker before it is made: tests use it to call the callbacks as
// gobreaker's documentation allows but its code does not today.
func newBreaker(name string, s Config, adjust func(*gobreaker.Settings)) (*Breaker, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	b := &Breaker{}
	if s.Disabled {
		return b, nil
	}
	s = s.WithDefaults()
	b.settings = s
	b.window = window.New(s.Window, s.BucketPeriod)
	if s.MaxFailedSpend > 0 {
		b.spent = window.New(s.Window, s.BucketPeriod)
	}
	b.closed.Store(true)
	b.base = time.Now()
	b.interval.Store(int64(s.FirstOpenFor))
	ch := make(chan struct{})
	b.changed.Store(&ch)
	// gobreaker gets no Interval: its rolling counts would drop the
	// failure of an attempt longer than the window and let consecutive
	// failures decay with time. Consecutive failures reset only on a
	// success; the ratio is counted in b.window. Its Timeout is the
	// shortest opening: longer ones are held open here (see Breaker).
	st := gobreaker.Settings{
		Name:          name,
		MaxRequests:   s.Probes,
		Timeout:       s.FirstOpenFor,
		IsExcluded:    func(err error) bool { return err == errExcluded },
		IsSuccessful:  func(err error) bool { return err == nil },
		ReadyToTrip:   b.readyToTrip,
		OnStateChange: b.onStateChange,
	}
	if adjust != nil {
		adjust(&st)
	}
	b.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](st)
	return b, nil
}

// onStateChange is gobreaker's OnStateChange, which it calls on every
// transition, under its lock. An opening's interval starts here: the first
// after a close lasts FirstOpenFor, one after a failed probe twice the
// last, up to OpenFor. A move to half-open before the opening's interval
// has passed is not told yet (see tellDeferred); one told later precedes
// whatever follows it.
func (b *Breaker) onStateChange(name string, from, to gobreaker.State) {
	b.tellMu.Lock()
	defer b.tellMu.Unlock()
	b.changes.Add(1)
	defer b.wake()
	switch to {
	case gobreaker.StateOpen:
		b.opens.Add(1)
		d := b.settings.FirstOpenFor
		if from == gobreaker.StateHalfOpen {
			last := time.Duration(b.interval.Load())
			d = b.settings.OpenFor
			if last <= d/2 {
				d = 2 * last
			}
		}
		b.interval.Store(int64(d))
		var extra time.Duration
		if b.jitter.Load() && d > 0 {
			// Shared: replicas whose breakers opened together would
			// otherwise end their openings within slackBound of each other and
			// probe in lockstep for ever; each opening draws its own. The
			// next opening doubles d, not d + extra.
			extra = time.Duration(rand.Int64N(int64(d/jitterShare) + 1))
		}
		b.extra.Store(int64(extra))
		d = min(d+extra, math.MaxInt64/2)
		since := int64(time.Since(b.base))
		b.until.Store(since + min(int64(d), math.MaxInt64-since))
		b.ownEnd.Store(b.until.Load() + min(int64(d), math.MaxInt64-b.until.Load()))
	case gobreaker.StateHalfOpen:
		if b.held() {
			b.deferred.Store(true)
			return // still open: told once the interval has passed
		}
	case gobreaker.StateClosed:
		b.recovered.Store(int64(time.Since(b.base)))
		b.released.Store(0)
		b.interval.Store(int64(b.settings.FirstOpenFor))
		b.extra.Store(0)
		b.window.Reset() // judge the recovered target on what follows
		if b.spent != nil {
			b.spent.Reset()
		}
	}
	if b.deferred.Load() {
		// gobreaker was half-open before the interval had passed, and
		// moves on now: tell the move to half-open first.
		b.deferred.Store(false)
		b.tell(name, gobreaker.StateOpen, gobreaker.StateHalfOpen)
	}
	b.closed.Store(to == gobreaker.StateClosed)
	b.tell(name, from, to)
	if p := b.prober.Load(); p != nil && to == gobreaker.StateOpen {
		p.opened()
	}
}

// wake wakes the callers of Wait: the breaker changed state.
func (b *Breaker) wake() {
	ch := make(chan struct{})
	close(*b.changed.Swap(&ch))
}

// tell records a state change for takeChange and tells OnStateChange,
// under tellMu.
func (b *Breaker) tell(name string, from, to gobreaker.State) {
	b.change.Store(int32(fromGobreaker(to)) + 1)
	if f := b.settings.OnStateChange; f != nil {
		f(name, fromGobreaker(from), fromGobreaker(to))
	}
}

// tellDeferred tells OnStateChange of gobreaker's move to half-open that
// came before the opening's interval had passed, once it has, and before
// gobreaker is asked for the probe (whose outcome is the next change).
// It costs one atomic load when there is none.
func (b *Breaker) tellDeferred() {
	if !b.deferred.Load() {
		return
	}
	b.tellMu.Lock()
	defer b.tellMu.Unlock()
	if b.deferred.Load() && !b.held() {
		b.deferred.Store(false)
		b.tell(b.cb.Name(), gobreaker.StateOpen, gobreaker.StateHalfOpen)
	}
}

// held reports whether the current opening's interval has not passed yet:
// while the breaker is not closed, it holds itself open until then. It
// reads the clock.
func (b *Breaker) held() bool {
	return int64(time.Since(b.base)) <= b.until.Load()
}

// readyToTrip is gobreaker's ReadyToTrip, which it calls whenever a
// request fails while the breaker is closed: true while a Trip is being
// reported; otherwise the window's ratio decides once the window holds
// MinRequests attempts, and the consecutive failures while it holds fewer.
//
// Attempts are counted in the window when they start (Allow), failures
// when they end: the ratio is the failures over every attempt sent, those
// still in flight included. Counted when they end, as earlier versions
// did, fast failures finish first under concurrency, and the first
// twenty of fifty concurrent attempts to a target that fails 30% of
// requests in 10ms and answers the rest in 500ms are mostly failures;
// counted when they start, they are 30% of what was sent. The consecutive
// rule is fooled the same way (five failures finishing before the next
// success), so it applies only while traffic is too thin for the ratio.
func (b *Breaker) readyToTrip(c gobreaker.Counts) bool {
	if b.trips.Load() > 0 {
		return true
	}
	attempts, failures := b.window.Sums()
	if attempts >= int64(b.settings.MinRequests) {
		return float64(failures) >= b.settings.FailureRatio*float64(attempts)
	}
	return c.ConsecutiveFailures >= b.settings.ConsecutiveFailures
}

// Allow asks to send one attempt. It returns a ticket on which to report
// the attempt's outcome, or an error matching ErrOpen when the attempt must
// not be sent (ErrOpenElsewhere when another replica holds it open). Once
// the open interval has passed, the first attempt Allow lets through is the
// half-open probe; with Config.ActiveProbe none is: only StartProbing's
// probes take it.
func (b *Breaker) allowNow() (ticket, error) {
	if b.cb != nil && b.elsewhere.Load() == nil && b.quiet() {
		b.window.Add(0)                                     // counted as it starts: see readyToTrip
		return ticket{b: b, changes: b.changes.Load()}, nil // the healthy path
	}
	return b.allowWatched()
}

// AllowAt is Allow for callers that have already read the clock: now is
// when the attempt starts, from time.Now or derived from it with Add (it
// must carry a monotonic reading). It spares the healthy path a clock
// read, which costs more than the rest of it on some machines.
func (b *Breaker) allowAt(now time.Time) (ticket, error) {
	if b.cb != nil && b.elsewhere.Load() == nil && b.quiet() {
		b.window.AddAt(0, now)
		return ticket{b: b, changes: b.changes.Load()}, nil
	}
	return b.allowWatched()
}

// quiet reports whether the breaker is closed with no failure left to
// tell gobreaker: a ticket then needs nothing of gobreaker.
func (b *Breaker) quiet() bool { return b.closed.Load() && b.fails.Load() == b.clean.Load() }

// allowWatched is Allow off the healthy path: a breaker that is off, open
// here or elsewhere, or has failures to tell gobreaker of.
func (b *Breaker) allowWatched() (ticket, error) {
	if b.cb == nil {
		return ticket{}, nil
	}
	if b.elsewhere.Load() != nil && b.closed.Load() && b.heldElsewhere() {
		return ticket{}, ErrOpenElsewhere
	}
	if b.quiet() {
		b.window.Add(0)
		return ticket{b: b, changes: b.changes.Load()}, nil
	}
	if !b.closed.Load() {
		if b.settings.ActiveProbe || b.held() {
			return ticket{}, ErrOpen
		}
		if b.elsewhere.Load() != nil && b.deferring() {
			return ticket{}, ErrOpenElsewhere
		}
		b.tellDeferred()
	}
	return b.allow(b.settings.ActiveProbe)
}

// allow asks gobreaker for a ticket. closedOnly refuses (with ErrOpen) a
// ticket granted while the breaker is not closed: the breaker opened, and
// its interval passed, since the caller saw it closed.
func (b *Breaker) allow(closedOnly bool) (ticket, error) {
	done, err := b.cb.Allow()
	switch err {
	case nil:
		if closedOnly && !b.closed.Load() {
			done(errExcluded) // frees the probe slot, if it was one
			return ticket{}, ErrOpen
		}
		b.window.Add(0) // counted as it starts: see readyToTrip
		// changes is read after Allow, which may itself have moved an open
		// breaker to half-open: it is the state this ticket counts in.
		return ticket{b: b, done: done, changes: b.changes.Load()}, nil
	case gobreaker.ErrTooManyRequests:
		return ticket{}, errProbing
	default:
		return ticket{}, ErrOpen
	}
}

// probe takes the half-open probe slot for an active probe
// (StartProbing): a small request of the caller's choosing that finds out
// whether the target has recovered without risking a user's call (see
// Config.ActiveProbe). Report
// its outcome on the ticket like any attempt's: retry.NotFailure closes the
// breaker (once Probes probes in a row have succeeded), retry.Failure or
// retry.Trip opens it again for twice as long (up to OpenFor),
// retry.Excluded (the probe was canceled) frees the slot for another. A
// ticket that is never reported keeps the slot: report every one.
//
// probe returns an error matching ErrOpen while the open interval has not
// passed (see ProbeAt) and while a probe is already in flight, and
// errNotOpen when the breaker is closed or disabled: there is nothing to
// probe. It reads the clock. It works with or without ActiveProbe; without
// it, a user's attempt may take the slot first.
func (b *Breaker) probe() (ticket, error) {
	if b.cb == nil || b.closed.Load() {
		return ticket{}, errNotOpen
	}
	if b.held() || b.elsewhere.Load() != nil && b.deferring() {
		return ticket{}, errNotDue
	}
	b.tellDeferred()
	t, err := b.allow(false)
	if err == nil && b.closed.Load() {
		// Granted as closed: another probe closed the breaker meanwhile.
		t.done(errExcluded)
		return ticket{}, errNotOpen
	}
	return t, err
}

// ProbeAt returns when the next probe is due: the first instant after the
// current open interval (the interval's own last instant is still open),
// a time already passed while the breaker is half-open (a probe is due, or
// in flight). It returns the zero time while the breaker is
// closed or disabled, including while another replica holds it open (that
// replica probes). A breaker that defers its probe to another replica
// (see Shared.Sync) keeps its own due time, passed: its probe waits until
// that replica's publication is withdrawn or ends. It reads no clock; its result carries a monotonic
// reading, so time.Until measures it correctly.
func (b *Breaker) probeAt() time.Time {
	if b.cb == nil || b.closed.Load() {
		return time.Time{}
	}
	return b.base.Add(time.Duration(b.until.Load()) + 1) // the interval's last instant is still open
}

// Closed reports, without a lock, whether the breaker was closed at its
// last state change and no other replica holds it open: false while it is
// open or half-open. It reads the clock only while another replica's
// publication holds it open. A disabled breaker is always closed.
func (b *Breaker) isClosed() bool { return b.refusalNow() == nil }

// State returns the breaker's state now: Open until the current open
// interval has passed (see ProbeAt), and while another replica holds it
// open; Closed when it is disabled.
func (b *Breaker) State() State {
	if b.cb == nil {
		return Closed
	}
	if !b.closed.Load() {
		if b.held() || b.elsewhere.Load() != nil && b.deferring() {
			return Open
		}
		b.tellDeferred()
	}
	s := fromGobreaker(b.cb.State())
	if s == Closed && b.elsewhere.Load() != nil && b.heldElsewhere() {
		return Open
	}
	return s
}

// publication is another replica's word that the breaker is open, as read
// when the breaker had made asOf state changes: read is the end the
// publisher asked for, as first estimated here; until is when this breaker
// stops holding for it (read, capped by its own 2 x OpenFor, the cap of its
// open interval, from when it first read it).
type publication struct {
	read, until time.Time
	asOf        uint64
	slack       time.Duration
}

// openElsewhere records, for Shared.Sync, that another replica published
// b open until until (this replica's estimate: when the read returned, from
// time.Now, plus the time the store says is left): while b is closed,
// Allow refuses every attempt with ErrOpenElsewhere (which matches
// ErrOpen), without a request. Once b is open or half-open itself, its own
// state decides, so that its probe is sent.
//
// What another replica published is capped by b's own limit: it holds b
// open until the earlier of until and twice b's OpenFor (the cap of b's
// open interval) after it first read the publication. A publisher asks for
// twice its current open interval (that interval, then the time its probe
// takes), which is at most twice its own OpenFor.
// The same publication read again does not extend it: a reading whose
// until is within slack (Shared.slackBound) of the last publication applied is
// that publication. A reading whose end differs by more is a new
// publication: it replaces the last, capped afresh.
//
// asOf is b.changes before the publication was read: if b has changed
// state since, the publication is older news than b's own and is ignored;
// so is it after any later change. A zero until means the read found none:
// it ends the last at once. A disabled breaker ignores it all.
func (b *Breaker) openElsewhere(until time.Time, asOf uint64, slack time.Duration) {
	if b.cb == nil {
		return
	}
	if until.IsZero() {
		if b.seen.Load() != nil {
			b.seen.Store(nil)
		}
		if p := b.elsewhere.Load(); p != nil {
			if b.closed.Load() && b.heldElsewhere() {
				// Withdrawn while it held this closed breaker: the
				// publisher's probe found the target healthy. Waiters are
				// released on the ramp from now, as after a local probe.
				b.recovered.Store(int64(time.Since(b.base)))
				b.released.Store(0)
			}
			b.elsewhere.Store(nil)
			b.wake()
		}
		return
	}
	if p := b.seen.Load(); p != nil && within(until, p.read, slack) {
		if p.asOf != asOf && !b.closed.Load() {
			// Read before, and this breaker has opened itself since: the
			// same publication, with the same end, now holds its opening
			// if it ends later than this breaker's own (see deferring).
			q := *p
			q.asOf = asOf
			b.seen.Store(&q)
			b.elsewhere.Store(&q)
		}
		return // read before: applied already, and perhaps over
	}
	p := &publication{read: until, until: until, asOf: asOf, slack: slack}
	now := time.Now()
	d := b.settings.OpenFor
	if limit := d + min(d, math.MaxInt64-d); until.Sub(now) > limit {
		p.until = now.Add(limit)
	}
	b.seen.Store(p)
	b.elsewhere.Store(p)
}

// heldElsewhere reports whether another replica's publication holds the
// breaker open now, and forgets it once it has ended or the breaker has
// changed state since it was read.
func (b *Breaker) heldElsewhere() bool {
	p := b.elsewhere.Load()
	if p == nil {
		return false
	}
	if p.asOf == b.changes.Load() && time.Now().Before(p.until) {
		return true
	}
	b.elsewhere.CompareAndSwap(p, nil)
	return false
}

// deferring reports whether the breaker, open itself, defers its probe to
// another replica: the publication read since it opened ends later than
// this breaker's own (its opening's end plus its interval, what Shared
// publishes for it) by more than the slackBound, and has not ended. That
// replica probes; this one holds its opening until the publication is
// withdrawn (the probe succeeded: Sync then reads none) or ends, so that
// replicas whose breakers opened on their own send one probe between
// them, not one each.
func (b *Breaker) deferring() bool {
	p := b.elsewhere.Load()
	if p == nil || p.asOf != b.changes.Load() || !time.Now().Before(p.until) {
		return false
	}
	own := b.base.Add(time.Duration(b.ownEnd.Load()))
	return p.read.Sub(own) > p.slack
}

// published records that Shared's publication of the breaker's opening,
// for d, was taken by the store now: a publication told late (the store
// was slow or down) ends later than the opening's own estimate, and this
// replica must not take its own publication for another's.
func (b *Breaker) published(d time.Duration) {
	since := int64(time.Since(b.base))
	end := since + min(int64(d), math.MaxInt64-since)
	for {
		cur := b.ownEnd.Load()
		if cur >= end || b.ownEnd.CompareAndSwap(cur, end) {
			return
		}
	}
}

// Refusal returns why Allow would refuse an attempt now, without taking a
// probe slot: ErrOpenElsewhere while another replica holds the breaker
// open, ErrOpen while it is open or half-open itself, nil while it is
// closed (or disabled). It reads no lock on the healthy path.
func (b *Breaker) refusalNow() error {
	switch {
	case b.cb == nil:
		return nil
	case !b.closed.Load():
		return ErrOpen
	case b.elsewhere.Load() != nil && b.heldElsewhere():
		return ErrOpenElsewhere
	}
	return nil
}

// takeChange returns b's last state change that has not been taken yet,
// at most once, for Shared.Publish to publish after the attempt that caused
// it (OnStateChange runs under gobreaker's lock, where no round trip
// belongs). It costs one atomic load when there is none; a disabled
// breaker has none.
func (b *Breaker) takeChange() (State, bool) {
	if b.cb == nil || b.change.Load() == 0 {
		return 0, false
	}
	c := b.change.Swap(0)
	if c == 0 {
		return 0, false
	}
	return State(c - 1), true
}

// OpenFor is the longest the breaker stays open before its probe: the cap
// its open interval grows to, Config.OpenFor after defaults (0 when it is
// disabled). OpenInterval is the current interval.
func (b *Breaker) maxOpenFor() time.Duration { return b.settings.OpenFor }

// OpenInterval is the length of the current opening: while the breaker is
// open, how long it stays open before its probe; while it is half-open,
// the opening the probe ends (a failed probe opens it for twice that, up
// to OpenFor); while it is closed, the length of the next opening,
// FirstOpenFor. A breaker that a Shared tracks lengthens each opening by
// a random share of up to a quarter (jitterShare), included here (the doubling
// ignores it). 0 when it is disabled.
func (b *Breaker) openInterval() time.Duration {
	if b.cb == nil {
		return 0
	}
	return time.Duration(b.interval.Load() + b.extra.Load())
}

// ticket is the permission to send one attempt. Report its outcome exactly
// once; a zero ticket (from a disabled breaker) ignores reports.
type ticket struct {
	b       *Breaker
	done    func(error) // nil on the healthy path
	changes uint64      // b.changes when it was issued
}

// Held reports whether the ticket holds a place in gobreaker (a counted
// request, or a half-open probe slot) that only Report releases. A ticket
// from the healthy path holds none: losing it loses nothing.
func (t ticket) Held() bool { return t.done != nil }

// Report records the attempt's outcome: retry.NotFailure for a success or
// a failure that is not the target's fault, retry.Failure, retry.Trip to
// open the breaker at once, retry.Excluded to count nothing.
func (t ticket) Report(v retry.BreakerVerdict) {
	if t.b != nil {
		t.ReportAt(v, time.Now())
	}
}

// ReportAt is Report for callers that have already read the clock: now is
// when the attempt ended, from time.Now or derived from it with Add (it
// must carry a monotonic reading).
func (t ticket) ReportAt(v retry.BreakerVerdict, now time.Time) {
	if v == retry.NotFailure && t.done == nil {
		return // the healthy path: counted when it started, nothing to tell gobreaker
	}
	t.reportWatched(v, now)
}

// reportWatched is ReportAt off the healthy path.
func (t ticket) reportWatched(v retry.BreakerVerdict, now time.Time) {
	b := t.b
	if b == nil {
		return
	}
	// A ticket issued before the breaker's last state change (not current)
	// is not reported to gobreaker, which ignores the outcome of a request
	// sent before its counts were cleared (as they are at every state
	// change): reporting it would change nothing but could move gobreaker
	// to half-open while the breaker holds itself open (see Breaker).
	switch v {
	case retry.Excluded:
		if t.done != nil && t.current() {
			t.done(errExcluded)
		}
	case retry.Failure, retry.Trip:
		b.window.AddAt(1, now)
		if !t.current() {
			// Stale: a breaker that opened needs no more evidence, and a
			// half-open one's probe slot is not this attempt's to take.
			return
		}
		done, changes := t.done, t.changes
		if done == nil {
			// The attempt started on the healthy path: report it now.
			d, aerr := b.cb.Allow()
			if aerr != nil {
				return
			}
			done, changes = d, b.changes.Load()
		}
		if v == retry.Trip {
			b.trip(done, changes)
		} else {
			done(errFailure)
		}
		b.fails.Add(1) // after done: see clear
	default:
		if t.done != nil {
			seq := b.fails.Load()
			if t.current() {
				t.done(nil)
			}
			b.clear(seq)
		}
	}
}

// current reports whether the breaker has made no state change since t
// was issued.
func (t ticket) current() bool { return t.b.changes.Load() == t.changes }

// trip reports a failure through done (a ticket issued when the breaker
// had made changes state changes) that opens the breaker at once: a spend
// cap. It leans only on what gobreaker documents: done registers the
// request's outcome; ReadyToTrip is called whenever a request fails while
// the breaker is closed, and a true answer opens it; Counts ignores the
// results of requests sent before a state change. trips is raised before
// done is called and lowered after it returns, so the ReadyToTrip call for
// this failure answers true whatever gobreaker calls before or after it,
// IsSuccessful included (which has no side effect). A concurrent failure
// whose ReadyToTrip runs meanwhile opens the breaker a moment earlier, for
// the spend cap all the same; a ticket from before a state change (its
// outcome ignored) opens nothing.
//
// If the breaker is still closed after done returned and has not changed
// state since the ticket was issued, gobreaker did not consult ReadyToTrip
// on this failure (which its documentation does not allow): trip then
// registers one more failure, while trips is still raised, so that the
// spend cap opens the breaker all the same.
func (b *Breaker) trip(done func(error), changes uint64) {
	b.trips.Add(1)
	defer b.trips.Add(-1)
	done(errFailure)
	if b.closed.Load() && b.changes.Load() == changes {
		if d, err := b.cb.Allow(); err == nil {
			d(errFailure)
		}
	}
}

// clear returns the breaker to the healthy path after a success reported
// to gobreaker, unless a failure was reported since seq was read or
// gobreaker still counts consecutive failures. Failures increment fails
// after reporting, so one that races this success either precedes it in
// gobreaker (and the success reset it) or changes fails (and keeps the
// breaker off the healthy path).
func (b *Breaker) clear(seq uint64) {
	if !b.closed.Load() || b.cb.Counts().ConsecutiveFailures != 0 || b.fails.Load() != seq {
		return
	}
	for {
		cur := b.clean.Load()
		if cur >= seq || b.clean.CompareAndSwap(cur, seq) {
			return
		}
	}
}
