package suite

import (
	"context"
	"testing"
	"time"
)

// TestClasses: each native adapter classifies every error class of its
// format as the shared table says (the adapters over the official SDKs run
// the same rows).
func TestClasses(t *testing.T) {
	forEach(t, func(t *testing.T, a adapter) {
		for _, c := range Classes(a.name) {
			s := NewServer(t, Respond(c.Status, c.Body, append([]string{a.requestID, "req_hdr"}, c.Header...)...))
			e := a.completeErr(t, a.new(t, s.URL, nil), context.Background())
			if e.Kind != c.Kind || e.Status != c.Status || e.RequestID != "req_hdr" {
				t.Errorf("%s: kind %v status %d id %q; want %v %d req_hdr", c.Name, e.Kind, e.Status, e.RequestID, c.Kind, c.Status)
			}
			if want := time.Duration(c.RetryAfterSeconds) * time.Second; e.RetryAfter.Truncate(time.Second) != want {
				t.Errorf("%s: RetryAfter %v; want %v", c.Name, e.RetryAfter, want)
			}
			if s.Count.Load() != 1 {
				t.Errorf("%s: %d requests", c.Name, s.Count.Load())
			}
		}
	})
}
