package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/backstop-llm/backstop/internal/remote"
	"github.com/backstop-llm/backstop/ledger"
	"github.com/redis/go-redis/v9"
)

// ledgerStore is a ledger.Ledger in Redis: one hash per key,
// "<name>:<escaped key>", with the fields state ("started" or "done"),
// owner, until (a Started lease's end, the server's TIME in milliseconds)
// and result (Done). Begin and Finish are one Lua script each, Get one
// read-only script, each on its one key.
type ledgerStore struct {
	client               redis.UniversalClient
	name                 string
	begin, finish, fetch *redis.Script
}

var _ ledger.Ledger = (*ledgerStore)(nil)

// ledgerForgetAfter is how long a Started key outlives its lease: as
// ledger.NewMemory's, an hour during which it reads as outcome unknown.
const ledgerForgetAfter = time.Hour

// Ledger returns the ledger.Ledger name: one Redis hash per key (an agent
// step's place in a conversation), under "<name>:<key>", such as
// "backstop:ledger:refunds:conv-81%3Astep-2%3Acall_1". name is used as it
// is, so give each ledger a name of its own (beginning with a namespace
// such as "backstop:ledger:"); in key, '%' and ':' are escaped as "%25"
// and "%3A", so that no two keys share a hash. Each hash holds "state"
// ("started" or "done"), "owner", "until" (while started: when the lease
// ends, the Redis server's TIME in milliseconds) and "result" (once done,
// the bytes as given).
//
// Begin and Finish are one round trip each, a Lua script on the one key,
// so they are atomic (of concurrent Begins on an absent key, from any
// number of replicas, exactly one is told Absent) and work on a Redis
// Cluster. Leases are judged on Redis's own clock, so replicas whose
// clocks disagree agree on whose lease has ended; the Until of an entry
// returned is translated to the caller's clock (the lease left, as Redis
// counts it, added to the time of the answer), so that Entry.Expired
// with time.Now() agrees with Redis. A Started key expires an hour after
// its lease ends (it reads as outcome unknown meanwhile, then Absent); a
// Done key expires ttl after its Finish (rounded up to a millisecond),
// never when ttl is 0 or less. Get is one read-only script (it reads
// TIME to judge the lease).
//
// A value of another type under a key, or a hash this store did not write
// (no state field), is deleted by the next Begin or Finish, which go on as
// if the key were absent, and reported: as a Warn record of the
// ledger.Shared around the store, or of slog.Default() without one; Get
// reads such a key as Absent. Errors name the Redis key.
//
// Wrap the store in ledger.NewShared, which bounds each round trip by its
// Timeout, leaves a failed Redis alone and keeps a Finish that failed
// until Redis answers. Ledger returns nil when s is nil.
func (s *Store) Ledger(name string) ledger.Ledger {
	if s == nil {
		return nil
	}
	return &ledgerStore{client: s.client, name: name, begin: redis.NewScript(ledgerBegin),
		finish: redis.NewScript(ledgerFinish), fetch: redis.NewScript(ledgerGet)}
}

// Key returns the prefix of the store's keys, "<name>:", naming the store
// in ledger.Shared's log records.
func (s *ledgerStore) Key() string { return s.name + ":" }

// key returns the Redis key of a ledger key; escaped as a budget key is.
func (s *ledgerStore) key(key string) string { return s.name + ":" + spendKeyEscaper.Replace(key) }

// ledgerRead reads the key's entry, in every script, after its TYPE was
// checked (kind): state is 0 (absent), 1 (started) or 2 (done), left the
// lease left in milliseconds on the server's clock (a started entry whose
// until is not a number reads as ended), foreign true for a hash whose
// state this store did not write.
const ledgerRead = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local state, owner, left, result, foreign = 0, '', 0, '', false
if kind == 'hash' then
  local f = redis.call('HMGET', key, 'state', 'owner', 'until', 'result')
  if f[1] == 'started' then
    state = 1
    left = (tonumber(f[3]) or 0) - now
  elseif f[1] == 'done' then
    state = 2
    result = f[4] or ''
  else
    foreign = true
  end
  if state ~= 0 then owner = f[2] or '' end
end
`

// ledgerBegin records the key started by ARGV[1] until now + ARGV[2]
// milliseconds iff it is absent, or started and its lease has ended and
// ARGV[3] is "1" (takeover); the key then expires ARGV[4] milliseconds
// after the lease. It returns {state, owner, lease left, result,
// repaired} as found.
const ledgerBegin = hashPrelude + `
if repaired ~= '' then kind = 'none' end
` + ledgerRead + `
if foreign then
  redis.call('DEL', key)
  repaired = 'hash without a state'
end
local lease = tonumber(ARGV[2])
if state == 0 or (state == 1 and left <= 0 and ARGV[3] == '1') then
  if state == 1 then redis.call('HDEL', key, 'result') end
  redis.call('HSET', key, 'state', 'started', 'owner', ARGV[1], 'until', string.format('%d', now + lease))
  redis.call('PEXPIRE', key, lease + tonumber(ARGV[4]))
