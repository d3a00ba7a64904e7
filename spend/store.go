package spend

import (
	"context"
	"time"

	"github.com/backstop-llm/backstop/cost"
)

// Store keeps what each key of a budget has spent and has reserved in
// each period, and changes it atomically. NewMemory keeps it in process;
// redisstore.Store.Spend keeps it on Redis, one key per budget key and
// period (Cluster-safe), for the replicas to share; Shared makes such a
// store's outage harmless.
//
// period is the start of the period, in Unix seconds; a store may forget
// a period once ttl has passed after its last change.
type Store interface {
	// Reserve adds amount to key's reservations in period iff spent plus
	// reserved plus amount stays within limit, and reports whether it did
	// and the spent plus reserved after it (before it, when it did not).
	Reserve(ctx context.Context, key string, period int64, amount, limit cost.Money, ttl time.Duration) (ok bool, used cost.Money, err error)
	// Settle takes reserved back from key's reservations in period and
	// adds spent to its spend (either may be 0).
	Settle(ctx context.Context, key string, period int64, reserved, spent cost.Money, ttl time.Duration) error
	// Used reports what key spent and holds reserved in period.
	Used(ctx context.Context, key string, period int64) (spent, reserved cost.Money, err error)
}
