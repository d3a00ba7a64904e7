package breaker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/backstop-llm/backstop/internal/problems"
	"github.com/backstop-llm/backstop/internal/remote"
	"github.com/redis/go-redis/v9"
)

// Defaults of SharedOptions' zero fields.
const (
	// DefaultSharedTimeout bounds each Redis round trip of a Shared when
	// SharedOptions.Timeout is 0.
	DefaultSharedTimeout = 50 * time.Millisecond
	// DefaultProbeEvery is how long a Shared leaves Redis alone after a
	// failure when SharedOptions.ProbeEvery is 0.
	DefaultProbeEvery = time.Second
)

// ErrSharedUnavailable is matched by the errors of a Shared's methods when
// Redis did not answer within the Timeout, could not be reached or answered
// with an error (the cause is wrapped too), and, without a round trip, while
// Redis is left alone after such a failure. Callers carry on with their
// local breakers and gates.
var ErrSharedUnavailable = errors.New("breaker: shared state unavailable")

// SharedOptions configures NewShared. The zero value means every default.
type SharedOptions struct {
	// Timeout bounds each Redis round trip, on top of the caller's
	// context. 0 means DefaultSharedTimeout (50ms); negative is an error.
	Timeout time.Duration
	// ProbeEvery is how long Redis is left alone after a failure: until
	// then every method returns ErrSharedUnavailable at once; then one
	// call tries Redis again. 0 means DefaultProbeEvery (1s); negative is
	// an error.
	ProbeEvery time.Duration
	// OnError, when set, is called each time Redis becomes unavailable,
	// with an error matching ErrSharedUnavailable, and each time it answers
	// again, with nil. It runs on the calling goroutine: keep it quick.
	OnError func(err error)
	// Logger receives a Warn record "backstop: shared breaker state
	// unavailable, using local state" and an Info record "backstop: shared
	// breaker state available again, using shared state" at the same
	// moments. nil means slog.Default() at the time of the record.
	Logger *slog.Logger
}

// Remote is what the replicas sharing a Shared have published about one
// name (a chain's target): how much longer its breaker is held open, and
// how much longer its Retry-After gate is closed. Zero means not at all.
type Remote struct {
	Name       string
	Open, Gate time.Duration
}

// Shared is the state of a set of breakers and Retry-After gates that the
// replicas of a service publish to each other through Redis: "name's
// breaker opened, skip it for d", "name's breaker closed again", "name's
// provider asked for no request for d". It is safe for concurrent use.
// Build one with NewShared.
//
// It shares decisions, not requests: every replica keeps its own Breaker,
// and no lock is taken across a model call (gobreaker's
// DistributedCircuitBreaker holds a Redis lock for the whole of each
// request, which would serialize every replica's calls). A replica whose
// breaker opens publishes it; the others read it before their next call
// and skip the target, without a request, until it is closed again or the
// publication expires.
//
// In Redis it is one hash under the key, with a field per name and kind,
// "o:<name>" for an open breaker and "g:<name>" for a closed gate, whose
// value is when it ends in milliseconds of the Redis server's TIME. Reading
// the server's clock inside the scripts makes replicas whose clocks
// disagree agree. Every write drops the fields that have ended and sets the
// key to expire with its last field, so nothing lingers; a read gives a
// hash that has no TTL (written by something else) one the same way. The
// key is the Shared's own: a value of another type under it (a string SET
// there, say) would fail every round trip, so the script that finds one
// deletes it and goes on, and a Warn record says so each time. Every method
// is one round trip (a Lua script), bounded by the Timeout.
//
// What is read is applied by each replica within its own limits (see
// Breaker.OpenElsewhere and Gate.CloseUntilElsewhere, and Slack): no
// publication holds a replica's target longer than that replica's 2 x
// OpenFor or MaxGate, however far ahead it ends.
type Shared struct {
	client  redis.UniversalClient
	read    *redis.Script
	write   *redis.Script
	keys    []string
	timeout time.Duration
	health  *remote.Health
	base    time.Time
	// leftAlone is returned, without a round trip or an allocation, while
	// Redis is left alone after a failure.
	leftAlone error
}

