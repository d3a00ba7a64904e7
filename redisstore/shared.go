package redisstore

import (
	"fmt"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/budget"
	"github.com/backstop-llm/backstop/internal/problems"
	"github.com/redis/go-redis/v9"
)

// Heads of the configuration problems of New and NewCache.
var (
	errHead      = problems.Head("redisstore: invalid configuration")
	errCacheHead = problems.Head("cache: invalid configuration")
)

// Store keeps the state the replicas of a service share, on one go-redis
// client: the breakers and Retry-After gates of a chain's targets
// (Breakers) and their retry budgets (Budget), each under a key of its own.
// It is a chain.Store: give it to chain.Builder.Shared, which names the
// keys. It is safe for concurrent use and holds nothing but the client.
// Build one with New.
type Store struct {
	client redis.UniversalClient
}

// New returns the store of shared state on client, which must bound its
// commands by their context (ContextTimeoutEnabled; see the package
// documentation). It makes no round trip. Errors wrap llm.ErrInvalidConfig
// and name what to change: a nil client, or one that ignores its
// contexts' deadlines.
func New(client redis.UniversalClient) (*Store, error) {
	if p := checkClient(client, "the shared stores' Timeout"); p != "" {
		return nil, fmt.Errorf("%w: %s", errHead, p)
	}
	return &Store{client: client}, nil
}

// Breakers returns the breaker.Store under key: one Redis hash holding,
// per name, when its breaker's publication ends and when its gate's does
// (see breaker.Shared). Give it to breaker.NewShared. It returns nil when
// s is nil.
func (s *Store) Breakers(key string) breaker.Store {
	if s == nil {
		return nil
	}
	return newBreakers(s.client, key)
}

// Budget returns the budget.Store under key: one Redis hash of counters
// per bucket of the window (see budget.Shared). Give it to
// budget.NewShared. It returns nil when s is nil.
func (s *Store) Budget(key string) budget.Store {
	if s == nil {
		return nil
	}
	return newBudget(s.client, key)
}

// checkClient describes what is wrong with client for a store whose round
// trips must be bounded by their context's deadline, or returns "". what
// names the store's bound in the description, such as "the store's
// Timeout". Clients other than *redis.Client, *redis.ClusterClient and
// *redis.Ring cannot be checked and pass.
func checkClient(client redis.UniversalClient, what string) string {
	var enabled bool
	switch c := client.(type) {
	case nil:
		return "client is nil; pass a go-redis client such as redis.NewClient(&redis.Options{Addr: ..., ContextTimeoutEnabled: true})"
	case *redis.Client:
		if c == nil {
			return "client is a nil *redis.Client"
		}
		enabled = c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		if c == nil {
			return "client is a nil *redis.ClusterClient"
		}
		enabled = c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		if c == nil {
			return "client is a nil *redis.Ring"
		}
		enabled = c.Options().ContextTimeoutEnabled
	default:
		return ""
	}
	if !enabled {
		return "client: ContextTimeoutEnabled is false; set ContextTimeoutEnabled: true in its options, or a slow Redis would hold a call for the client's ReadTimeout instead of " + what
	}
	return ""
}

// hashPrelude begins each script that keeps a hash under KEYS[1] (the
// budget's window, a money budget's key, the breakers' publications):
// its effects replicated rather than the script (it reads TIME), key
// naming KEYS[1], and a value of another type under it deleted, its
// type kept in repaired ("" when there was none) for the store to log.
const hashPrelude = `
if redis.replicate_commands then redis.replicate_commands() end
local key = KEYS[1]
local repaired = ''
local kind = redis.call('TYPE', key)['ok']
if kind ~= 'hash' and kind ~= 'none' then
  redis.call('DEL', key)
  repaired = kind
end
`
