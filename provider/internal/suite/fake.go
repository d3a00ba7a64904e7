package suite

import (
	"testing"
	"time"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/fake"
)

// StartFake starts a provider/fake server on a loopback port, closed when
// t ends.
func StartFake(t testing.TB) *fake.Server {
	t.Helper()
	s := fake.New()
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// FakeOutcome is an error outcome of provider/fake, the kind every adapter
// classifies it as, and the RetryAfter it reads from it (0 when the
// outcome asks for none).
type FakeOutcome struct {
	Name       string
	Outcome    fake.Outcome
	Kind       llm.Kind
	RetryAfter time.Duration
}

// FakeOutcomes are the error outcomes each SDK module's TestFake drives
// through every platform's client.
func FakeOutcomes() []FakeOutcome {
	return []FakeOutcome{
		{"overloaded", fake.Overloaded(), llm.KindOverloaded, 0},
		{"rate limited", fake.RateLimited("7"), llm.KindRateLimited, 7 * time.Second},
		{"spend cap", fake.SpendCap(), llm.KindQuota, 0},
		{"context too long", fake.ContextTooLong(), llm.KindContextLength, 0},
		{"server error", fake.ServerError(), llm.KindServer, 0},
	}
}
