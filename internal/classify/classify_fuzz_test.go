package classify

import (
	"net/http"
	"testing"
	"time"

	"github.com/backstop-llm/backstop/llm"
)

// FuzzClassify: whatever a reply holds, Classify returns an error of a
// known kind, with a wait within [0, maxRetryAfter].
func FuzzClassify(f *testing.F) {
	f.Add(uint8(3), 429, "RESOURCE_EXHAUSTED", "", "quota", `{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"30s"}]}}`, "2")
	f.Add(uint8(1), 529, "overloaded_error", "", "", `{"type":"error"}`, "Tue, 01 Dec 2026 12:00:30 GMT")
	f.Add(uint8(2), 400, "", "context_length_exceeded", "", "", "")
	f.Add(uint8(4), 503, "ServiceUnavailableException:x", "", "", "", "-1")
	f.Fuzz(func(t *testing.T, v uint8, status int, typ, code, msg, body, retryAfter string) {
		h := http.Header{}
		h.Set("Retry-After", retryAfter)
		h.Set("Retry-After-Ms", retryAfter)
		h.Set("Anthropic-Ratelimit-Requests-Limit", retryAfter)
		h.Set("X-Ratelimit-Reset-Tokens", retryAfter)
		e := Classify("p", Vendor(v%5), Reply{Status: status, Header: h, Type: typ, Code: code, Message: msg, Body: []byte(body), Received: time.Unix(1_800_000_000, 0)})
		if e.Kind > llm.KindCanceled || e.RetryAfter < 0 || e.RetryAfter > maxRetryAfter {
			t.Fatalf("kind %d, wait %v", e.Kind, e.RetryAfter)
		}
		if e.RateLimit.Requests.Limit < 0 {
			t.Fatalf("negative limit %+v", e.RateLimit)
		}
	})
}
