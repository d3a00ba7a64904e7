package observe_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/observe"
)

// TestLogRecordsTheRequestIDOfEveryAttempt: the "backstop: attempt"
// record carries request_id whether the attempt answered or failed, so
// that a search of the logs by a provider's request-id finds the
// failures too: the event's RequestID, else the answer's, else the one
// its *llm.Error carries (however deeply wrapped).
func TestLogRecordsTheRequestIDOfEveryAttempt(t *testing.T) {
	overloaded := &llm.Error{Provider: "anthropic", Status: 529, Kind: llm.KindOverloaded, RequestID: "req_err"}
	for _, tc := range []struct {
		name string
		e    observe.AttemptEnd
		want string
	}{
		{"answered", observe.AttemptEnd{Status: 200, Response: &llm.Response{RequestID: "req_ok"}}, "req_ok"},
		{"failed", observe.AttemptEnd{Status: 529, Kind: llm.KindOverloaded, Err: overloaded}, "req_err"},
		{"failed, wrapped", observe.AttemptEnd{Status: 529, Kind: llm.KindOverloaded,
			Err: errors.Join(errors.New("first"), fmt.Errorf("second: %w", overloaded))}, "req_err"},
		{"the event's own", observe.AttemptEnd{Kind: llm.KindTimeout, RequestID: "req_headers",
			Err: &llm.Error{Provider: "backstop", Kind: llm.KindTimeout}}, "req_headers"},
		{"lost", observe.AttemptEnd{Kind: llm.KindCanceled, Err: errors.New("lost"), Lost: true, RequestID: "req_lost"}, "req_lost"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := observe.Log(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
			ctx, call := log.StartCall(context.Background(), observe.CallStart{Chain: "c"})
			target := observe.Target{Name: "sonnet", Tier: "primary", Provider: "anthropic", Model: "m"}
			_, a := call.StartAttempt(ctx, observe.AttemptStart{Target: target, N: 1})
			tc.e.Target, tc.e.N = target, 1
			a.End(tc.e)
			if got := buf.String(); !strings.Contains(got, " request_id="+tc.want+" ") {
				t.Fatalf("the attempt's record lacks request_id=%s:\n%s", tc.want, got)
			}
		})
	}
}
