package ledger

import (
	"context"
	"sync"
	"time"
)

// NewMemory returns a Ledger kept in process, for one replica (tests, a
// single process, or a fallback): entries in a map guarded by a mutex. A
// Done entry is forgotten once its ttl has passed (never when ttl <= 0),
// a Started one an hour after its lease ended (meanwhile it reads as
// outcome unknown), lazily. Its clock is time.Now.
func NewMemory() Ledger { return &memory{m: map[string]*memEntry{}} }

// forgetAfter is how long a Started entry outlives its lease.
const forgetAfter = time.Hour

// forever is a keeping time no clock reaches.
var forever = time.Unix(1<<62, 0)

type memory struct {
	mu    sync.Mutex
	m     map[string]*memEntry
	swept time.Time
}

type memEntry struct {
	Entry
	keep time.Time // forgotten after
}

// Begin implements Ledger.
func (l *memory) Begin(_ context.Context, key, owner string, lease time.Duration, takeover bool) (Entry, error) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now)
	e, ok := l.m[key]
	if ok && now.After(e.keep) {
		delete(l.m, key)
		ok = false
	}
	if ok && !(takeover && e.Expired(now)) {
		return e.Entry, nil
	}
	var was Entry
	if ok {
		was = e.Entry
	}
	until := now.Add(lease)
	l.m[key] = &memEntry{Entry: Entry{State: Started, Owner: owner, Until: until}, keep: until.Add(forgetAfter)}
	return was, nil
}

// Finish implements Ledger.
func (l *memory) Finish(_ context.Context, key, owner string, result []byte, ttl time.Duration) error {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.m[key]
	if !ok || e.State != Started || e.Owner != owner {
		return ErrNotOwner
	}
	e.State, e.Result, e.Until = Done, append([]byte(nil), result...), time.Time{}
	e.keep = now.Add(ttl)
	if ttl <= 0 {
		e.keep = forever
	}
	return nil
}

// Get implements Ledger.
func (l *memory) Get(_ context.Context, key string) (Entry, error) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.m[key]
	if !ok || now.After(e.keep) {
		return Entry{}, nil
	}
	return e.Entry, nil
}

// sweep forgets the entries past keeping, at most once a minute. l.mu is
// held.
func (l *memory) sweep(now time.Time) {
	if now.Sub(l.swept) < time.Minute {
		return
	}
	l.swept = now
	for k, e := range l.m {
		if now.After(e.keep) {
			delete(l.m, k)
		}
	}
}
