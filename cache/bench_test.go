package cache

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// benchValue is the size of a typical remembered answer: a small JSON
// document.
var benchValue = []byte(`{"text":"` + strings.Repeat("a", 500) + `"}`)

func benchMemory(b *testing.B, keys int) (*Memory, []string) {
	b.Helper()
	m := newMemory(b, 0, 24*time.Hour)
	ks := make([]string, keys)
	for i := range ks {
		ks[i] = Key("bench", fmt.Sprint(i))
		mustSet(b, m, ks[i], string(benchValue), 0)
	}
	return m, ks
}

// overKeys runs op on the keys of a memory of 1,000 entries in turn, as
// the sub-benchmarks prefix+"serial" and prefix+"parallel".
func overKeys(b *testing.B, prefix string, op func(m *Memory, key string) error) {
	b.Run(prefix+"serial", func(b *testing.B) {
		m, ks := benchMemory(b, 1000)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if err := op(m, ks[i%len(ks)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run(prefix+"parallel", func(b *testing.B) {
		m, ks := benchMemory(b, 1000)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				if err := op(m, ks[i%len(ks)]); err != nil {
					panic(err)
				}
				i++
			}
		})
	})
}

var errMiss = errors.New("miss")

func BenchmarkMemoryGet(b *testing.B) {
	ctx := context.Background()
	overKeys(b, "hit/", func(m *Memory, key string) error {
		if _, ok, _ := m.Get(ctx, key); !ok {
			return errMiss
		}
		return nil
	})
	b.Run("miss/serial", func(b *testing.B) {
		m, _ := benchMemory(b, 1000)
		key := Key("absent")
		b.ReportAllocs()
		for b.Loop() {
			if _, ok, _ := m.Get(ctx, key); ok {
				b.Fatal("hit")
			}
		}
	})
}

func BenchmarkMemorySet(b *testing.B) {
	ctx := context.Background()
	overKeys(b, "replace/", func(m *Memory, key string) error {
		return m.Set(ctx, key, Entry{Value: benchValue}, 0)
	})
	b.Run("evict/serial", func(b *testing.B) {
		// Every Set adds a new key to a full cache and evicts the oldest.
		m := newMemory(b, 1000, time.Hour)
		ks := make([]string, 4096)
		for i := range ks {
			ks[i] = Key("bench", fmt.Sprint(i))
		}
		for _, k := range ks[:1000] {
			mustSet(b, m, k, "v", 0)
		}
		b.ReportAllocs()
		i := 1000
		for b.Loop() {
			if err := m.Set(ctx, ks[i%len(ks)], Entry{Value: benchValue}, 0); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

func BenchmarkKey(b *testing.B) {
	parts := []string{"support-answer", "system", strings.Repeat("You are a helpful support agent. ", 20), "user", "How do I reset my password?"}
	b.ReportAllocs()
	for b.Loop() {
		Key(parts...)
	}
}
