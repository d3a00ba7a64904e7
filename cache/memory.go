package cache

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backstop-llm/backstop/internal/problems"
	lru "github.com/hashicorp/golang-lru/v2"
)

// Defaults of NewMemory's zero arguments.
const (
	// defaultMaxEntries is how many answers a Memory keeps when NewMemory
	// is given maxEntries 0. Each entry costs its Value, its key and under
	// 200 bytes of bookkeeping: 10,000 answers of 1 KiB under keys from Key
	// take about 13 MB.
	defaultMaxEntries = 10_000
	// defaultTTL is how long a Memory keeps an answer when NewMemory is
	// given ttl 0 and Set is given ttl 0.
	defaultTTL = 24 * time.Hour
)

// Memory is a Store in process memory: a least-recently-used cache of at
// most a fixed number of entries (hashicorp/golang-lru/v2's lru.Cache),
// each kept for a time to live. It is safe for concurrent use. Build one
// with NewMemory; the zero value is not usable. Each Memory is local to its
// process: replicas do not share it.
//
// Expiry is checked on read, on the clock of time.Now: an entry Set at t
// with ttl d is served until just before t+d and is absent from t+d on (an
// entry is never served at exactly t+d). Get removes an expired entry it
// finds. An expired entry nobody reads stays until it is replaced or is
// evicted as the least recently used, so it still counts in Len. Entry.Stored
// plays no part in expiry.
//
// Beyond maxEntries, Set evicts the least recently used entry; Get and Set
// of an entry make it the most recently used.
//
// No goroutine is ever started, so there is nothing to close, and a Memory
// built inside a testing/synctest bubble expires entries on the bubble's
// virtual clock.
type Memory struct {
	lru *lru.Cache[string, item]
	ttl time.Duration

	// seq numbers the Sets, so that the removal of an expired entry
	// removes that entry and not a newer one Set under the same key.
	seq atomic.Uint64
	// mu is held shared by Set around its Add and exclusively by the
	// removal of an expired entry, which makes that removal's "is it still
	// the same entry" check and its Remove one step. Get of a live entry
	// does not take it.
	mu sync.RWMutex
}

// item is what the LRU holds for one key: the caller's Entry (with its own
// copy of the bytes) and when it expires.
type item struct {
	value   []byte
	stored  time.Time
	expires time.Time // carries a monotonic reading
	seq     uint64
}

var _ Store = (*Memory)(nil)

// errHead begins every configuration problem of the package's stores.
var errHead = problems.Head("cache: invalid configuration")

// MemoryConfig configures NewMemory. The zero value means every default.
type MemoryConfig struct {
	// MaxEntries is the most entries the store keeps; the least recently
	// used goes first. 0 means 10,000; negative is an
	// error. Size it to the distinct questions worth answering when every
	// model is down.
	MaxEntries int
	// TTL is how long an entry is kept when Set is given ttl 0. 0 means
	// 24h; negative is an error. Size it to how old an answer
	// may be and still be worth serving.
	TTL time.Duration
}

// withDefaults returns c with every zero field set to its default.
func (c MemoryConfig) withDefaults() MemoryConfig {
	c.MaxEntries = cmp.Or(c.MaxEntries, defaultMaxEntries)
	c.TTL = cmp.Or(c.TTL, defaultTTL)
	return c
}

// Validate reports every problem with c at once, each wrapping
// llm.ErrInvalidConfig and naming the field.
func (c MemoryConfig) Validate() error {
	found := problems.In(errHead, "memory store")
	problems.NotNegative(found, "MaxEntries", c.MaxEntries, defaultMaxEntries)
	problems.NotNegative(found, "TTL", c.TTL, defaultTTL)
	return found.Err()
}

// NewMemory returns an empty Memory configured by cfg (the zero
// MemoryConfig for every default), or cfg's problems.
func NewMemory(cfg MemoryConfig) (*Memory, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	maxEntries, ttl := cfg.MaxEntries, cfg.TTL
	c, err := lru.New[string, item](maxEntries)
	if err != nil { // unreachable: maxEntries is positive
		return nil, fmt.Errorf("%w: memory store: %w", errHead, err)
	}
	return &Memory{lru: c, ttl: ttl}, nil
}

// Get returns a copy of the entry stored under key and makes it the most
// recently used. ok is false when there is none or it has expired; an
// expired entry is removed. The only error is ctx.Err() when ctx is already
// done.
func (m *Memory) Get(ctx context.Context, key string) (Entry, bool, error) {
	if err := ctx.Err(); err != nil {
		return Entry{}, false, err
	}
	it, ok := m.lru.Get(key)
	if !ok {
		return Entry{}, false, nil
	}
	if !time.Now().Before(it.expires) {
		m.removeExpired(key, it.seq)
		return Entry{}, false, nil
	}
	return Entry{Value: bytes.Clone(it.value), Stored: it.stored}, true, nil
}

// removeExpired removes the entry under key if it is still the one Set
// with number seq: a Set between the Get that found it expired and this
// removal must not be lost.
func (m *Memory) removeExpired(key string, seq uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.lru.Peek(key); ok && cur.seq == seq {
		m.lru.Remove(key)
	}
}

// Set stores a copy of e under key for ttl (0 means the Memory's ttl),
// replacing any entry already there, and makes it the most recently used;
// beyond maxEntries the least recently used entry is evicted. A zero
// e.Stored is set to time.Now(). It returns ctx.Err() when ctx is already
// done, and an error matching ErrInvalidTTL when ttl is negative; nothing is
// stored then.
func (m *Memory) Set(ctx context.Context, key string, e Entry, ttl time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if ttl < 0 {
		return fmt.Errorf("%w: memory store: ttl is %v; it must not be negative (0 means the store's default, %v)", ErrInvalidTTL, ttl, m.ttl)
	}
	ttl = cmp.Or(ttl, m.ttl)
	now := time.Now()
	if e.Stored.IsZero() {
		e.Stored = now
	}
	it := item{value: bytes.Clone(e.Value), stored: e.Stored, expires: now.Add(ttl), seq: m.seq.Add(1)}
	m.mu.RLock()
	m.lru.Add(key, it)
	m.mu.RUnlock()
	return nil
}

// size returns how many entries the Memory holds, expired ones that have not
// been read since they expired included. It is at most maxEntries.
func (m *Memory) size() int {
	return m.lru.Len()
}
