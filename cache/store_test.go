package cache_test

import (
	"context"
	"testing"
	"time"

	"github.com/backstop-llm/backstop/cache"
	"github.com/backstop-llm/backstop/internal/cachetest"
)

// A Memory does what any store does with Get and Set (see cachetest.Store),
// serves a nil Value as nil, and counts each key once: replacing an entry
// adds none.
func TestMemoryStore(t *testing.T) {
	m, err := cache.NewMemory(cache.MemoryConfig{MaxEntries: 10, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	cachetest.Store(t, m)
	if e, ok, _ := m.Get(context.Background(), "nil"); !ok || e.Value != nil {
		t.Fatalf("Get of a nil Value = %v, %v; want nil, true", e.Value, ok)
	}
	if m.Len() != 5 {
		t.Fatalf("Len = %d, want 5 (q1, replaced once, empty, nil, the empty key and copy)", m.Len())
	}
}
