package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/backstop-llm/backstop/cost"
	"github.com/backstop-llm/backstop/internal/remote"
	"github.com/backstop-llm/backstop/spend"
	"github.com/redis/go-redis/v9"
)

// spendStore is a spend.Store in Redis: one hash per budget key and
// period, "<name>:<key>:<period>", with the integer fields "spent" and
// "reserved" in nanodollars (cost.Money). Reserve and Settle are one Lua
// script each, on that one key (so a Redis Cluster runs it on the key's
// node), and set the key to expire ttl after the change; ReserveAs is
// Reserve's script given a replica id; Used is one HMGET. A value of another type under a key is deleted by the next
// Reserve or Settle, and a field that is not a whole number is taken as 0
// and rewritten; both are reported (see remote.Repaired).
type spendStore struct {
	client          redis.UniversalClient
	name            string
	reserve, settle *redis.Script
}

var _ spend.ReplicaStore = (*spendStore)(nil)

// Spend returns the spend.Store of the money budget name: one Redis hash
// per budget key (the tenant, user or feature the budget is kept for) and
// period, under "<name>:<key>:<period>", such as
// "backstop:spend:tenants:acme:1767225600". name is used as it is, so give
// each budget a name of its own (beginning with a namespace such as
// "backstop:spend:"); in key, '%' and ':' are escaped as "%25" and "%3A",
// so that no two keys of one name share a Redis key; period is the
// period's start in Unix seconds. Each hash holds "spent" and "reserved",
// whole nanodollars, and a field "r:<id>" for each replica (spend.Shared)
// that reserved on it within the last minute, holding when it last did:
// the store is a spend.ReplicaStore, and its ReserveAs counts them in the
// same script.
//
// Reserve and Settle are one round trip each, a Lua script on the one key,
// so they are atomic and work on a Redis Cluster; each sets the key to
// expire ttl after its change (rounded up to a millisecond; a ttl of 0 or
// less means 32 days), and a refused Reserve gives a key without a TTL
// (written by something else) one; a ReserveAs also reads the hash's
// fields (one a replica) and writes its replica's, granted or refused.
// Used is one HMGET. The key is the
// budget's: a value of another type under it is deleted by the next
// Reserve or Settle, which then go on from zero, and reported: as a Warn
// record of the spend.Shared around the store, or of slog.Default()
// without one. Amounts beyond 2^53 nanodollars (9 million dollars) are
// compared in Lua's floating point, not exactly.
//
// Wrap the store in spend.NewShared, which bounds each round trip by its
// Timeout and decides locally while Redis is down. Spend returns nil when
// s is nil.
func (s *Store) Spend(name string) spend.Store {
	if s == nil {
		return nil
	}
	return &spendStore{client: s.client, name: name,
		reserve: redis.NewScript(spendReserve), settle: redis.NewScript(spendSettle)}
}

// spendKeyEscaper escapes a budget key as one part of a Redis key, as the
// chain's keys escape its names: "a:b" and "a%3Ab" stay apart.
var spendKeyEscaper = strings.NewReplacer("%", "%25", ":", "%3A")

// defaultSpendTTL is a key's lifetime when a Reserve or Settle is given a
// ttl of 0 or less: longer than a month's period.
const defaultSpendTTL = 32 * 24 * time.Hour

// Key returns the prefix of the store's keys, "<name>:", naming the store
// in spend.Shared's log records.
func (s *spendStore) Key() string { return s.name + ":" }

// key returns the Redis key of a budget key's period.
func (s *spendStore) key(key string, period int64) string {
	return s.name + ":" + spendKeyEscaper.Replace(key) + ":" + strconv.FormatInt(period, 10)
}

// spendPrelude repairs the key and reads its two fields, in every script:
// a value of another type under the key is deleted (repaired holds its
// type), and a field that is not a whole number (never written here) is
// taken as 0 and rewritten (repaired: "hash field").
const spendPrelude = hashPrelude + `local f = redis.call('HMGET', key, 'spent', 'reserved')
local spent, reserved = tonumber(f[1]), tonumber(f[2])
if f[1] and (spent == nil or spent ~= math.floor(spent)) then
  redis.call('HSET', key, 'spent', 0)
  spent = nil
  if repaired == '' then repaired = 'hash field' end
end
if f[2] and (reserved == nil or reserved ~= math.floor(reserved)) then
  redis.call('HSET', key, 'reserved', 0)
  reserved = nil
  if repaired == '' then repaired = 'hash field' end
end
spent = spent or 0
reserved = reserved or 0
`

// spendReserve adds ARGV[1] to reserved iff spent + reserved + ARGV[1] <=
// ARGV[2], then sets the key to expire in ARGV[3] milliseconds; a refusal
// writes nothing, but gives a key without a TTL one. With a replica id in
// ARGV[4] (not ""), it first counts the other fields "r:<id>" whose time
// (the server's TIME, in milliseconds) is within a minute of now, deletes the others, and sets its own to now, granted or refused
// (then setting the TTL too): O(fields), one per replica. It returns {1 or
// 0, spent + reserved after (granted) or before (refused), repaired,
// replicas counted, the caller included (0 without an id)}.
const spendReserve = spendPrelude + `
local amount, limit, id = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[4]
local replicas = 0
if id ~= '' then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local all = redis.call('HGETALL', key)
  local stale = {}
  for i = 1, #all, 2 do
    local f = all[i]
    if string.sub(f, 1, 2) == 'r:' and f ~= 'r:' .. id then
      local at = tonumber(all[i + 1])
      if at and at > now - 60000 and at <= now + 60000 then
        replicas = replicas + 1
      else
        stale[#stale + 1] = f
      end
    end
  end
  if #stale > 0 then redis.call('HDEL', key, unpack(stale)) end
  redis.call('HSET', key, 'r:' .. id, string.format('%d', now))
  replicas = replicas + 1
end
local used = spent + reserved
if used + amount <= limit then
  redis.call('HINCRBY', key, 'reserved', ARGV[1])
  redis.call('PEXPIRE', key, ARGV[3])
  return {1, used + amount, repaired, replicas}
end
if id ~= '' or repaired ~= '' or redis.call('PTTL', key) == -1 then redis.call('PEXPIRE', key, ARGV[3]) end
return {0, used, repaired, replicas}
`

