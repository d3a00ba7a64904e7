package budget

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/backstop-llm/backstop/internal/problems"
	"github.com/backstop-llm/backstop/internal/remote"
	"github.com/redis/go-redis/v9"
)

// Defaults of SharedOptions' zero fields.
const (
	// DefaultSharedTimeout bounds each Redis round trip of a Shared budget
	// when SharedOptions.Timeout is 0.
	DefaultSharedTimeout = 50 * time.Millisecond
	// DefaultFlushEvery is how long a Shared budget keeps first attempts
	// to itself, at most, when SharedOptions.FlushEvery is 0.
	DefaultFlushEvery = time.Second
	// DefaultFlushAfter is how many first attempts a Shared budget keeps
	// to itself, at most, when SharedOptions.FlushAfter is 0.
	DefaultFlushAfter = 100
	// DefaultProbeEvery is how long a Shared budget leaves Redis alone
	// after a failure when SharedOptions.ProbeEvery is 0.
	DefaultProbeEvery = time.Second
)

// ErrSharedUnavailable is matched by the errors a Shared budget passes to
// SharedOptions.OnError and returns from Flush and Counts when Redis did
// not answer within the Timeout, could not be reached or answered with an
// error; the cause is wrapped too. Withdraw never returns it: a Shared
// budget decides with its local budget instead.
var ErrSharedUnavailable = errors.New("budget: shared budget unavailable")

// SharedOptions configures NewShared. The zero value means every default.
type SharedOptions struct {
	// Ratio is the budget the replicas share, with the semantics of
	// NewRatio's: the retries granted in the rolling Window, by all the
	// replicas on one key together, may not exceed max(MinRetries,
	// Ratio * the first attempts they recorded in the Window). Zero fields
	// take RatioConfig's defaults (10%, 10s, a floor of 10). Replicas
	// sharing a key should share this configuration too: each applies its
	// own to the shared counts.
	Ratio RatioConfig
	// Timeout bounds each Redis round trip, on top of the caller's
	// context: a slow or unreachable Redis costs a call at most this long,
	// after which the decision is made locally. 0 means
	// DefaultSharedTimeout (50ms); negative is an error.
	Timeout time.Duration
	// Local decides while Redis is unavailable. It is told of every
	// attempt (Record), so it knows this replica's recent traffic when it
	// takes over; Withdraw and Refund go to it only while Redis is
	// unavailable, so it takes over with none of its retries spent. nil
	// means a NewRatio of the Ratio configuration: each replica falls back
	// to a budget of its own, as if nothing were shared.
	Local Budget
	// FlushEvery and FlushAfter bound how long and how many first attempts
	// a replica counts to itself before it writes them to Redis: Record
	// writes them (one round trip, on the calling goroutine, bounded by
	// the Timeout) once FlushAfter are waiting or FlushEvery has passed
	// since the last write, and Withdraw always carries them. 0 means
	// DefaultFlushEvery (1s) and DefaultFlushAfter (100); negative is an
	// error. A first attempt still waiting is unknown to the other
	// replicas, which can only make them grant fewer retries, never more.
	FlushEvery time.Duration
	FlushAfter int
	// ProbeEvery is how long Redis is left alone after it failed: until
	// then every decision is local and no round trip is tried; then one
	// call tries Redis again, and shared decisions resume when it answers.
	// 0 means DefaultProbeEvery (1s); negative is an error.
	ProbeEvery time.Duration
	// OnError, when set, is called each time Redis becomes unavailable,
	// with an error matching ErrSharedUnavailable that wraps the cause,
	// and each time it answers again, with nil: feed a metric with it. It
	// runs on the goroutine whose call saw the change, so keep it quick.
	// Failures while Redis is already unavailable do not call it again.
	OnError func(err error)
	// Available, when set, is asked before each round trip: while it
	// reports false, the budget decides locally without trying Redis, and
	// its own health is left as it is. A shared chain passes its shared
	// breaker state's Available, so that a Redis that failed one of the
	// chain's stores costs a call one Timeout, not one per store.
	Available func() bool
	// Logger receives a Warn record "backstop: shared budget unavailable,
	// using local state" each time Redis becomes unavailable and an Info
	// record "backstop: shared budget available again, using shared state"
	// each time it answers again. nil means slog.Default() at the time of
	// the record.
	Logger *slog.Logger
}

