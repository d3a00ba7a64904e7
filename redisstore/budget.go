package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/backstop-llm/backstop/budget"
	"github.com/backstop-llm/backstop/internal/remote"
	"github.com/redis/go-redis/v9"
)

// budgetStore is a budget.Store in Redis: one hash under the key, with a
// field per bucket and kind, "f<epoch>" counting first attempts and
// "r<epoch>" granted retries, where epoch is the Redis server's TIME
// divided by the bucket length. Each round trip is one Lua script
// (sharedScript) that drops the buckets that have left the window, counts,
// decides and sets the key to expire, atomically. A value of another type
// under the key is deleted, and reported (budget.Shared logs it).
type budgetStore struct {
	client redis.UniversalClient
	script *redis.Script
	keys   []string // the one key, as the script's KEYS
	// shape is the window of the last op, formatted as the script's
	// ARGV[3:]: a Shared gives every op the same one, formatted once.
	shape atomic.Pointer[budgetShape]
}

// budgetShape is a window, as given and as formatted.
type budgetShape struct {
	op   remote.BudgetOp // Kind and Pending zero
	args []any
}

var _ budget.Store = (*budgetStore)(nil)

func newBudget(client redis.UniversalClient, key string) *budgetStore {
	return &budgetStore{client: client, script: redis.NewScript(sharedScript), keys: []string{key}}
}

// sharedScript is the Lua source of every budget round trip: one call reads
// the window, writes what changed and decides, atomically (see
// remote.BudgetOp).
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
const sharedScript = hashPrelude + `local op = tonumber(ARGV[1])
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

func (s *budgetStore) Key() string { return s.keys[0] }

// Run runs the script once.
func (s *budgetStore) Run(ctx context.Context, op remote.BudgetOp) (remote.BudgetResult, error) {
	statics := s.statics(op)
	args := make([]any, 0, 2+len(statics))
	args = append(append(args, int64(op.Kind), op.Pending), statics...)
	res, err := s.script.Run(ctx, s.client, s.keys, args...).Slice()
	if err != nil {
		return remote.BudgetResult{}, err
	}
	return parseAnswer(res)
}

// statics returns op's window as ARGV[3:]: [3] bucket length in
// microseconds; [4] buckets per window; [5] Ratio in millionths; [6] the
// floor; [7] the key's TTL in milliseconds.
func (s *budgetStore) statics(op remote.BudgetOp) []any {
	op.Kind, op.Pending = 0, 0
	if sh := s.shape.Load(); sh != nil && sh.op == op {
		return sh.args
	}
	sh := &budgetShape{op: op, args: []any{
		strconv.FormatInt(int64(op.Bucket/time.Microsecond), 10),
		strconv.Itoa(op.Buckets),
		strconv.FormatInt(op.Ratio, 10),
		strconv.FormatInt(op.Floor, 10),
		strconv.FormatInt(int64(op.TTL/time.Millisecond), 10),
	}}
	s.shape.Store(sh)
	return sh.args
}

// parseAnswer reads the script's answer, {granted, firsts, retries,
// repaired}.
func parseAnswer(res []any) (remote.BudgetResult, error) {
	var v [3]int64
	if len(res) != len(v)+1 {
		return remote.BudgetResult{}, fmt.Errorf("the script answered %v; want 3 integers and a string", res)
	}
	for i := range v {
		n, ok := res[i].(int64)
		if !ok {
			return remote.BudgetResult{}, fmt.Errorf("the script answered %v; want 3 integers and a string", res)
		}
		v[i] = n
	}
	repaired, _ := res[3].(string)
	return remote.BudgetResult{Granted: v[0] == 1, Firsts: v[1], Retries: v[2], Repaired: repaired}, nil
}
