package llm

import (
	"net/http"
	"testing"
	"time"
)

var now = time.Date(1994, time.November, 6, 8, 49, 30, 0, time.UTC)

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"4", 4 * time.Second, true},
		{" 120 ", 2 * time.Minute, true},
		{"0", 0, true},
		{"1.5", 1500 * time.Millisecond, true},
		{"Sun, 06 Nov 1994 08:49:37 GMT", 7 * time.Second, true},  // IMF-fixdate
		{"Sunday, 06-Nov-94 08:49:37 GMT", 7 * time.Second, true}, // RFC 850
		{"Sun Nov  6 08:49:37 1994", 7 * time.Second, true},       // asctime
		{"Sun, 06 Nov 1994 08:49:00 GMT", 0, true},                // past: no wait
		{"Sun, 06 Nov 2094 08:49:37 GMT", MaxRetryAfter, true},    // absurd: clamped
		{"99999999999999999999999", MaxRetryAfter, true},
		{"1e3", 0, false},
		{"0x10", 0, false},
		{"Inf", 0, false},
		{"NaN", 0, false},
		{"-1", 0, false},
		{"+5", 0, false},
		{"1_000", 0, false},
		{"soon", 0, false},
		{"", 0, false},
		{"Sun, 06 Nov 1994 08:49:37 PST", 0, false},
	}
	for _, tt := range tests {
		got, ok := ParseRetryAfter(tt.in, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestFromHeader(t *testing.T) {
	h := http.Header{}
	if _, ok := RetryAfter(h, now); ok {
		t.Fatal("empty header reported a wait")
	}
	h.Set("Retry-After", "3")
	if d, ok := RetryAfter(h, now); !ok || d != 3*time.Second {
		t.Fatalf("retry-after 3 = %v, %v", d, ok)
	}
	h.Set("Retry-After-Ms", "1574")
	if d, ok := RetryAfter(h, now); !ok || d != 1574*time.Millisecond {
		t.Fatalf("retry-after-ms wins: got %v, %v", d, ok)
	}
	h.Set("Retry-After-Ms", "garbage")
	if d, ok := RetryAfter(h, now); !ok || d != 3*time.Second {
		t.Fatalf("bad retry-after-ms falls back to retry-after: got %v, %v", d, ok)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"4", "1.5", "Sun, 06 Nov 1994 08:49:37 GMT",
		"Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994", "-1", "1e400", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := ParseRetryAfter(s, now)
		if d < 0 || d > MaxRetryAfter {
			t.Fatalf("ParseRetryAfter(%q) = %v out of [0, %v]", s, d, MaxRetryAfter)
		}
		if !ok && d != 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v but not ok", s, d)
		}
		m, ok := ParseRetryAfterMillis(s)
		if m < 0 || m > MaxRetryAfter || !ok && m != 0 {
			t.Fatalf("ParseRetryAfterMillis(%q) = %v, %v", s, m, ok)
		}
	})
}