// Shared is a ratio retry budget kept in Redis, so that the replicas of a
// service budget one target together: 40 replicas with local budgets grant
// 40 floors of retries to a failing target, 40 replicas on one Shared key
// grant one. It is safe for concurrent use. Build one with NewShared; the
// zero value is not usable.
//
// Record counts first attempts in an atomic counter and writes them to
// Redis in batches (see SharedOptions.FlushEvery); between writes it costs a
// clock read, the local budget's Record and an atomic add, and does not
// allocate. Withdraw is one round trip: a Lua script that adds this
// replica's waiting first attempts, sums the window and grants a retry iff
// the retries in it are fewer than max(MinRetries, Ratio * first attempts),
// all atomically in Redis, so concurrent replicas never grant more than one
// budget allows. Refund is one round trip too.
//
// In Redis the budget is one hash under the key, with a field per bucket
// length (Window/10) and kind: "f<epoch>" counts first attempts and
// "r<epoch>" granted retries, where epoch is the Redis server's TIME divided
// by the bucket length. Reading the server's clock inside the script means
// replicas whose clocks disagree still agree on the window, and costs no
// round trip. Each call that writes drops the buckets that have left the
// window and sets the key to expire after two Windows, so nothing lingers
// once the traffic stops; so does a call that finds the key without a TTL
// (written by something else). The key is the budget's: a value of another
// type under it (a string SET there, say) would fail every round trip, so
// the script deletes it and goes on with an empty window, and a Warn record
// says so each time.
//
// When Redis fails or does not answer within the Timeout, that call decides
// with the Local budget, and so does every call for the next ProbeEvery;
// then one call tries Redis again. No call fails, or waits longer than the
// Timeout, because of Redis; OnError and the Logger say when Redis becomes
// unavailable and when it answers again. First attempts a failed round trip
// carried are lost to the shared count (they may or may not have been
// written), which can only lower the shared allowance.
//
// A Shared starts no goroutine of its own and holds nothing to close: the
// client is the caller's, to share and to close.
type Shared struct {
	client  redis.UniversalClient
	script  *redis.Script
	keys    []string // the one key, as the script's KEYS
	statics []any    // ARGV[3:]: the configuration, formatted once
	local   Budget
	config  RatioConfig

	timeout    time.Duration
	flushEvery int64 // nanoseconds
	flushAfter int64
	health     *remote.Health // on the clock of now
	available  func() bool    // SharedOptions.Available; nil: always

	base time.Time // monotonic origin of the times below

	pending   atomic.Int64 // first attempts not yet written
	lastFlush atomic.Int64 // when pending was last taken, since base
	flushing  atomic.Bool  // a Record is writing a batch
}

var _ Refunder = (*Shared)(nil)

// sharedScript is the Lua source of every Shared round trip: one call reads
// the window, writes what changed and decides, atomically.
//
// KEYS[1] the budget's hash. ARGV: [1] op, 0 count (write only the pending
// first attempts), 1 withdraw, 2 refund; [2] pending first attempts to add;
// [3] bucket length in microseconds; [4] buckets per window; [5] Ratio in
// millionths; [6] the floor (MinRetries, 0 for none); [7] the key's TTL in
// milliseconds. It returns {granted (0 or 1), first attempts in the window,
// retries in the window}, the counts including this call's changes.
//
// Buckets are epochs of the server's TIME: fields from a bucket a whole
// window old, or more than a window ahead (a server whose clock was set
// back), and fields it did not write (another kind, an epoch or a count
// that is not a whole number, NaN included) are deleted, not counted. A withdraw
// grants iff retries < max(floor, floor(firsts * ratio / 10^6)), as Ratio
// does; a refund decrements the newest bucket holding a granted retry, and
// only when the window holds one. Writes are followed by PEXPIRE, and so
// is a call that finds the key without a TTL (written by something else);
// a call that changed nothing otherwise writes nothing. A value of another
// type under the key is deleted first, and the call goes on with an empty
// window: the fourth value returned is its type then, "" otherwise.
const sharedScript = `
if redis.replicate_commands then redis.replicate_commands() end
local key = KEYS[1]
local repaired = ''
local kind = redis.call('TYPE', key)['ok']
if kind ~= 'hash' and kind ~= 'none' then
  redis.call('DEL', key)
  repaired = kind
end
local op = tonumber(ARGV[1])
local pending = tonumber(ARGV[2])
local width = tonumber(ARGV[3])
local n = tonumber(ARGV[4])
local ratio = tonumber(ARGV[5])
local floor = tonumber(ARGV[6])
local t = redis.call('TIME')
local now = math.floor((tonumber(t[1]) * 1000000 + tonumber(t[2])) / width)
local wrote = false
local firsts, retries = 0, 0
local newest, newestE = nil, nil
local fields = redis.call('HGETALL', key)
for i = 1, #fields, 2 do
  local name = fields[i]
  local kind = string.sub(name, 1, 1)
  local e = tonumber(string.sub(name, 2))
  local v = tonumber(fields[i + 1])
  -- e ~= math.floor(e) and v ~= math.floor(v) are true for NaN, an
  -- infinity and a fraction: never written here, so foreign
  if (kind ~= 'f' and kind ~= 'r') or e == nil or v == nil or e ~= math.floor(e) or v ~= math.floor(v)
    or e <= now - n or e > now + n then
    redis.call('HDEL', key, name)
    wrote = true
  elseif kind == 'f' then
    firsts = firsts + v
  else
    retries = retries + v
    if v > 0 and (newestE == nil or e > newestE) then newest, newestE = name, e end
  end
end
if retries < 0 then retries = 0 end
if pending > 0 then
  redis.call('HINCRBY', key, 'f' .. now, pending)
  firsts = firsts + pending
  wrote = true
end
local granted = 0
if op == 1 then
  local allowed = math.floor(firsts * ratio / 1000000)
  if allowed < floor then allowed = floor end
  if retries < allowed then
    redis.call('HINCRBY', key, 'r' .. now, 1)
    retries = retries + 1
    granted = 1
    wrote = true
  end
elseif op == 2 and retries > 0 and newest ~= nil then
  redis.call('HINCRBY', key, newest, -1)
  retries = retries - 1
  wrote = true
end
if wrote or redis.call('PTTL', key) == -1 then redis.call('PEXPIRE', key, ARGV[7]) end
return {granted, firsts, retries, repaired}
`