// sharedRead returns {field, milliseconds left, ...} for every field that
// has not ended (nothing when there is no key), or {type} alone when the
// key held a value of another type, which it deleted. A hash without a TTL
// is set to expire with its last field (or deleted, when none is left).
// ARGV[1] is maxPublish in milliseconds.
const sharedRead = `
if redis.replicate_commands then redis.replicate_commands() end
local key = KEYS[1]
local kind = redis.call('TYPE', key)['ok']
if kind == 'none' then return {} end
if kind ~= 'hash' then
  redis.call('DEL', key)
  return {kind}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit = now + tonumber(ARGV[1])
local fields = redis.call('HGETALL', key)
local out = {}
local last = 0
for i = 1, #fields, 2 do
  local v = tonumber(fields[i + 1])
  if v ~= nil and v > now and v <= limit and v == math.floor(v) then
    out[#out + 1] = fields[i]
    out[#out + 1] = v - now
    if v > last then last = v end
  end
end
if redis.call('PTTL', key) == -1 then
  if last > now then redis.call('PEXPIRE', key, last - now) else redis.call('DEL', key) end
end
return out
`

// sharedWrite applies one publication. ARGV: [1] op: "o" open, "g" gate
// (both keep the later of the stored end and now + [3]), "c" closed
// (removes the open field); [2] the name; [3] milliseconds; [4] maxPublish
// in milliseconds. It returns "", or the type of the value of another type
// it found under the key and deleted before writing.
const sharedWrite = `
if redis.replicate_commands then redis.replicate_commands() end
local key = KEYS[1]
local kind = redis.call('TYPE', key)['ok']
local repaired = ''
if kind ~= 'hash' and kind ~= 'none' then
  redis.call('DEL', key)
  repaired = kind
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local op, name, ms = ARGV[1], ARGV[2], tonumber(ARGV[3])
local limit = now + tonumber(ARGV[4])
if op == 'c' then
  redis.call('HDEL', key, 'o:' .. name)
else
  local field = op .. ':' .. name
  local cur = tonumber(redis.call('HGET', key, field))
  if cur == nil or cur < now + ms then redis.call('HSET', key, field, now + ms) end
end
local last = 0
local fields = redis.call('HGETALL', key)
for i = 1, #fields, 2 do
  local v = tonumber(fields[i + 1])
  if v == nil or v <= now or v > limit or v ~= math.floor(v) then
    redis.call('HDEL', key, fields[i])
  elseif v > last then
    last = v
  end
end
if last > now then redis.call('PEXPIRE', key, last - now) end
return repaired
`

// NewShared returns the shared state the replicas calling it with the same
// key publish to each other through client, configured by opts. key names
// one chain's state, such as "backstop:" + chain + ":breakers"; it is one
// Redis hash, so it works on a Redis Cluster too. NewShared makes no round
// trip: Redis may be down when it is called.
//
// Errors match ErrInvalidSettings and name what to change: a nil client, a
// client whose options do not bound commands by their context (in go-redis,
// set Options.ContextTimeoutEnabled), an empty key, a negative Timeout or
// ProbeEvery.
func NewShared(client redis.UniversalClient, key string, opts SharedOptions) (*Shared, error) {
	found := problems.New(ErrInvalidSettings)
	if p := remote.CheckClient(client, "the shared state's Timeout"); p != "" {
		found.Addf("shared state: %s", p)
	}
	if key == "" {
		found.Addf(`shared state: key is empty; name it, one per chain, such as "backstop:" + chain + ":breakers"`)
	}
	if opts.Timeout < 0 {
		found.Addf("shared state: Timeout is %v; it must not be negative (0 means %v)", opts.Timeout, DefaultSharedTimeout)
	}
	if opts.ProbeEvery < 0 {
		found.Addf("shared state: ProbeEvery is %v; it must not be negative (0 means %v)", opts.ProbeEvery, DefaultProbeEvery)
	}
	if err := found.Err(); err != nil {
		return nil, err
	}
	s := &Shared{
		client:  client,
		read:    redis.NewScript(sharedRead),
		write:   redis.NewScript(sharedWrite),
		keys:    []string{key},
		timeout: opts.Timeout,
		base:    time.Now(),
	}
	if s.timeout == 0 {
		s.timeout = DefaultSharedTimeout
	}
	probe := opts.ProbeEvery
	if probe == 0 {
		probe = DefaultProbeEvery
	}
	s.health = remote.NewHealth("shared breaker state", key, probe, opts.OnError, opts.Logger)
	s.leftAlone = fmt.Errorf("%w: key %q: Redis failed recently; the next try is after ProbeEvery (%v)", ErrSharedUnavailable, key, probe)
	return s, nil
}

