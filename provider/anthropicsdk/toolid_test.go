package anthropicsdk

import (
	"testing"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/suite"
)

// TestToolIDs drives every platform's client through the shared cases of
// tool calls whose ids the conversation already holds (suite.ToolIDs):
// the caller is given distinct ids, whole and streamed, and the next turn
// answering them is accepted.
func TestToolIDs(t *testing.T) {
	s := suite.StartFake(t)
	s.Region("eu-west-1")
	for _, pl := range []struct {
		name, model string
		p           *Provider
	}{
		{"anthropic", "claude-fake", newProvider(t, s.URL())},
		{"aws.bedrock", "eu.anthropic.claude-fake-v1:0", bedrockProvider(t, s.URL())},
		{"gcp.vertex_ai", "claude-fake@20260101", vertexProvider(t, s.URL())},
	} {
		t.Run(pl.name, func(t *testing.T) { suite.ToolIDs(t, suite.FakeTarget(s, pl.model, pl.p)) })
	}
}

// callIDs returns the ids of calls.
func callIDs(calls []llm.ToolCall) []string {
	var ids []string
	for _, c := range calls {
		ids = append(ids, c.ID)
	}
	return ids
}