// Ops of sharedScript (ARGV[1]).
const (
	opCount    = 0
	opWithdraw = 1
	opRefund   = 2
)

// NewShared returns a retry budget that the replicas calling it with the
// same key share through client, configured by opts (the zero SharedOptions
// for every default). key names the budget, one per chain and target, such
// as "backstop:budget:" + chain + ":" + target; it is one Redis hash, so it
// works on a Redis Cluster too. The key is the budget's: a value of another
// type found under it is deleted (see Shared).
//
// Errors match ErrInvalidConfig and name what to change: a nil client, a
// client whose options do not bound commands by their context, an empty
// key, an invalid Ratio, a negative Timeout, FlushEvery, FlushAfter or
// ProbeEvery. NewShared makes no round trip: Redis may be down when it is
// called.
//
// The client must honour its contexts' deadlines, or the Timeout could not
// bound a round trip: in go-redis that is Options.ContextTimeoutEnabled (and
// the same field of ClusterOptions, RingOptions, FailoverOptions and
// UniversalOptions). NewShared checks it on *redis.Client,
// *redis.ClusterClient and *redis.Ring; another implementation of
// redis.UniversalClient must honour them itself.
func NewShared(client redis.UniversalClient, key string, opts SharedOptions) (*Shared, error) {
	found := problems.New(ErrInvalidConfig)
	bad := func(format string, args ...any) { found.Addf("shared budget: "+format, args...) }
	if err := remote.CheckClient(client, "the budget's Timeout"); err != "" {
		bad("%s", err)
	}
	if key == "" {
		bad(`key is empty; name the budget, one per chain and target, such as "backstop:budget:" + chain + ":" + target`)
	}
	found.Add(opts.Ratio.Validate())
	for _, d := range []struct {
		name string
		v    time.Duration
		def  time.Duration
	}{
		{"Timeout", opts.Timeout, DefaultSharedTimeout},
		{"FlushEvery", opts.FlushEvery, DefaultFlushEvery},
		{"ProbeEvery", opts.ProbeEvery, DefaultProbeEvery},
	} {
		if d.v < 0 {
			bad("%s is %v; it must not be negative (0 means %v)", d.name, d.v, d.def)
		}
	}
	if opts.FlushAfter < 0 {
		bad("FlushAfter is %d; it must not be negative (0 means %d)", opts.FlushAfter, DefaultFlushAfter)
	}
	if err := found.Err(); err != nil {
		return nil, err
	}

	c := opts.Ratio.WithDefaults()
	s := &Shared{
		client:     client,
		script:     redis.NewScript(sharedScript),
		keys:       []string{key},
		local:      opts.Local,
		config:     c,
		timeout:    orDefault(opts.Timeout, DefaultSharedTimeout),
		flushEvery: int64(orDefault(opts.FlushEvery, DefaultFlushEvery)),
		flushAfter: int64(orDefault(opts.FlushAfter, DefaultFlushAfter)),
		health: remote.NewHealth("shared budget", key, orDefault(opts.ProbeEvery, DefaultProbeEvery),
			opts.OnError, opts.Logger),
		available: opts.Available,
		base:      time.Now(),
	}
	if s.local == nil {
		r, err := NewRatio(c)
		if err != nil {
			return nil, err // unreachable: c was validated
		}
		s.local = r
	}
	width := int64(c.Window/Buckets) / int64(time.Microsecond) // >= 1000: Window >= MinWindow
	ttl := (2*c.Window + time.Millisecond - 1) / time.Millisecond
	var floor int64
	if c.MinRetries > 0 {
		floor = int64(c.MinRetries)
	}
	s.statics = []any{
		strconv.FormatInt(width, 10),
		strconv.Itoa(Buckets),
		strconv.FormatInt(int64(math.Round(c.Ratio*ppm)), 10),
		strconv.FormatInt(floor, 10),
		strconv.FormatInt(int64(ttl), 10),
	}
	return s, nil
}

