package cache

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

func TestKey(t *testing.T) {
	// The format is stable: these must not change between versions, or
	// keys shared through a store would stop matching.
	for _, tc := range []struct {
		parts []string
		input string // what is hashed
	}{
		{nil, ""},
		{[]string{""}, "\x00\x00\x00\x00\x00\x00\x00\x00"},
		{[]string{"ab", "c"}, "\x00\x00\x00\x00\x00\x00\x00\x02ab\x00\x00\x00\x00\x00\x00\x00\x01c"},
	} {
		sum := sha256.Sum256([]byte(tc.input))
		if got, want := Key(tc.parts...), hex.EncodeToString(sum[:]); got != want {
			t.Errorf("Key(%q) = %s, want %s", tc.parts, got, want)
		}
	}

	distinct := [][]string{
		nil, {""}, {"", ""}, {"abc"}, {"abc", ""}, {"", "abc"}, {"ab", "c"}, {"a", "bc"},
		{"a", "b", "c"}, {"c", "ab"}, {"support", "user", "hi"}, {"support", "user", "hi "},
		{"support", "assistant", "hi"}, {"support\x00", "user", "hi"},
		{strings.Repeat("x", 504), "y"}, {strings.Repeat("x", 505)}, {strings.Repeat("x", 504) + "y"},
	}
	seen := map[string][]string{}
	for _, parts := range distinct {
		k := Key(parts...)
		if len(k) != 64 || strings.Trim(k, "0123456789abcdef") != "" {
			t.Fatalf("Key(%q) = %q; want 64 lowercase hex digits", parts, k)
		}
		if prev, dup := seen[k]; dup {
			t.Fatalf("Key(%q) == Key(%q)", parts, prev)
		}
		seen[k] = parts
		if Key(parts...) != k {
			t.Fatalf("Key(%q) is not deterministic", parts)
		}
	}
}

// keyReference is Key written plainly, without the buffer.
func keyReference(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		var n [8]byte
		for i := range 8 {
			n[i] = byte(uint64(len(p)) >> (56 - 8*i))
		}
		h.Write(n[:])
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Parts longer than Key's buffer, and parts that end just at its edges.
func TestKeyLongParts(t *testing.T) {
	for _, sizes := range [][]int{{511}, {512}, {513}, {504, 0}, {503, 1}, {505, 3}, {4000, 0, 17}, {496, 1}, {0, 0, 0}} {
		parts := make([]string, len(sizes))
		for i, n := range sizes {
			parts[i] = strings.Repeat(string(rune('a'+i)), n)
		}
		if got, want := Key(parts...), keyReference(parts...); got != want {
			t.Fatalf("Key with part sizes %v = %s, want %s", sizes, got, want)
		}
	}
}

func FuzzKey(f *testing.F) {
	f.Add("ab", "c", "")
	f.Add("a", "bc", "d")
	f.Add("", "", "")
	f.Add("support-answer", "user", "How do I reset my password?")
	f.Add(strings.Repeat("x", 600), "\x00\x00\x00", "y")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		k := Key(a, b, c)
		if len(k) != 64 || strings.Trim(k, "0123456789abcdef") != "" {
			t.Fatalf("Key = %q; want 64 lowercase hex digits", k)
		}
		if k != keyReference(a, b, c) {
			t.Fatal("Key differs from the plain reference")
		}
		if k != Key(a, b, c) {
			t.Fatal("Key is not deterministic")
		}
		// Distinct lists of parts give distinct keys.
		differ := func(x, y []string) {
			t.Helper()
			if Key(x...) == Key(y...) {
				t.Fatalf("Key(%q) == Key(%q)", x, y)
			}
		}
		differ([]string{a, b}, []string{a + b})    // fewer parts
		differ([]string{a, b}, []string{a, b, ""}) // a trailing empty part
		differ([]string{a, b, c}, []string{a, b})  // a dropped part
		if c != "" {
			differ([]string{a + c, b}, []string{a, c + b}) // the boundary moved
		}
		if a != b {
			differ([]string{a, b}, []string{b, a}) // the order
		}
	})
}
