package retry

import (
	"net/http"
	"time"

	"github.com/backstop-llm/backstop/llm"
)

// MaxRetryAfter is the longest wait ParseRetryAfter reports: larger values
// (a far-off date, an overflowing number) are clamped to it.
const MaxRetryAfter = llm.MaxRetryAfter

// ParseRetryAfter reads the wait a response asks for. It looks at
// retry-after-ms first (milliseconds, as the official SDKs do), then at
// Retry-After, which RFC 9110 allows as delay-seconds or as an HTTP-date in
// any of three forms (IMF-fixdate "Sun, 06 Nov 1994 08:49:37 GMT", RFC 850
// "Sunday, 06-Nov-94 08:49:37 GMT", asctime "Sun Nov  6 08:49:37 1994").
// A date is measured from now; one in the past means no wait (0, true).
// Negative numbers and garbage report false; absurd values are clamped to
// MaxRetryAfter.
func ParseRetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	return llm.RetryAfter(h, now)
}
