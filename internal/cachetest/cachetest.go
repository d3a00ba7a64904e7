// Package cachetest holds what the tests of every cache.Store share: Store,
// the checks any store must pass, and helpers that fail a test on an error.
// cache's own tests are in its package, which this one imports: they keep
// their own copies of the helpers.
package cachetest

import (
	"context"
	"testing"
	"time"

	"github.com/backstop-llm/backstop/cache"
)

// Store checks what any store does with Get and Set: an absent key is a
// zero Entry; an entry comes back as Set, its Stored included; a Set
// replaces; empty and nil values (served empty, nil or not), and the empty
// key, are stored and served;
// the store keeps its own copy of the bytes, and gives each Get its own.
// s must be empty, with a default TTL longer than the test. It leaves the
// keys "q1", "empty", "nil", "" and "copy" in s.
func Store(t *testing.T, s cache.Store) {
	t.Helper()
	ctx := context.Background()
	if e, ok, err := s.Get(ctx, "absent"); ok || err != nil || e.Value != nil || !e.Stored.IsZero() {
		t.Fatalf("Get of an absent key = %+v, %v, %v; want zero cache.Entry, false, nil", e, ok, err)
	}
	stored := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	if err := s.Set(ctx, "q1", cache.Entry{Value: []byte(`{"text":"a1"}`), Stored: stored}, 0); err != nil {
		t.Fatal(err)
	}
	e, ok, err := s.Get(ctx, "q1")
	if err != nil || !ok {
		t.Fatalf("Get = ok %v, err %v", ok, err)
	}
	if string(e.Value) != `{"text":"a1"}` || !e.Stored.Equal(stored) {
		t.Fatalf("Get = %q stored %v; want the entry as Set", e.Value, e.Stored)
	}

	// Set replaces.
	MustSet(t, s, "q1", "a1'", 0)
	WantValue(t, s, "q1", "a1'")

	// Empty and nil values are stored and served.
	MustSet(t, s, "empty", "", 0)
	WantValue(t, s, "empty", "")
	if err := s.Set(ctx, "nil", cache.Entry{}, 0); err != nil {
		t.Fatal(err)
	}
	if e, ok, _ := s.Get(ctx, "nil"); !ok || len(e.Value) != 0 {
		t.Fatalf("Get of a nil Value = %q, %v; want nothing, true", e.Value, ok)
	}
	// The empty key is a key like any other.
	MustSet(t, s, "", "blank", 0)
	WantValue(t, s, "", "blank")

	copies(t, s)
}

// copies checks that changing the bytes given to Set, or those a Get
// returned, does not change the entry, and that two Gets do not share
// bytes.
func copies(t *testing.T, s cache.Store) {
	t.Helper()
	ctx := context.Background()
	v := []byte("original")
	if err := s.Set(ctx, "copy", cache.Entry{Value: v}, 0); err != nil {
		t.Fatal(err)
	}
	copy(v, "MUTATED!")
	e, _, _ := s.Get(ctx, "copy")
	if string(e.Value) != "original" {
		t.Fatalf("changing the Set slice changed the entry: %q", e.Value)
	}
	copy(e.Value, "MUTATED!")
	_ = append(e.Value, "more"...)
	e.Value = append(e.Value[:0], "appended over"...)
	e2, _, _ := s.Get(ctx, "copy")
	if string(e2.Value) != "original" {
		t.Fatalf("changing a Get slice changed the entry: %q", e2.Value)
	}
	e3, _, _ := s.Get(ctx, "copy")
	if &e2.Value[0] == &e3.Value[0] {
		t.Fatal("two Gets returned the same bytes")
	}
}

// MustSet stores value under key for ttl, failing the test on an error.
func MustSet(t testing.TB, s cache.Store, key, value string, ttl time.Duration) {
	t.Helper()
	if err := s.Set(context.Background(), key, cache.Entry{Value: []byte(value)}, ttl); err != nil {
		t.Fatalf("Set(%q): %v", key, err)
	}
}

// Present reports whether s holds an entry under key, failing the test on
// an error.
func Present(t testing.TB, s cache.Store, key string) bool {
	t.Helper()
	_, ok, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return ok
}

// WantValue fails the test unless s holds want under key.
func WantValue(t testing.TB, s cache.Store, key, want string) {
	t.Helper()
	e, ok, err := s.Get(context.Background(), key)
	if err != nil || !ok {
		t.Fatalf("Get(%q) = ok %v, err %v; want the entry", key, ok, err)
	}
	if string(e.Value) != want {
		t.Fatalf("Get(%q) = %q; want %q", key, e.Value, want)
	}
}
