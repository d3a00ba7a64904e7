package anthropic

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/suite"
	"github.com/backstop-llm/backstop/provider/internal/wire"
)

func fuzzReply(status int, body []byte) *wire.Reply {
	return &wire.Reply{Status: status, Body: body, Received: time.Now(), Header: http.Header{
		"Request-Id":     {"req_1"},
		"Retry-After":    {"3"},
		"X-Should-Retry": {"false"},
	}}
}

func FuzzParseError(f *testing.F) {
	p := newProvider(f, "http://127.0.0.1")
	suite.FuzzParseError(f, suite.ErrorFuzz{Provider: "anthropic", Key: testKey,
		Seeds: []suite.Reply{
			{Status: 529, Body: `{"type":"error","error":{"details":null,"type":"overloaded_error","message":"Overloaded"},"request_id":"req_011CS"}`},
			{Status: 429, Body: `{"type":"error","error":{"type":"rate_limit_error","message":"limit","details":{"error_code":"enforced_spend_limit_reached"}},"request_id":"req_1"}`},
			{Status: 400, Body: `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}`},
			{Status: 401, Body: `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`},
			{Status: 502, Body: "<html><head><title>502 Bad Gateway</title></head></html>"},
			{Status: 500, Body: `{"type":"error","error":{"type":"api_error","message":"\u00e9\ud800"}}`},
			{Status: 200, Body: `{"type":"error","error":null}`},
			{Status: 404, Body: ""},
			{Status: 0, Body: `{"error":{"details":"x"}}`},
		},
		Parse: func(status int, body []byte) *llm.Error { return p.parseError(fuzzReply(status, body)) },
		Check: func(t *testing.T, e *llm.Error, body []byte) {
			for _, code := range []string{"enforced_spend_limit_reached", "contract_spend_limit_reached", "linked_organization_spend_limit_reached"} {
				if bytes.Contains(body, []byte(code)) && e.Kind != llm.KindQuota {
					t.Fatalf("spend limit %s in the body but Kind %v", code, e.Kind)
				}
			}
			if e.RequestID == "" || e.RetryAfter != 3*time.Second || e.ShouldRetry == nil || *e.ShouldRetry {
				t.Fatalf("headers lost: %#v", e)
			}
		}})
}

