package tracing

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/observe"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestAttemptSpanCarriesTheRequestID: every attempt span carries
// backstop.request_id when the attempt had one, whether it answered,
// failed (the id only in its *llm.Error, however wrapped) or lost a
// hedged race with the id its stream's headers carried (the event's
// RequestID).
func TestAttemptSpanCarriesTheRequestID(t *testing.T) {
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
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			defer func() { _ = tp.Shutdown(context.Background()) }()
			o, err := New(Config{TracerProvider: tp})
			if err != nil {
				t.Fatal(err)
			}
			target := observe.Target{Name: "sonnet", Tier: "primary", Provider: "anthropic", Model: "m"}
			if err := o.Bind("c", []observe.Target{target}); err != nil {
				t.Fatal(err)
			}
			ctx, call := o.StartCall(context.Background(), observe.CallStart{Chain: "c"})
			_, a := call.StartAttempt(ctx, observe.AttemptStart{Target: target, N: 1})
			tc.e.Target, tc.e.N = target, 1
			a.End(tc.e)
			spans := rec.Ended()
			if len(spans) != 1 {
				t.Fatalf("%d spans ended", len(spans))
			}
			got := ""
			for _, kv := range spans[0].Attributes() {
				if kv.Key == keyRequestID {
					got = kv.Value.AsString()
				}
			}
			if got != tc.want {
				t.Fatalf("backstop.request_id %q, want %q", got, tc.want)
			}
		})
	}
}
