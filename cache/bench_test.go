package cache

import (
	"context"
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

func BenchmarkMemoryGet(b *testing.B) {
	ctx := context.Background()
	b.Run("hit/serial", func(b *testing.B) {
		m, ks := benchMemory(b, 1000)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, ok, _ := m.Get(ctx, ks[i%len(ks)]); !ok {
				b.Fatal("miss")
			}
			i++
		}
	})
	b.Run("hit/parallel", func(b *testing.B) {
		m, ks := benchMemory(b, 1000)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				if _, ok, _ := m.Get(ctx, ks[i%len(ks)]); !ok {
					panic("miss")
				}
				i++
			}
		})
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
	b.Run("replace/serial", func(b *testing.B) {
		m, ks := benchMemory(b, 1000)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if err := m.Set(ctx, ks[i%len(ks)], Entry{Value: benchValue}, 0); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("replace/parallel", func(b *testing.B) {
		m, ks := benchMemory(b, 1000)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				if err := m.Set(ctx, ks[i%len(ks)], Entry{Value: benchValue}, 0); err != nil {
					panic(err)
				}
				i++
			}
		})
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