// orDefault returns v, or def when v is zero.
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Record tells the Local budget of o and, if o is a first attempt, counts
// it for the shared window. The count is written to Redis with the next
// Withdraw, or by this Record once FlushAfter first attempts are waiting or
// FlushEvery has passed since the last write: one round trip, bounded by the
// Timeout and not by ctx's cancellation (only its values are kept), so that
// a canceled call still has its attempt counted. Between writes Record does
// not allocate. Retries were counted when Withdraw granted them, and
// successes and failures do not matter to a ratio budget.
func (s *Shared) Record(ctx context.Context, o Outcome) {
	if o.Retry {
		s.local.Record(ctx, o)
		return
	}
	if o.At.IsZero() {
		o.At = time.Now() // one clock read for the local budget and the flush
	}
	s.local.Record(ctx, o)
	n := s.pending.Add(1)
	now := max(int64(o.At.Sub(s.base)), 0)
	if n < s.flushAfter && now-s.lastFlush.Load() < s.flushEvery {
		return
	}
	if s.health.Down(now) {
		return // Redis is left alone; the count waits for it
	}
	s.flush(ctx, now)
}

// flush writes the waiting first attempts, unless another Record is
// already writing a batch or Redis is left alone.
func (s *Shared) flush(ctx context.Context, now int64) {
	if !s.flushing.CompareAndSwap(false, true) {
		return // this count goes with the next batch
	}
	defer s.flushing.Store(false)
	if s.pending.Load() < s.flushAfter && now-s.lastFlush.Load() < s.flushEvery {
		return // another Record wrote the batch meanwhile
	}
	use, probe := s.use(now)
	if !use {
		return
	}
	s.lastFlush.Store(now)
	n := s.pending.Swap(0)
	if n == 0 && !probe {
		return
	}
	s.decide(context.WithoutCancel(ctx), opCount, n)
}

// Withdraw grants a retry, and counts it in Redis, when the retries all
// replicas were granted in the window are fewer than max(MinRetries,
// Ratio * first attempts in the window); otherwise it returns ErrExhausted.
// It carries this replica's waiting first attempts in the same round trip.
//
// When Redis is unavailable, does not answer within the Timeout, or ctx
// ends first, the Local budget decides instead; so it does for ProbeEvery
// after a failure. Withdraw returns nil or ErrExhausted, or, when the Local
// budget decides, what it returns.
func (s *Shared) Withdraw(ctx context.Context) error {
	if ctx.Err() == nil {
		now := s.now()
		if use, _ := s.use(now); use {
			s.lastFlush.Store(now)
			if v, ok := s.decide(ctx, opWithdraw, s.pending.Swap(0)); ok {
				if v[0] == 1 {
					return nil
				}
				return ErrExhausted
			}
		}
	}
	return s.local.Withdraw(ctx)
}

// Refund takes back a retry Withdraw granted that was not sent, from the
// budget that decides now: the shared window while Redis answers (one
// round trip, bounded by the Timeout and not by ctx's cancellation, so a
// canceled call can refund), the Local budget, if it is a Refunder, while
// Redis is unavailable. In the shared window the retry comes off the
// newest bucket that counts one, so that it leaves the window no later than
// the grant it cancels, and the window's retries never go below zero. If
// the round trip fails the retry stays counted.
func (s *Shared) Refund(ctx context.Context) {
	if use, _ := s.use(s.now()); use {
		s.decide(context.WithoutCancel(ctx), opRefund, 0)
		return
	}
	if r, ok := s.local.(Refunder); ok {
		r.Refund(ctx)
	}
}

