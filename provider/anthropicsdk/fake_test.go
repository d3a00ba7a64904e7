package anthropicsdk

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/fake"
	"github.com/backstop-llm/backstop/provider/internal/suite"
)

// TestFake runs the same outcomes through the three platforms' clients
// against provider/fake, which renders each in the platform's own wire
// format: one request per call, classified alike.
func TestFake(t *testing.T) {
	s := suite.StartFake(t)
	s.Region("eu-west-1")
	platforms := []struct {
		name, model string
		p           *Provider
	}{
		{"anthropic", "claude-fake", newProvider(t, s.URL())},
		{"aws.bedrock", "eu.anthropic.claude-fake-v1:0", bedrockProvider(t, s.URL())},
		{"gcp.vertex_ai", "claude-fake@20260101", vertexProvider(t, s.URL())},
	}
	for _, pl := range platforms {
		t.Run(pl.name, func(t *testing.T) {
			if pl.p.Name() != pl.name {
				t.Fatalf("Name %q", pl.p.Name())
			}
			req := userReq
			req.Model = pl.model
			// The prompt cache read and written, on every platform.
			answer := fake.Answer("Hello from the fake.").Usage(12, 5).Cached(4).CacheWrite(3)
			usage := llm.Usage{InputTokens: 12, OutputTokens: 5, CacheReadTokens: 4, CacheWriteTokens: 3}
			s.Script(pl.model, answer, answer)
			res, err := pl.p.Complete(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if res.Text != "Hello from the fake." || res.Usage != usage || res.RequestID == "" || res.Finish != llm.FinishStop {
				t.Errorf("%+v", res)
			}
			st := suite.OpenStream(t, pl.p, context.Background(), req)
			if got, err := suite.ReadStream(st); err != io.EOF || st.Response().Text != "Hello from the fake." || st.Response().Usage != usage {
				t.Errorf("stream %q %v, usage %+v", got, err, st.Response().Usage)
			}
			for _, o := range suite.FakeOutcomes() {
				s.Script(pl.model, o.Outcome)
				n := s.Requests(pl.model)
				_, err := pl.p.Complete(context.Background(), req)
				var e *llm.Error
				if !errors.As(err, &e) || e.Kind != o.Kind || e.Provider != pl.name {
					t.Errorf("%s: %v (%#v); want %v", o.Name, err, e, o.Kind)
				}
				if got := s.Requests(pl.model) - n; got != 1 {
					t.Errorf("%s: %d requests; want 1", o.Name, got)
				}
			}
			s.Script(pl.model, fake.Answer("Hello from the fake.").ErrorAfter(1))
			st = suite.OpenStream(t, pl.p, context.Background(), req)
			if _, err := suite.ReadStream(st); llm.KindOf(err) == llm.KindUnknown || err == io.EOF {
				t.Errorf("stream error event: %v", err)
			}
		})
	}
}