func FuzzParseResponse(f *testing.F) {
	p := newProvider(f, "http://127.0.0.1")
	suite.FuzzParseResponse(f, suite.ResponseFuzz{Provider: "anthropic", Key: testKey,
		Seeds: []string{
			okBody,
			`{"id":"m","type":"message","content":[],"stop_reason":"refusal"}`,
			`{"content":[{"type":"text","text":"a"},{"type":"text"},{"text":"b"}],"usage":{"input_tokens":-1}}`,
			`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
			`{"content":null}`, `[]`, `"text"`, ``,
			toolBody,
			`{"type":"message","content":[{"type":"tool_use","id":"toolu_019a016c6d9a97873778a4dd","name":"get","input":null},{"type":"tool_use"}],"stop_reason":"tool_use"}`,
			`{"content":[{"type":"tool_use","id":"x","name":"y","input":[1,"a"]},{"type":"tool_use","id":7}]}`,
		},
		Parse: func(body []byte) (*llm.Response, error) {
			var ids wire.CallIDs
			return p.parse(fuzzReply(200, body), &ids)
		},
		Check: func(t *testing.T, body []byte, res *llm.Response) {
			if !json.Valid(body) || res.RequestID != "req_1" {
				t.Fatalf("accepted %q as %+v", body, res)
			}
			checkToolCalls(t, body, res, nil, nil)
		}})
}

// FuzzParseToolCalls fuzzes the tool_use blocks of an answer to a request
// whose ids were translated: every call comes back in order, with JSON
// arguments, and a translated id as the caller's, renamed since the
// history holds it; the answer's two blocks share one id, so the second
// is renamed.
func FuzzParseToolCalls(f *testing.F) {
	f.Add("toolu_019a016c6d9a97873778a4dd", "get", []byte(`{"city": "Paris"}`), "Hi")
	f.Add("call_1", "", []byte(`null`), "")
	f.Add("", "x", []byte(`[]`), "\u0000")
	f.Add("functions.get:0", "n", []byte(`{"a":{"b":[1,2,{}]}}`), "</script>")
	p := newProvider(f, "http://127.0.0.1")
	f.Fuzz(func(t *testing.T, id, name string, input []byte, text string) {
		ids := newToolIDs()
		sent := ids.Out("functions.get:0")
		history := []llm.Message{{Role: llm.RoleAssistant, Parts: []llm.Part{llm.ToolCallPart("functions.get:0", "get", nil)}}}
		if id == "functions.get:0" {
			id = sent // the API echoes the id it was sent
		}
		bl := map[string]any{"type": "tool_use", "id": id, "name": name}
		if json.Valid(input) {
			bl["input"] = json.RawMessage(input)
		}
		body, err := json.Marshal(map[string]any{"type": "message", "stop_reason": "tool_use", "content": []any{
			map[string]string{"type": "text", "text": text}, bl, map[string]string{"type": "thinking", "thinking": text}, bl}})
		if err != nil {
			t.Skip()
		}
		calls := wire.NewCallIDs(history, &ids)
		res, err := p.parse(fuzzReply(200, body), &calls)
		if err != nil {
			t.Fatalf("parse %s: %v", body, err)
		}
		checkToolCalls(t, body, res, &ids, history)
		var wantName string // name as JSON carries it (invalid UTF-8 replaced)
		nb, _ := json.Marshal(name)
		json.Unmarshal(nb, &wantName)
		if len(res.ToolCalls) != 2 || res.ToolCalls[0].Name != wantName || res.Finish != llm.FinishToolUse {
			t.Fatalf("calls %+v from %s", res.ToolCalls, body)
		}
		if id == sent && res.ToolCalls[0].ID != "functions.get:0_2" {
			t.Fatalf("translated id came back as %q; the history holds it", res.ToolCalls[0].ID)
		}
	})
}

// checkToolCalls checks the calls of res parsed from body, answering
// history: one per tool_use block, in order, with valid JSON arguments ({}
// for none) and the ids mapped back through ids, kept when free, none
// twice in the conversation (see suite.CheckToolIDs).
func checkToolCalls(t *testing.T, body []byte, res *llm.Response, ids *wire.ToolIDs, history []llm.Message) {
	t.Helper()
	var b struct {
		Content []struct {
			Type  string          `json:"type"`
			ID    string          `json:"id"`
			Input json.RawMessage `json:"input"`
		} `json:"content"`
	}
	if json.Unmarshal(body, &b) != nil {
		return // parse took what a stricter decoder refuses; nothing to compare
	}
	suite.CheckToolIDs(t, history, res.ToolCalls)
	taken := map[string]bool{}
	for _, m := range history {
		for _, p := range m.Parts {
			if p.ToolCall != nil {
				taken[p.ToolCall.ID] = true
			}
		}
	}
	var sent []string
	for _, bl := range b.Content {
		if bl.Type == "tool_use" {
			id := bl.ID
			if ids != nil {
				id = ids.Back(id)
			}
			sent = append(sent, id)
		}
	}
	if len(res.ToolCalls) != len(sent) {
		t.Fatalf("%d calls from %d tool_use blocks: %s", len(res.ToolCalls), len(sent), body)
	}
	for i, c := range res.ToolCalls {
		if id := sent[i]; id != "" && !taken[id] && c.ID != id {
			t.Fatalf("call %d: the free id %q came back as %q from %s", i, id, c.ID, body)
		}
		taken[c.ID] = true
	}
	for _, c := range res.ToolCalls {
		if !json.Valid(c.Arguments) {
			t.Fatalf("call %s: arguments %q are not JSON", c.ID, c.Arguments)
		}
	}
}
