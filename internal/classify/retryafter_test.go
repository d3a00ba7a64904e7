package classify

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
		{"Sun, 06 Nov 2094 08:49:37 GMT", maxRetryAfter, true},    // absurd: clamped
		{"99999999999999999999999", maxRetryAfter, true},
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
		got, ok := parseRetryAfter(tt.in, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
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
		d, ok := parseRetryAfter(s, now)
		if d < 0 || d > maxRetryAfter {
			t.Fatalf("parseRetryAfter(%q) = %v out of [0, %v]", s, d, maxRetryAfter)
		}
		if !ok && d != 0 {
			t.Fatalf("parseRetryAfter(%q) = %v but not ok", s, d)
		}
		m, ok := parseRetryAfterMillis(s)
		if m < 0 || m > maxRetryAfter || !ok && m != 0 {
			t.Fatalf("parseRetryAfterMillis(%q) = %v, %v", s, m, ok)
		}
	})
}

// TestRetryAfterForms and FuzzRetryAfter came from package retry, whose
// ParseRetryAfter was another name for RetryAfter.
func TestRetryAfterForms(t *testing.T) {
	now := time.Date(1994, 11, 6, 8, 49, 33, 0, time.UTC)
	for _, v := range []string{"4", "Sun, 06 Nov 1994 08:49:37 GMT",
		"Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994"} {
		h := http.Header{"Retry-After": {v}}
		if d, ok := RetryAfter(h, now); !ok || d != 4*time.Second {
			t.Errorf("%q: %v %v, want 4s", v, d, ok)
		}
	}
	h := http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"9"}}
	if d, ok := RetryAfter(h, now); !ok || d != 250*time.Millisecond {
		t.Errorf("retry-after-ms first: %v %v", d, ok)
	}
}

func FuzzRetryAfter(f *testing.F) {
	f.Add("4", "")
	f.Add("Sun, 06 Nov 1994 08:49:37 GMT", "1500")
	f.Add("garbage", "-3")
	now := time.Date(1994, 11, 6, 8, 49, 33, 0, time.UTC)
	f.Fuzz(func(t *testing.T, ra, ms string) {
		h := http.Header{}
		h.Set("Retry-After", ra)
		h.Set("Retry-After-Ms", ms)
		d, ok := RetryAfter(h, now)
		if d < 0 || d > maxRetryAfter || (!ok && d != 0) {
			t.Fatalf("(%q, %q) = %v, %v", ra, ms, d, ok)
		}
	})
}
