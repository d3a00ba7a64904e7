package redistest

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a client is left open.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// recorder records Skipf and Fatalf instead of ending the test.
type recorder struct {
	testing.TB
	skipped, fatal string
}

func (r *recorder) Helper() {}
func (r *recorder) Skipf(format string, args ...any) {
	r.skipped = fmt.Sprintf(format, args...)
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
}

// closedAddr returns an address nothing listens on.
func closedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestAddrUnreachable(t *testing.T) {
	addr := closedAddr(t)
	t.Setenv(EnvAddr, addr)

	t.Setenv("CI", "")
	r := &recorder{TB: t}
	if got := Addr(r); got != "" || r.fatal != "" || !strings.Contains(r.skipped, addr) ||
		!strings.Contains(r.skipped, "apt-get install -y redis-server") || !strings.Contains(r.skipped, EnvAddr) {
		t.Fatalf("without CI: Addr = %q, skipped %q, fatal %q; want a skip saying how to start Redis", got, r.skipped, r.fatal)
	}

	t.Setenv("CI", "true")
	r = &recorder{TB: t}
	if got := Addr(r); got != "" || r.skipped != "" || !strings.Contains(r.fatal, addr) || !strings.Contains(r.fatal, "CI=true") {
		t.Fatalf("with CI=true: Addr = %q, skipped %q, fatal %q; want a failure", got, r.skipped, r.fatal)
	}
}

func TestClientAndPrefix(t *testing.T) {
	ctx := context.Background()
	var prefix string
	t.Run("writes", func(t *testing.T) {
		c := Client(t)
		prefix = Prefix(t)
		if other := Prefix(t); other == prefix {
			t.Fatalf("two Prefix calls gave %q", prefix)
		}
		if !strings.HasPrefix(prefix, "backstop-test:TestClientAndPrefix/writes:") {
			t.Fatalf("Prefix = %q; want it to name the test", prefix)
		}
		for i := range 3 {
			if err := c.Set(ctx, fmt.Sprint(prefix, i), "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
	})
	// The subtest's keys are gone with it.
	c := Client(t)
	keys, err := c.Keys(ctx, prefix+"*").Result()
	if err != nil || len(keys) != 0 {
		t.Fatalf("keys under %q after the test: %q, %v; want none", prefix, keys, err)
	}
}

func TestSanitize(t *testing.T) {
	if got, want := sanitize("TestX/sub_case-1.2 with [glob]*?\\"), "TestX/sub_case-1.2_with__glob____"; got != want {
		t.Fatalf("sanitize = %q; want %q", got, want)
	}
}
