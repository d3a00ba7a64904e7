package wire

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/backstop-llm/backstop/llm"
)

// ShouldRetry reads the x-should-retry header: a pointer to true or false,
// or nil when the header is absent or holds anything else.
func ShouldRetry(h http.Header) *bool {
	var b bool
	switch v := strings.TrimSpace(h.Get("X-Should-Retry")); {
	case strings.EqualFold(v, "true"):
		b = true
	case strings.EqualFold(v, "false"):
		b = false
	default:
		return nil
	}
	return &b
}

// Int reads a header holding a non-negative decimal integer.
func Int(h http.Header, name string) (int, bool) {
	v := h.Get(name)
	if v == "" {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// Allowance reads one rate-limit bucket from the headers named limit,
// remaining and reset; parseReset turns the reset header into an absolute
// time, given when the response arrived. Figures that are absent or garbled
// are left zero.
func Allowance(h http.Header, limit, remaining, reset string, received time.Time,
	parseReset func(v string, received time.Time) (time.Time, bool)) llm.Allowance {
	var a llm.Allowance
	if n, ok := Int(h, limit); ok {
		a.Limit = int32(min(n, math.MaxInt32))
	}
	if n, ok := Int(h, remaining); ok {
		a.Remaining = int32(min(n, math.MaxInt32))
	}
	if v := h.Get(reset); v != "" {
		if t, ok := parseReset(strings.TrimSpace(v), received); ok {
			a.Reset = t
		}
	}
	return a
}
