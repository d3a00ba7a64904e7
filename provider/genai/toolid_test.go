package genai

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/suite"
)

// TestToolIDs drives both backends through the shared cases of tool calls
// whose ids the conversation already holds (suite.ToolIDs), against
// provider/fake: the caller is given distinct ids, whole and streamed,
// and the next turn answering them is accepted and sends distinct ids.
func TestToolIDs(t *testing.T) {
	s := suite.StartFake(t)
	t.Run(NameGemini, func(t *testing.T) {
		suite.ToolIDs(t, suite.FakeTarget(s, "gemini-fake", newProvider(t, geminiClient(t, s.URL(), nil), Config{})))
	})
	t.Run(NameVertex, func(t *testing.T) {
		p := newProvider(t, vertexClient(t, s.URL(), &http.Client{Transport: bearer{http.DefaultTransport}}), Config{})
		suite.ToolIDs(t, suite.FakeTarget(s, "gemini-vertex-fake", p))
	})
}

// TestIDlessCallAfterCall1: the finding. A conversation that began on an
// OpenAI-compatible server holds call_1; Gemini answers with an id-less
// call, which the adapter named call_<calls in the history>: call_1 again.
// It must get another id, whole and streamed, and the next turn must send
// two distinct ids. A signature Gemini attached stays with the call, and
// a history id carrying a signature is judged by the id before it.
func TestIDlessCallAfterCall1(t *testing.T) {
	sig := []byte{1, 2, 3}
	part := `{"functionCall":{"name":"weather","args":{"city":"Rome"}},"thoughtSignature":"` + base64.StdEncoding.EncodeToString(sig) + `"}`
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, _ seen) {
		if strings.Contains(r.URL.Path, "streamGenerateContent") {
			writeSSE(w, `{"candidates":[{"content":{"role":"model","parts":[`+part+`]},"finishReason":"STOP"}]}`)
			return
		}
		writeJSON(w, 200, `{"candidates":[{"content":{"role":"model","parts":[`+part+`]},"finishReason":"STOP"}]}`)
	})
	p := newProvider(t, geminiClient(t, s.URL, s.Client()), Config{})
	for _, history := range []string{"call_1", "call_1~sig~AQID"} {
		req := hello("gemini-2.5-flash")
		req.Tools = []llm.Tool{{Name: "weather"}}
		req.Messages = append(req.Messages,
			llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{llm.ToolCallPart(history, "weather", json.RawMessage(`{"city":"Paris"}`))}},
			llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.ToolResultPart(history, "sunny", false)}})
		res, err := p.Complete(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		st, err := p.Stream(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		chunks, _ := suite.ReadChunks(t, st)
		st.Close()
		if len(res.ToolCalls) != 1 || len(chunks) != 1 || chunks[0].ToolCall == nil {
			t.Fatalf("history %s: answer %+v, chunks %+v", history, res, chunks)
		}
		for _, c := range []llm.ToolCall{res.ToolCalls[0], *chunks[0].ToolCall} {
			id, got := splitID(c.ID)
			if id != "call_2" || string(got) != string(sig) {
				t.Errorf("history %s: the id-less call is %q (signature %v); want call_2 with its signature", history, c.ID, got)
			}
		}
		next := suite.FollowUp(req, res.ToolCalls)
		if _, err := p.Complete(context.Background(), next); err != nil {
			t.Fatal(err)
		}
		reqs := s.requests()
		body, _ := json.Marshal(reqs[len(reqs)-1].Body)
		suite.CheckWireToolIDs(t, body)
	}
}
