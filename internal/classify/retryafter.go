package classify

// The waits a server asks for: the Retry-After header of RFC 9110
// (delay-seconds or an HTTP-date in any of its three forms) and the
// retry-after-ms header some providers send beside it; shared by every
// adapter (through Classify) and by package retry.

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxRetryAfter is the longest wait RetryAfter and parseRetryAfter report. Larger values (a year, an overflow,
// a clock far off) are clamped to it: long enough to mean "not soon", short
// enough that a garbage header cannot close a target for good.
const maxRetryAfter = 24 * time.Hour

// RetryAfter reads the wait h asks for: retry-after-ms first (as the official
// SDKs do), then retry-after. It reports false when neither header holds a
// usable value. An HTTP-date is measured from now; a date in the past means
// no wait (0, true).
func RetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if d, ok := parseRetryAfterMillis(v); ok {
			return d, true
		}
	}
	if v := h.Get("Retry-After"); v != "" {
		return parseRetryAfter(v, now)
	}
	return 0, false
}

// parseRetryAfter reads one Retry-After value: delay-seconds (a decimal fraction is
// accepted, as some gateways send one) or an HTTP-date in IMF-fixdate,
// RFC 850 or asctime form. Negative numbers, garbage and dates that are not
// GMT report false.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if c := v[0]; c >= '0' && c <= '9' || c == '.' {
		return seconds(v, float64(time.Second))
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	if d < 0 {
		return 0, true
	}
	return min(d, maxRetryAfter), true
}

// parseRetryAfterMillis reads a retry-after-ms value: a non-negative number of
// milliseconds, possibly fractional.
func parseRetryAfterMillis(v string) (time.Duration, bool) {
	return seconds(strings.TrimSpace(v), float64(time.Millisecond))
}

func seconds(v string, unit float64) (time.Duration, bool) {
	if v == "" || v[0] == '+' || v[0] == '-' {
		return 0, false
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil && !isRange(err) || math.IsNaN(f) || f < 0 {
		return 0, false
	}
	// ParseFloat accepts hex, exponents, "Inf" and underscores; a header
	// value is plain decimal digits with at most one dot.
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < '0' || c > '9') && c != '.' {
			return 0, false
		}
	}
	d := f * unit
	if d >= float64(maxRetryAfter) {
		return maxRetryAfter, true
	}
	return time.Duration(d), true
}

func isRange(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}
