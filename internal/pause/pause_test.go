package pause_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/internal/pause"
)

func TestFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if err := pause.For(t.Context(), time.Second); err != nil || time.Since(start) != time.Second {
			t.Fatalf("a full wait: %v after %v", err, time.Since(start))
		}
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		start = time.Now()
		if err := pause.For(ctx, time.Second); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 100*time.Millisecond {
			t.Fatalf("cut short: %v after %v", err, time.Since(start))
		}
		if err := pause.For(ctx, 0); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("no wait on an ended context: %v", err)
		}
		if err := pause.For(t.Context(), -time.Second); err != nil {
			t.Fatalf("no wait: %v", err)
		}
	})
}