// Load returns what the replicas have published that has not ended yet:
// one Remote per name with an open breaker or a closed gate, in no
// particular order. While Redis is left alone after a failure it returns an
// error matching ErrSharedUnavailable at once.
func (s *Shared) Load(ctx context.Context) ([]Remote, error) {
	res, err := s.run(ctx, s.read, maxPublishArg)
	if err != nil {
		return nil, err
	}
	vals, ok := res.([]any)
	if ok && len(vals) == 1 { // a value of another type, deleted
		kind, _ := vals[0].(string)
		s.health.Repaired(kind)
		return nil, nil
	}
	if !ok || len(vals)%2 != 0 {
		return nil, fmt.Errorf("%w: key %q: the read script answered %v; want field, milliseconds pairs", ErrSharedUnavailable, s.keys[0], res)
	}
	var out []Remote
	for i := 0; i < len(vals); i += 2 {
		field, _ := vals[i].(string)
		ms, _ := vals[i+1].(int64)
		if len(field) < 3 || field[0] != 'o' && field[0] != 'g' || field[1] != ':' || ms <= 0 {
			continue // not ours
		}
		ms = min(ms, maxPublishMS) // the scripts bound it; a foreign writer may not
		name := field[2:]
		j := 0
		for j < len(out) && out[j].Name != name {
			j++ // a chain has a few targets: a scan beats a map
		}
		if j == len(out) {
			out = append(out, Remote{Name: name})
		}
		d := time.Duration(ms) * time.Millisecond
		switch field[0] {
		case 'o':
			out[j].Open = d
		case 'g':
			out[j].Gate = d
		}
	}
	return out, nil
}

// PublishOpen tells the other replicas that name's breaker is open and to
// skip it for d (rounded up to a millisecond); a publication that ends
// later is kept. Each replica skips it for at most twice its own OpenFor.
func (s *Shared) PublishOpen(ctx context.Context, name string, d time.Duration) error {
	return s.publish(ctx, "o", name, ms(d))
}

// PublishClosed tells the other replicas that name's breaker closed: they
// stop skipping it from their next Load.
func (s *Shared) PublishClosed(ctx context.Context, name string) error {
	return s.publish(ctx, "c", name, "0")
}

// PublishGate tells the other replicas that name's provider asked for no
// request for d (rounded up to a millisecond); a closure that ends later
// is kept. Each replica closes its gate for at most its own MaxGate.
func (s *Shared) PublishGate(ctx context.Context, name string, d time.Duration) error {
	return s.publish(ctx, "g", name, ms(d))
}

// publish runs the write script, and logs the repair of a key that held a
// value of another type.
func (s *Shared) publish(ctx context.Context, op, name, ms string) error {
	res, err := s.run(ctx, s.write, op, name, ms, maxPublishArg)
	if kind, _ := res.(string); kind != "" {
		s.health.Repaired(kind)
	}
	return err
}

// Available reports whether Redis answered the last round trip.
func (s *Shared) Available() bool { return s.health.Available() }

// Slack is how far apart two readings of one publication's end may be,
// when each is estimated as the time Load returned plus the time it says is
// left: one round trip (the Timeout bounds it) and the millisecond Redis
// rounds to. Pass it to Breaker.OpenElsewhere and Gate.CloseUntilElsewhere,
// which apply a publication once, however often it is read.
func (s *Shared) Slack() time.Duration { return s.timeout + time.Millisecond }

// maxPublish bounds every publication: a longer one is kept this long.
// Both scripts treat a field that ends later, or whose value is not a whole
// number, as foreign: not read, and deleted by the next write.
const (
	maxPublish   = 366 * 24 * time.Hour
	maxPublishMS = int64(maxPublish / time.Millisecond)
)

var maxPublishArg = strconv.FormatInt(maxPublishMS, 10)

// ms is d in whole milliseconds, rounded up, at least 1 and at most
// maxPublish.
func ms(d time.Duration) string {
	d = min(d, maxPublish)
	return strconv.FormatInt(max(int64((d+time.Millisecond-1)/time.Millisecond), 1), 10)
}

// run runs script once, bounded by the Timeout, unless Redis is left alone.
func (s *Shared) run(ctx context.Context, script *redis.Script, args ...any) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	now := int64(time.Since(s.base))
	if use, _ := s.health.Use(now); !use {
		return nil, s.leftAlone
	}
	tctx, cancel := context.WithTimeout(ctx, s.timeout)
	res, err := script.Run(tctx, s.client, s.keys, args...).Result()
	if err == nil {
		cancel()
		s.health.Succeeded()
		return res, nil
	}
	cerr, timedOut := remote.Blame(ctx, tctx, err)
	cancel()
	if cerr != nil { // says nothing about Redis
		return nil, fmt.Errorf("shared state %q: %w (%v)", s.keys[0], cerr, err)
	}
	if timedOut {
		err = fmt.Errorf("%w: key %q: no answer from Redis within the Timeout (%v): %w", ErrSharedUnavailable, s.keys[0], s.timeout, err)
	} else {
		err = fmt.Errorf("%w: key %q: %w", ErrSharedUnavailable, s.keys[0], err)
	}
	s.health.Failed(int64(time.Since(s.base)), err)
	return nil, err
}
