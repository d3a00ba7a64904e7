package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/internal/remote"
	"github.com/redis/go-redis/v9"
)

// breakers is a breaker.Store in Redis: one hash under the key, with a
// field per name and kind, "o:<name>" for an open breaker and "g:<name>"
// for a closed gate, whose value is when it ends in milliseconds of the
// Redis server's TIME. Reading the server's clock inside the scripts makes
// replicas whose clocks disagree agree. Every write drops the fields that
// have ended and sets the key to expire with its last field, so nothing
// lingers; a read gives a hash that has no TTL (written by something else)
// one the same way. The key is the store's: a value of another type under
// it (a string SET there, say) would fail every round trip, so the script
// that finds one deletes it and goes on, and reports it (breaker.Shared
// logs it). Every method is one round trip, a Lua script.
type breakers struct {
	client      redis.UniversalClient
	read, write *redis.Script
	keys        []string // the one key, as the scripts' KEYS
}

var _ breaker.Store = (*breakers)(nil)

func newBreakers(client redis.UniversalClient, key string) *breakers {
	return &breakers{client: client, read: redis.NewScript(sharedRead), write: redis.NewScript(sharedWrite), keys: []string{key}}
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
const sharedWrite = hashPrelude + `local t = redis.call('TIME')
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

func (s *breakers) Key() string { return s.keys[0] }

// Load returns every field that has not ended, one remote.Published per name, or
// the type of the value of another type it deleted.
func (s *breakers) Load(ctx context.Context) ([]remote.Published, string, error) {
	res, err := s.read.Run(ctx, s.client, s.keys, maxPublishArg).Result()
	if err != nil {
		return nil, "", err
	}
	vals, ok := res.([]any)
	if ok && len(vals) == 1 { // a value of another type, deleted
		kind, _ := vals[0].(string)
		return nil, kind, nil
	}
	if !ok || len(vals)%2 != 0 {
		return nil, "", fmt.Errorf("the read script answered %v; want field, milliseconds pairs", res)
	}
	var out []remote.Published
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
			out = append(out, remote.Published{Name: name})
		}
		d := time.Duration(ms) * time.Millisecond
		switch field[0] {
		case 'o':
			out[j].Open = d
		case 'g':
			out[j].Gate = d
		}
	}
	return out, "", nil
}

// PublishOpen keeps the later of the stored end and now + d, rounded up to
// a millisecond.
func (s *breakers) PublishOpen(ctx context.Context, name string, d time.Duration) (string, error) {
	return s.publish(ctx, "o", name, ms(d))
}

// PublishClosed removes name's open field.
func (s *breakers) PublishClosed(ctx context.Context, name string) (string, error) {
	return s.publish(ctx, "c", name, "0")
}

// PublishGate keeps the later of the stored end and now + d, rounded up to
// a millisecond.
func (s *breakers) PublishGate(ctx context.Context, name string, d time.Duration) (string, error) {
	return s.publish(ctx, "g", name, ms(d))
}

// publish runs the write script, and returns the type of the value of
// another type it found under the key and deleted.
func (s *breakers) publish(ctx context.Context, op, name, ms string) (string, error) {
	res, err := s.write.Run(ctx, s.client, s.keys, op, name, ms, maxPublishArg).Result()
	if err != nil {
		return "", err
	}
	kind, _ := res.(string)
	return kind, nil
}

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
