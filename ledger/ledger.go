package ledger

import (
	"context"
	"errors"
	"time"
)

// State is where a key's side effect stands.
type State uint8

// The states of a key.
const (
	// Absent: nothing is recorded; Begin has just recorded it Started
	// for the caller, who may run the side effect.
	Absent State = iota
	// Started: an owner began the side effect and has not finished it.
	// Entry.Until says until when its lease runs: past it, the owner is
	// presumed dead and the outcome unknown (Entry.Expired).
	Started
	// Done: the side effect ran and Entry.Result is what it returned.
	Done
)

// String returns the state's name: "absent", "started" or "done".
func (s State) String() string {
	switch s {
	case Started:
		return "started"
	case Done:
		return "done"
	}
	return "absent"
}

// Entry is what a Ledger holds for a key.
type Entry struct {
	State State
	// Owner is who began the side effect (Started and Done).
	Owner string
	// Until is when a Started owner's lease ends.
	Until time.Time
	// Result is what the side effect returned (Done): replayed, never
	// recomputed.
	Result []byte
}

// Expired reports whether e is Started and its owner's lease ended
// before now: the outcome is unknown.
func (e Entry) Expired(now time.Time) bool { return e.State == Started && !now.Before(e.Until) }

// ErrNotOwner is returned by Finish when the key is not Started by the
// owner finishing it: another owner took it over after the lease ran out,
// or it is done already.
var ErrNotOwner = errors.New("ledger: the key is not held by this owner")

// ErrUnavailable is matched by the errors of a ledger whose store (Redis)
// did not answer: the side effect must not run blind (see agent's rule).
var ErrUnavailable = errors.New("ledger: unavailable")

// Ledger records side effects by key, atomically: of concurrent Begins on
// an absent key (on any replica sharing the ledger) exactly one is told
// Absent. Implementations are safe for concurrent use.
type Ledger interface {
	// Begin records key Started by owner until now+lease iff it is
	// Absent, or Started by another owner whose lease has ended and
	// takeover is true, and returns the entry as it was before (Absent:
	// the caller now holds the key and may run the side effect). In any
	// other case it changes nothing and returns the entry found.
	Begin(ctx context.Context, key, owner string, lease time.Duration, takeover bool) (Entry, error)
	// Finish records key Done with result, kept for ttl, iff owner holds
	// it (Started by owner); else ErrNotOwner.
	Finish(ctx context.Context, key, owner string, result []byte, ttl time.Duration) error
	// Get returns key's entry; Absent when none.
	Get(ctx context.Context, key string) (Entry, error)
}