// spendSettle sets reserved to max(0, reserved - ARGV[1]) and adds ARGV[2]
// to spent, then sets the key to expire in ARGV[3] milliseconds. It
// returns repaired.
const spendSettle = spendPrelude + `
local r, s = tonumber(ARGV[1]), ARGV[2]
if r > 0 then
  local left = reserved - r
  if left < 0 then left = 0 end
  redis.call('HSET', key, 'reserved', string.format('%d', left))
end
if tonumber(s) ~= 0 then redis.call('HINCRBY', key, 'spent', s) end
redis.call('PEXPIRE', key, ARGV[3])
return repaired
`

// ttlArg is ttl as the scripts' milliseconds: rounded up, and
// defaultSpendTTL when ttl is 0 or less.
func ttlArg(ttl time.Duration) string {
	if ttl <= 0 {
		ttl = defaultSpendTTL
	}
	return strconv.FormatInt(int64((ttl+time.Millisecond-1)/time.Millisecond), 10)
}

// Reserve adds amount to key's reservations in period iff spent plus
// reserved plus amount stays within limit: one script.
func (s *spendStore) Reserve(ctx context.Context, key string, period int64, amount, limit cost.Money, ttl time.Duration) (bool, cost.Money, error) {
	ok, used, _, err := s.ReserveAs(ctx, "", key, period, amount, limit, ttl)
	return ok, used, err
}

// ReserveAs is Reserve made by the replica id, in the same one script: it
// also records id in the key's hash, as the field "r:<id>" holding the
// server's TIME in milliseconds, deletes the fields of replicas not seen
// within the last minute, and reports how many were, id included. An
// empty id records and counts nothing (replicas is then 0).
func (s *spendStore) ReserveAs(ctx context.Context, id, key string, period int64, amount, limit cost.Money, ttl time.Duration) (bool, cost.Money, int, error) {
	k := s.key(key, period)
	res, err := s.reserve.Run(ctx, s.client, []string{k},
		strconv.FormatInt(int64(amount), 10), strconv.FormatInt(int64(limit), 10), ttlArg(ttl), id).Slice()
	if err != nil {
		return false, 0, 0, fmt.Errorf("spend key %q: reserve: %w", k, err)
	}
	const want = "want 2 integers, a string and an integer"
	if len(res) != 4 {
		return false, 0, 0, fmt.Errorf("spend key %q: the reserve script answered %v; %s", k, res, want)
	}
	ok, okOK := res[0].(int64)
	used, usedOK := res[1].(int64)
	replicas, replicasOK := res[3].(int64)
	if !okOK || !usedOK || !replicasOK {
		return false, 0, 0, fmt.Errorf("spend key %q: the reserve script answered %v; %s", k, res, want)
	}
	if repaired, _ := res[2].(string); repaired != "" {
		remote.Repaired(ctx, "spend store", k, repaired)
	}
	return ok == 1, cost.Money(used), int(replicas), nil
}

// Settle takes reserved back from key's reservations in period (never
// below 0) and adds spent to its spend: one script.
func (s *spendStore) Settle(ctx context.Context, key string, period int64, reserved, spent cost.Money, ttl time.Duration) error {
	k := s.key(key, period)
	res, err := s.settle.Run(ctx, s.client, []string{k},
		strconv.FormatInt(int64(reserved), 10), strconv.FormatInt(int64(spent), 10), ttlArg(ttl)).Result()
	if err != nil {
		return fmt.Errorf("spend key %q: settle: %w", k, err)
	}
	if repaired, _ := res.(string); repaired != "" {
		remote.Repaired(ctx, "spend store", k, repaired)
	}
	return nil
}

// Used reports key's spent and reserved in period: one HMGET. A key that
// holds a value of another type holds nothing of the budget's: 0, 0 (the
// next Reserve or Settle repairs it); so is a field that is not a whole
// number.
func (s *spendStore) Used(ctx context.Context, key string, period int64) (spent, reserved cost.Money, err error) {
	k := s.key(key, period)
	vals, err := s.client.HMGet(ctx, k, "spent", "reserved").Result()
	if redis.HasErrorPrefix(err, "WRONGTYPE") {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("spend key %q: used: %w", k, err)
	}
	if len(vals) != 2 {
		return 0, 0, fmt.Errorf("spend key %q: HMGET answered %v; want 2 values", k, vals)
	}
	return money(vals[0]), money(vals[1]), nil
}

// money parses a field HMGET returned: 0 for none or one that is not a
// whole number.
func money(v any) cost.Money {
	str, ok := v.(string)
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(str, 10, 64)
	if err != nil {
		return 0
	}
	return cost.Money(n)
}