// Flush writes the first attempts Record counted and has not written yet,
// whatever FlushEvery and FlushAfter say and whether or not Redis is
// available: call it before a replica stops, or in tests. It returns ctx's
// error when ctx ends first, or an error matching ErrSharedUnavailable when
// Redis did not answer within the Timeout or failed; the first attempts
// are then lost to the shared count. Flush does not change whether the
// budget considers Redis available.
func (s *Shared) Flush(ctx context.Context) error {
	n := s.pending.Swap(0)
	if n == 0 {
		return nil
	}
	s.lastFlush.Store(s.now())
	_, err := s.run(ctx, opCount, n)
	return err
}

// Counts returns the first attempts and the retries all replicas recorded
// in the current shared window, as Redis holds them (without this replica's
// first attempts that are still waiting to be written). It is one round
// trip, meant for tests and telemetry; errors are as for Flush.
func (s *Shared) Counts(ctx context.Context) (firsts, retries int64, err error) {
	v, err := s.run(ctx, opCount, 0)
	return v[1], v[2], err
}

// Available reports whether decisions go to Redis: false from a failed
// round trip until one succeeds again.
func (s *Shared) Available() bool { return s.health.Available() }

// use is Health.Use, unless Available says Redis is down.
func (s *Shared) use(now int64) (use, probe bool) {
	if s.available != nil && !s.available() {
		return false, false
	}
	return s.health.Use(now)
}

// Config returns the ratio configuration s runs with, defaults filled in.
func (s *Shared) Config() RatioConfig { return s.config }

// now returns the time since s.base.
func (s *Shared) now() int64 { return int64(time.Since(s.base)) }

// decide makes one round trip and records whether Redis answered. ok is
// false when it did not, or when ctx ended first (which says nothing about
// Redis); the caller then decides locally.
func (s *Shared) decide(ctx context.Context, op, pending int64) (v [3]int64, ok bool) {
	v, err := s.run(ctx, op, pending)
	if err == nil {
		s.health.Succeeded()
		return v, true
	}
	if errors.Is(err, ErrSharedUnavailable) { // not the caller's own end
		s.health.Failed(s.now(), err)
	}
	return v, false
}

// run runs the script once, bounded by the Timeout, and logs the repair
// of a key that held a value of another type.
func (s *Shared) run(ctx context.Context, op, pending int64) ([3]int64, error) {
	var v [3]int64
	if err := ctx.Err(); err != nil {
		return v, err
	}
	args := make([]any, 0, 2+len(s.statics))
	args = append(append(args, op, pending), s.statics...)
	tctx, cancel := context.WithTimeout(ctx, s.timeout)
	res, err := s.script.Run(tctx, s.client, s.keys, args...).Slice()
	var cerr error
	var timedOut bool
	if err != nil {
		cerr, timedOut = remote.Blame(ctx, tctx, err)
	}
	cancel()
	var repaired string
	if err == nil {
		repaired, err = parseAnswer(res, &v)
	}
	if err != nil {
		if cerr != nil { // says nothing about Redis
			return v, fmt.Errorf("shared budget %q: %w (%v)", s.keys[0], cerr, err)
		}
		if timedOut { // go-redis reports it as a context or a network timeout
			return v, fmt.Errorf("%w: key %q: no answer from Redis within the Timeout (%v): %w", ErrSharedUnavailable, s.keys[0], s.timeout, err)
		}
		return v, fmt.Errorf("%w: key %q: %w", ErrSharedUnavailable, s.keys[0], err)
	}
	if repaired != "" {
		s.health.Repaired(repaired)
	}
	return v, nil
}

// parseAnswer reads the script's answer, {granted, firsts, retries,
// repaired}, into v, and returns repaired.
func parseAnswer(res []any, v *[3]int64) (string, error) {
	if len(res) != len(v)+1 {
		return "", fmt.Errorf("the script answered %v; want 3 integers and a string", res)
	}
	for i := range v {
		n, ok := res[i].(int64)
		if !ok {
			return "", fmt.Errorf("the script answered %v; want 3 integers and a string", res)
		}
		v[i] = n
	}
	repaired, _ := res[3].(string)
	return repaired, nil
}
