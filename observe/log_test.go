package observe_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/backstop-llm/backstop/cost"
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

// TestLogRecordsWhatEachAttemptAndTheCallCost: the attempt and call
// records carry cost, with unpriced and estimated when so; a cost no
// token had a price for is not written as $0, and a degradation's attempt
// has none.
func TestLogRecordsWhatEachAttemptAndTheCallCost(t *testing.T) {
	var buf bytes.Buffer
	log := observe.Log(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	ctx, call := log.StartCall(context.Background(), observe.CallStart{Chain: "c"})
	sonnet := observe.Target{Name: "sonnet", Tier: "primary", Provider: "anthropic", Model: "m"}
	mystery := observe.Target{Name: "mystery", Tier: "sibling", Provider: "openai", Model: "unknown", Index: 1}
	static := observe.Target{Name: "static", Tier: "degrade", Index: 2}
	end := func(tg observe.Target, e observe.AttemptEnd) string {
		buf.Reset()
		_, a := call.StartAttempt(ctx, observe.AttemptStart{Target: tg, N: 1})
		e.Target, e.N = tg, 1
		a.End(e)
		return buf.String()
	}
	cut := cost.Cost{Spent: cost.Dollars(0.0042), Estimated: true}
	for _, tc := range []struct {
		name     string
		line     string
		want     []string
		unwanted []string
	}{
		{"billed", end(sonnet, observe.AttemptEnd{Kind: llm.KindServer, Err: errors.New("cut"), Cost: cut}),
			[]string{" cost=$0.0042 ", " estimated=true"}, []string{"unpriced", "cache_lost"}},
		{"not billed", end(sonnet, observe.AttemptEnd{Status: 529, Kind: llm.KindOverloaded, Err: errors.New("overloaded")}),
			[]string{" cost=$0 "}, []string{"unpriced", "estimated"}},
		{"unpriced", end(mystery, observe.AttemptEnd{Status: 200, Cost: cost.Cost{Unpriced: true}}),
			[]string{" unpriced=true"}, []string{"cost="}},
		{"degradation", end(static, observe.AttemptEnd{}), nil, []string{"cost=", "unpriced"}},
		{"cache lost", end(sonnet, observe.AttemptEnd{Status: 200, Cost: cost.Cost{Spent: cost.Dollars(0.03), CacheLost: cost.Dollars(0.02)}}),
			[]string{" cost=$0.03 ", " cache_lost=$0.02"}, []string{"unpriced"}},
	} {
		for _, w := range tc.want {
			if !strings.Contains(tc.line, w) {
				t.Errorf("%s: the attempt's record lacks %q:\n%s", tc.name, w, tc.line)
			}
		}
		for _, w := range tc.unwanted {
			if strings.Contains(tc.line, w) {
				t.Errorf("%s: the attempt's record has %q:\n%s", tc.name, w, tc.line)
			}
		}
	}
	buf.Reset()
	call.End(observe.CallEnd{Served: &mystery, Outcome: "served", Attempts: 3, Cost: cut.Add(cost.Cost{Spent: cost.Dollars(0.001), Unpriced: true})})
	if got := buf.String(); !strings.Contains(got, " cost=$0.0052 unpriced=true estimated=true") {
		t.Errorf("the call's record lacks its cost:\n%s", got)
	}
}