end
return {state, owner, left, result, repaired}
`

// ledgerFinish records the key done with result ARGV[2] iff it is started
// by ARGV[1], then sets it to expire in ARGV[3] milliseconds (never when
// 0). It returns {1 or 0, repaired}.
const ledgerFinish = hashPrelude + `
local f = redis.call('HMGET', key, 'state', 'owner')
if f[1] ~= 'started' or f[2] ~= ARGV[1] then
  if f[1] ~= 'started' and f[1] ~= 'done' and redis.call('EXISTS', key) == 1 then
    redis.call('DEL', key)
    if repaired == '' then repaired = 'hash without a state' end
  end
  return {0, repaired}
end
redis.call('HSET', key, 'state', 'done', 'result', ARGV[2])
redis.call('HDEL', key, 'until')
local ttl = tonumber(ARGV[3])
if ttl > 0 then redis.call('PEXPIRE', key, ttl) else redis.call('PERSIST', key) end
return {1, repaired}
`

// ledgerGet returns {state, owner, lease left, result}, writing nothing: a
// value of another type, or a foreign hash, reads as absent.
const ledgerGet = `
local key = KEYS[1]
local kind = redis.call('TYPE', key)['ok']
` + ledgerRead + `
return {state, owner, left, result}
`

// msArg is d in whole milliseconds, rounded up; 0 when d <= 0.
func msArg(d time.Duration) string {
	if d <= 0 {
		return "0"
	}
	return strconv.FormatInt(int64((d+time.Millisecond-1)/time.Millisecond), 10)
}

// Begin implements ledger.Ledger: one script.
func (s *ledgerStore) Begin(ctx context.Context, key, owner string, lease time.Duration, takeover bool) (ledger.Entry, error) {
	k := s.key(key)
	take := "0"
	if takeover {
		take = "1"
	}
	res, err := s.begin.Run(ctx, s.client, []string{k}, owner, msArg(lease), take, msArg(ledgerForgetAfter)).Slice()
	if err != nil {
		return ledger.Entry{}, fmt.Errorf("ledger key %q: begin: %w", k, err)
	}
	e, err := ledgerEntry(res, 5)
	if err != nil {
		return ledger.Entry{}, fmt.Errorf("ledger key %q: the begin script answered %v; %w", k, res, err)
	}
	if repaired, _ := res[4].(string); repaired != "" {
		remote.Repaired(ctx, "ledger store", k, repaired)
	}
	return e, nil
}

// Finish implements ledger.Ledger: one script.
func (s *ledgerStore) Finish(ctx context.Context, key, owner string, result []byte, ttl time.Duration) error {
	k := s.key(key)
	if result == nil {
		result = []byte{}
	}
	res, err := s.finish.Run(ctx, s.client, []string{k}, owner, result, msArg(ttl)).Slice()
	if err != nil {
		return fmt.Errorf("ledger key %q: finish: %w", k, err)
	}
	var ok int64
	isInt := false
	if len(res) == 2 {
		ok, isInt = res[0].(int64)
	}
	if !isInt {
		return fmt.Errorf("ledger key %q: the finish script answered %v; want an integer and a string", k, res)
	}
	if repaired, _ := res[1].(string); repaired != "" {
		remote.Repaired(ctx, "ledger store", k, repaired)
	}
	if ok != 1 {
		return fmt.Errorf("ledger key %q: %w", k, ledger.ErrNotOwner)
	}
	return nil
}

// Get implements ledger.Ledger: one read-only script.
func (s *ledgerStore) Get(ctx context.Context, key string) (ledger.Entry, error) {
	k := s.key(key)
	res, err := s.fetch.Run(ctx, s.client, []string{k}).Slice()
	if err != nil {
		return ledger.Entry{}, fmt.Errorf("ledger key %q: get: %w", k, err)
	}
	e, err := ledgerEntry(res, 4)
	if err != nil {
		return ledger.Entry{}, fmt.Errorf("ledger key %q: the get script answered %v; %w", k, res, err)
	}
	return e, nil
}

// ledgerEntry parses a script's {state, owner, lease left, result, ...}
// of n values, translating the lease left to the caller's clock.
func ledgerEntry(res []any, n int) (ledger.Entry, error) {
	errWant := fmt.Errorf("want %d values: 3 integers and strings", n)
	if len(res) != n {
		return ledger.Entry{}, errWant
	}
	state, ok1 := res[0].(int64)
	owner, ok2 := res[1].(string)
	left, ok3 := res[2].(int64)
	result, ok4 := res[3].(string)
	if !ok1 || !ok2 || !ok3 || !ok4 || state < 0 || state > 2 {
		return ledger.Entry{}, errWant
	}
	switch e := (ledger.Entry{State: ledger.State(state), Owner: owner}); e.State {
	case ledger.Started:
		e.Until = time.Now().Add(time.Duration(left) * time.Millisecond)
		return e, nil
	case ledger.Done:
		if result != "" {
			e.Result = []byte(result)
		}
		return e, nil
	}
	return ledger.Entry{}, nil
}
